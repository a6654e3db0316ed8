/*
 * clock.h - the monotonic clock every deadline of stackwatch is measured
 * on, in nanoseconds.
 *
 * Header only: code on signal context (collector/signal/) reads it too.
 */
#ifndef SW_CLOCK_H
#define SW_CLOCK_H

#include <stdint.h>
#include <time.h>

/* CLOCK_MONOTONIC in nanoseconds. Async-signal-safe (the vDSO). */
static inline uint64_t clock_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

#endif /* SW_CLOCK_H */
