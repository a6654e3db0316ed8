/*
 * test_framecache.c - handlers walk warm stacks by the unwind rules the
 * dumper learnt (framecache.h), and every stack so walked is the one
 * libunwind gives.
 *
 * With framecache_verify set, a handler that walked by rules unwinds with
 * libunwind too and counts any difference. The threads cover the shapes a
 * rule must get right or refuse: frame-pointer code (this file is built
 * -O0) and code without one (-O2 functions, libc), deep recursion, a
 * spinner interrupted at ever other pcs, the vDSO, a thread stopped in an
 * application's signal handler (the kernel's signal frame: no rule of our
 * shape), the same on a sigaltstack, and a stack deeper than the frames a
 * dump keeps. Then a module is unloaded: the rules are dropped and learnt
 * again.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>

#include "model/dump.h"
#include "collector/signal/framecache.h"
#include "stackwatch.h"
#include "tap.h"
#include "testutil.h"

#define TIMEOUT_MS 5000
#define DUMPS 300

static atomic_bool stop;
static atomic_int parked;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static volatile uint64_t sink;

static void park(void)
{
	pthread_mutex_lock(&lock);
	atomic_fetch_add(&parked, 1);
	while (!atomic_load(&stop))
		pthread_cond_wait(&cond, &lock);
	pthread_mutex_unlock(&lock);
}

/* -O0: every frame keeps rbp as its frame pointer. */
static int deep_fp(int n)
{
	if (n == 0) {
		park();
		return 0;
	}
	return deep_fp(n - 1) + 1;
}

/* -O2 without a frame pointer: CFA from rsp, as in most libraries. */
__attribute__((optimize("O2", "omit-frame-pointer"), noinline)) static int
deep_nofp(int n, volatile char *pad)
{
	volatile char buf[96];

	buf[n % 96] = (char)n;
	if (n == 0) {
		struct timespec ts = { 0, 20 * 1000 * 1000 };

		atomic_fetch_add(&parked, 1);
		while (!atomic_load(&stop))
			nanosleep(&ts, NULL);
		return buf[0];
	}
	return deep_nofp(n - 1, buf) + pad[0];
}

static void *fp_main(void *arg)
{
	(void)arg;
	pthread_setname_np(pthread_self(), "fc-fp");
	return (void *)(intptr_t)deep_fp(30);
}

static void *nofp_main(void *arg)
{
	char pad[1] = { 0 };

	(void)arg;
	pthread_setname_np(pthread_self(), "fc-nofp");
	return (void *)(intptr_t)deep_nofp(25, pad);
}

/* Deeper than a dump keeps: the walk stops at SW_MAX_FRAMES. */
static void *abyss_main(void *arg)
{
	(void)arg;
	pthread_setname_np(pthread_self(), "fc-abyss");
	return (void *)(intptr_t)deep_fp(SW_MAX_FRAMES + 40);
}

__attribute__((optimize("O2"), noinline)) static uint64_t spin_step(uint64_t x)
{
	return x * 6364136223846793005ull + 1442695040888963407ull;
}

static void *spinner_main(void *arg)
{
	uint64_t x = 1;

	(void)arg;
	pthread_setname_np(pthread_self(), "fc-spinner");
	atomic_fetch_add(&parked, 1);
	while (!atomic_load(&stop))
		x = spin_step(x);
	sink = x;
	return NULL;
}

/*
 * A frame far larger than any scratch memory a probe could use: learning
 * its rule must not read past what is mapped (it is left to libunwind).
 */
__attribute__((optimize("O2", "omit-frame-pointer"), noinline)) static int
big_frame(void)
{
	volatile char buf[4 << 20];

	buf[0] = 1;
	buf[sizeof(buf) - 1] = 1;
	park();
	return buf[0] + buf[sizeof(buf) - 1];
}

static void *big_main(void *arg)
{
	(void)arg;
	pthread_setname_np(pthread_self(), "fc-big");
	return (void *)(intptr_t)big_frame();
}

