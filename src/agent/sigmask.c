/*
 * sigmask.c - keeps the dump signal deliverable.
 *
 * Many servers block every signal in their workers and take signals in one
 * thread with sigwait() or a signalfd; inherited by every worker, that mask
 * would make them all undumpable. We define sigprocmask and pthread_sigmask
 * (ahead of libc: LD_PRELOAD, or linked) and take our signal out of any set
 * being blocked. Our handler takes no lock and touches no application
 * state, so this cannot defeat the application's reason for masking. A
 * thread that blocks it by raw system call is still seen (SigBlk) and
 * reported "blocked-signal".
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <signal.h>
#include <stdatomic.h>

#include "agent.h"

typedef int (*mask_fn)(int, const sigset_t *, sigset_t *);

static _Atomic(mask_fn) real_sigprocmask;
static _Atomic(mask_fn) real_pthread_sigmask;

static mask_fn resolve(_Atomic(mask_fn) *slot, const char *name)
{
	mask_fn f = atomic_load_explicit(slot, memory_order_acquire);

	if (!f) {
		union {
			void *p;
			mask_fn f;
		} u = { .p = dlsym(RTLD_NEXT, name) };
		f = u.f;
		atomic_store_explicit(slot, f, memory_order_release);
	}
	return f;
}

/* The set the caller asked for, minus our signal where it would block it. */
static const sigset_t *filter(int how, const sigset_t *set, sigset_t *copy)
{
	int signo = agent_signal();

	if (!set || signo <= 0 || how == SIG_UNBLOCK)
		return set;
	if (!sigismember(set, signo))
		return set;
	*copy = *set;
	sigdelset(copy, signo);
	return copy;
}

int sigprocmask(int how, const sigset_t *set, sigset_t *old)
{
	mask_fn f = resolve(&real_sigprocmask, "sigprocmask");
	sigset_t copy;

	if (!f) {
		errno = ENOSYS;
		return -1;
	}
	return f(how, filter(how, set, &copy), old);
}

int pthread_sigmask(int how, const sigset_t *set, sigset_t *old)
{
	mask_fn f = resolve(&real_pthread_sigmask, "pthread_sigmask");
	sigset_t copy;

	if (!f)
		return ENOSYS;
	return f(how, filter(how, set, &copy), old);
}
