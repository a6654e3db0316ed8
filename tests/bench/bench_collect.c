/*
 * bench_collect.c - the collector's benchmark: how fast one thread and a
 * whole process are dumped, against the empty-handler floor and Kudu's
 * poll-and-sleep baseline, and how much memory a dump leaves behind.
 *
 * It prints "key value" lines; tests/bench/run.sh turns them into the
 * Markdown table with the targets. Two subcommands:
 *
 *   bench_collect single [SECONDS [PROCS]]
 *                                    one blocked target thread, dumped in a
 *                                    loop (the process has exactly two
 *                                    threads: main and the target), each
 *                                    rate for SECONDS (1) in each of PROCS
 *                                    processes (3)
 *   bench_collect threads N [REPS [PROCS]]
 *                                    N blocked threads in realistic shapes,
 *                                    dumped cold and warm, raw and
 *                                    symbolized, with the floor and RSS;
 *                                    REPS warm dumps per figure (11) in
 *                                    each of PROCS processes (3)
 *   bench_collect locks N [REPS]
 *                                    N threads blocked on one mutex that
 *                                    main holds: dumped, symbolized and
 *                                    rendered as JSON with their lock
 *                                    owners and without, REPS times each
 *                                    (11), alternating
 *   bench_collect rate N [HZ [SECONDS]]
 *                                    what sampling at HZ (19) costs a
 *                                    process of N parked threads: its CPU
 *                                    over SECONDS (10) at rest, dumped by
 *                                    the real handler and by the empty one
 *
 * Every measurement runs in a child forked from a parent that has never
 * touched the library, so "cold" really is the first dump of a process
 * and a child that hangs or dies (a watchdog alarm kills it) costs one
 * figure, not the run. Timings are medians: the machine is noisy.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "collector/collect.h"
#include "model/dump.h"
#include "collector/signal/futex.h"
#include "collector/signal/handler.h"
#include "render/group.h"
#include "render/render.h"
#include "stackwatch.h"
#include "symbols/symbolize.h"
#include "shapes.h"

#define STACK_SIZE (64 * 1024) /* small, so 4000 threads fit anywhere */
#define TIMEOUT_MS 10000       /* generous: we measure, we do not time out */
#define WATCHDOG_S 240	       /* a child still running by then is killed */
#define MAX_REPS 64
#define POLL_SLEEP_NS 10000000L /* Kudu's "before": sleep 10 ms */

/* ---- the target threads: shapes.h ---- */

static void sleep_ns(long ns)
{
	struct timespec ts = { ns / 1000000000L, ns % 1000000000L };

	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

/*
 * Starts n parked threads with small stacks and returns once every one of
 * them is inside pthread_cond_wait (it increments gate_ready under the
 * lock that the wait releases). Returns 0 or a negative errno.
 */
static int spawn_threads(size_t n)
{
	pthread_attr_t attr;
	int rc = 0;

	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, STACK_SIZE);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	for (size_t i = 0; i < n; i++) {
		pthread_t t;

		rc = pthread_create(&t, &attr, thread_main, (void *)i);
		if (rc != 0) {
			fprintf(stderr,
				"bench_collect: thread %zu of %zu: %s\n", i, n,
				strerror(rc));
			rc = -rc;
			goto out_attr;
		}
	}
	for (;;) {
		int ready;

		pthread_mutex_lock(&gate_lock);
		ready = gate_ready;
		pthread_mutex_unlock(&gate_lock);
		if ((size_t)ready >= n)
			break;
		sleep_ns(1000000);
	}
	/* Let the scheduler settle after the burst of clones. */
	sleep_ns(50000000);
out_attr:
	pthread_attr_destroy(&attr);
	return rc;
}

