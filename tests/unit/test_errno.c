/*
 * test_errno.c - the handler preserves errno.
 *
 * Threads set errno to a sentinel and spin, checking that it never
 * changes, while they are dumped 1000 times. A handler that makes a system
 * call which fails (a futex wake with no waiter, a getrusage, ...) and does
 * not restore errno would change it under the interrupted code. Every dump
 * must find the spinners ok, so we know the handler ran on them each time.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "model/dump.h"
#include "stackwatch.h"
#include "tap.h"
#include "testutil.h"

#define SPINNERS 2
#define DUMPS 1000
#define SENTINEL 0x5eed

static atomic_bool stop;
static atomic_int started;
static pid_t spinner_tids[SPINNERS];
static unsigned long changed[SPINNERS];
static int last_seen[SPINNERS];
static unsigned long iterations[SPINNERS];

__attribute__((noinline)) static void errno_spin(int id)
{
	errno = SENTINEL;
	while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
		int e = errno;

		if (e != SENTINEL) {
			changed[id]++;
			last_seen[id] = e;
			errno = SENTINEL;
		}
		iterations[id]++;
	}
}

static void *spinner_main(void *arg)
{
	int id = (int)(intptr_t)arg;

	spinner_tids[id] = tu_gettid();
	atomic_fetch_add(&started, 1);
	errno_spin(id);
	return NULL;
}

int main(void)
{
	pthread_t th[SPINNERS];
	int failed = 0, answered = 0, notes = 0;
	unsigned long total_changed = 0;

	for (int i = 0; i < SPINNERS; i++)
		pthread_create(&th[i], NULL, spinner_main, (void *)(intptr_t)i);
	while (atomic_load(&started) < SPINNERS)
		tu_sleep_ms(1);

	for (int i = 0; i < DUMPS; i++) {
		struct sw_dump_opts o;
		struct sw_dump *d = NULL;

		sw_dump_opts_init(&o);
		o.symbolize = 0;
		if (sw_dump_self(&o, &d) != 0 || !d) {
			failed++;
			continue;
		}
		for (int s = 0; s < SPINNERS; s++) {
			const struct sw_thread *t =
				tu_find_thread(d, spinner_tids[s]);
			if (t && t->status == SW_ST_OK)
				answered++;
			else if (notes++ < 5)
				TAP_NOTE("dump %d: spinner %d is %s: %s", i, s,
					 t ? dump_status_name(t->status)
					   : "missing",
					 t && t->error ? t->error : "");
		}
		sw_dump_free(d);
	}
	atomic_store(&stop, true);
	for (int i = 0; i < SPINNERS; i++) {
		pthread_join(th[i], NULL);
		total_changed += changed[i];
		if (changed[i])
			TAP_NOTE("spinner %d saw errno %d (%s)", i,
				 last_seen[i], strerror(last_seen[i]));
	}

	TAP_OK(failed == 0, "%d dumps succeed (%d failed)", DUMPS, failed);
	TAP_OK(answered == DUMPS * SPINNERS,
	       "the handler ran on each spinner in every dump (%d of %d)",
	       answered, DUMPS * SPINNERS);
	TAP_OK(iterations[0] > 0 && iterations[1] > 0,
	       "the spinners were checking errno all along");
	TAP_OK(total_changed == 0,
	       "errno never changed under the interrupted code (%lu times)",
	       total_changed);
	return tap_done();
}
