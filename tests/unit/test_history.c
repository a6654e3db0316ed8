/*
 * test_history.c - the daemon's per-target sample ring (history.h) and the
 * watchdog's measure of a spinner (spin.h), on values made here:
 *
 *  - the ring keeps samples in order through wrap-arounds and growth, and
 *    finds the newest sample taken at or before a time by binary search;
 *  - a thread runnable 98% of a window but on a CPU 40% of it (a spinner
 *    beside two hogs) spins; one woken now and then (a sleeper that runs
 *    our handler, or waits for a CPU after waking) does not, however
 *    often it is caught in state R; nor one that waited much but barely
 *    ran; counters that went back (a tid reused) never spin;
 *  - the agent's thread is the one the dump marks, else the tid remembered,
 *    and only when neither is known the one named sw-agent.
 */
#include <stdlib.h>
#include <string.h>

#include "daemon/history.h"
#include "daemon/spin.h"
#include "daemon/stacks.h"
#include "tap.h"

static struct sdump *sample(uint64_t mono_ns)
{
	struct sdump *sd = calloc(1, sizeof(*sd));

	sd->refs = 1;
	sd->d = dump_new();
	sd->mono_ns = mono_ns;
	return sd;
}

static void test_ring(void)
{
	struct history h = { 0 };
	bool order = true;
	size_t k;

	for (uint64_t i = 1; i <= 40; i++)
		history_push(&h, sample(i * 10));
	/* Drop from the front and add at the back: wraps around. */
	for (uint64_t i = 41; i <= 100; i++) {
		sdump_put(history_pop_oldest(&h));
		history_push(&h, sample(i * 10));
	}
	TAP_OK(h.n == 40, "the ring holds 40 after wrapping (%zu)", h.n);
	for (size_t i = 0; i < h.n; i++)
		order = order && history_at(&h, i)->mono_ns == (61 + i) * 10;
	TAP_OK(order, "oldest first, in order, across the wrap");
	TAP_OK(history_newest(&h)->mono_ns == 1000, "the newest is the last");
	k = history_find(&h, 755);
	TAP_OK(k != SIZE_MAX && history_at(&h, k)->mono_ns == 750,
	       "find: the newest at or before a time between two");
	k = history_find(&h, 750);
	TAP_OK(k != SIZE_MAX && history_at(&h, k)->mono_ns == 750,
	       "find: a time exactly on a sample is that sample");
	TAP_OK(history_find(&h, 609) == SIZE_MAX,
	       "find: before the oldest is none");
	k = history_find(&h, 5000);
	TAP_OK(k == h.n - 1, "find: after the newest is the newest");
	sdump_put(history_pop_newest(&h));
	TAP_OK(h.n == 39 && history_newest(&h)->mono_ns == 990,
	       "pop_newest takes the last");
	for (uint64_t i = 101; i <= 300; i++) /* grows past its capacity */
		history_push(&h, sample(i * 10));
	order = true;
	for (size_t i = 1; i < h.n; i++)
		order = order && history_at(&h, i - 1)->mono_ns <
					 history_at(&h, i)->mono_ns;
	TAP_OK(h.n == 239 && order, "grown to %zu, still in order", h.n);
	history_release(&h);
	TAP_OK(h.n == 0 && !history_newest(&h), "released: empty");
}

static struct sw_thread thread(char state, uint64_t run_ms, uint64_t wait_ms)
{
	struct sw_thread t;

	memset(&t, 0, sizeof(t));
	t.tid = 42;
	t.state = state;
	t.run_ns = run_ms * 1000000ull;
	t.wait_ns = wait_ms * 1000000ull;
	return t;
}

static void test_spin(void)
{
	const uint64_t s = 1000000000ull, t0 = 100 * s, t1 = 103 * s;
	struct sw_thread o = thread('R', 5000, 5000), n;

	/* 3 s: on a CPU 1.2 s, waiting 1.74 s (two hogs per core). */
	n = thread('R', 5000 + 1200, 5000 + 1740);
	TAP_OK(spin_wanted_cpu(&o, t0, &n, t1),
	       "a spinner beside two hogs (40%% run, 98%% wanted) spins");
	/* Woken 6 times for our handler, 50 us each, 20 ms for a CPU. */
	n = thread('R', 5000 + 1, 5000 + 120);
	TAP_OK(!spin_wanted_cpu(&o, t0, &n, t1),
	       "a sleeper caught in R after its wake-ups does not");
	/* Waited 2.7 s, ran 30 ms: a CPU-starved waker, not a spinner. */
	n = thread('R', 5000 + 30, 5000 + 2700);
	TAP_OK(!spin_wanted_cpu(&o, t0, &n, t1),
	       "wanted 91%% but ran 1%%: does not");
	n = thread('S', 5000 + 1200, 5000 + 1740);
	TAP_OK(!spin_wanted_cpu(&o, t0, &n, t1),
	       "not in state R now: does not");
	n = thread('R', 100, 100);
	TAP_OK(!spin_wanted_cpu(&o, t0, &n, t1),
	       "counters that went back (another thread): does not");
	n = thread('R', 5000 + 2900, 5000);
	TAP_OK(!spin_wanted_cpu(&o, t1, &n, t0),
	       "a window backwards: does not");
	/* No figures (a kernel without schedstat): CPU time instead. */
	o = thread('R', 0, 0);
	n = thread('R', 0, 0);
	o.utime_ms = 1000;
	n.utime_ms = 1000 + 1600;
	TAP_OK(spin_wanted_cpu(&o, t0, &n, t1),
	       "without figures, CPU time over half the window spins");
	n.utime_ms = 1000 + 400;
	TAP_OK(!spin_wanted_cpu(&o, t0, &n, t1),
	       "without figures, CPU time under half does not");
}

static void test_agent(void)
{
	struct sw_thread th[3];
	struct sw_dump d = { .threads = th, .nthreads = 3 };

	memset(th, 0, sizeof(th));
	th[0].tid = 10;
	strcpy(th[0].name, "main");
	th[1].tid = 11;
	strcpy(th[1].name, "sw-agent");
	th[2].tid = 12;
	strcpy(th[2].name, "sw-agent"); /* a program's thread, so named */
	th[1].flags = SW_TF_DUMPER;
	TAP_OK(spin_dumper(&d) == 11, "the dumper is the marked thread");
	TAP_OK(spin_is_agent(&d, &th[1], 0) && !spin_is_agent(&d, &th[2], 0),
	       "marked: the marked thread is the agent's, not its namesake");
	th[1].flags = 0;
	TAP_OK(spin_is_agent(&d, &th[1], 11) && !spin_is_agent(&d, &th[2], 11),
	       "unmarked (read from the kernel): the tid remembered");
	TAP_OK(spin_is_agent(&d, &th[2], 0) && !spin_is_agent(&d, &th[0], 0),
	       "nothing known: the name");
}

int main(void)
{
	test_ring();
	test_spin();
	test_agent();
	return tap_done();
}
