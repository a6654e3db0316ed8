/*
 * ksnap.c - a snapshot (snapshot.h) whose blocked threads are read from
 * the kernel (kread.h): no signal, no stop. Only the threads that were on
 * a CPU, or ran while they were copied, are left to the ptrace path, or
 * to the caller with SNAP_GIVEN_ONLY (an agent target's own signal path).
 */
#define _GNU_SOURCE
#include "ksnap.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>

#include "model/clock.h"
#include "perfsample.h"

/* Running threads sampled per snapshot, and how long each may take. */
#define KSNAP_PERF_MAX 64
#define KSNAP_PERF_WAIT_NS 20000000ull

/* Name, state and CPU times, as the kernel read gave them. */
static void describe(const struct kread_thread *k, struct snap_thread *t)
{
	memcpy(t->name, k->comm,
	       sizeof(t->name) < sizeof(k->comm) ? sizeof(t->name)
						 : sizeof(k->comm));
	t->name[sizeof(t->name) - 1] = '\0';
	t->state = k->state;
	t->utime_ms = k->utime_ns / 1000000u;
	t->stime_ms = k->stime_ns / 1000000u;
}

/* A thread read whole, as the snapshot's thread; its stack moves. */
static void to_snap(struct kread_thread *k, struct snap_thread *t)
{
	memset(t, 0, sizeof(*t));
	t->tid = k->tid;
	t->method = SNAP_M_KERNEL;
	t->status = SW_ST_OK;
	describe(k, t);
	t->captured_ns = k->captured_ns;
	memcpy(t->regs, k->regs, sizeof(t->regs));
	t->sp = k->sp;
	t->stack = k->stack;
	t->stack_len = k->stack_len;
	t->nvcsw = k->nvcsw;
	t->nivcsw = k->nivcsw;
	t->cut = (k->flags & KREAD_CUT) != 0;
	k->stack = NULL;
	k->stack_len = 0;
	/* As snapshot.c's copy_thread(): a futex wait keeps its word. */
#if defined(__x86_64__)
	t->waits = k->syscall == SYS_futex || k->syscall == SYS_restart_syscall;
	if (t->waits) {
		t->wait.addr = k->regs[5];	   /* rdi */
		t->wait.op = (uint32_t)k->regs[4]; /* rsi */
	}
#endif
}

/*
 * A thread the kernel read could not copy (it was running): one perf
 * sample of it, or, when it blocked before the sample came, the kernel
 * read of it alone. Returns 0 with *t filled, or a negative errno: the
 * caller leaves it to ptrace.
 */
static int read_running(struct kread *k, int slot, pid_t pid,
			const struct kread_thread *first, uint64_t deadline_ns,
			uint32_t limit, struct snap_thread *t)
{
	uint64_t until = clock_now_ns() + KSNAP_PERF_WAIT_NS;
	struct kread_thread *v = NULL;
	size_t n = 0;
	int r;

	if (until > deadline_ns)
		until = deadline_ns;
	for (int tries = 0; tries < 3; tries++) {
		memset(t, 0, sizeof(*t));
		r = perf_sample_thread(pid, first->tid, until, t);
		if (r == 0) {
			describe(first, t);
			t->state = 'R';
			return 0;
		}
		if (r != -EAGAIN)
			return r;
		/* It did not run: it is blocked now, the kernel has it. */
		r = kread_thread(k, slot, pid, first->tid, limit, &v, &n, NULL);
		if (r == 0 && n == 1 && (v[0].flags & KREAD_OK)) {
			to_snap(&v[0], t);
			kread_free(v, n);
			return 0;
		}
		kread_free(v, n);
		v = NULL;
		n = 0;
		if (clock_now_ns() >= until)
			break;
	}
	return -EAGAIN;
}

