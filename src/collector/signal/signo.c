/*
 * signo.c - which real-time signal we use, and giving it up when the
 * program turns out to want it (signo.h).
 *
 * A real-time signal left at SIG_DFL looks free, but that is exactly how
 * programs that take their signals through signalfd() or sigwaitinfo()
 * leave theirs. When a program blocks, waits for or opens a signalfd on
 * our signal by name (a set that names it among a few, not "block
 * everything"), the signal is theirs: we install our handler on another
 * free one and use that from the next dump on. The old one keeps our
 * handler (a signal of ours may still be in flight), which hands every
 * instance not sent by us back to the process, blocked for the thread
 * that caught it, so that the program's signalfd or sigwaitinfo gets it
 * (handler.c). Signals the program claimed are never chosen again.
 *
 * Everything here but signo_install() may run on signal context (the
 * mask and wait interposers are called from signal handlers too): atomics
 * and sigaction(), which is async-signal-safe.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "sigctx.h"
#include "signo.h"
#include "stackwatch.h"

static _Atomic uint64_t claimed;   /* the program's: never ours */
static _Atomic uint64_t retired;   /* were ours: still handled */
static _Atomic int moving;	   /* a move in progress */
static struct sigaction installed; /* what we install, on any signal */

#define BIT(s) (1ull << ((s)-1))

static bool is_free(int signo)
{
	struct sigaction old;

	if ((atomic_load(&claimed) | atomic_load(&retired)) & BIT(signo))
		return false;
	if (sigaction(signo, NULL, &old) < 0)
		return false;
	if (old.sa_flags & SA_SIGINFO)
		return false;
	return old.sa_handler == SIG_DFL;
}

/* The first free real-time signal from SIGRTMIN + 4 up, or 0. */
static int first_free(void)
{
	for (int signo = SIGRTMIN + 4; signo <= SIGRTMAX; signo++)
		if (is_free(signo))
			return signo;
	return 0;
}

/* sa with its mask made for signo (our own signal is left out). */
static void install_on(int signo, struct sigaction *sa)
{
	sigdelset(&sa->sa_mask, signo);
	sigaction(signo, sa, NULL);
}

int signo_install(const struct sigaction *sa)
{
	const char *env = getenv("STACKWATCH_SIGNAL");
	struct sigaction mine = *sa;
	int signo;

	if (env && *env) {
		char *end;
		long v;

		errno = 0;
		v = strtol(env, &end, 10);
		if (errno || *end || v < SIGRTMIN || v > SIGRTMAX)
			return -EINVAL;
		if (!is_free((int)v))
			return SW_ENOSIGNAL;
		signo = (int)v;
	} else {
		signo = first_free();
		if (!signo)
			return SW_ENOSIGNAL;
	}
	installed = *sa;
	install_on(signo, &mine);
	return signo;
}

bool signo_named(const sigset_t *set, int signo)
{
	int in = 0, rt = 0;

	if (!set || signo <= 0 || !sigismember(set, signo))
		return false;
	for (int s = SIGRTMIN; s <= SIGRTMAX; s++) {
		rt++;
		in += sigismember(set, s) == 1;
	}
	/* "Everything" (sigfillset, less a few) holds nearly every one. */
	return in < rt - 3;
}

void signo_note(const sigset_t *set)
{
	uint64_t add = 0;
	int in = 0, rt = 0;

	if (!set)
		return;
	/* signo_named() of each, with the set counted once, not each time. */
	for (int s = SIGRTMIN; s <= SIGRTMAX; s++) {
		rt++;
		if (sigismember(set, s) == 1) {
			in++;
			if (s >= 1 && s <= 64)
				add |= BIT(s);
		}
	}
	if (add && in < rt - 3)
		atomic_fetch_or(&claimed, add);
}

int signo_yield(int signo)
{
	struct sigaction mine;
	int expect = 0, next;

	if (signo <= 0 || signo > 64)
		return 0;
	atomic_fetch_or(&claimed, BIT(signo));
	/* One move at a time; moves take microseconds. */
	while (!atomic_compare_exchange_weak(&moving, &expect, 1))
		expect = 0;
	if (signo != handler_signo) {
		atomic_store(&moving, 0);
		return handler_signo;
	}
	next = first_free();
	if (next) {
		mine = installed;
		install_on(next, &mine);
	}
	atomic_fetch_or(&retired, BIT(signo));
	/* 0: no signal left that is not the program's; dumps stop. */
	handler_signo = next;
	atomic_store(&moving, 0);
	return next;
}

bool signo_is_retired(int signo)
{
	return signo > 0 && signo <= 64 &&
	       (atomic_load(&retired) & BIT(signo)) != 0;
}

uint64_t signo_retired_mask(void)
{
	return atomic_load(&retired);
}
