/*
 * dumplock.c - the lock that serializes dumps and execs (dumplock.h).
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <time.h>

#include "dumplock.h"
#include "model/clock.h"

/* A dump's largest timeout (the daemon allows 10 s), learning, room. */
#define DUMPLOCK_BOUND_NS (12 * 1000000000ull)

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

void dumplock_take(void)
{
	pthread_mutex_lock(&lock);
}

void dumplock_give(void)
{
	pthread_mutex_unlock(&lock);
}

bool dumplock_take_bounded(void)
{
	uint64_t until = clock_now_ns() + DUMPLOCK_BOUND_NS;
	struct timespec ts = {
		.tv_sec = (time_t)(until / 1000000000ull),
		.tv_nsec = (long)(until % 1000000000ull),
	};

	return pthread_mutex_clocklock(&lock, CLOCK_MONOTONIC, &ts) == 0;
}

void dumplock_atfork_child(void)
{
	pthread_mutex_init(&lock, NULL);
}
