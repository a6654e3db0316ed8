/*
 * collect.c - the dumper (collect.h).
 *
 * Slots carry a (generation, state) word changed only by CAS. The dumper
 * arms a slot with a fresh generation and sends the signal with the slot
 * index and generation as cookie; the handler claims the slot only if it is
 * still armed for that generation. At the deadline the dumper takes back
 * every slot still armed (a late handler then finds a newer generation and
 * does nothing); a slot a handler is writing into is quarantined, not
 * reused, until that handler has published. Slots are static and live as
 * long as the process, so nothing is ever freed under a running handler.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "model/clock.h"
#include "collect.h"
#include "dumplock.h"
#include "exec.h"
#include "waits.h"
#include "collector/signal/framecache.h"
#include "collector/signal/futex.h"
#include "collector/signal/handler.h"
#include "collector/signal/loader_guard.h"
#include "modules.h"
#include "model/procfs.h"
#include "model/waitmem.h"
#include "collector/signal/signo.h"
#include "collector/signal/stackmap.h"
#include "stackroom.h"

/* The most a dump spends learning unwind rules afterwards. */
#define COLLECT_LEARN_NS (5 * 1000000ull)

/* Without an answer for this long, the dumper checks who has exited. */
#define COLLECT_EXIT_POLL_NS (5 * 1000000ull)
/*
 * A thread seen blocking our signal is looked at again once the threads
 * in flight answered, or this long after it was put aside: one still
 * returning from the previous dump's handler, preempted before its
 * sigreturn on a busy machine, keeps the signal blocked for a while.
 */
#define COLLECT_RECHECK_NS (2 * 1000000ull)

/* Everything below is under the dump lock (dumplock.h). */
static uint64_t next_gen;
static struct collect_stats stats;

/*
 * The threads that answered the previous dump, by tid, ascending (under
 * the dump lock). They had our signal deliverable a moment ago, and it
 * stays so unless they block it by a raw system call (the library's
 * sigprocmask strips it), so they are signalled at once, without reading
 * /proc first: that read costs more than the rest of the round trip.
 * Their name and state come from their handler; if one does not answer
 * within COLLECT_EXIT_POLL_NS, /proc is read after all (settle_quiet()).
 * Every other thread (new ones, blocked ones, the first dump) is read
 * first, and never signalled while it blocks the signal.
 * Each is checked for stack room before its signal (stackroom.h), unless
 * its handler had STACKROOM_AMPLE below it last time (roomy).
 */
struct known {
	pid_t tid;
	bool roomy;
	char name[SW_COMM_MAX];
};
static struct known *answered;
static size_t nanswered;
static int last_signo;		    /* the signal of the dump before */
static uint32_t last_epoch;	    /* handler_recheck_epoch then */
static _Atomic bool own_seccomp_ok; /* collect_trust_own_seccomp() */
static int seccomp_at_start; /* /proc/self/status: collect_note_seccomp() */

/*
 * Whether a thread in seccomp mode mode may take our signal. Strict mode
 * never (four calls allowed, none of them our handler's). A filter only
 * when it can be nothing but the one the process inherited at exec (no
 * mode entered through libc since: exec.c counts them), or when the
 * process said its own filters let the handler through (the daemon). A
 * filter the program installed itself may forbid, kill for, or trap any
 * call of ours.
 */
static bool seccomp_signallable(int mode)
{
	if (atomic_load(&own_seccomp_ok))
		return true;
	return mode == 2 && seccomp_at_start == 2 &&
	       !atomic_load(&exec_seccomp_entered);
}

/*
 * A handler's name costs a system call (PR_GET_NAME), which in a guest is
 * a good part of the whole round trip: dumps less than
 * COLLECT_NAME_REFRESH_NS after the last one that asked for names reuse
 * the names the threads had then (under the dump lock).
 */
#define COLLECT_NAME_REFRESH_NS 1000000000ull
static uint64_t names_at_ns;

/* One dump in progress. */
struct run {
	struct sw_dump *d;
	int signo;
	pid_t pid;
	int taskfd;
	uint64_t deadline_ns;
	long ticks_per_s;
	size_t next; /* next thread to signal */
	size_t inflight;
	int owner[HANDLER_SLOTS]; /* thread index, or -1 */
	uint64_t gen[HANDLER_SLOTS];
	bool usable[HANDLER_SLOTS]; /* false: quarantined */
	bool *settled;		    /* per thread: has its final status */
	bool *unread;		    /* per thread: signalled without /proc */
	bool *learn;		    /* per thread: unwound by libunwind */
	bool *roomy; /* per thread: ample stack at the last answer, or this */
	size_t *recheck; /* threads seen blocking the signal once */
	size_t nrecheck;
	size_t rechecked;    /* how many of them were started again */
	uint64_t recheck_ns; /* not before this while others are in flight */
	size_t window;
	bool main_skipped; /* the main thread is left out (opts->skip) */
};

/*
 * In a child of fork() only the forking thread exists: a dump another
 * thread had in progress will never finish, so the lock and the slots
 * start afresh.
 *
 * Nothing of the dumper's to undo unless a dump ever ran (fresh_gen()).
 * The slots span some 30 pages, and a child that writes a page copies
 * it, one that reads a page never touched faults it in: most children
 * exec or exit at once. Only the slots a dump left in use are freed; a
 * free slot's generation is no matter, the dumper arms a slot with a
 * fresh one.
 */
