/*
 * cond.h - condition variables whose timed waits count on CLOCK_MONOTONIC,
 * so that a wall-clock step neither cuts a deadline short nor stretches it.
 */
#ifndef SW_DAEMON_COND_H
#define SW_DAEMON_COND_H

#include <pthread.h>
#include <time.h>

/* pthread_cond_init() with the monotonic clock. 0 or an errno value. */
static inline int cond_init_monotonic(pthread_cond_t *c)
{
	pthread_condattr_t ca;
	int rc;

	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	rc = pthread_cond_init(c, &ca);
	pthread_condattr_destroy(&ca);
	return rc;
}

#endif /* SW_DAEMON_COND_H */
