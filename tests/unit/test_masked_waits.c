/*
 * test_masked_waits.c - threads that wait with every signal blocked are
 * never signalled, and never see a dump; one whose wait opens the mask
 * is dumped, and its wait never fails because of it.
 *
 * Servers block every signal and wait for some in sigwaitinfo() or
 * sigtimedwait(), or wait for I/O in ppoll(), pselect() or epoll_pwait()
 * with a full mask. The program's mask is the program's: our signal must
 * not reach any of them (every dump has them "blocked-signal"; the daemon
 * reads them from the kernel instead), and none of the calls may fail
 * with EINTR because of it. A thread that blocks everything but waits in
 * ppoll() with an empty mask takes our signal while it waits: it is
 * dumped "ok", and its ppoll() is made again with what is left of its
 * timeout. A sigtimedwait() with a 300 ms timeout, dumped every 10 ms,
 * still times out (EAGAIN), not before 300 ms and not much after. Then
 * each waiter gets what it waits for and must return it.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <time.h>
#include <unistd.h>

#include "model/dump.h"
#include "stackwatch.h"
#include "tap.h"
#include "testutil.h"

#define DUMPS 200

enum {
	W_SIGTIMEDWAIT,
	W_SIGWAITINFO,
	W_PPOLL,
	W_PSELECT,
	W_EPOLL_PWAIT,
	W_PPOLL_OPEN, /* every signal blocked, none while it waits */
	NWAITERS
};
static const char *const wname[NWAITERS] = { "sigtimedwait", "sigwaitinfo",
					     "ppoll",	     "pselect",
					     "epoll_pwait",  "ppoll(open)" };

struct waiter {
	pthread_t th;
	_Atomic pid_t tid;
	atomic_int eintr, other, got;
	int pipe[2];
};

static struct waiter w[NWAITERS];
static sigset_t all, none;
static atomic_int short_timeouts, long_timeouts, timed_calls, timed_bad;
static atomic_bool stop_timed;

static void book(struct waiter *x, int rc)
{
	if (rc >= 0)
		atomic_fetch_add(&x->got, 1);
	else if (errno == EINTR)
		atomic_fetch_add(&x->eintr, 1);
	else
		atomic_fetch_add(&x->other, 1);
}

static void *waiter_main(void *arg)
{
	struct waiter *x = arg;
	int kind = (int)(x - w);
	sigset_t usr1;

	pthread_sigmask(SIG_BLOCK, &all, NULL);
	sigemptyset(&usr1);
	sigaddset(&usr1, SIGUSR1);
	atomic_store(&x->tid, tu_gettid());
	while (!atomic_load(&x->got)) {
		struct timespec long_time = { 3600, 0 };
		struct pollfd p = { .fd = x->pipe[0], .events = POLLIN };
		struct epoll_event ev;
		fd_set rd;
		int ep, rc;

		switch (kind) {
		case W_SIGTIMEDWAIT:
			rc = sigtimedwait(&usr1, NULL, &long_time);
			break;
		case W_SIGWAITINFO:
			rc = sigwaitinfo(&all, NULL) /* ours among them */;
			break;
		case W_PPOLL:
			rc = ppoll(&p, 1, NULL, &all);
			break;
		case W_PPOLL_OPEN:
			rc = ppoll(&p, 1, NULL, &none);
			break;
		case W_PSELECT:
			FD_ZERO(&rd);
			FD_SET(x->pipe[0], &rd);
			rc = pselect(x->pipe[0] + 1, &rd, NULL, NULL, NULL,
				     &all);
			break;
		default:
			ep = epoll_create1(EPOLL_CLOEXEC);
			ev.events = EPOLLIN;
			ev.data.fd = x->pipe[0];
			epoll_ctl(ep, EPOLL_CTL_ADD, x->pipe[0], &ev);
			rc = epoll_pwait(ep, &ev, 1, -1, &all);
			close(ep);
			break;
		}
		book(x, rc);
	}
	return NULL;
}

