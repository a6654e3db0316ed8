/*
 * signo.h - the real-time signal we use, chosen free and given up when the
 * program claims it (signo.c).
 */
#ifndef SW_SIGNO_H
#define SW_SIGNO_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>

/*
 * Chooses our signal ($STACKWATCH_SIGNAL, else the first free real-time
 * signal from SIGRTMIN + 4 up: SIG_DFL and not claimed) and installs sa
 * on it, remembered for later moves. Returns the signal, -EINVAL for a
 * bad $STACKWATCH_SIGNAL, SW_ENOSIGNAL when none is free. Once, before
 * any signal is sent; not async-signal-safe.
 */
int signo_install(const struct sigaction *sa);

/*
 * Whether set names signo as such: holds it, but not as part of
 * "everything" (a set holding nearly every real-time signal, as
 * sigfillset makes). Async-signal-safe.
 */
bool signo_named(const sigset_t *set, int signo);

/*
 * The program claims signo: it is never chosen again, and if it is ours
 * our handler moves to another free signal (installed at once; the old
 * one keeps our handler, which passes the program's instances on).
 * Returns our signal afterwards, 0 when none was left (no dumps then).
 * Async-signal-safe.
 */
int signo_yield(int signo);

/* Before we chose: every real-time signal that set names is claimed. */
void signo_note(const sigset_t *set);

/* Whether signo was ours before a move; and all such, as a mask. */
bool signo_is_retired(int signo);
uint64_t signo_retired_mask(void);

#endif /* SW_SIGNO_H */
