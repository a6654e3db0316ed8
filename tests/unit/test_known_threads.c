/*
 * test_known_threads.c - threads that answered the previous dump are
 * signalled without reading /proc first (collect.c): their name and state
 * come from their own handler, and one that has blocked the signal since
 * is still reported blocked-signal, promptly, not after the deadline.
 *
 * Names read by the handler are reused for a second; a thread renamed
 * shows its new name after that.
 *
 * Threads: a waiter on a condition variable, one in nanosleep, one in
 * epoll_wait, one in read() on a pipe, a spinner, and a "toggler" that
 * blocks and unblocks our signal with the raw system call on command (the
 * library's sigprocmask would strip it).
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "model/dump.h"
#include "stackwatch.h"
#include "tap.h"
#include "testutil.h"

#define TIMEOUT_MS 3000

static atomic_bool stop;
static atomic_int command; /* 0 idle, 1 block, 2 unblock */
static atomic_int done_cmd;
static atomic_int toggler_tid;
static atomic_int rename_to; /* 1: the toggler renames itself */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static int pipefd[2];

static void *waiter_main(void *arg)
{
	(void)arg;
	pthread_setname_np(pthread_self(), "kt-waiter");
	pthread_mutex_lock(&lock);
	while (!atomic_load(&stop))
		pthread_cond_wait(&cond, &lock);
	pthread_mutex_unlock(&lock);
	return NULL;
}

static void *sleeper_main(void *arg)
{
	(void)arg;
	pthread_setname_np(pthread_self(), "kt-sleeper");
	while (!atomic_load(&stop)) {
		struct timespec ts = { 0, 50 * 1000 * 1000 };

		nanosleep(&ts, NULL);
	}
	return NULL;
}

static void *poller_main(void *arg)
{
	int ep = epoll_create1(0);
	struct epoll_event ev;

	(void)arg;
	pthread_setname_np(pthread_self(), "kt-poller");
	while (!atomic_load(&stop))
		epoll_wait(ep, &ev, 1, 50);
	close(ep);
	return NULL;
}

static void *reader_main(void *arg)
{
	char c;

	(void)arg;
	pthread_setname_np(pthread_self(), "kt-reader");
	while (read(pipefd[0], &c, 1) < 0)
		; /* EINTR would show here: SA_RESTART means never */
	return NULL;
}

static void *spinner_main(void *arg)
{
	(void)arg;
	pthread_setname_np(pthread_self(), "kt-spinner");
	while (!atomic_load(&stop))
		;
	return NULL;
}

/* Blocks or unblocks signo with the system call itself, on command. */
static void *toggler_main(void *arg)
{
	int signo = (int)(intptr_t)arg;
	uint64_t set = 1ull << (signo - 1);

	pthread_setname_np(pthread_self(), "kt-toggler");
	atomic_store(&toggler_tid, (int)syscall(SYS_gettid));
	while (!atomic_load(&stop)) {
		int c = atomic_exchange(&command, 0);

		if (c == 1)
			syscall(SYS_rt_sigprocmask, SIG_BLOCK, &set, NULL, 8);
		else if (c == 2)
			syscall(SYS_rt_sigprocmask, SIG_UNBLOCK, &set, NULL, 8);
		if (c)
			atomic_store(&done_cmd, c);
		if (atomic_load(&rename_to)) {
			pthread_setname_np(pthread_self(), "kt-renamed");
			atomic_store(&rename_to, 0);
		}
		tu_sleep_ms(1);
	}
	return NULL;
}

static void send_command(int c)
{
	atomic_store(&done_cmd, 0);
	atomic_store(&command, c);
	while (atomic_load(&done_cmd) != c)
		tu_sleep_ms(1);
}

static const struct sw_thread *by_tid(const struct sw_dump *d, pid_t tid)
{
	for (size_t i = 0; i < d->nthreads; i++)
		if (d->threads[i].tid == tid)
			return &d->threads[i];
	return NULL;
}

static size_t count_ok(const struct sw_dump *d)
{
	size_t n = 0;

	for (size_t i = 0; i < d->nthreads; i++)
		n += d->threads[i].status == SW_ST_OK;
	return n;
}

static void check_state(const struct sw_dump *d, const char *name, char want)
{
	const struct sw_thread *t = tu_thread_named(d, name);

	TAP_OK(t && t->status == SW_ST_OK && t->state == want,
	       "%s: answered, named by its handler, state %c (got %s, %c)",
	       name, want, t ? dump_status_name(t->status) : "missing",
	       t ? t->state : '-');
}

