/*
 * spin.h - telling a thread that spins from one that only looks busy.
 *
 * A thread is caught in state R whenever it runs our handler, or has just
 * woken and waits for a CPU; its CPU time rises a little every time it
 * wakes, however idle it is. Neither makes it a spinner. What does is
 * wanting the CPU for most of a while: on one for part of it, runnable
 * and waiting for one the rest. The kernel counts both for every thread
 * (/proc/PID/task/TID/schedstat: ns on a CPU, ns waiting on a run
 * queue), so each sample the daemon keeps carries them, whatever way its
 * threads were read, and the watchdog compares two samples. Under two
 * CPU hogs per core a spinner is on a CPU ~40% of the time but runnable
 * all of it; an idle thread is neither.
 */
#ifndef SWD_SPIN_H
#define SWD_SPIN_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "model/dump.h"

/* Of the time between two samples, a spinner wanted the CPU for ... */
#define SPIN_WANTED_PCT 75
/* ... and was on one for at least this much (a wake-up is far less). */
#define SPIN_RAN_PCT 5

/*
 * Reads the schedstat of each thread of d in state R (a dump of process
 * pid; its tids as the daemon sees them) into run_ns and wait_ns; any
 * other thread, and one gone, unreadable, or on a kernel that keeps no
 * figures, gets 0 and 0 (unknown). One small read per running thread;
 * may block on /proc only.
 */
void spin_read(pid_t pid, struct sw_dump *d);

/*
 * Whether the thread, as o (its schedstat read at o_ns, monotonic) and
 * later as n (read at n_ns), in state R in both, wanted the CPU for
 * SPIN_WANTED_PCT of the time in between and ran SPIN_RAN_PCT of it.
 * Where either sample has no
 * figures, its CPU time (utime + stime) must have grown by half the time
 * instead: the best there is, though it misses a spinner that gets less
 * than half a CPU.
 */
bool spin_wanted_cpu(const struct sw_thread *o, uint64_t o_ns,
		     const struct sw_thread *n, uint64_t n_ns);

/*
 * Whether t, a thread of d (a dump of an agent's process), is the agent's
 * own: the thread that took the dump (SW_TF_DUMPER), the one with tid
 * agent_tid (the one an earlier dump marked; 0: none yet), or, when
 * neither is known, the one named as the agent names its thread.
 */
bool spin_is_agent(const struct sw_dump *d, const struct sw_thread *t,
		   pid_t agent_tid);

/* The tid of the thread that took d (SW_TF_DUMPER), or 0. */
pid_t spin_dumper(const struct sw_dump *d);

#endif /* SWD_SPIN_H */
