/*
 * test_loader_lock.c - a thread interrupted while holding a lock that a
 * thread inside the loader waits for is unwound without the loader's lock.
 *
 * The cycle this guards against: thread A holds lock L (in real programs
 * the allocator's); thread B sits in dl_iterate_phdr's callback, holding
 * the loader's lock, and waits for L; we interrupt A. If A's handler looked
 * its modules up through the loader, it would wait for B, B for L, and L
 * for A to return from the handler: the process would hang for good. Here
 * A holds L almost all the time and B waits for it inside the loader over
 * and over, so without the module snapshot (loader_guard.h) the first few
 * dumps hang. An alarm is the watchdog: a hung dump fails the test.
 */
#define _GNU_SOURCE
#include <link.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "model/dump.h"
#include "stackwatch.h"
#include "tap.h"
#include "testutil.h"

#define DUMPS 300
#define TIMEOUT_MS 2000
#define WATCHDOG_S 120

static pthread_mutex_t lock_l = PTHREAD_MUTEX_INITIALIZER;
static atomic_bool stop;
static atomic_ulong b_rounds;
static atomic_ulong b_got; /* times B got L */

/* A: holds L for 500 us at a time, letting go only for a moment. */
__attribute__((noinline)) static void hold_and_spin(void)
{
	uint64_t t0 = tu_now_ns();

	pthread_mutex_lock(&lock_l);
	while (tu_now_ns() - t0 < 500 * 1000)
		;
	pthread_mutex_unlock(&lock_l);
}

/*
 * A again and again, letting B through L in between (for up to 2 ms): a
 * mutex is not fair, and a B starved of L would hold the loader's lock for
 * as long, which the dumper needs for a moment to take its snapshot. Real
 * critical sections (the allocator's) are short; this one is long so that
 * the dumps catch it.
 */
static void *holder_main(void *arg)
{
	(void)arg;
	pthread_setname_np(pthread_self(), "holder");
	while (!atomic_load(&stop)) {
		unsigned long got = atomic_load(&b_got);
		uint64_t t0;

		hold_and_spin();
		t0 = tu_now_ns();
		while (atomic_load(&b_got) == got &&
		       tu_now_ns() - t0 < 2 * 1000 * 1000)
			;
	}
	return NULL;
}

/* B: inside the loader's lock, waits for L. */
static int wait_for_l(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)info;
	(void)size;
	(void)arg;
	pthread_mutex_lock(&lock_l);
	atomic_fetch_add(&b_got, 1);
	pthread_mutex_unlock(&lock_l);
	return 1;
}

static void *waiter_main(void *arg)
{
	(void)arg;
	pthread_setname_np(pthread_self(), "waiter");
	while (!atomic_load(&stop)) {
		dl_iterate_phdr(wait_for_l, NULL);
		atomic_fetch_add(&b_rounds, 1);
	}
	return NULL;
}

static void hung(int sig)
{
	static const char msg[] =
		"not ok - a dump hung: the handler waited for the loader\n";

	(void)sig;
	if (write(STDOUT_FILENO, msg, sizeof(msg) - 1) < 0)
		_exit(2);
	_exit(1);
}

int main(void)
{
	pthread_t a, b;
	unsigned long failed = 0, slow = 0, a_unwound = 0, a_placeholder = 0;
	unsigned long b_in_loader = 0, rounds;

#if defined(__SANITIZE_THREAD__)
	TAP_SKIP("under ThreadSanitizer signals arrive on its own terms");
	return tap_done();
#endif
	signal(SIGALRM, hung);
	alarm(WATCHDOG_S);
	pthread_create(&a, NULL, holder_main, NULL);
	pthread_create(&b, NULL, waiter_main, NULL);
	tu_sleep_ms(20);
	for (int i = 0; i < DUMPS; i++) {
		struct sw_dump_opts o;
		struct sw_dump *d = NULL;
		const struct sw_thread *t;
		uint64_t t0 = tu_now_ns();

		sw_dump_opts_init(&o);
		o.symbolize = 1;
		o.timeout_ms = TIMEOUT_MS;
		if (sw_dump_self(&o, &d) != 0) {
			failed++;
			continue;
		}
		if (tu_now_ns() - t0 >= TIMEOUT_MS * 1000000ull)
			slow++;
		for (size_t k = 0; k < d->nthreads; k++) {
			t = &d->threads[k];
			if (t->status != SW_ST_OK)
				continue;
			if (strcmp(t->name, "holder") == 0) {
				if (t->flags & SW_TF_IN_LOADER)
					a_placeholder++;
				else if (tu_count_fn(t, "holder_main") > 0)
					a_unwound++;
			} else if (strcmp(t->name, "waiter") == 0 &&
				   (t->flags & SW_TF_IN_LOADER)) {
				b_in_loader++;
			}
		}
		sw_dump_free(d);
	}
	alarm(0);
	atomic_store(&stop, true);
	pthread_join(a, NULL);
	pthread_join(b, NULL);
	rounds = atomic_load(&b_rounds);

	TAP_OK(true, "%d dumps returned: none hung", DUMPS);
	TAP_OK(failed == 0 && slow == 0,
	       "every dump succeeded within its timeout (%lu failed, %lu "
	       "waited it out)",
	       failed, slow);
	TAP_OK(a_unwound >= DUMPS * 9 / 10 && a_placeholder == 0,
	       "the lock holder was unwound to its start routine in %lu of %d "
	       "dumps, never given the placeholder (%lu)",
	       a_unwound, DUMPS, a_placeholder);
	TAP_OK(b_in_loader >= DUMPS / 10,
	       "the waiter was caught inside the loader waiting for the lock "
	       "(%lu of %d dumps)",
	       b_in_loader, DUMPS);
	TAP_OK(rounds > 0, "the waiter got through the loader %lu times",
	       rounds);
	return tap_done();
}
