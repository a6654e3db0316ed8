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

/*
 * By trylock and 1 ms naps rather than pthread_mutex_clocklock(): an exec
 * or a seccomp call is rare, and ThreadSanitizer's runtime does not know
 * clocklock (it then reports the unlock that follows).
 */
bool dumplock_take_bounded(void)
{
	uint64_t until = clock_now_ns() + DUMPLOCK_BOUND_NS;

	while (pthread_mutex_trylock(&lock) != 0) {
		struct timespec nap = { 0, 1000000L };

		if (clock_now_ns() >= until)
			return false;
		nanosleep(&nap, NULL);
	}
	return true;
}

void dumplock_atfork_child(void)
{
	pthread_mutex_init(&lock, NULL);
}
