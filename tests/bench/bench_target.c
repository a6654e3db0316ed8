/*
 * bench_target.c - the process that tests/bench/daemon.sh dumps with
 * stackwatch (the agent preloaded), eu-stack and gdb. Nothing of ours is
 * linked in: it is a plain program, as a user's would be.
 *
 *	bench_target N FILE
 *
 * Starts N threads in the shapes of shapes.h (bench_collect's): SHAPES groups
 *of identical stacks (a thread pool's workers), and every DEEP_EVERY-th thread
 *DEEP_DEPTH frames deep in a static recursion, all parked in pthread_cond_wait.
 *One more thread, the heartbeat, wakes every 1 ms (absolute CLOCK_MONOTONIC
 *deadlines) and keeps the largest gap between two consecutive wake-ups: how
 *long the process was kept from running.
 *
 * Prints "ready" on stdout once every thread is parked. Then, on SIGUSR1,
 * writes "maxgap_us G beats B late L" to FILE (through FILE.tmp and a
 * rename, so a reader never sees half a line) and starts a new window: G,
 * B and L are the largest gap, the number of beats and the number of gaps
 * over LATE_NS since the previous SIGUSR1 (or since "ready"). FILE "-"
 * starts no heartbeat (for the daemon-at-rest figure, where 50 heartbeats
 * would be most of the targets' CPU). SIGTERM or SIGINT ends it. The
 * signals are taken by the main thread with sigwaitinfo, so no handler of
 * ours runs on a thread a tool is unwinding.
 *
 * With BENCH_TARGET_FIFO=1 in the environment the heartbeat runs at
 * SCHED_FIFO priority 1 (root only): it then waits for nothing but the
 * process being stopped (ptrace) or its own signal handler, whatever else
 * loads the machine.
 *
 * With BENCH_TARGET_WAIT=1 the N threads do not park in the shapes:
 * thread i sleeps for an hour in sleep(), poll() (a pipe nobody writes),
 * epoll_wait() (the same pipe) or sigtimedwait() (SIGUSR2, which nobody
 * sends), by i % 4, and counts each return before the hour is up (an
 * early return: EINTR, say, when a signal handler ran on it) before it
 * goes back to sleep. The report line then goes on with "key value"
 * pairs since the previous report: "early E" and "early_CALL E" for each
 * call (sleep, poll, epoll, sigtimedwait), the early returns the program
 * saw; "wakes W" and "wakes_CALL W", the context switches of those
 * threads (/proc/self/task/TID/status): each time one was woken, whether
 * the call returned or was made again out of the program's sight (the
 * agent remakes a sigtimedwait() its own signal cut short).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>

#include "shapes.h"

#define STACK_SIZE (128 * 1024) /* 4000 threads fit in little memory */
#define BEAT_NS 1000000L
#define LATE_NS 2000000ull /* the limit on the pause */

static _Atomic uint64_t max_gap_ns;
static _Atomic uint64_t beats;
static _Atomic uint64_t late;

/* BENCH_TARGET_WAIT=1: the calls the threads sleep in, by i % WAITS. */
#define WAITS 4
#define WAIT_S 3600
static const char *const wait_names[WAITS] = { "sleep", "poll", "epoll",
					       "sigtimedwait" };
static bool waiting;	 /* the mode is on */
static int wait_pipe[2]; /* nobody writes it */
static int wait_ep = -1; /* an epoll set of wait_pipe[0] */
static _Atomic uint64_t early[WAITS];
static _Atomic pid_t *wait_tids; /* thread i's tid, 0 until it runs */
static long wait_n;
static uint64_t wakes_before[WAITS]; /* at the previous report */

/*
 * The start routine of thread i in BENCH_TARGET_WAIT=1 mode: sleeps an
 * hour in call i % WAITS, again and again, counting the returns that
 * came before the hour was up.
 */