int main(void)
{
	pthread_t th[6];
	void *(*mains[5])(void *) = { waiter_main, sleeper_main, poller_main,
				      reader_main, spinner_main };
	struct sw_dump *d;
	const struct sw_thread *t;
	int signo;

#if defined(__SANITIZE_THREAD__)
	TAP_SKIP("under ThreadSanitizer signals arrive on its own terms");
	return tap_done();
#endif
	if (pipe(pipefd) < 0)
		return 1;
	/* the first dump installs the handler and learns the threads */
	d = tu_dump_self(1, TIMEOUT_MS);
	sw_dump_free(d);
	signo = sw_signal();
	for (int i = 0; i < 5; i++)
		pthread_create(&th[i], NULL, mains[i], NULL);
	pthread_create(&th[5], NULL, toggler_main, (void *)(intptr_t)signo);
	while (!atomic_load(&toggler_tid))
		tu_sleep_ms(1);
	tu_sleep_ms(100);

	/* read from /proc, then from the handlers */
	for (int round = 0; round < 2; round++) {
		d = tu_dump_self(1, TIMEOUT_MS);
		TAP_OK(d != NULL, "dump %d succeeds", round + 1);
		if (!d)
			return tap_done();
		if (round == 1) {
			check_state(d, "kt-waiter", 'S');
			check_state(d, "kt-sleeper", 'S');
			check_state(d, "kt-poller", 'S');
			check_state(d, "kt-reader", 'S');
			check_state(d, "kt-spinner", 'R');
		}
		sw_dump_free(d);
	}

	/* a new name shows once names are read again (a second at most) */
	atomic_store(&rename_to, 1);
	while (atomic_load(&rename_to))
		tu_sleep_ms(1);
	tu_sleep_ms(1100);
	d = tu_dump_self(1, TIMEOUT_MS);
	t = d ? by_tid(d, atomic_load(&toggler_tid)) : NULL;
	TAP_OK(t && t->status == SW_ST_OK && strcmp(t->name, "kt-renamed") == 0,
	       "renamed a second ago: shown under its new name (got %s)",
	       t ? t->name : "-");
	sw_dump_free(d);

	/* it answered: the next dump signals it without looking */
	send_command(1);
	d = tu_dump_self(1, TIMEOUT_MS);
	t = d ? by_tid(d, atomic_load(&toggler_tid)) : NULL;
	TAP_OK(t && t->status == SW_ST_BLOCKED &&
		       strcmp(t->name, "kt-renamed") == 0,
	       "blocked by a system call since the last dump: blocked-signal, "
	       "named (got %s, %s)",
	       t ? dump_status_name(t->status) : "missing", t ? t->name : "-");
	TAP_OK(d && count_ok(d) + 1 == d->nthreads,
	       "every other thread answered");
	sw_dump_free(d);

	/* now known to block: read first, not signalled again */
	d = tu_dump_self(1, TIMEOUT_MS);
	t = d ? by_tid(d, atomic_load(&toggler_tid)) : NULL;
	TAP_OK(t && t->status == SW_ST_BLOCKED,
	       "still blocked: blocked-signal again (got %s)",
	       t ? dump_status_name(t->status) : "missing");
	sw_dump_free(d);

	/* unblocked: the stale pending signal runs its handler and does
	 * nothing; the next dumps find the thread as it is */
	send_command(2);
	tu_sleep_ms(20);
	for (int round = 0; round < 3; round++) {
		d = tu_dump_self(1, TIMEOUT_MS);
		t = d ? by_tid(d, atomic_load(&toggler_tid)) : NULL;
		TAP_OK(t && t->status == SW_ST_OK &&
			       tu_count_fn(t, "toggler_main") > 0,
		       "unblocked, dump %d: the toggler answers with its own "
		       "stack (got %s)",
		       round + 1, t ? dump_status_name(t->status) : "missing");
		sw_dump_free(d);
	}

	atomic_store(&stop, true);
	pthread_mutex_lock(&lock);
	pthread_cond_broadcast(&cond);
	pthread_mutex_unlock(&lock);
	if (write(pipefd[1], "x", 1) != 1)
		return 1;
	for (int i = 0; i < 6; i++)
		pthread_join(th[i], NULL);
	return tap_done();
}
