/*
 * waits.h - the signal waits and masked waits, as the program asked them
 * (waits.c). The interposers themselves are libc's names.
 */
#ifndef SW_COLLECTOR_WAITS_H
#define SW_COLLECTOR_WAITS_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

/*
 * Resolves libc's functions. Idempotent; the collector calls it before
 * its first dump (which also links waits.c into a static program).
 */
void waits_init(void);

/*
 * Whether thread tid is inside sigwait(), sigwaitinfo() or sigtimedwait()
 * on a set that holds our signal. Such a thread shows the signal
 * unblocked in its SigBlk (the kernel opens the set for the wait), but a
 * signal of ours would be taken by its wait: it is not signalled. Read
 * after its /proc status, so that a thread that entered such a wait
 * before that read is seen here (the wait is marked before it starts).
 */
bool waits_takes_ours(pid_t tid);

/* A relative timespec in ns: -1 for none (no end), 0 if negative. */
static inline int64_t waits_ts_ns(const struct timespec *ts)
{
	if (!ts)
		return -1;
	if (ts->tv_sec < 0 || ts->tv_nsec < 0)
		return 0;
	return (int64_t)ts->tv_sec * 1000000000 + ts->tv_nsec;
}

#endif /* SW_COLLECTOR_WAITS_H */
