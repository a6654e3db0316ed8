/*
 * collect.h - the dumper: collects a raw dump of the calling process.
 *
 * It lists /proc/self/task, reads each thread's name, state, CPU times and
 * blocked-signal mask, sends each thread our real-time signal through a
 * window of slots, and waits on the done futex with one absolute
 * CLOCK_MONOTONIC deadline. The result has no symbols: the symbolizer adds
 * them (in process, or in the daemon from the agent's raw dump).
 */
#ifndef SW_COLLECT_H
#define SW_COLLECT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "model/dump.h"

struct collect_opts {
	int timeout_ms; /* 1..600000 */
	int window;	/* 1..HANDLER_SLOTS */
	/*
	 * Threads to leave alone, read by other means already: never
	 * signalled, never read in /proc, absent from the dump. Tids
	 * ascending; NULL with nskip 0 for none.
	 */
	const pid_t *skip;
	size_t nskip;
};

/* Counters since the process started; the daemon exports them. */
struct collect_stats {
	uint64_t dumps;
	uint64_t signals_sent;
	uint64_t threads[SW_ST_COUNT];
};

/*
 * One process, one collector, however many copies of our code it loaded
 * (the agent, the library linked or dlopen'ed, a program linking it
 * statically): the copy first in the global symbol scope serves, the
 * others hand it every call below. collect_install() installs the
 * collector that serves (ours or that one) and returns its signal, or a
 * negative error: SW_EVERSION when a copy of another version is loaded.
 * collect_signal() is its signal (0 before it installed, or once it had
 * to give up every free one). Not async-signal-safe.
 */
int collect_install(void);
int collect_signal(void);

/*
 * What a program that may exit or exec at once needs: the handler on its
 * signal (ours), nothing loaded, read or allocated; the rest comes with
 * collect_install() or the first dump. Another copy's collector is
 * installed whole. Returns as collect_install() does.
 */
int collect_install_early(void);

/*
 * Notes the seccomp mode the process has now as the one it started with
 * (a filter inherited at exec is trusted until the program enters a mode
 * of its own): once, before our first signal can go. The agent calls it
 * as its thread starts, not at load, which a program that exits at once
 * pays for; collect_install() and the first dump call it too.
 */
void collect_note_seccomp(void);

/*
 * Collects every thread of the calling process but those of opts->skip,
 * which the dump leaves out (the calling thread too, when it is one of
 * them; with every thread left out, no signal goes and the dump has the
 * process's fields and modules only). The calling thread is not
 * signalled: its stack is self_ips (self_n entries, return addresses,
 * captured by the caller). Never waits past now + timeout_ms for the
 * threads; a thread that has not answered by then is "timeout", one that
 * blocks the signal "blocked-signal", one that is gone "exited"; with a
 * debugger attached every other thread is "skipped". If our handler is no
 * longer installed, sends nothing and returns SW_EHANDLER. Calls are
 * serialized. On success *out is a raw dump the caller frees with
 * sw_dump_free(). Never call it from a signal handler.
 */
int collect_self(const struct collect_opts *opts, const uint64_t *self_ips,
		 size_t self_n, struct sw_dump **out);

/*
 * Says that every seccomp filter of this process lets our handler's calls
 * through and never kills for a signal (the daemon's own lockdown denies
 * with EPERM a list of calls the handler never makes): its threads under
 * seccomp are signalled like the others. By default they never are
 * (status "seccomp"). Call before the filter goes in.
 */
void collect_trust_own_seccomp(void);

/* A snapshot of the counters. */
void collect_get_stats(struct collect_stats *out);

/*
 * Nonzero: dumps leave out the futex words threads sleep on (and so their
 * locks' owners). For the benchmark that prices them; 0 otherwise.
 */
extern volatile int collect_no_waits;

#endif /* SW_COLLECT_H */