static void *clock_main(void *arg)
{
	struct timespec ts;
	uint64_t n = 0;

	(void)arg;
	pthread_setname_np(pthread_self(), "fc-clock");
	atomic_fetch_add(&parked, 1);
	while (!atomic_load(&stop)) {
		clock_gettime(CLOCK_MONOTONIC, &ts);
		n += (uint64_t)ts.tv_nsec;
	}
	sink = n;
	return NULL;
}

static void *poller_main(void *arg)
{
	int ep = epoll_create1(0);
	struct epoll_event ev;

	(void)arg;
	pthread_setname_np(pthread_self(), "fc-poller");
	atomic_fetch_add(&parked, 1);
	while (!atomic_load(&stop))
		epoll_wait(ep, &ev, 1, 20);
	close(ep);
	return NULL;
}

/* An application's handler that stays: its thread is dumped inside it. */
static void app_handler(int signo)
{
	(void)signo;
	park();
}

static void *in_handler_main(void *arg)
{
	bool alt = arg != NULL;
	stack_t ss = { .ss_size = 64 * 1024 }, old;

	pthread_setname_np(pthread_self(), alt ? "fc-altstack" : "fc-handler");
	if (alt) {
		ss.ss_sp = malloc(ss.ss_size);
		sigaltstack(&ss, &old);
	}
	raise(alt ? SIGUSR2 : SIGUSR1);
	if (alt) {
		/* the one it had (a sanitizer's, which it unmaps at exit) */
		sigaltstack(&old, NULL);
		free(ss.ss_sp);
	}
	return NULL;
}

/* Dumps n times; counts the dumps that failed or had a thread not ok. */
static int dump_many(int n, size_t *bad)
{
	int failed = 0;

	for (int i = 0; i < n; i++) {
		struct sw_dump *d = tu_dump_self(0, TIMEOUT_MS);

		if (!d) {
			failed++;
			continue;
		}
		for (size_t k = 0; k < d->nthreads; k++)
			*bad += d->threads[k].status != SW_ST_OK;
		sw_dump_free(d);
	}
	return failed;
}

static void mismatch_report(const char *when)
{
	uint64_t m = framecache_mismatch_count();

	TAP_OK(m == 0,
	       "%s: every stack walked by rules is libunwind's (%lu "
	       "differ; first at frame %lu: %lu by rules, %lu by libunwind, "
	       "libunwind's pc 0x%lx)",
	       when, (unsigned long)m,
	       (unsigned long)framecache_mismatch_info[0],
	       (unsigned long)framecache_mismatch_info[1],
	       (unsigned long)framecache_mismatch_info[2],
	       (unsigned long)framecache_mismatch_info[3]);
}