static void atfork_child(void)
{
	dumplock_atfork_child();
	if (next_gen != 0) {
		nanswered = 0; /* other threads' tids */
		names_at_ns = 0;
		for (int s = 0; s < HANDLER_SLOTS; s++)
			if (SLOT_STATE(atomic_load(&handler_slots[s].word)) !=
			    SLOT_FREE)
				atomic_store(&handler_slots[s].word,
					     SLOT_WORD(0, SLOT_FREE));
	}
	loader_gate_atfork_child();
}

/*
 * The seccomp mode the process had when our collector came in: a filter
 * it inherited across exec (systemd's SystemCallFilter=, a container
 * runtime's profile) was made for the whole program, signal handling
 * included, and our agent's own calls have passed it since the start.
 */
static void note_seccomp(void)
{
	char buf[4096];
	const char *mode;
	ssize_t n =
		procfs_read_at(AT_FDCWD, "/proc/self/status", buf, sizeof(buf));

	if (n <= 0)
		return;
	mode = procfs_status_value(buf, (size_t)n, "Seccomp");
	if (mode && mode < buf + n && *mode >= '0' && *mode <= '9')
		seccomp_at_start = *mode - '0';
}

void collect_note_seccomp(void)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;

	pthread_once(&once, note_seccomp);
}

static void register_atfork(void)
{
	exec_guard_init();
	waits_init();
	pthread_atfork(NULL, NULL, atfork_child);
}

static void register_atfork_once(void)
{
	static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;

	pthread_once(&atfork_once, register_atfork);
}

/* Installs this copy's collector: the handler and what goes with it. */
static int install_here(void)
{
	register_atfork_once();
	collect_note_seccomp();
	return handler_install();
}

void collect_trust_own_seccomp(void)
{
	atomic_store(&own_seccomp_ok, true);
}

static uint64_t fresh_gen(void)
{
	if (next_gen == 0) {
		uint64_t seed = 0;

		if (getrandom(&seed, sizeof(seed), GRND_NONBLOCK) !=
		    sizeof(seed))
			seed = clock_now_ns() ^ ((uint64_t)getpid() << 32);
		/* Unpredictable, with room to count up for ages. */
		next_gen = (seed & 0xffffffffffull) | 1;
		atomic_store(&handler_gen_first, next_gen);
	}
	/* Before the signal goes: the handler tells ours by it. */
	atomic_store(&handler_gen_next, next_gen + 1);
	return next_gen++ & ((1ull << 54) - 1);
}

/*
 * A slot seen mid-write since writing_since[s] (CLOCK_MONOTONIC ns), with
 * the same word: the dumper's own record, across dumps.
 */
static uint64_t writing_word[HANDLER_SLOTS], writing_since[HANDLER_SLOTS];

/*
 * Frees what previous dumps left behind: a slot whose late handler has
 * since published is free again; one still being written stays out of use
 * for this dump, unless it has been for LOADER_GATE_STALE_MS: its handler
 * never returned (cancelled, or long-jumped out of a fault handler
 * stacked on ours), and the slot is taken back. A handler that comes back
 * after all cannot publish into it (its publishing CAS fails).
 */
static void reclaim_slots(struct run *r)
{
	uint64_t now = clock_now_ns();

	for (int s = 0; s < HANDLER_SLOTS; s++) {
		uint64_t w = atomic_load_explicit(&handler_slots[s].word,
						  memory_order_acquire);

		r->owner[s] = -1;
		switch (SLOT_STATE(w)) {
		case SLOT_FREE:
			r->usable[s] = true;
			break;
		case SLOT_WRITING:
			r->usable[s] = false;
			if (writing_word[s] != w) {
				writing_word[s] = w;
				writing_since[s] = now;
			} else if (now - writing_since[s] >=
				   LOADER_GATE_STALE_MS * 1000000ull) {
				r->usable[s] = atomic_compare_exchange_strong(
					&handler_slots[s].word, &w,
					SLOT_WORD(SLOT_GEN(w) + 1, SLOT_FREE));
			}
			break;
		default: /* DONE, or ARMED for a signal never delivered */
			r->usable[s] = atomic_compare_exchange_strong(
				&handler_slots[s].word, &w,
				SLOT_WORD(SLOT_GEN(w) + 1, SLOT_FREE));
			break;
		}
	}
}

static int free_slot(const struct run *r)
{
	for (size_t s = 0; s < r->window; s++) {
		if (r->owner[s] < 0 && r->usable[s])
			return (int)s;
	}
	return -1;
}

static void fill_task(struct run *r, struct sw_thread *t,
		      const struct procfs_task *pt)
{
	memcpy(t->name, pt->name, sizeof(t->name));
	t->state = pt->state;
	t->utime_ms = pt->utime_ticks * 1000 / (uint64_t)r->ticks_per_s;
	t->stime_ms = pt->stime_ticks * 1000 / (uint64_t)r->ticks_per_s;
}

/* Fills t's name, state and CPU times from /proc, when it is still there. */
static void read_task(struct run *r, struct sw_thread *t)
{
	struct procfs_task pt;

	if (procfs_read_task(r->taskfd, t->tid, &pt, NULL) == 0)
		fill_task(r, t, &pt);
}

/*
 * The code of our interposers, in every copy of ours in the process (each
 * registers its sw_interpose section with the collector that serves):
 * frames there are ours, not the program's, and are dropped.
 */
#define FRAME_RANGES 16
static _Atomic uint64_t frames_lo[FRAME_RANGES], frames_hi[FRAME_RANGES];
static _Atomic unsigned nframe_ranges;

static void frames_here(uint64_t lo, uint64_t hi)
{
	unsigned n;

	if (lo >= hi)
		return;
	n = atomic_fetch_add(&nframe_ranges, 1);
	if (n >= FRAME_RANGES)
		return;
	atomic_store(&frames_lo[n], lo);
	atomic_store(&frames_hi[n], hi);
}