/* A thread that has not run since the caller's earlier read (e). */
static void to_reused(const struct kread_thread *k,
		      const struct kread_expect *e, struct snap_thread *t)
{
	memset(t, 0, sizeof(*t));
	t->tid = k->tid;
	t->method = SNAP_M_KERNEL;
	t->status = SW_ST_OK;
	t->reused = true;
	t->captured_ns = k->captured_ns;
	t->nvcsw = k->nvcsw;
	t->nivcsw = k->nivcsw;
	describe(k, t);
	/* Still in the same futex wait: its lock word is read afresh. */
	if (e && e->wait_addr) {
		t->waits = true;
		t->wait.addr = e->wait_addr;
		t->wait.op = e->wait_op;
	}
}

static int cmp_expect(const void *a, const void *b)
{
	const struct kread_expect *x = a, *y = b;

	return (x->tid > y->tid) - (x->tid < y->tid);
}

/* The expectation given for tid, or NULL. */
static const struct kread_expect *find_expect(const struct kread_expect *same,
					      size_t n, pid_t tid)
{
	struct kread_expect key = { .tid = tid };

	return same && n ? bsearch(&key, same, n, sizeof(*same), cmp_expect)
			 : NULL;
}

int ksnap_take(struct kread *k, int slot, pid_t pid, int timeout_ms,
	       unsigned flags, struct snap **out, struct kread_stats *stats)
{
	return ksnap_take_same(k, slot, pid, timeout_ms, flags, NULL, 0, out,
			       stats);
}

int ksnap_take_same(struct kread *k, int slot, pid_t pid, int timeout_ms,
		    unsigned flags, const struct kread_expect *same,
		    size_t nsame, struct snap **out, struct kread_stats *stats)
{
	uint64_t deadline_ns =
		clock_now_ns() +
		(uint64_t)(timeout_ms > 0 ? timeout_ms : 1) * 1000000ull;
	struct kread_thread *v = NULL;
	struct snap_thread *given = NULL;
	size_t n = 0, ng = 0, sampled = 0;
	int r;

	*out = NULL;
	if (!k)
		return snap_take_with(pid, timeout_ms, NULL, 0, flags, out);
	r = kread_process_same(k, slot, pid, snap_stack_limit(flags), same,
			       nsame, &v, &n, stats);
	if (r == 0 && n) {
		given = calloc(n, sizeof(*given));
		if (!given)
			r = -ENOMEM;
	}
	/*
	 * Every thread the iterator saw is given: read, or its tid alone
	 * (left to ptrace, or skipped for the caller), so the snapshot need
	 * not list the process's threads again.
	 */
	for (size_t i = 0; r == 0 && i < n; i++) {
		struct snap_thread *t = &given[ng++];

		if (v[i].flags & KREAD_OK) {
			to_snap(&v[i], t);
			continue;
		}
		if (v[i].flags & KREAD_SAME) {
			to_reused(&v[i], find_expect(same, nsame, v[i].tid), t);
			continue;
		}
		if (!(flags & SNAP_GIVEN_ONLY) &&
		    (v[i].flags & (KREAD_ONCPU | KREAD_TORN)) &&
		    sampled < KSNAP_PERF_MAX && clock_now_ns() < deadline_ns) {
			sampled++;
			if (read_running(k, slot, pid, &v[i], deadline_ns,
					 snap_stack_limit(flags), t) == 0)
				continue;
		}
		memset(t, 0, sizeof(*t));
		t->tid = v[i].tid;
		t->method = SNAP_M_PTRACE;
		if (flags & SNAP_GIVEN_ONLY)
			t->status = SW_ST_SKIPPED;
	}
	if (r == 0 && ng)
		flags |= SNAP_LISTED;
	kread_free(v, n);
	/* Whatever the kernel could not say, the snapshot's checks say. */
	timeout_ms = (int)((deadline_ns > clock_now_ns()
				    ? deadline_ns - clock_now_ns()
				    : 1000000u) /
			   1000000u);
	r = snap_take_with(pid, timeout_ms > 0 ? timeout_ms : 1, given, ng,
			   flags, out);
	for (size_t i = 0; i < ng; i++)
		free(given[i].stack);
	free(given);
	return r;
}
