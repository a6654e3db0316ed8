/*
 * test_churn.c - threads created and exiting thousands of times a second
 * while the process is dumped (torture scenario 5).
 *
 * Spawner threads start short-lived threads in batches, alternating two
 * start routines, churn_alpha and churn_beta; each names itself after its
 * routine ("churn-alpha", "churn-beta") first thing and then works a
 * little in a function of its own. Meanwhile the main thread dumps the
 * process, symbolized, over and over. Every thread of every dump whose name
 * is one of the two must carry no frame of the other routine: a stack
 * written by one thread and reported under another (a slot reused under a
 * late handler, a stale generation, a tid taken over) would show as the
 * wrong pair. The check must also have teeth: many threads must have been
 * caught inside their own routine. A thread that exits after being
 * signalled is "exited", and the dump does not wait out its deadline for
 * it.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "model/dump.h"
#include "stackwatch.h"
#include "tap.h"
#include "testutil.h"

#define SPAWNERS 2
#define BATCH 8		/* threads alive at once per spawner */
#define RUN_MS 4000	/* how long the main thread dumps */
#define TIMEOUT_MS 1000 /* per dump */

static atomic_bool stop;
static atomic_ulong created;

/* Runs for us microseconds: long enough to be caught, short enough to churn. */
static void spin_for(uint64_t us)
{
	uint64_t t0 = tu_now_ns();

	while (tu_now_ns() - t0 < us * 1000)
		;
}

__attribute__((noinline)) static void alpha_work(void)
{
	spin_for(100);
}

__attribute__((noinline)) static void beta_work(void)
{
	spin_for(120);
}

static void *churn_alpha(void *arg)
{
	(void)arg;
	pthread_setname_np(pthread_self(), "churn-alpha");
	alpha_work();
	return NULL;
}

static void *churn_beta(void *arg)
{
	(void)arg;
	pthread_setname_np(pthread_self(), "churn-beta");
	beta_work();
	return (void *)1;
}

static void *spawner_main(void *arg)
{
	pthread_t th[BATCH];
	unsigned long k = (unsigned long)(uintptr_t)arg;

	pthread_setname_np(pthread_self(), "spawner");
	while (!atomic_load(&stop)) {
		int n = 0;

		for (int i = 0; i < BATCH; i++, k++)
			if (pthread_create(&th[n], NULL,
					   k % 2 ? churn_beta : churn_alpha,
					   NULL) == 0)
				n++;
		for (int i = 0; i < n; i++)
			pthread_join(th[i], NULL);
		atomic_fetch_add(&created, (unsigned long)n);
	}
	return NULL;
}

struct tally {
	unsigned long dumps, failed, slow;
	unsigned long named; /* threads dumped ok under a churn name */
	unsigned long own;   /* ...caught inside their own routine */
	unsigned long wrong; /* ...carrying the other routine */
	unsigned long statuses[SW_ST_COUNT];
	uint64_t worst_us;
};

/* Checks one dump's churned threads. */
static void check_dump(const struct sw_dump *d, struct tally *t, int *notes)
{
	char desc[256];

	for (size_t i = 0; i < d->nthreads; i++) {
		const struct sw_thread *th = &d->threads[i];
		bool alpha = strcmp(th->name, "churn-alpha") == 0;
		bool beta = strcmp(th->name, "churn-beta") == 0;
		int mine, other;

		if (!alpha && !beta)
			continue;
		t->statuses[th->status]++;
		if (th->status != SW_ST_OK)
			continue;
		t->named++;
		mine = tu_count_fn(th, alpha ? "churn_alpha" : "churn_beta");
		other = tu_count_fn(th, alpha ? "churn_beta" : "churn_alpha") +
			tu_count_fn(th, alpha ? "beta_work" : "alpha_work");
		t->own += mine > 0;
		if (other > 0) {
			t->wrong++;
			if ((*notes)++ < 5)
				TAP_NOTE("%s (%d) has %s", th->name,
					 (int)th->tid,
					 tu_describe_stack(th, desc,
							   sizeof(desc)));
		}
	}
}

int main(void)
{
	pthread_t sp[SPAWNERS];
	struct tally t = { 0 };
	uint64_t start, end;
	unsigned long made;
	int notes = 0;

#if defined(__SANITIZE_THREAD__)
	/*
	 * ThreadSanitizer holds an asynchronous signal back until the thread
	 * next enters one of its interceptors (read() and accept() do not
	 * count), and then runs the handler on a copy of the old context:
	 * what this test looks at is not what a real process sees.
	 */
	TAP_SKIP("under ThreadSanitizer signals arrive on its own terms");
	return tap_done();
#endif

	for (int i = 0; i < SPAWNERS; i++)
		pthread_create(&sp[i], NULL, spawner_main,
			       (void *)(uintptr_t)i);
	start = tu_now_ns();
	while (tu_now_ns() - start < RUN_MS * 1000000ull) {
		struct sw_dump_opts o;
		struct sw_dump *d = NULL;
		uint64_t t0 = tu_now_ns(), us;

		sw_dump_opts_init(&o);
		o.symbolize = 1;
		o.timeout_ms = TIMEOUT_MS;
		t.dumps++;
		if (sw_dump_self(&o, &d) != 0) {
			t.failed++;
			continue;
		}
		us = (tu_now_ns() - t0) / 1000;
		if (us > t.worst_us)
			t.worst_us = us;
		/* a dump that waited out its deadline */
		if (us >= TIMEOUT_MS * 1000ull)
			t.slow++;
		check_dump(d, &t, &notes);
		sw_dump_free(d);
	}
	end = tu_now_ns();
	made = atomic_load(&created);
	atomic_store(&stop, true);
	for (int i = 0; i < SPAWNERS; i++)
		pthread_join(sp[i], NULL);

	TAP_NOTE("%lu threads created in %.1f s (%.0f/s); %lu dumps, worst "
		 "%.1f ms",
		 made, (end - start) / 1e9, made / ((end - start) / 1e9),
		 t.dumps, t.worst_us / 1000.0);
	for (int s = 0; s < SW_ST_COUNT; s++)
		if (t.statuses[s])
			TAP_NOTE("churned threads %s: %lu",
				 dump_status_name((enum sw_status)s),
				 t.statuses[s]);
	TAP_OK(made / ((end - start) / 1e9) >= 1000,
	       "threads came and went at over a thousand a second (%lu)", made);
	TAP_OK(t.failed == 0, "%lu dumps succeed (%lu failed)", t.dumps,
	       t.failed);
	TAP_OK(t.own >= 20,
	       "churned threads were caught inside their own start routine "
	       "(%lu of %lu dumped)",
	       t.own, t.named);
	TAP_OK(t.wrong == 0,
	       "no churned thread carried the other routine's frames (%lu "
	       "did)",
	       t.wrong);
	/*
	 * glibc blocks every signal while a thread starts and while it
	 * exits: such a thread is rightly blocked-signal, or exited.
	 */
	TAP_OK(t.statuses[SW_ST_TIMEOUT] == 0 && t.statuses[SW_ST_ERROR] == 0 &&
		       t.slow == 0,
	       "no churned thread timed out (%lu) or failed (%lu), and no "
	       "dump waited out its deadline (%lu)",
	       t.statuses[SW_ST_TIMEOUT], t.statuses[SW_ST_ERROR], t.slow);
	return tap_done();
}