static bool ours(uint64_t ip)
{
	unsigned n = atomic_load(&nframe_ranges);

	if (n > FRAME_RANGES)
		n = FRAME_RANGES;
	for (unsigned i = 0; i < n; i++)
		if (ip >= atomic_load(&frames_lo[i]) &&
		    ip < atomic_load(&frames_hi[i]))
			return true;
	return false;
}

/*
 * Drops our interposers' frames from ips[0..n); returns how many are left,
 * at most SW_MAX_FRAMES (more, and the stack was cut there). The first
 * one left is no longer the interrupted pc when that was ours. A stack
 * that is ours alone is kept as it is.
 */
static uint32_t drop_ours(uint64_t *ips, uint32_t n, uint32_t *flags)
{
	uint32_t k = 0;

	for (uint32_t i = 0; i < n; i++) {
		if (ours(ips[i])) {
			if (i == 0)
				*flags &= ~SW_TF_FIRST_EXACT;
			continue;
		}
		ips[k++] = ips[i];
	}
	if (!k)
		k = n;
	if (k > SW_MAX_FRAMES) {
		k = SW_MAX_FRAMES;
		*flags |= SW_TF_TRUNCATED;
	}
	return k;
}

/* Copies a published slot into its thread and frees the slot. */
/*
 * A thread caught in a futex wait: the word it sleeps on, for the lock
 * that holds it (its memory is read once every thread answered).
 */
volatile int collect_no_waits;

static void note_wait(struct sw_thread *t, const struct slot *sl)
{
	if ((sl->sysno != SYS_futex && sl->sysno != -2) || t->wait ||
	    collect_no_waits)
		return;
	t->wait = calloc(1, sizeof(*t->wait));
	if (!t->wait)
		return; /* the stack matters more: no error */
	t->wait->addr = sl->sysarg[0];
	t->wait->op = (uint32_t)sl->sysarg[1];
	t->wait->unsure = sl->sysno == -2;
}

/*
 * A thread caught just after a call that returned EINTR (a timed futex
 * wait is not restarted: glibc's loop calls it again) keeps its wait only
 * if /proc says it sleeps in futex on the same word now. Rare: one read
 * for each such thread.
 */
static void check_unsure(struct run *r)
{
	for (size_t i = 0; i < r->d->nthreads; i++) {
		struct sw_thread *t = &r->d->threads[i];
		char path[48], buf[256];
		unsigned long long nr = 0, addr = 0;
		ssize_t n;

		if (!t->wait || !t->wait->unsure)
			continue;
		snprintf(path, sizeof(path), "%d/syscall", (int)t->tid);
		n = procfs_read_at(r->taskfd, path, buf, sizeof(buf) - 1);
		if (n > 0) {
			buf[n] = '\0';
			if (sscanf(buf, "%llu 0x%llx", &nr, &addr) != 2)
				nr = 0;
		}
		if (n <= 0 || (nr != SYS_futex && nr != SYS_restart_syscall) ||
		    addr != t->wait->addr) {
			free(t->wait);
			t->wait = NULL;
			continue;
		}
		t->wait->unsure = false;
	}
}

static void harvest_slot(struct run *r, int s)
{
	struct slot *sl = &handler_slots[s];
	struct sw_thread *t = &r->d->threads[r->owner[s]];
	uint32_t n = sl->nips;

	if (n > SLOT_IPS)
		n = SLOT_IPS;
	t->ips = malloc((n ? n : 1) * sizeof(uint64_t));
	if (!t->ips) {
		dump_thread_set_error(t, SW_ST_ERROR, "out of memory");
	} else {
		memcpy(t->ips, sl->ips, n * sizeof(uint64_t));
		t->nips = n;
		t->flags = sl->flags;
		t->captured_ns = sl->captured_ns;
		t->utime_ms = sl->utime_us / 1000;
		t->stime_ms = sl->stime_us / 1000;
		t->status = SW_ST_OK;
		t->read = SW_READ_SIGNAL;
		if (r->unread[r->owner[s]]) {
			/* else the name the last dump saw, set at the start */
			if (sl->name[0])
				memcpy(t->name, sl->name, sizeof(t->name));
			t->name[sizeof(t->name) - 1] = '\0';
			t->state = sl->state;
		}
		r->learn[r->owner[s]] = sl->walk == 'u';
		r->roomy[r->owner[s]] = sl->room != STACKMAP_UNKNOWN &&
					sl->room >= STACKROOM_AMPLE;
		note_wait(t, sl);
	}
	atomic_store_explicit(&sl->word, SLOT_WORD(r->gen[s] + 1, SLOT_FREE),
			      memory_order_release);
	r->owner[s] = -1;
	r->inflight--;
}

/* Harvests every published slot. Returns how many. */
static size_t harvest(struct run *r)
{
	size_t got = 0;

	for (size_t s = 0; s < r->window; s++) {
		uint64_t w;

		if (r->owner[s] < 0)
			continue;
		w = atomic_load_explicit(&handler_slots[s].word,
					 memory_order_acquire);
		if (w == SLOT_WORD(r->gen[s], SLOT_DONE)) {
			harvest_slot(r, (int)s);
			got++;
		}
	}
	return got;
}