static void *wait_main(void *arg)
{
	unsigned kind = (unsigned)((uintptr_t)arg % WAITS);
	struct pollfd p = { .fd = wait_pipe[0], .events = POLLIN };
	struct timespec hour = { WAIT_S, 0 };
	struct epoll_event ev;
	sigset_t usr2;

	sigemptyset(&usr2);
	sigaddset(&usr2, SIGUSR2); /* blocked in every thread (main) */
	atomic_store(&wait_tids[(uintptr_t)arg], gettid());
	pthread_mutex_lock(&gate_lock);
	gate_ready++;
	pthread_mutex_unlock(&gate_lock);
	for (;;) {
		uint64_t t0 = now_ns();

		switch (kind) {
		case 0:
			sleep(WAIT_S);
			break;
		case 1:
			poll(&p, 1, WAIT_S * 1000);
			break;
		case 2:
			epoll_wait(wait_ep, &ev, 1, WAIT_S * 1000);
			break;
		default:
			sigtimedwait(&usr2, NULL, &hour);
			break;
		}
		if (now_ns() - t0 < (uint64_t)WAIT_S * 1000000000ull)
			atomic_fetch_add(&early[kind], 1);
	}
	return NULL;
}

/*
 * Context switches of the waiting threads so far, by call: each wake-up
 * of a thread is one (it goes back to sleep after).
 */
static void wakes_now(uint64_t by[WAITS])
{
	memset(by, 0, WAITS * sizeof(*by));
	for (long i = 0; i < wait_n; i++) {
		pid_t tid = atomic_load(&wait_tids[i]);
		char path[64], line[128];
		FILE *f;

		if (!tid)
			continue;
		snprintf(path, sizeof(path), "/proc/self/task/%d/status",
			 (int)tid);
		f = fopen(path, "r");
		if (!f)
			continue;
		while (fgets(line, sizeof(line), f)) {
			unsigned long long v;

			if (sscanf(line, "voluntary_ctxt_switches: %llu", &v) ==
				    1 ||
			    sscanf(line, "nonvoluntary_ctxt_switches: %llu",
				   &v) == 1)
				by[i % WAITS] += v;
		}
		fclose(f);
	}
}

/* Sets up the pipe and the epoll set wait_main() sleeps on. */
static int wait_setup(long n)
{
	struct epoll_event ev = { .events = EPOLLIN };

	wait_tids = calloc((size_t)n, sizeof(*wait_tids));
	wait_n = n;
	if (!wait_tids || pipe(wait_pipe) != 0)
		return -1;
	wait_ep = epoll_create1(EPOLL_CLOEXEC);
	if (wait_ep < 0)
		return -1;
	ev.data.fd = wait_pipe[0];
	return epoll_ctl(wait_ep, EPOLL_CTL_ADD, wait_pipe[0], &ev);
}

static void *heartbeat_main(void *arg)
{
	uint64_t last = now_ns();

	(void)arg;
	pthread_setname_np(pthread_self(), "heartbeat");
	if (getenv("BENCH_TARGET_FIFO") &&
	    strcmp(getenv("BENCH_TARGET_FIFO"), "1") == 0) {
		struct sched_param sp = { .sched_priority = 1 };
		int rc = pthread_setschedparam(pthread_self(), SCHED_FIFO, &sp);

		if (rc != 0)
			fprintf(stderr, "bench_target: SCHED_FIFO: %s\n",
				strerror(rc));
	}
	for (;;) {
		uint64_t next = last + BEAT_NS, now, gap, max;
		struct timespec ts = { (time_t)(next / 1000000000ull),
				       (long)(next % 1000000000ull) };

		/* A signal (the agent's) or a ptrace stop may cut it short. */
		while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts,
				       NULL) == EINTR)
			;
		now = now_ns();
		gap = now - last;
		last = now;
		max = atomic_load(&max_gap_ns);
		while (gap > max &&
		       !atomic_compare_exchange_weak(&max_gap_ns, &max, gap))
			;
		atomic_fetch_add(&beats, 1);
		if (gap > LATE_NS)
			atomic_fetch_add(&late, 1);
	}
	return NULL;
}

