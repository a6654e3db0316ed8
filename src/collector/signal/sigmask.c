/*
 * sigmask.c - takes note of the masks a program sets, and keeps the
 * handler free of mask system calls.
 *
 * The program's mask is the program's: a thread that blocks our signal
 * (many servers block every signal in their workers and take signals in
 * one thread with sigwait() or a signalfd) keeps it blocked, and the
 * dumper never signals it while it does (collect.c: its SigBlk is read
 * first); the daemon reads such a thread from the kernel instead, or it is
 * reported "blocked-signal". A signal of ours let through a mask that
 * blocked it would cut a wait short (EINTR) where the program had made
 * sure nothing could, and a signal someone else sends on ours would not
 * stay pending as the program expects. So we define sigprocmask and
 * pthread_sigmask (ahead of libc: LD_PRELOAD, or linked) only to notice:
 * a set that names our signal makes it the program's (signo.c), and a set
 * that blocks it tells the dumper that a thread it signalled without
 * reading /proc last time must be read again first.
 *
 * Inside our handler every other signal is already blocked by the kernel
 * (the handler's sa_mask), so the masking libunwind does around its locks
 * buys nothing there: such calls from libunwind's code while our handler
 * runs do nothing and report a full mask as the old one, which the
 * matching restore then ignores too. Every other call is made, whoever
 * makes it and whatever runs below.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <string.h>

#include "sigctx.h"
#include "sigmask.h"
#include "signo.h"
#include "unwind.h"

typedef int (*mask_fn)(int, const sigset_t *, sigset_t *);

static _Atomic(mask_fn) real_sigprocmask;
static _Atomic(mask_fn) real_pthread_sigmask;

/* Not in signal context: sigmask_init() resolves both first. */
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

/*
 * The interposer's caller: used in the interposers themselves, so the
 * return address is their caller's.
 */
#define CALLER() ((uintptr_t)__builtin_return_address(0))

static bool in_libunwind(uintptr_t caller)
{
	return caller >= unwind_text_lo && caller < unwind_text_hi;
}

/* The claim: whether our signal (after any move) is in set. */
static bool claim(const sigset_t *set)
{
	int signo = handler_signo;

	if (signo <= 0) {
		signo_note(set); /* before we choose: not one of those */
		return false;
	}
	if (!sigismember(set, signo))
		return false;
	/*
	 * Named as such, the signal is the program's: we move to another
	 * and it gets its own as it asked.
	 */
	if (signo_named(set, signo)) {
		signo = signo_yield(signo);
		if (signo <= 0 || !sigismember(set, signo))
			return false;
	}
	return true;
}

void sigmask_claim(const sigset_t *set)
{
	if (set)
		(void)claim(set);
}

SW_FORK_STATE void (*volatile sigmask_settle_hook)(int64_t wait_ns);

void sigmask_note(int how, const sigset_t *set)
{
	if (!set || how == SIG_UNBLOCK || !claim(set))
		return;
	atomic_fetch_add(&handler_recheck_epoch, 1);
}

void sigmask_init(void)
{
	resolve(&real_sigprocmask, "sigprocmask");
	resolve(&real_pthread_sigmask, "pthread_sigmask");
}

/*
 * libunwind masking signals around its locks, inside our handler: nothing
 * to do, every signal is blocked already; "old" is a full mask, which the
 * matching restore then ignores too. Anyone else's call, even in a
 * program's fault handler running on top of ours, is made as asked.
 */
static bool in_handler(uintptr_t caller, sigset_t *old)
{
	if (!in_libunwind(caller) || !handler_on_stack())
		return false;
	if (old)
		memset(old, 0xff, sizeof(*old));
	return true;
}

SW_INTERPOSER int sigprocmask(int how, const sigset_t *set, sigset_t *old)
{
	mask_fn f;
	uintptr_t caller = CALLER();

	if (in_handler(caller, old))
		return 0;
	f = resolve(&real_sigprocmask, "sigprocmask");
	if (!f) {
		errno = ENOSYS;
		return -1;
	}
	if (!in_libunwind(caller)) {
		sigmask_note(how, set);
		sigmask_settle(0);
	}
	return f(how, set, old);
}

SW_INTERPOSER int pthread_sigmask(int how, const sigset_t *set, sigset_t *old)
{
	mask_fn f;
	uintptr_t caller = CALLER();

	if (in_handler(caller, old))
		return 0;
	f = resolve(&real_pthread_sigmask, "pthread_sigmask");
	if (!f)
		return ENOSYS;
	if (!in_libunwind(caller)) {
		sigmask_note(how, set);
		sigmask_settle(0);
	}
	return f(how, set, old);
}