/* Resident set size of this process in kB. */
static long rss_kb(void)
{
	long size = 0, resident = 0;
	FILE *f = fopen("/proc/self/statm", "r");

	if (!f)
		return -1;
	if (fscanf(f, "%ld %ld", &size, &resident) != 2)
		resident = -1;
	fclose(f);
	return resident < 0 ? -1 : resident * (sysconf(_SC_PAGESIZE) / 1024);
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* Median of v[0..n) (sorts v). 0 when n is 0. */
static double median(double *v, size_t n)
{
	if (n == 0)
		return 0;
	qsort(v, n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* ---- results shared from the children ---- */

/*
 * One child's answers, in a MAP_SHARED page the parent reads after
 * waitpid. ok stays 0 unless the child got to the end.
 */
struct result {
	int ok;
	double v[32];
	long bad;      /* threads neither ok nor blocked-signal: must stay 0 */
	long blocked;  /* threads seen blocking the signal (see check_dump) */
	long seen;     /* threads in all dumps */
	long groups;   /* groups in the last symbolized dump */
	long max_nips; /* deepest raw stack seen */
};

/*
 * Runs fn(arg, r) in a fresh child with a watchdog and waits for it.
 * Returns 0 when the child finished and filled *out, else -1 (a message
 * on stderr says why).
 */
static int in_child(void (*fn)(void *, struct result *), void *arg,
		    struct result *out)
{
	struct result *r = mmap(NULL, sizeof(*r), PROT_READ | PROT_WRITE,
				MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	int status = 0, rc = -1;
	pid_t pid;

	if (r == MAP_FAILED)
		return -1;
	memset(r, 0, sizeof(*r));
	fflush(NULL);
	pid = fork();
	if (pid < 0)
		goto out_unmap;
	if (pid == 0) {
		alarm(WATCHDOG_S);
		fn(arg, r);
		_exit(0);
	}
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	if (WIFSIGNALED(status))
		fprintf(stderr, "bench_collect: child killed by signal %d\n",
			WTERMSIG(status));
	if (r->ok) {
		*out = *r;
		rc = 0;
	}
out_unmap:
	munmap(r, sizeof(*r));
	return rc;
}

/*
 * Counts the threads of d that are not ok, and notes the deepest stack.
 * None of our threads blocks the signal, so "blocked-signal" means the
 * collector read SigBlk while the thread was still in the tail of the
 * previous dump's handler (the kernel blocks the signal while its handler
 * runs): counted apart, it happens to back-to-back dumps.
 */
static void check_dump(const struct sw_dump *d, struct result *r)
{
	for (size_t i = 0; i < d->nthreads; i++) {
		const struct sw_thread *t = &d->threads[i];

		r->seen++;
		if (t->status == SW_ST_BLOCKED) {
			r->blocked++;
		} else if (t->status != SW_ST_OK) {
			if (r->bad++ < 5)
				fprintf(stderr, "bench_collect: tid %d: %s\n",
					(int)t->tid, t->error ? t->error : "?");
		}
		if ((long)t->nips > r->max_nips)
			r->max_nips = (long)t->nips;
	}
}

/* Signals in flight: SW_BENCH_WINDOW, else the library's default. */
static int bench_window(void)
{
	const char *env = getenv("SW_BENCH_WINDOW");
	int w = env ? atoi(env) : 0;

	return w >= 1 && w <= HANDLER_SLOTS ? w : SW_DEFAULT_WINDOW;
}

/* One raw dump through the collector; returns its wall time in µs. */
static double time_collect(struct result *r)
{
	struct collect_opts co = { .timeout_ms = TIMEOUT_MS,
				   .window = bench_window() };
	struct sw_dump *d = NULL;
	uint64_t t0 = now_ns();
	int rc = collect_self(&co, NULL, 0, &d);
	double us = (double)(now_ns() - t0) / 1000.0;

	if (rc < 0) {
		fprintf(stderr, "bench_collect: collect_self: %s\n",
			sw_strerror(rc));
		r->bad++;
		return us;
	}
	check_dump(d, r);
	sw_dump_free(d);
	return us;
}

/* One dump through the public API; returns its wall time in µs. */
static double time_dump_self(int symbolize, struct result *r)
{
	struct sw_dump_opts o;
	struct sw_dump *d = NULL;
	uint64_t t0;
	double us;
	int rc;

	sw_dump_opts_init(&o);
	o.timeout_ms = TIMEOUT_MS;
	o.symbolize = symbolize;
	o.window = bench_window();
	t0 = now_ns();
	rc = sw_dump_self(&o, &d);
	us = (double)(now_ns() - t0) / 1000.0;
	if (rc < 0) {
		fprintf(stderr, "bench_collect: sw_dump_self: %s\n",
			sw_strerror(rc));
		r->bad++;
		return us;
	}
	check_dump(d, r);
	r->groups = (long)d->ngroups;
	sw_dump_free(d);
	return us;
}

/* ---- single thread ---- */

static pid_t target_tid; /* the one thread of "single" that is not main */
static uint64_t raw_gen; /* the next generation raw_dump() arms slot 0 with */

/*
 * One dump of the target thread by hand, through the handler's public
 * slot protocol (handler.h) rather than the collector: arm slot 0 for a
 * fresh generation, queue our signal with the cookie (generation << 8 |
 * slot) the handler checks, and wait for the slot to read DONE, either on
 * the done futex (Kudu's "after") or by polling it with 10 ms sleeps
 * (Kudu's "before"). This is the bare signal round trip: no /proc reads,
 * no module list. Returns 0, or -1 when the target did not answer in 1 s.
 */
static int raw_dump(bool poll)
{
	struct slot *sl = &handler_slots[0];
	uint64_t gen = raw_gen++, deadline = now_ns() + 1000000000ull;
	uint64_t done = SLOT_WORD(gen, SLOT_DONE);
	siginfo_t si;
	int rc = 0;

	atomic_store_explicit(&sl->word, SLOT_WORD(gen, SLOT_ARMED),
			      memory_order_release);
	memset(&si, 0, sizeof(si));
	si.si_signo = handler_signal();
	si.si_code = SI_QUEUE;
	si.si_pid = getpid();
	si.si_uid = getuid();
	si.si_value.sival_ptr = (void *)(uintptr_t)(gen << 8);
	if (syscall(SYS_rt_tgsigqueueinfo, getpid(), target_tid, si.si_signo,
		    &si) < 0)
		return -1;
	for (;;) {
		uint32_t seq = atomic_load_explicit(&handler_done_seq,
						    memory_order_acquire);

		if (atomic_load_explicit(&sl->word, memory_order_acquire) ==
		    done)
			break;
		if (now_ns() >= deadline) {
			rc = -1;
			break;
		}
		if (poll)
			sleep_ns(POLL_SLEEP_NS);
		else
			futex_wait_until(&handler_done_seq, seq, deadline);
	}
	/* A late handler finds a newer generation and leaves it alone. */
	atomic_store_explicit(&sl->word, SLOT_WORD(gen + 1, SLOT_FREE),
			      memory_order_release);
	return rc;
}

/*
 * Dumps per second of dump() run back to back for ns nanoseconds. dump()
 * returns 1 for a real dump, 0 for one that must not count (its time is
 * left out too) and -1 when the target did not answer.
 */
static double rate_for(int (*dump)(struct result *), struct result *r,
		       uint64_t ns)
{
	uint64_t t0 = now_ns(), spent = 0, t;
	long n = 0;

	do {
		uint64_t start = now_ns();
		int rc = dump(r);

		t = now_ns();
		if (rc > 0) {
			n++;
			spent += t - start;
		} else if (rc < 0 && r->bad++ < 5) {
			fprintf(stderr, "bench_collect: no answer\n");
		}
	} while (t - t0 < ns);
	return spent ? (double)n * 1e9 / (double)spent : 0;
}

/*
 * A collector dump counts only when it really signalled the target: one
 * that misreports it "blocked-signal" (see check_dump) sent nothing and
 * would flatter the rate.
 */
static int one_collect(struct result *r)
{
	long blocked = r->blocked;

	time_collect(r);
	return r->blocked == blocked;
}

static int one_raw_futex(struct result *r)
{
	(void)r;
	return raw_dump(false) < 0 ? -1 : 1;
}

static int one_raw_poll(struct result *r)
{
	(void)r;
	return raw_dump(true) < 0 ? -1 : 1;
}

/*
 * Alternates the real handler and the empty one in short rounds, so both
 * see the same machine noise; stores the median rate of each in *real and
 * *floor_.
 */
static void rate_pair(int (*dump)(struct result *), struct result *r,
		      double seconds, double *real, double *floor_)
{
	enum { ROUNDS = 10 };
	double a[ROUNDS], b[ROUNDS];
	uint64_t slice = (uint64_t)(seconds * 1e9 / ROUNDS);

	for (int i = 0; i < ROUNDS; i++) {
		handler_empty = 0;
		a[i] = rate_for(dump, r, slice);
		handler_empty = 1;
		b[i] = rate_for(dump, r, slice);
	}
	handler_empty = 0;
	*real = median(a, ROUNDS);
	*floor_ = median(b, ROUNDS);
}

enum {
	S_COLLECT,
	S_COLLECT_FLOOR,
	S_RAW,
	S_RAW_FLOOR,
	S_POLL,
	S_RAW_SAME, /* dumper and target pinned to one CPU */
	S_RAW_SAME_FLOOR,
	S_RAW_CROSS, /* pinned to two different CPUs */
	S_RAW_CROSS_FLOOR,
	S_COUNT
};

/*
 * Pins the calling thread to CPU a and thread t to CPU b; a or b -1 lets
 * that thread run anywhere again. Returns 0 or an errno value.
 */
static int pin(pthread_t t, int a, int b)
{
	cpu_set_t all, one;
	int rc;

	sched_getaffinity(0, sizeof(all), &all);
	if (a >= 0) {
		CPU_ZERO(&one);
		CPU_SET(a, &one);
	}
	rc = pthread_setaffinity_np(pthread_self(), sizeof(one),
				    a >= 0 ? &one : &all);
	if (rc)
		return rc;
	if (b >= 0) {
		CPU_ZERO(&one);
		CPU_SET(b, &one);
	}
	return pthread_setaffinity_np(t, sizeof(one), b >= 0 ? &one : &all);
}

/* The first two CPUs this process may run on, in *a and *b. */
static bool two_cpus(int *a, int *b)
{
	cpu_set_t set;
	int n = 0;

	if (sched_getaffinity(0, sizeof(set), &set) < 0)
		return false;
	for (int c = 0; c < CPU_SETSIZE && n < 2; c++) {
		if (!CPU_ISSET(c, &set))
			continue;
		if (n++ == 0)
			*a = c;
		else
			*b = c;
	}
	return n == 2;
}

/*
 * Sets target_tid to the one thread that is not the caller, with a first
 * collector dump (which also installs the handler). Returns 0, or -1 when
 * the process does not have exactly two threads.
 */
static int find_target(void)
{
	struct collect_opts co = { .timeout_ms = TIMEOUT_MS, .window = 1 };
	struct sw_dump *d = NULL;
	pid_t self = (pid_t)syscall(SYS_gettid);

	if (collect_self(&co, NULL, 0, &d) < 0)
		return -1;
	if (d->nthreads != 2) {
		fprintf(stderr, "bench_collect: %zu threads, not 2\n",
			d->nthreads);
		sw_dump_free(d);
		return -1;
	}
	for (size_t i = 0; i < d->nthreads; i++)
		if (d->threads[i].tid != self)
			target_tid = d->threads[i].tid;
	sw_dump_free(d);
	return 0;
}

static void single_child(void *arg, struct result *r)
{
	double seconds = *(const double *)arg;
	int c0 = 0, c1 = 0;
	pthread_t t;
	pthread_attr_t attr;
	int rc;

	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, STACK_SIZE);
	rc = pthread_create(&t, &attr, thread_main, (void *)0);
	pthread_attr_destroy(&attr);
	if (rc != 0)
		return;
	for (;;) {
		pthread_mutex_lock(&gate_lock);
		rc = gate_ready;
		pthread_mutex_unlock(&gate_lock);
		if (rc >= 1)
			break;
		sleep_ns(1000000);
	}
	if (find_target() < 0)
		return;
	raw_gen = SLOT_GEN(atomic_load(&handler_slots[0].word)) + 1;

	rate_pair(one_collect, r, seconds, &r->v[S_COLLECT],
		  &r->v[S_COLLECT_FLOOR]);
	rate_pair(one_raw_futex, r, seconds, &r->v[S_RAW], &r->v[S_RAW_FLOOR]);
	r->v[S_POLL] = rate_for(one_raw_poll, r, (uint64_t)(seconds * 1e9));
	if (two_cpus(&c0, &c1)) {
		/* The DESIGN's facts: same CPU is cheap, an IPI is not. */
		if (pin(t, c0, c0) == 0)
			rate_pair(one_raw_futex, r, seconds, &r->v[S_RAW_SAME],
				  &r->v[S_RAW_SAME_FLOOR]);
		if (pin(t, c0, c1) == 0)
			rate_pair(one_raw_futex, r, seconds, &r->v[S_RAW_CROSS],
				  &r->v[S_RAW_CROSS_FLOOR]);
		pin(t, -1, -1);
	}
	r->ok = 1;
}

static int cmd_single(int argc, char **argv)
{
	double seconds = argc > 2 ? atof(argv[2]) : 1.0;
	int procs = argc > 3 ? atoi(argv[3]) : 3, got = 0;
	double v[S_COUNT][MAX_REPS];
	struct result r, sum;

	if (seconds <= 0 || seconds > 60)
		seconds = 1.0;
	if (procs < 1 || procs > MAX_REPS)
		procs = 3;
	memset(&sum, 0, sizeof(sum));
	/* Unpinned, the scheduler's placement decides a whole process. */
	for (int p = 0; p < procs; p++) {
		if (in_child(single_child, &seconds, &r) < 0)
			continue;
		for (int k = 0; k < S_COUNT; k++)
			v[k][got] = r.v[k];
		got++;
		sum.bad += r.bad;
		sum.blocked += r.blocked;
		sum.seen += r.seen;
	}
	if (got == 0) {
		printf("single_failed 1\n");
		return 1;
	}
	for (int k = 0; k < S_COUNT; k++)
		r.v[k] = median(v[k], (size_t)got);
	printf("single_procs %d\n", got);
	printf("single_collect_per_s %.0f\n", r.v[S_COLLECT]);
	printf("single_collect_floor_per_s %.0f\n", r.v[S_COLLECT_FLOOR]);
	printf("single_raw_per_s %.0f\n", r.v[S_RAW]);
	printf("single_raw_floor_per_s %.0f\n", r.v[S_RAW_FLOOR]);
	printf("single_poll_per_s %.1f\n", r.v[S_POLL]);
	printf("single_raw_same_cpu_per_s %.0f\n", r.v[S_RAW_SAME]);
	printf("single_raw_same_cpu_floor_per_s %.0f\n", r.v[S_RAW_SAME_FLOOR]);
	printf("single_raw_cross_cpu_per_s %.0f\n", r.v[S_RAW_CROSS]);
	printf("single_raw_cross_cpu_floor_per_s %.0f\n",
	       r.v[S_RAW_CROSS_FLOOR]);
	printf("single_bad %ld\n", sum.bad);
	printf("single_blocked %ld\n", sum.blocked);
	printf("single_seen %ld\n", sum.seen);
	return 0;
}

/* ---- many threads ---- */

enum {
	T_COLD_RAW,  /* µs, the first dump of a process, raw */
	T_COLD_SYM,  /* µs, the first dump of a process, symbolized */
	T_WARM_RAW,  /* µs, median */
	T_FLOOR,     /* µs, median, empty handler */
	T_FIRST_SYM, /* µs, first symbolized dump after raw ones */
	T_WARM_SYM,  /* µs, median */
	T_RSS_IDLE,  /* kB, threads up, before any dump */
	T_RSS_RAW,   /* kB, after the raw and floor dumps */
	T_RSS_SYM,   /* kB, after the symbolized dumps */
	T_COUNT
};

struct threads_arg {
	size_t n;
	int reps;
	int symbolize; /* for the cold children */
};

/* A fresh process: N threads, then its very first dump, timed. */
static void cold_child(void *arg, struct result *r)
{
	const struct threads_arg *a = arg;

	if (spawn_threads(a->n) < 0)
		return;
	if (a->symbolize)
		r->v[0] = time_dump_self(1, r);
	else
		r->v[0] = time_collect(r);
	r->ok = 1;
}

/*
 * A fresh process: N threads, then raw dumps alternating with floor dumps,
 * then symbolized ones, with the RSS read before, between and after.
 */
static void warm_child(void *arg, struct result *r)
{
	const struct threads_arg *a = arg;
	double raw[MAX_REPS], floor_[MAX_REPS], sym[MAX_REPS];

	if (spawn_threads(a->n) < 0)
		return;
	r->v[T_RSS_IDLE] = (double)rss_kb();
	time_collect(r); /* warm-up: installs, faults pages in */
	for (int i = 0; i < a->reps; i++) {
		handler_empty = 0;
		raw[i] = time_collect(r);
		handler_empty = 1;
		floor_[i] = time_collect(r);
	}
	handler_empty = 0;
	if (getenv("SW_BENCH_VERBOSE"))
		for (int i = 0; i < a->reps; i++)
			fprintf(stderr,
				"%zu threads: raw %.0f us, floor %.0f us\n",
				a->n, raw[i], floor_[i]);
	r->v[T_WARM_RAW] = median(raw, (size_t)a->reps);
	r->v[T_FLOOR] = median(floor_, (size_t)a->reps);
	r->v[T_RSS_RAW] = (double)rss_kb();
	r->v[T_FIRST_SYM] = time_dump_self(1, r);
	for (int i = 0; i < a->reps; i++)
		sym[i] = time_dump_self(1, r);
	r->v[T_WARM_SYM] = median(sym, (size_t)a->reps);
	r->v[T_RSS_SYM] = (double)rss_kb();
	r->ok = 1;
}

/* Median over reps fresh children of their first dump. -1 on failure. */
static double cold_median(struct threads_arg *a, int symbolize,
			  struct result *sum)
{
	double v[MAX_REPS];
	size_t got = 0;

	a->symbolize = symbolize;
	for (int i = 0; i < a->reps; i++) {
		struct result r;

		if (in_child(cold_child, a, &r) == 0) {
			if (getenv("SW_BENCH_VERBOSE"))
				fprintf(stderr,
					"%zu threads: cold %s %.0f us\n", a->n,
					symbolize ? "symbolized" : "raw",
					r.v[0]);
			v[got++] = r.v[0];
			sum->bad += r.bad;
			sum->blocked += r.blocked;
			sum->seen += r.seen;
		}
	}
	return got ? median(v, got) : -1;
}

static int cmd_threads(int argc, char **argv)
{
	struct threads_arg a = { 0 };
	struct result w, sum;
	double v[T_COUNT][MAX_REPS];
	int procs, got = 0, reps;

	if (argc < 3) {
		fprintf(stderr,
			"usage: bench_collect threads N [REPS [PROCS]]\n");
		return 2;
	}
	a.n = (size_t)strtoul(argv[2], NULL, 10);
	a.reps = argc > 3 ? atoi(argv[3]) : 11;
	procs = argc > 4 ? atoi(argv[4]) : 3;
	if (a.n < 1 || a.n > 60000 || a.reps < 1 || a.reps > MAX_REPS ||
	    procs < 1 || procs > MAX_REPS) {
		fprintf(stderr, "bench_collect: bad N, REPS or PROCS\n");
		return 2;
	}
	memset(&sum, 0, sizeof(sum));
	printf("threads %zu\n", a.n);
	/*
	 * One process can be lucky or unlucky as a whole (where the
	 * scheduler puts things): the figures are medians over processes of
	 * each process's median.
	 */
	for (int p = 0; p < procs; p++) {
		if (in_child(warm_child, &a, &w) < 0)
			continue;
		for (int k = 0; k < T_COUNT; k++)
			v[k][got] = w.v[k];
		got++;
		sum.bad += w.bad;
		sum.blocked += w.blocked;
		sum.seen += w.seen;
		sum.groups = w.groups;
		if (w.max_nips > sum.max_nips)
			sum.max_nips = w.max_nips;
	}
	if (got == 0) {
		printf("threads_failed 1\n");
		return 1;
	}
	for (int k = 0; k < T_COUNT; k++)
		w.v[k] = median(v[k], (size_t)got);
	/* A cold figure is one dump per process: take more processes. */
	reps = a.reps;
	a.reps = procs < 5 ? 5 : procs;
	w.v[T_COLD_RAW] = cold_median(&a, 0, &sum);
	w.v[T_COLD_SYM] = cold_median(&a, 1, &sum);
	printf("procs %d\n", got);
	printf("cold_procs %d\n", a.reps);
	printf("reps %d\n", reps);
	printf("cold_raw_us %.0f\n", w.v[T_COLD_RAW]);
	printf("warm_raw_us %.0f\n", w.v[T_WARM_RAW]);
	printf("floor_us %.0f\n", w.v[T_FLOOR]);
	printf("cold_sym_us %.0f\n", w.v[T_COLD_SYM]);
	printf("first_sym_us %.0f\n", w.v[T_FIRST_SYM]);
	printf("warm_sym_us %.0f\n", w.v[T_WARM_SYM]);
	printf("rss_idle_kb %.0f\n", w.v[T_RSS_IDLE]);
	printf("rss_raw_kb %.0f\n", w.v[T_RSS_RAW]);
	printf("rss_sym_kb %.0f\n", w.v[T_RSS_SYM]);
	printf("groups %ld\n", sum.groups);
	printf("max_nips %ld\n", sum.max_nips);
	printf("bad %ld\n", sum.bad);
	printf("blocked %ld\n", sum.blocked);
	printf("seen %ld\n", sum.seen);
	return 0;
}

/* ---- the cost of lock owners ---- */

static pthread_mutex_t held = PTHREAD_MUTEX_INITIALIZER;

static void *blocked(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&held);
	pthread_mutex_unlock(&held);
	return NULL;
}

struct locks_arg {
	size_t n;
	int reps;
};

/*
 * One dump as the daemon answers it: collected, symbolized, grouped and
 * rendered as JSON, with lock owners or without. Its time in µs; the
 * threads the JSON says wait for a lock go to *said.
 */
static double time_locks(struct sym *sym, int with, long *said)
{
	struct collect_opts co = { .timeout_ms = TIMEOUT_MS,
				   .window = bench_window() };
	struct sw_dump *d = NULL;
	cJSON *o = NULL, *t;
	uint64_t t0 = now_ns();
	double us;

	collect_no_waits = !with;
	if (collect_self(&co, NULL, 0, &d) < 0 || sym_dump(sym, d, true) < 0 ||
	    group_dump(d) < 0 || render_json(d, &o) < 0) {
		sw_dump_free(d);
		collect_no_waits = 0;
		return -1;
	}
	us = (double)(now_ns() - t0) / 1000.0;
	collect_no_waits = 0;
	*said = 0;
	cJSON_ArrayForEach(t, cJSON_GetObjectItem(o, "threads")) *said +=
		cJSON_GetObjectItem(t, "waiting_for") != NULL;
	cJSON_Delete(o);
	sw_dump_free(d);
	return us;
}

static void locks_child(void *arg, struct result *r)
{
	const struct locks_arg *a = arg;
	double with[MAX_REPS], without[MAX_REPS];
	struct timespec ts = { 0, 200 * 1000 * 1000 };
	struct sym *sym = NULL;
	pthread_attr_t attr;
	long said = 0, said_off = 0;

	pthread_mutex_lock(&held);
	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, STACK_SIZE);
	for (size_t i = 0; i < a->n; i++) {
		pthread_t t;

		if (pthread_create(&t, &attr, blocked, NULL) != 0)
			return;
	}
	nanosleep(&ts, NULL); /* every one asleep on the mutex */
	if (sym_new(NULL, NULL, &sym) < 0)
		return;
	time_locks(sym, 1, &said); /* warm-up: symbols cached */
	time_locks(sym, 0, &said_off);
	for (int i = 0; i < a->reps; i++) {
		with[i] = time_locks(sym, 1, &said);
		without[i] = time_locks(sym, 0, &said_off);
	}
	sym_free(sym);
	r->v[0] = median(with, (size_t)a->reps);
	r->v[1] = median(without, (size_t)a->reps);
	r->v[2] = (double)said;
	r->v[3] = (double)said_off;
	r->ok = 1;
}

static int cmd_locks(int argc, char **argv)
{
	struct locks_arg a = { 0 };
	struct result r;

	if (argc < 3) {
		fprintf(stderr, "usage: bench_collect locks N [REPS]\n");
		return 2;
	}
	a.n = (size_t)strtoul(argv[2], NULL, 10);
	a.reps = argc > 3 ? atoi(argv[3]) : 11;
	if (a.n < 1 || a.n > 60000 || a.reps < 1 || a.reps > MAX_REPS) {
		fprintf(stderr, "bench_collect: bad N or REPS\n");
		return 2;
	}
	if (in_child(locks_child, &a, &r) < 0) {
		printf("locks_failed 1\n");
		return 1;
	}
	printf("locks_threads %zu\n", a.n);
	printf("locks_with_us %.0f\n", r.v[0]);
	printf("locks_without_us %.0f\n", r.v[1]);
	printf("locks_said %.0f\n", r.v[2]);
	printf("locks_said_without %.0f\n", r.v[3]);
	return 0;
}

/* ---- the cost of sampling at a rate ---- */

struct rate_arg {
	size_t n;
	int hz;
	int seconds;
};

static uint64_t process_cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/*
 * The process's CPU over seconds, dumping at hz (0: not at all), on the
 * real handler or the empty one; the dumps made go to *dumps.
 */
static uint64_t cpu_while(int hz, int seconds, int empty, struct result *r,
			  long *dumps)
{
	uint64_t c0 = process_cpu_ns(), t0 = now_ns();
	uint64_t end = t0 + (uint64_t)seconds * 1000000000ull;
	uint64_t next = t0;

	*dumps = 0;
	handler_empty = empty;
	while (now_ns() < end) {
		if (hz > 0) {
			time_collect(r);
			(*dumps)++;
			next += 1000000000ull / (uint64_t)hz;
		} else {
			next = end;
		}
		if (next > now_ns())
			sleep_ns((long)(next - now_ns()));
	}
	handler_empty = 0;
	return process_cpu_ns() - c0;
}

static void rate_child(void *arg, struct result *r)
{
	const struct rate_arg *a = arg;
	long d_rest, d_real, d_floor;
	uint64_t rest, real, floor_;
	double s = (double)a->seconds * 1e9;

	if (spawn_threads(a->n) < 0)
		return;
	time_collect(r); /* warm-up: installs, faults pages in */
	rest = cpu_while(0, a->seconds, 0, r, &d_rest);
	real = cpu_while(a->hz, a->seconds, 0, r, &d_real);
	floor_ = cpu_while(a->hz, a->seconds, 1, r, &d_floor);
	r->v[0] = 100.0 * (double)rest / s;
	r->v[1] = 100.0 * ((double)real - (double)rest) / s;
	r->v[2] = 100.0 * ((double)floor_ - (double)rest) / s;
	r->v[3] = ((double)real - (double)rest) / 1000.0 / (double)d_real;
	r->v[4] = ((double)floor_ - (double)rest) / 1000.0 / (double)d_floor;
	r->v[5] = (double)d_real;
	r->ok = 1;
}

static int cmd_rate(int argc, char **argv)
{
	struct rate_arg a = { 0 };
	struct result r;

	if (argc < 3) {
		fprintf(stderr, "usage: bench_collect rate N [HZ [SECONDS]]\n");
		return 2;
	}
	a.n = (size_t)strtoul(argv[2], NULL, 10);
	a.hz = argc > 3 ? atoi(argv[3]) : 19;
	a.seconds = argc > 4 ? atoi(argv[4]) : 10;
	if (a.n < 1 || a.n > 60000 || a.hz < 1 || a.hz > 1000 ||
	    a.seconds < 1 || a.seconds > WATCHDOG_S / 4) {
		fprintf(stderr, "bench_collect: bad N, HZ or SECONDS\n");
		return 2;
	}
	if (in_child(rate_child, &a, &r) < 0) {
		printf("rate_failed 1\n");
		return 1;
	}
	printf("rate_threads %zu\n", a.n);
	printf("rate_hz %d\n", a.hz);
	printf("rate_dumps %.0f\n", r.v[5]);
	printf("rate_rest_pct %.2f\n", r.v[0]);
	printf("rate_real_pct %.2f\n", r.v[1]);
	printf("rate_floor_pct %.2f\n", r.v[2]);
	printf("rate_real_us %.0f\n", r.v[3]);
	printf("rate_floor_us %.0f\n", r.v[4]);
	printf("bad %ld\n", r.bad);
	return 0;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc >= 2 && strcmp(argv[1], "single") == 0)
		return cmd_single(argc, argv);
	if (argc >= 2 && strcmp(argv[1], "threads") == 0)
		return cmd_threads(argc, argv);
	if (argc >= 2 && strcmp(argv[1], "rate") == 0)
		return cmd_rate(argc, argv);
	if (argc >= 2 && strcmp(argv[1], "locks") == 0)
		return cmd_locks(argc, argv);
	fprintf(stderr, "usage: bench_collect single [SECONDS [PROCS]]\n"
			"       bench_collect threads N [REPS [PROCS]]\n"
			"       bench_collect rate N [HZ [SECONDS]]\n"
			"       bench_collect locks N [REPS]\n");
	return 2;
}