static int send_signal(struct run *r, pid_t tid, int s, uint64_t gen)
{
	siginfo_t si;

	memset(&si, 0, sizeof(si));
	si.si_signo = r->signo;
	si.si_code = SI_QUEUE;
	si.si_pid = r->pid;
	si.si_uid = getuid();
	si.si_value.sival_ptr = (void *)(uintptr_t)((gen << 8) | (uint64_t)s);
	if (syscall(SYS_rt_tgsigqueueinfo, r->pid, tid, r->signo, &si) < 0)
		return -errno;
	return 0;
}

/*
 * Asks a thread whose mask blocks our signal, but not one we gave up, to
 * take the old one's place in its mask (handler.c's pass_on): one signal
 * on the old one, unless one is pending already.
 */
static void migrate(struct run *r, pid_t tid, uint64_t sigblk, uint64_t sigpnd)
{
	uint64_t open = signo_retired_mask() & ~sigblk & ~sigpnd;
	siginfo_t si;
	int old;

	if (!open)
		return;
	old = __builtin_ctzll(open) + 1;
	memset(&si, 0, sizeof(si));
	si.si_signo = old;
	si.si_code = SI_QUEUE;
	si.si_pid = r->pid;
	si.si_uid = getuid();
	si.si_value.sival_ptr = (void *)(uintptr_t)HANDLER_COOKIE_MIGRATE;
	syscall(SYS_rt_tgsigqueueinfo, r->pid, tid, old, &si);
}

/*
 * Reads thread i's /proc entries and signals it through a free slot. A
 * thread that blocks the signal is put aside for one recheck unless this
 * is the recheck.
 * Returns 1 when the thread is settled (signalled, or given a final
 * status), 0 when it must wait for a slot or for the signal queue to drain.
 */
static int start_thread(struct run *r, size_t i, bool recheck)
{
	struct sw_thread *t = &r->d->threads[i];
	struct procfs_task pt;
	uint64_t sigblk = 0, gen;
	int s, rc;

	if (r->settled[i])
		return 1; /* ourselves, or skipped */
	if (r->unread[i] && !recheck && !waits_takes_ours(t->tid))
		goto send;
	r->unread[i] = false;
	rc = procfs_read_task(r->taskfd, t->tid, &pt, &sigblk);
	if (rc == -ESRCH) {
		dump_thread_set_error(t, SW_ST_EXITED,
				      "the thread exited during the dump");
		return 1;
	}
	if (rc < 0) {
		dump_thread_set_error(t, SW_ST_ERROR, sw_strerror(rc));
		return 1;
	}
	fill_task(r, t, &pt);
	/*
	 * Gone but not yet reaped: the first thread of a process whose main
	 * called pthread_exit() stays a zombie while the others run on. A
	 * signal to it is never taken.
	 */
	if (pt.state == 'Z' || pt.state == 'X') {
		dump_thread_set_error(t, SW_ST_EXITED,
				      "the thread has exited; the process "
				      "lives on in its other threads");
		return 1;
	}
	/*
	 * Under seccomp our signal, or a call our handler makes, may be
	 * what the filter kills for (strict mode allows four calls): never
	 * signalled. Nor is a thread whose wait would take our signal.
	 */
	if (pt.seccomp && !seccomp_signallable(pt.seccomp)) {
		dump_thread_set_error(
			t, SW_ST_SECCOMP,
			pt.seccomp == 1 ? "the thread runs in seccomp "
					  "strict mode: not signalled"
					: "the thread runs under a "
					  "seccomp filter: not signalled");
		return 1;
	}
	if (waits_takes_ours(t->tid)) {
		dump_thread_set_error(t, SW_ST_BLOCKED,
				      "the thread waits for signals, the dump "
				      "signal among them");
		return 1;
	}
	if ((pt.sigpnd & (1ull << (r->signo - 1))) &&
	    !(sigblk & (1ull << (r->signo - 1)))) {
		/*
		 * An earlier dump's signal is still queued: the thread takes
		 * no signal now (the parent side of vfork(), an NFS or FUSE
		 * wait). Never a second one: it would pile up in the queue,
		 * use up RLIMIT_SIGPENDING, and be delivered in a burst.
		 */
		dump_thread_set_error(
			t, SW_ST_TIMEOUT,
			"the last dump's signal is still pending");
		return 1;
	}
	if (sigblk & (1ull << (r->signo - 1))) {
		/*
		 * A thread still returning from the handler of the previous
		 * dump shows the signal blocked for a moment: look once
		 * more after the others before calling it blocked. One that
		 * blocks our signal but not the one we gave up got its mask
		 * before we moved (a "block everything" less the old one):
		 * asked to move its mask along, it is dumpable by then.
		 */
		if (!recheck) {
			migrate(r, t->tid, sigblk, pt.sigpnd);
			if (!r->nrecheck)
				r->recheck_ns =
					clock_now_ns() + COLLECT_RECHECK_NS;
			r->recheck[r->nrecheck++] = i;
			return 1;
		}
		dump_thread_set_error(t, SW_ST_BLOCKED,
				      "the thread blocks the dump signal");
		return 1;
	}
send:
	if (!r->roomy[i] && stackroom_refuse(r->taskfd, t)) {
		if (r->unread[i])
			read_task(r, t);
		return 1;
	}
	s = free_slot(r);
	if (s < 0)
		return 0;
	gen = fresh_gen();
	atomic_store_explicit(&handler_slots[s].word,
			      SLOT_WORD(gen, SLOT_ARMED), memory_order_release);
	rc = send_signal(r, t->tid, s, gen);
	if (rc < 0) {
		uint64_t w = SLOT_WORD(gen, SLOT_ARMED);

		/* Never delivered, so no handler can hold it. */
		atomic_compare_exchange_strong(&handler_slots[s].word, &w,
					       SLOT_WORD(gen + 1, SLOT_FREE));
		if (rc == -EAGAIN && r->inflight > 0)
			return 0; /* queue full: retry once some drain */
		if (rc == -ESRCH)
			dump_thread_set_error(
				t, SW_ST_EXITED,
				"the thread exited during the dump");
		else
			dump_thread_set_error(t, SW_ST_ERROR, sw_strerror(rc));
		return 1;
	}
	stats.signals_sent++;
	r->owner[s] = (int)i;
	r->gen[s] = gen;
	r->inflight++;
	return 1;
}

