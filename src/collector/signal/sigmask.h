/*
 * sigmask.h - our sigprocmask and pthread_sigmask (see sigmask.c): the
 * dump signal is never blocked through libc, and inside our handler the
 * calls cost nothing.
 */
#ifndef SW_SIGMASK_H
#define SW_SIGMASK_H

#include <signal.h>

/* Resolves libc's functions. Call before any signal is sent. */
void sigmask_init(void);

/*
 * The set a caller asked to block (how SIG_BLOCK or SIG_SETMASK; also a
 * set to wait on, or a mask a wait installs), minus our signal: set
 * itself when it does not hold it, else *copy so changed. NULL stays
 * NULL. Async-signal-safe.
 */
const sigset_t *sigmask_filter(int how, const sigset_t *set, sigset_t *copy);

#endif /* SW_SIGMASK_H */
