/*
 * dumplock.c - the lock that serializes dumps and execs (dumplock.h).
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "dumplock.h"
#include "collector/signal/sigctx.h"
#include "model/clock.h"

/* A dump's largest timeout (the daemon allows 10 s), learning, room. */
#define DUMPLOCK_BOUND_NS (12 * 1000000000ull)

SW_FORK_STATE static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

/*
 * Bounded takers waiting: a dump about to start lets them go first.
 * Without it an exec waiting beside dumps that follow one another back to
 * back (two dumping threads, or one under a sanitizer) found the lock
 * held at each of its naps, for the whole bound.
 */
SW_FORK_STATE static _Atomic unsigned waiting;

static void nap_ms(void)
{
	struct timespec nap = { 0, 1000000L };

	nanosleep(&nap, NULL);
}

void dumplock_take(void)
{
	while (atomic_load(&waiting) != 0)
		nap_ms();
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
	bool got = true;

	atomic_fetch_add(&waiting, 1);
	while (pthread_mutex_trylock(&lock) != 0) {
		if (clock_now_ns() >= until) {
			got = false;
			break;
		}
		nap_ms();
	}
	atomic_fetch_sub(&waiting, 1);
	return got;
}

void dumplock_atfork_child(void)
{
	/* (written only where it changes: a page written is a page copied) */
	if (atomic_load(&waiting) != 0)
		atomic_store(&waiting, 0);
	if (lock.__data.__lock != 0)
		pthread_mutex_init(&lock, NULL);
}