static bool task_exists(const struct run *r, pid_t tid)
{
	char path[32];

	snprintf(path, sizeof(path), "%d", (int)tid);
	return faccessat(r->taskfd, path, F_OK, 0) == 0;
}

static void time_out(struct run *r, struct sw_thread *t, const char *why)
{
	if (!task_exists(r, t->tid))
		dump_thread_set_error(t, SW_ST_EXITED,
				      "the thread exited during the dump");
	else
		dump_thread_set_error(t, SW_ST_TIMEOUT, why);
}

/*
 * The deadline passed: takes back every slot still out. why says what
 * held the dump up, NULL for threads that did not answer.
 */
static void finish_at_deadline(struct run *r, const char *why_not)
{
	char no_answer[64];
	const char *why = why_not;

	if (!why) {
		snprintf(no_answer, sizeof(no_answer), "no answer within %d ms",
			 r->d->timeout_ms);
		why = no_answer;
	}
	for (size_t s = 0; s < r->window; s++) {
		uint64_t w = SLOT_WORD(r->gen[s], SLOT_ARMED);
		struct sw_thread *t;

		if (r->owner[s] < 0)
			continue;
		t = &r->d->threads[r->owner[s]];
		/*
		 * Still armed: take it back, a late handler will find a newer
		 * generation. Published just now: harvest it. Mid-write: leave
		 * it quarantined until the handler is done (reclaim_slots).
		 */
		if (!atomic_compare_exchange_strong(
			    &handler_slots[s].word, &w,
			    SLOT_WORD(r->gen[s] + 1, SLOT_FREE)) &&
		    w == SLOT_WORD(r->gen[s], SLOT_DONE)) {
			harvest_slot(r, (int)s);
			continue;
		}
		if (r->unread[r->owner[s]])
			read_task(r, t);
		r->owner[s] = -1;
		r->inflight--;
		time_out(r, t, why);
	}
	for (; r->rechecked < r->nrecheck; r->rechecked++)
		time_out(r, &r->d->threads[r->recheck[r->rechecked]], why);
	for (; r->next < r->d->nthreads; r->next++) {
		struct sw_thread *t = &r->d->threads[r->next];

		if (r->settled[r->next])
			continue;
		read_task(r, t);
		time_out(r, t, why);
	}
}

/*
 * Starts threads through the window: first every thread in order, then
 * the ones put aside for a recheck. Returns when the window is full, the
 * deadline passed or no thread is left to start.
 */
static void start_more(struct run *r)
{
	size_t n = r->d->nthreads;

	while (r->inflight < r->window && clock_now_ns() < r->deadline_ns) {
		size_t i;
		bool again = r->next >= n;

		if (!again)
			i = r->next;
		else if (r->rechecked < r->nrecheck &&
			 (r->inflight == 0 || clock_now_ns() >= r->recheck_ns))
			i = r->recheck[r->rechecked];
		else
			return;
		if (!start_thread(r, i, again))
			return;
		if (again)
			r->rechecked++;
		else
			r->next++;
	}
}

/*
 * Takes back slot s, armed for a thread that will not answer it. Returns
 * false when a handler has claimed it meanwhile (it will publish).
 */
static bool take_back(struct run *r, int s)
{
	uint64_t w = SLOT_WORD(r->gen[s], SLOT_ARMED);

	if (!atomic_compare_exchange_strong(
		    &handler_slots[s].word, &w,
		    SLOT_WORD(r->gen[s] + 1, SLOT_FREE)))
		return false;
	r->owner[s] = -1;
	r->inflight--;
	return true;
}

/*
 * No answer for COLLECT_EXIT_POLL_NS. Takes back the slots of signalled
 * threads that have exited since: their signal died with them (glibc
 * blocks every signal while a thread exits, so one signalled then never
 * runs the handler), and waiting for them would hold the whole dump until
 * its deadline. A thread signalled without reading /proc first is read
 * now: should it have blocked the signal since the previous dump, it is
 * blocked-signal at once (the signal stays pending, and a late handler
 * finds a newer generation); otherwise its name and state are noted for
 * the case it times out.
 */
static void settle_quiet(struct run *r)
{
	for (size_t s = 0; s < r->window; s++) {
		struct procfs_task pt;
		uint64_t sigblk = 0;
		struct sw_thread *t;
		int i = r->owner[s], rc;

		if (i < 0)
			continue;
		t = &r->d->threads[i];
		if (!r->unread[i]) {
			if (!task_exists(r, t->tid) && take_back(r, (int)s))
				dump_thread_set_error(
					t, SW_ST_EXITED,
					"the thread exited during the dump");
			continue;
		}
		r->unread[i] = false;
		rc = procfs_read_task(r->taskfd, t->tid, &pt, &sigblk);
		if (rc == -ESRCH) {
			if (take_back(r, (int)s))
				dump_thread_set_error(
					t, SW_ST_EXITED,
					"the thread exited during the dump");
			continue;
		}
		if (rc < 0)
			continue;
		fill_task(r, t, &pt);
		/*
		 * Blocked with our signal still pending: the thread blocked
		 * it. Blocked and not pending: our handler is running (the
		 * kernel blocks the signal while it runs).
		 */
		if ((sigblk & pt.sigpnd & (1ull << (r->signo - 1))) &&
		    take_back(r, (int)s))
			dump_thread_set_error(
				t, SW_ST_BLOCKED,
				"the thread blocks the dump signal");
	}
}

