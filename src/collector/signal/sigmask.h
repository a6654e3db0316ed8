/*
 * sigmask.h - our sigprocmask and pthread_sigmask (see sigmask.c): the
 * program's masks are its own; we take note of what they say of our
 * signal, and inside our handler the calls cost nothing.
 */
#ifndef SW_SIGMASK_H
#define SW_SIGMASK_H

#include <signal.h>
#include <stdint.h>

/* Resolves libc's functions. Call before any signal is sent. */
void sigmask_init(void);

/*
 * Takes note of a set a caller blocks (how SIG_BLOCK or SIG_SETMASK; also
 * a set a thread waits on, or a mask a wait installs): a set that names
 * our signal among a few makes it the program's (signo.c moves us to
 * another); one that holds it among everything moves
 * handler_recheck_epoch, so the dumper reads the threads' masks again
 * before it signals them. The set itself is never changed. NULL and
 * SIG_UNBLOCK are nothing to note. Async-signal-safe.
 */
void sigmask_note(int how, const sigset_t *set);

/*
 * sigmask_note() for a set a wait takes or a mask it installs for its
 * duration: only the claim. A wait's mask is seen in the thread's SigBlk
 * while it waits, and a wait on a set that holds our signal is marked
 * (collector/waits.c), so the dumper needs no word. Async-signal-safe.
 */
void sigmask_claim(const sigset_t *set);

/*
 * Set by the agent while its thread waits for the process to settle
 * (agent/settle.h): called by the mask interposers and the waits of
 * collector/waits.c with how long the call may block (-1: no end; 0:
 * not at all). Not signal context.
 */
extern void (*volatile sigmask_settle_hook)(int64_t wait_ns);

static inline void sigmask_settle(int64_t wait_ns)
{
	void (*f)(int64_t) = sigmask_settle_hook;

	if (f)
		f(wait_ns);
}

#endif /* SW_SIGMASK_H */