int main(void)
{
	void *(*mains[])(
		void *) = { fp_main,	  nofp_main,	   abyss_main,
			    spinner_main, clock_main,	   poller_main,
			    big_main,	  in_handler_main, in_handler_main };
	size_t nmains = sizeof(mains) / sizeof(mains[0]);
	struct framecache_stats a, b;
	struct sigaction sa;
	pthread_t th[16];
	struct sw_dump *d;
	const struct sw_thread *t;
	size_t bad = 0;
	void *h;
	int failed;

#if defined(__SANITIZE_THREAD__)
	TAP_SKIP("under ThreadSanitizer signals arrive on its own terms");
	return tap_done();
#endif
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = app_handler;
	sigaction(SIGUSR1, &sa, NULL);
	sa.sa_flags = SA_ONSTACK;
	sigaction(SIGUSR2, &sa, NULL);
	framecache_verify = 1;
	for (size_t i = 0; i < nmains; i++)
		pthread_create(&th[i], NULL, mains[i],
			       i == nmains - 1 ? (void *)1 : NULL);
	while (atomic_load(&parked) < (int)nmains)
		tu_sleep_ms(1);
	tu_sleep_ms(50);

	failed = dump_many(DUMPS, &bad);
	TAP_OK(failed == 0 && bad == 0,
	       "%d dumps with every stack checked: all answered (%d failed, "
	       "%zu threads not ok)",
	       DUMPS, failed, bad);
	mismatch_report("warm dumps");

	/* warm: the parked threads are walked by rules, all of them */
	framecache_get_stats(&a);
	failed = dump_many(20, &bad);
	framecache_get_stats(&b);
	TAP_OK(b.rules > 0 && b.slow > 0 && b.slow < b.rules,
	       "rules learnt, some pcs left to libunwind (%lu rules, %lu "
	       "slow)",
	       (unsigned long)b.rules, (unsigned long)b.slow);
	TAP_OK(b.walks - a.walks >= 20 * 5,
	       "warm dumps walk at least five threads each by rules (%lu "
	       "walked, %lu by libunwind, in 20 dumps)",
	       (unsigned long)(b.walks - a.walks),
	       (unsigned long)(b.misses - a.misses));
	TAP_OK(b.probes - a.probes < 20 * 8,
	       "little left to learn once warm (%lu probes in 20 dumps)",
	       (unsigned long)(b.probes - a.probes));

	/* the walked stacks: deep, truncated, through the signal frames */
	d = tu_dump_self(1, TIMEOUT_MS);
	TAP_OK(d != NULL, "a symbolized dump");
	if (!d)
		return tap_done();
	t = tu_thread_named(d, "fc-fp");
	TAP_OK(t && tu_count_fn(t, "deep_fp") == 31,
	       "frame-pointer recursion: 31 deep_fp frames (got %d)",
	       t ? tu_count_fn(t, "deep_fp") : -1);
	t = tu_thread_named(d, "fc-nofp");
	TAP_OK(t && tu_count_fn(t, "deep_nofp") == 26,
	       "recursion without frame pointers: 26 frames (got %d)",
	       t ? tu_count_fn(t, "deep_nofp") : -1);
	t = tu_thread_named(d, "fc-abyss");
	TAP_OK(t && t->nips == SW_MAX_FRAMES && (t->flags & SW_TF_TRUNCATED),
	       "deeper than kept: %d frames, truncated (got %u)", SW_MAX_FRAMES,
	       t ? (unsigned)t->nips : 0u);
	t = tu_thread_named(d, "fc-big");
	TAP_OK(t && tu_count_fn(t, "big_frame") == 1 &&
		       tu_count_fn(t, "big_main") == 1,
	       "a 4 MB frame: unwound through (by libunwind)");
	t = tu_thread_named(d, "fc-handler");
	TAP_OK(t && tu_count_fn(t, "app_handler") == 1 &&
		       tu_count_fn(t, "in_handler_main") == 1,
	       "through the application's signal frame: app_handler and "
	       "the code it interrupted");
	t = tu_thread_named(d, "fc-altstack");
	TAP_OK(t && tu_count_fn(t, "app_handler") == 1 &&
		       tu_count_fn(t, "in_handler_main") == 1,
	       "from a sigaltstack back to the thread's stack");
	sw_dump_free(d);

	/* a module unloaded: every rule is dropped, then learnt again */
	framecache_get_stats(&a);
	h = dlopen("libanl.so.1", RTLD_NOW | RTLD_LOCAL);
	TAP_OK(h != NULL, "a module loaded (libanl)");
	if (h)
		dlclose(h);
	failed = dump_many(1, &bad);
	framecache_get_stats(&b);
	TAP_OK(failed == 0 && b.resets == a.resets + 1,
	       "after an unload the rules are dropped (%lu resets)",
	       (unsigned long)(b.resets - a.resets));
	failed = dump_many(50, &bad);
	framecache_get_stats(&a);
	TAP_OK(failed == 0 && bad == 0 && a.rules > 0 && a.walks > b.walks,
	       "and learnt again: %lu rules, %lu stacks walked by them",
	       (unsigned long)a.rules, (unsigned long)(a.walks - b.walks));
	mismatch_report("after the unload");

	atomic_store(&stop, true);
	pthread_mutex_lock(&lock);
	pthread_cond_broadcast(&cond);
	pthread_mutex_unlock(&lock);
	for (size_t i = 0; i < nmains; i++)
		pthread_join(th[i], NULL);
	return tap_done();
}