/* Signals every thread through the window until all answered or the
 * deadline. */
static void signal_all(struct run *r)
{
	for (;;) {
		uint64_t now, until;
		bool for_recheck;
		uint32_t seq;

		start_more(r);
		if (r->inflight == 0 && r->next >= r->d->nthreads &&
		    r->rechecked >= r->nrecheck)
			return;
		seq = atomic_load_explicit(&handler_done_seq,
					   memory_order_acquire);
		if (harvest(r) > 0)
			continue;
		if (r->inflight == 0) {
			/* Every usable slot is quarantined. */
			break;
		}
		now = clock_now_ns();
		if (now >= r->deadline_ns)
			break;
		/* No answer for a while: look for threads gone meanwhile;
		 * or the time has come to look at those put aside. */
		until = now + COLLECT_EXIT_POLL_NS;
		for_recheck = r->rechecked < r->nrecheck &&
			      r->recheck_ns > now && r->recheck_ns < until;
		if (for_recheck)
			until = r->recheck_ns;
		if (until >= r->deadline_ns) {
			until = r->deadline_ns;
			for_recheck = false;
		}
		if (futex_wait_until(&handler_done_seq, seq, until) ==
			    -ETIMEDOUT &&
		    until < r->deadline_ns && !for_recheck)
			settle_quiet(r);
	}
	finish_at_deadline(r, NULL);
}

static int cmp_tid(const void *a, const void *b)
{
	pid_t x = *(const pid_t *)a, y = *(const pid_t *)b;

	return (x > y) - (x < y);
}

static const struct known *answered_before(pid_t tid)
{
	if (!nanswered)
		return NULL;
	return bsearch(&tid, answered, nanswered, sizeof(*answered), cmp_tid);
}

/* Keeps the threads that answered this dump for the next one. */
static void note_answered(const struct run *r)
{
	const struct sw_dump *d = r->d;
	struct known *v = realloc(answered, (d->nthreads ? d->nthreads : 1) *
						    sizeof(*answered));
	size_t n = 0;

	if (!v) {
		nanswered = 0;
		return;
	}
	answered = v;
	for (size_t i = 0; i < d->nthreads; i++) {
		if (d->threads[i].status != SW_ST_OK)
			continue;
		answered[n].tid = d->threads[i].tid;
		answered[n].roomy = r->roomy[i];
		memcpy(answered[n].name, d->threads[i].name,
		       sizeof(answered[n].name));
		n++;
	}
	qsort(answered, n, sizeof(*answered), cmp_tid);
	nanswered = n;
}

/* Whether tid is in the ascending set skip[0..n). */
static bool skipped(const pid_t *skip, size_t n, pid_t tid)
{
	return n && bsearch(&tid, skip, n, sizeof(*skip), cmp_tid);
}

/*
 * Drops the tids of opts->skip from tids[0..*n), in place, order kept.
 * Returns whether the process's main thread was one of them.
 */
static bool drop_skipped(const struct collect_opts *opts, pid_t pid,
			 pid_t *tids, size_t *n)
{
	bool main_skipped = false;
	size_t k = 0;

	for (size_t i = 0; i < *n; i++) {
		if (skipped(opts->skip, opts->nskip, tids[i])) {
			main_skipped |= tids[i] == pid;
			continue;
		}
		tids[k++] = tids[i];
	}
	*n = k;
	return main_skipped;
}

static int init_threads(struct run *r, const struct collect_opts *opts,
			const uint64_t *self_ips, size_t self_n, bool traced)
{
	struct sw_dump *d = r->d;
	pid_t self = (pid_t)syscall(SYS_gettid);
	pid_t *tids = NULL;
	size_t n = 0;
	int rc;

	rc = procfs_list_tasks(r->taskfd, SW_MAX_THREADS, &tids, &n);
	if (rc < 0)
		return rc;
	r->main_skipped = drop_skipped(opts, r->pid, tids, &n);
	d->threads = calloc(n ? n : 1, sizeof(*d->threads));
	r->settled = calloc(n ? n : 1, sizeof(*r->settled));
	r->recheck = calloc(n ? n : 1, sizeof(*r->recheck));
	r->unread = calloc(n ? n : 1, sizeof(*r->unread));
	r->learn = calloc(n ? n : 1, sizeof(*r->learn));
	r->roomy = calloc(n ? n : 1, sizeof(*r->roomy));
	if (!d->threads || !r->settled || !r->recheck || !r->unread ||
	    !r->learn || !r->roomy) {
		free(tids);
		return -ENOMEM;
	}
	d->nthreads = n;
	for (size_t i = 0; i < n; i++) {
		struct sw_thread *t = &d->threads[i];
		const struct known *known;

		t->tid = tids[i];
		t->state = '?';
		t->name[0] = '?'; /* until told: a thread may be gone */
		t->group = -1;
		t->unchanged_s = -1;
		t->status = SW_ST_TIMEOUT; /* until it answers */
		known = answered_before(t->tid);
		if (known) {
			r->unread[i] = true;
			r->roomy[i] = known->roomy;
			memcpy(t->name, known->name, sizeof(t->name));
		}
		if (t->tid == self) {
			r->settled[i] = true;
			read_task(r, t);
			t->ips = malloc((self_n ? self_n : 1) *
					sizeof(uint64_t));
			if (!t->ips) {
				free(tids);
				return -ENOMEM;
			}
			memcpy(t->ips, self_ips, self_n * sizeof(uint64_t));
			t->nips = self_n;
			t->captured_ns = clock_now_ns();
			t->status = SW_ST_OK;
			t->read = SW_READ_SIGNAL; /* itself, as if */
			t->flags |= SW_TF_DUMPER;
		} else if (traced) {
			r->settled[i] = true;
			read_task(r, t);
			dump_thread_set_error(
				t, SW_ST_SKIPPED,
				"a debugger is attached to the process");
		}
	}
	free(tids);
	return 0;
}

