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

/* A thread read whole, as the snapshot's thread; its stack moves. */
static void to_snap(struct kread_thread *k, struct snap_thread *t)
{
	memset(t, 0, sizeof(*t));
	t->tid = k->tid;
	t->method = SNAP_M_KERNEL;
	t->status = SW_ST_OK;
	memcpy(t->name, k->comm,
	       sizeof(t->name) < sizeof(k->comm) ? sizeof(t->name)
						 : sizeof(k->comm));
	t->name[sizeof(t->name) - 1] = '\0';
	t->state = k->state;
	t->utime_ms = k->utime_ns / 1000000u;
	t->stime_ms = k->stime_ns / 1000000u;
	t->captured_ns = k->captured_ns;
	memcpy(t->regs, k->regs, sizeof(t->regs));
	t->sp = k->sp;
	t->stack = k->stack;
	t->stack_len = k->stack_len;
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

int ksnap_take(struct kread *k, int slot, pid_t pid, int timeout_ms,
	       unsigned flags, struct snap **out, struct kread_stats *stats)
{
	struct kread_thread *v = NULL;
	struct snap_thread *given = NULL;
	size_t n = 0, ng = 0;
	int r;

	*out = NULL;
	if (!k)
		return snap_take_with(pid, timeout_ms, NULL, 0, flags, out);
	r = kread_process(k, slot, pid, SNAP_STACK_MAX, &v, &n, stats);
	if (r == 0 && n) {
		given = calloc(n, sizeof(*given));
		if (!given)
			r = -ENOMEM;
	}
	for (size_t i = 0; r == 0 && i < n; i++)
		if (v[i].flags & KREAD_OK)
			to_snap(&v[i], &given[ng++]);
	kread_free(v, n);
	/* Whatever the kernel could not say, the snapshot's checks say. */
	r = snap_take_with(pid, timeout_ms, given, ng, flags, out);
	for (size_t i = 0; i < ng; i++)
		free(given[i].stack);
	free(given);
	return r;
}