static int report(const char *path)
{
	char tmp[4096];
	uint64_t gap = atomic_exchange(&max_gap_ns, 0);
	uint64_t n = atomic_exchange(&beats, 0);
	uint64_t l = atomic_exchange(&late, 0);
	FILE *f;

	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	f = fopen(tmp, "w");
	if (!f)
		return -1;
	fprintf(f, "maxgap_us %.0f beats %llu late %llu", (double)gap / 1e3,
		(unsigned long long)n, (unsigned long long)l);
	if (waiting) {
		uint64_t by[WAITS], now[WAITS], all = 0;

		for (int k = 0; k < WAITS; k++)
			all += by[k] = atomic_exchange(&early[k], 0);
		fprintf(f, " early %llu", (unsigned long long)all);
		for (int k = 0; k < WAITS; k++)
			fprintf(f, " early_%s %llu", wait_names[k],
				(unsigned long long)by[k]);
		wakes_now(now);
		all = 0;
		for (int k = 0; k < WAITS; k++) {
			by[k] = now[k] - wakes_before[k];
			wakes_before[k] = now[k];
			all += by[k];
		}
		fprintf(f, " wakes %llu", (unsigned long long)all);
		for (int k = 0; k < WAITS; k++)
			fprintf(f, " wakes_%s %llu", wait_names[k],
				(unsigned long long)by[k]);
	}
	fputc('\n', f);
	if (fclose(f) != 0)
		return -1;
	return rename(tmp, path);
}

int main(int argc, char **argv)
{
	const char *mode;
	pthread_attr_t attr;
	pthread_t t;
	sigset_t set;
	long n;

	if (argc != 3 || (n = strtol(argv[1], NULL, 10)) < 1 || n > 100000) {
		fprintf(stderr, "usage: bench_target N FILE\n");
		return 2;
	}
	/* Every thread inherits the mask: only sigwaitinfo takes these. */
	sigemptyset(&set);
	sigaddset(&set, SIGUSR1);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	mode = getenv("BENCH_TARGET_WAIT");
	waiting = mode && strcmp(mode, "1") == 0;
	if (waiting) {
		sigset_t usr2;

		sigemptyset(&usr2);
		sigaddset(&usr2, SIGUSR2);
		pthread_sigmask(SIG_BLOCK, &usr2, NULL);
		if (wait_setup(n) != 0) {
			perror("bench_target: pipe or epoll");
			return 1;
		}
	}

	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, STACK_SIZE);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	for (long i = 0; i < n; i++) {
		int rc = pthread_create(&t, &attr,
					waiting ? wait_main : thread_main,
					(void *)i);

		if (rc != 0) {
			fprintf(stderr, "bench_target: thread %ld of %ld: %s\n",
				i, n, strerror(rc));
			return 1;
		}
	}
	for (;;) {
		int ready;
		struct timespec ms = { 0, 1000000 };

		pthread_mutex_lock(&gate_lock);
		ready = gate_ready;
		pthread_mutex_unlock(&gate_lock);
		if (ready >= n)
			break;
		nanosleep(&ms, NULL);
	}
	if (strcmp(argv[2], "-") != 0 &&
	    pthread_create(&t, &attr, heartbeat_main, NULL) != 0) {
		fprintf(stderr, "bench_target: no heartbeat thread\n");
		return 1;
	}
	pthread_attr_destroy(&attr);
	printf("ready\n");
	fflush(stdout);
	for (;;) {
		int sig = sigwaitinfo(&set, NULL);

		if (sig == SIGUSR1 && strcmp(argv[2], "-") != 0) {
			if (report(argv[2]) < 0)
				perror("bench_target: report");
		} else if (sig == SIGTERM || sig == SIGINT) {
			return 0;
		}
	}
}