/* Back-to-back sigtimedwait()s of 300 ms, each timed. */
static void *timed_main(void *arg)
{
	sigset_t usr2;

	(void)arg;
	pthread_sigmask(SIG_BLOCK, &all, NULL);
	sigemptyset(&usr2);
	sigaddset(&usr2, SIGUSR2);
	while (!atomic_load(&stop_timed)) {
		struct timespec t = { 0, 300 * 1000000L };
		uint64_t start = tu_now_ns(), took;
		int rc = sigtimedwait(&usr2, NULL, &t);

		took = (tu_now_ns() - start) / 1000000;
		atomic_fetch_add(&timed_calls, 1);
		if (rc >= 0 || errno != EAGAIN)
			atomic_fetch_add(&timed_bad, 1);
		else if (took < 300)
			atomic_fetch_add(&short_timeouts, 1);
		else if (took > 2000)
			atomic_fetch_add(&long_timeouts, 1);
	}
	return NULL;
}

int main(void)
{
	int dumped[NWAITERS] = { 0 }, blocked[NWAITERS] = { 0 };
	struct sw_dump_opts o;
	pthread_t timed;

	sigfillset(&all);
	sigemptyset(&none);
	/* Installed first, as the agent would be: masks set before it are
	 * the program's own business. */
	sw_dump_opts_init(&o);
	o.symbolize = 0;
	o.timeout_ms = 1000;
	{
		struct sw_dump *d = NULL;

		if (sw_dump_self(&o, &d) == 0)
			sw_dump_free(d);
	}
	for (int i = 0; i < NWAITERS; i++) {
		if (pipe(w[i].pipe) < 0)
			return 1;
		pthread_create(&w[i].th, NULL, waiter_main, &w[i]);
	}
	pthread_create(&timed, NULL, timed_main, NULL);
	for (int i = 0; i < NWAITERS; i++)
		while (!atomic_load(&w[i].tid) ||
		       tu_thread_state(atomic_load(&w[i].tid)) != 'S')
			tu_sleep_ms(1);
	for (int n = 0; n < DUMPS; n++) {
		struct sw_dump *d = NULL;

		if (sw_dump_self(&o, &d) != 0)
			continue;
		for (int i = 0; i < NWAITERS; i++) {
			const struct sw_thread *t =
				tu_find_thread(d, atomic_load(&w[i].tid));

			if (t && t->status == SW_ST_OK)
				dumped[i]++;
			else if (t && t->status == SW_ST_BLOCKED)
				blocked[i]++;
		}
		sw_dump_free(d);
		tu_sleep_ms(10);
	}
	for (int i = 0; i < NWAITERS; i++) {
		if (i == W_PPOLL_OPEN)
			TAP_OK(dumped[i] == DUMPS,
			       "%s, its mask open while it waits: dumped %d of "
			       "%d times (%d blocked-signal)",
			       wname[i], dumped[i], DUMPS, blocked[i]);
		else
			TAP_OK(blocked[i] == DUMPS,
			       "%s with every signal blocked: never signalled, "
			       "blocked-signal %d of %d times (%d dumped)",
			       wname[i], blocked[i], DUMPS, dumped[i]);
		TAP_OK(atomic_load(&w[i].eintr) == 0 &&
			       atomic_load(&w[i].other) == 0 &&
			       atomic_load(&w[i].got) == 0,
		       "%s never returned meanwhile (%d EINTR, %d other, %d "
		       "early)",
		       wname[i], atomic_load(&w[i].eintr),
		       atomic_load(&w[i].other), atomic_load(&w[i].got));
	}
	pthread_kill(w[W_SIGTIMEDWAIT].th, SIGUSR1);
	pthread_kill(w[W_SIGWAITINFO].th, SIGUSR1);
	for (int i = W_PPOLL; i < NWAITERS; i++)
		if (write(w[i].pipe[1], "x", 1) != 1)
			TAP_OK(0, "write to %s's pipe", wname[i]);
	for (int i = 0; i < NWAITERS; i++) {
		pthread_join(w[i].th, NULL);
		TAP_OK(atomic_load(&w[i].got) == 1,
		       "%s then returns what it waited for", wname[i]);
	}
	atomic_store(&stop_timed, 1);
	pthread_join(timed, NULL);
	TAP_OK(atomic_load(&timed_calls) >= 3 && atomic_load(&timed_bad) == 0 &&
		       atomic_load(&short_timeouts) == 0 &&
		       atomic_load(&long_timeouts) == 0,
	       "sigtimedwait(300 ms), dumped every 10 ms: %d calls timed out "
	       "(EAGAIN), %d otherwise, %d early, %d after 2 s",
	       atomic_load(&timed_calls), atomic_load(&timed_bad),
	       atomic_load(&short_timeouts), atomic_load(&long_timeouts));
	return tap_done();
}