static void finish_dump(struct run *r, uint64_t start_ns)
{
	struct sw_dump *d = r->d;
	uint64_t lo = UINT64_MAX, hi = 0;
	char *name;

	/* After learning: rules are learnt for our frames too. */
	for (size_t i = 0; i < d->nthreads; i++) {
		struct sw_thread *t = &d->threads[i];

		if (t->status == SW_ST_OK && !r->settled[i])
			t->nips =
				drop_ours(t->ips, (uint32_t)t->nips, &t->flags);
	}

	for (size_t i = 0; i < d->nthreads; i++) {
		const struct sw_thread *t = &d->threads[i];

		stats.threads[t->status]++;
		if (t->status != SW_ST_OK || !t->captured_ns)
			continue;
		if (t->captured_ns < lo)
			lo = t->captured_ns;
		if (t->captured_ns > hi)
			hi = t->captured_ns;
	}
	d->skew_us = hi > lo ? (hi - lo) / 1000 : 0;
	d->elapsed_us = (clock_now_ns() - start_ns) / 1000;
	if (procfs_read_cmdline(0, &d->cmdline) < 0)
		d->cmdline = strdup("");
	name = program_invocation_short_name;
	for (size_t i = 0; i < d->nthreads; i++)
		if (d->threads[i].tid == d->pid)
			name = d->threads[i].name;
	snprintf(d->comm, sizeof(d->comm), "%s", name ? name : "");
	/*
	 * Its main thread left out, the process's name is read as the
	 * agent's HELLO reads it: the kernel's, from /proc/self/comm (no
	 * signal, no file of the thread's task), not from argv, which
	 * servers rewrite for a title.
	 */
	if (r->main_skipped && procfs_read_at(AT_FDCWD, "/proc/self/comm",
					      d->comm, sizeof(d->comm)) > 0)
		d->comm[strcspn(d->comm, "\n")] = '\0';
	stats.dumps++;
}

/*
 * Learns the unwind rules of the stacks that libunwind had to unwind, so
 * that the next dump walks them by rules (framecache.h). For a few
 * milliseconds at most, and never past the dump's deadline: a process
 * with many modules and many new pcs learns over several dumps.
 */
static void learn_rules(struct run *r)
{
	const struct sw_dump *d = r->d;
	uint64_t until = clock_now_ns() + COLLECT_LEARN_NS;

	if (until > r->deadline_ns)
		until = r->deadline_ns;
	for (size_t i = 0; i < d->nthreads; i++) {
		const struct sw_thread *t = &d->threads[i];

		if (r->learn[i] && t->status == SW_ST_OK)
			framecache_learn(t->ips, t->nips, until);
	}
	framecache_learn_done();
}

static int collect_here(const struct collect_opts *opts,
			const uint64_t *self_ips, size_t self_n,
			struct sw_dump **out)
{
	struct run r;
	pid_t tracer = 0;
	uint64_t start_ns;
	uint32_t epoch;
	int rc, signo;

	if (handler_on_stack())
		return SW_EINHANDLER;
	signo = install_here();
	if (signo < 0)
		return signo;
	memset(&r, 0, sizeof(r));
	r.signo = signo;
	r.pid = getpid();
	r.ticks_per_s = sysconf(_SC_CLK_TCK);
	if (r.ticks_per_s <= 0)
		r.ticks_per_s = 100;
	r.window = (size_t)opts->window;
	if (r.window < 1 || r.window > HANDLER_SLOTS)
		r.window = HANDLER_SLOTS;

