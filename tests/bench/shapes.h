/*
 * shapes.h - the threads both benchmarks dump, so that bench_collect (in
 * process) and bench_target (under the agent, and eu-stack and gdb) measure
 * the same stacks: SHAPES groups of identical stacks (a thread pool's
 * workers) and every DEEP_EVERY-th thread DEEP_DEPTH frames deep in a
 * static recursion, all parked in pthread_cond_wait for good.
 *
 * Included once, by the benchmark's own source file: the definitions are
 * static. Start threads with thread_main(i) for i = 0, 1, ...; gate_ready
 * (under gate_lock) counts the ones parked.
 */
#ifndef SW_BENCH_SHAPES_H
#define SW_BENCH_SHAPES_H

#include <pthread.h>
#include <stdint.h>
#include <time.h>

#define SHAPES 8	/* distinct stacks among the ordinary threads */
#define DEEP_EVERY 10	/* every 10th thread recurses... */
#define DEEP_DEPTH 30	/* ...this many frames deep */

static pthread_mutex_t gate_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t gate_cond = PTHREAD_COND_INITIALIZER;
static int gate_ready; /* threads parked in gate_wait(), under gate_lock */
static int gate_open;  /* never set: threads stay parked until exit */

/* Parks the calling thread for the rest of the process's life. */
static __attribute__((noinline)) void gate_wait(void)
{
	pthread_mutex_lock(&gate_lock);
	gate_ready++;
	while (!gate_open)
		pthread_cond_wait(&gate_cond, &gate_lock);
	pthread_mutex_unlock(&gate_lock);
}

/*
 * SHAPES functions that differ only in name: threads parked through the
 * same one share a stack, as a thread pool's workers do. The empty asm
 * after the call keeps it from becoming a tail call.
 */
#define SHAPE(k)                                              \
	static __attribute__((noinline)) void shape_##k(void) \
	{                                                     \
		gate_wait();                                  \
		__asm__ volatile("" ::: "memory");            \
	}
SHAPE(0)
SHAPE(1)
SHAPE(2)
SHAPE(3)
SHAPE(4)
SHAPE(5)
SHAPE(6)
SHAPE(7)

static void (*const shapes[SHAPES])(void) = {
	shape_0, shape_1, shape_2, shape_3, shape_4, shape_5, shape_6, shape_7,
};

/*
 * Recurses n frames deep and parks; static on purpose, the tools must name
 * local functions too. The volatile read after the call keeps the
 * compiler from turning the recursion into a loop.
 */
static __attribute__((noinline, noipa)) int recurse(int n)
{
	volatile int depth = n;
	int r;

	if (n == 0) {
		gate_wait();
		return 0;
	}
	r = recurse(n - 1);
	return r + depth;
}

/* The start routine of thread i. */
static void *thread_main(void *arg)
{
	uintptr_t i = (uintptr_t)arg;

	if (i % DEEP_EVERY == DEEP_EVERY - 1)
		recurse(DEEP_DEPTH);
	else
		shapes[i % SHAPES]();
	return NULL;
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

#endif /* SW_BENCH_SHAPES_H */
