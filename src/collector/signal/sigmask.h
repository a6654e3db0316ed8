/*
 * sigmask.h - our sigprocmask and pthread_sigmask (see sigmask.c): the
 * dump signal is never blocked through libc, and inside our handler the
 * calls cost nothing.
 */
#ifndef SW_SIGMASK_H
#define SW_SIGMASK_H

/* Resolves libc's functions. Call before any signal is sent. */
void sigmask_init(void);

#endif /* SW_SIGMASK_H */