	/* The part of the installation left for the first dump (once). */
	install_here();
	dumplock_take();
	start_ns = clock_now_ns();
	r.deadline_ns = start_ns + (uint64_t)opts->timeout_ms * 1000000ull;
	rc = handler_check();
	if (rc < 0)
		goto out_unlock;
	/* Moved to another signal since (signo.c): all read afresh. */
	r.signo = handler_signo;
	if (r.signo != last_signo) {
		nanswered = 0;
		last_signo = r.signo;
	}
	/*
	 * A mask that blocks our signal, a wait that takes it or a seccomp
	 * mode since the last dump, in some thread: all read afresh too.
	 */
	epoch = atomic_load(&handler_recheck_epoch);
	if (epoch != last_epoch) {
		nanswered = 0;
		last_epoch = epoch;
	}
	r.d = dump_new();
	if (!r.d) {
		rc = -ENOMEM;
		goto out_unlock;
	}
	r.d->pid = r.pid;
	r.d->timeout_ms = opts->timeout_ms;
	clock_gettime(CLOCK_REALTIME, &r.d->collected_at);
	r.taskfd = open("/proc/self/task", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (r.taskfd < 0) {
		rc = -errno;
		goto out_free;
	}
	procfs_tracer_pid(0, &tracer);
	rc = init_threads(&r, opts, self_ips, self_n, tracer != 0);
	if (rc < 0)
		goto out_close;
	/*
	 * After the thread list: every listed thread's stack is mapped by
	 * now. Should the table fail, handlers find no bounds and unwind.
	 */
	stackmap_refresh();
	reclaim_slots(&r);
	if (start_ns - names_at_ns >= COLLECT_NAME_REFRESH_NS) {
		names_at_ns = start_ns;
		atomic_store(&handler_want_name, 1);
	} else {
		atomic_store(&handler_want_name, 0);
	}
	if (loader_gate_hold(r.deadline_ns) == 0) {
		framecache_sync(sw_loader_gate2.nsnap
					? sw_loader_gate2.snap[0].dlpi_subs
					: 0);
		signal_all(&r);
		/*
		 * Learning reads the modules' unwind tables: still under the
		 * gate, so that no dlclose unmaps one meanwhile.
		 */
		learn_rules(&r);
		loader_gate_release();
	} else {
		finish_at_deadline(
			&r, "a dlclose() in progress outlasted the timeout");
	}
	/* The lock words, while their threads still sleep on them. */
	check_unsure(&r);
	waitmem_read(r.pid, r.d);
	rc = modules_read_self(r.d);
	if (rc < 0)
		goto out_close;
	finish_dump(&r, start_ns);
	note_answered(&r);
	free(r.settled);
	free(r.recheck);
	free(r.unread);
	free(r.learn);
	free(r.roomy);
	close(r.taskfd);
	dumplock_give();
	*out = r.d;
	return 0;

out_close:
	free(r.settled);
	free(r.recheck);
	free(r.unread);
	free(r.learn);
	free(r.roomy);
	close(r.taskfd);
out_free:
	sw_dump_free(r.d);
out_unlock:
	dumplock_give();
	return rc;
}

static void stats_here(struct collect_stats *out)
{
	dumplock_take();
	*out = stats;
	dumplock_give();
}

/*
 * The process's collector: a table each copy exports under a name that
 * carries the version of the table and of the dump it returns, plus that
 * version alone under a fixed name, so that a copy of another version is
 * seen rather than joined. The layout covers the options as well: a copy
 * that knows no skip set must never serve a call that passes one.
 */
#define COLLECTOR_ABI 2
#define COLLECTOR_LAYOUT                                                       \
	((uint32_t)(sizeof(struct sw_dump) << 20 ^                             \
		    sizeof(struct sw_thread) << 10 ^                           \
		    sizeof(struct sw_module) ^ (uint32_t)SW_MAX_FRAMES << 24 ^ \
		    sizeof(struct collect_opts) << 27))

struct sw_collector {
	uint32_t size;
	uint32_t layout;
	int (*install)(void);
	int (*signal)(void);
	int (*collect)(const struct collect_opts *, const uint64_t *, size_t,
		       struct sw_dump **);
	void (*stats)(struct collect_stats *);
	void (*frames)(uint64_t lo, uint64_t hi); /* a copy's interposers */
};

extern const int sw_collector_abi;
extern const struct sw_collector sw_collector_abi2;

const int sw_collector_abi = COLLECTOR_ABI;
const struct sw_collector sw_collector_abi2 = {
	.size = sizeof(struct sw_collector),
	.layout = COLLECTOR_LAYOUT,
	.install = install_here,
	.signal = handler_signal,
	.collect = collect_here,
	.stats = stats_here,
	.frames = frames_here,
};

static const struct sw_collector *server; /* &sw_collector_abi2: ours */
static int server_err;

/*
 * Finds the collector that serves: the first in the global scope (a
 * static copy not exported does not see itself there, and so finds the
 * agent's).
 */
static void find_server(void)
{
	const struct sw_collector *c = dlsym(RTLD_DEFAULT, "sw_collector_abi2");
	const int *abi = dlsym(RTLD_DEFAULT, "sw_collector_abi");

	server = &sw_collector_abi2;
	if (c && c != &sw_collector_abi2 && c->size == sizeof(*c) &&
	    c->layout == COLLECTOR_LAYOUT)
		server = c;
	/* Our interposers' frames are ours to drop, whoever serves. */
	if (__start_sw_interpose)
		server->frames((uintptr_t)__start_sw_interpose,
			       (uintptr_t)__stop_sw_interpose);
	if (server != &sw_collector_abi2)
		return;
	if ((abi && *abi != COLLECTOR_ABI) || (c && c != &sw_collector_abi2))
		server_err = SW_EVERSION;
}

static const struct sw_collector *serving(void)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;

	pthread_once(&once, find_server);
	return server_err ? NULL : server;
}

/*
 * At load: a copy that never dumps still has its interposers in the
 * program's calls, and says so to the one that serves.
 */
__attribute__((constructor)) static void collect_ctor(void)
{
	serving();
}

int collect_install(void)
{
	const struct sw_collector *c = serving();

	return c ? c->install() : server_err;
}

int collect_install_early(void)
{
	const struct sw_collector *c = serving();

	if (c != &sw_collector_abi2)
		return collect_install(); /* another copy's: all of it */
	register_atfork_once();
	return handler_install_early();
}

int collect_signal(void)
{
	const struct sw_collector *c = serving();

	return c ? c->signal() : 0;
}

int collect_self(const struct collect_opts *opts, const uint64_t *self_ips,
		 size_t self_n, struct sw_dump **out)
{
	const struct sw_collector *c = serving();

	return c ? c->collect(opts, self_ips, self_n, out) : server_err;
}

void collect_get_stats(struct collect_stats *out)
{
	const struct sw_collector *c = serving();

	if (c)
		c->stats(out);
	else
		memset(out, 0, sizeof(*out));
}
