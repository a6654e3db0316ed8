/*
 * test_eintr.c - what a dump does to threads blocked in system calls
 * (torture scenario 6).
 *
 * Threads block in read() on a pipe, accept() on a listening socket,
 * epoll_wait(), poll() and nanosleep(), each with errno set to a sentinel
 * before every call, while the process is dumped 1000 times (each dump
 * waits until they sleep again, so each one interrupts a blocked call).
 * Every tenth dump the main thread gives each of them something to return
 * with. Our signal is installed with SA_RESTART, so read() and accept()
 * must never see EINTR; epoll_wait(), poll() and nanosleep() are never
 * restarted after a handler (signal(7)), so they do return EINTR, which
 * the README says. Whatever a call returns, errno must be either the
 * sentinel (success) or what the call itself failed with: our handler
 * restores errno.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "model/dump.h"
#include "stackwatch.h"
#include "tap.h"
#include "testutil.h"

#define DUMPS 1000
#define FEED_EVERY 10 /* dumps between two wake-ups of each thread */
#define SENTINEL 0x5eed

enum { C_READ, C_ACCEPT, C_EPOLL, C_POLL, C_SLEEP, NCALLS };

static const char *const call_name[NCALLS] = {
	"read", "accept", "epoll_wait", "poll", "nanosleep",
};

struct blocker {
	pid_t tid;
	unsigned long returned;	 /* successful returns */
	unsigned long eintr;	 /* -1 with EINTR */
	unsigned long other;	 /* -1 with anything else */
	unsigned long bad_errno; /* errno neither sentinel nor the error */
};

static struct blocker b[NCALLS];
static atomic_bool stop;
static atomic_int started;
static int pipes[NCALLS][2]; /* read, epoll, poll: main writes, they read */
static int listen_fd;
static struct sockaddr_un addr;
static socklen_t addr_len;

/* Books one return of call c: r < 0 is a failure with errno e. */
static void book(int c, long r, int e)
{
	if (r >= 0) {
		b[c].returned++;
		if (e != SENTINEL)
			b[c].bad_errno++;
	} else if (e == EINTR) {
		b[c].eintr++;
	} else {
		b[c].other++;
	}
}

static void *reader_main(void *arg)
{
	char ch;

	(void)arg;
	b[C_READ].tid = tu_gettid();
	atomic_fetch_add(&started, 1);
	while (!atomic_load(&stop)) {
		long r;

		errno = SENTINEL;
		r = read(pipes[C_READ][0], &ch, 1);
		book(C_READ, r, errno);
	}
	return NULL;
}

static void *acceptor_main(void *arg)
{
	(void)arg;
	b[C_ACCEPT].tid = tu_gettid();
	atomic_fetch_add(&started, 1);
	while (!atomic_load(&stop)) {
		int fd;

		errno = SENTINEL;
		fd = accept(listen_fd, NULL, NULL);
		book(C_ACCEPT, fd, errno);
		if (fd >= 0)
			close(fd);
	}
	return NULL;
}

static void *epoller_main(void *arg)
{
	struct epoll_event ev = { .events = EPOLLIN };
	int ep = epoll_create1(EPOLL_CLOEXEC);
	char ch;

	(void)arg;
	epoll_ctl(ep, EPOLL_CTL_ADD, pipes[C_EPOLL][0], &ev);
	b[C_EPOLL].tid = tu_gettid();
	atomic_fetch_add(&started, 1);
	while (!atomic_load(&stop)) {
		long r;

		errno = SENTINEL;
		r = epoll_wait(ep, &ev, 1, -1);
		book(C_EPOLL, r, errno);
		if (r > 0 && read(pipes[C_EPOLL][0], &ch, 1) < 0)
			break;
	}
	close(ep);
	return NULL;
}

static void *poller_main(void *arg)
{
	struct pollfd p = { .fd = pipes[C_POLL][0], .events = POLLIN };
	char ch;

	(void)arg;
	b[C_POLL].tid = tu_gettid();
	atomic_fetch_add(&started, 1);
	while (!atomic_load(&stop)) {
		long r;

		errno = SENTINEL;
		r = poll(&p, 1, -1);
		book(C_POLL, r, errno);
		if (r > 0 && read(pipes[C_POLL][0], &ch, 1) < 0)
			break;
	}
	return NULL;
}

static void *sleeper_main(void *arg)
{
	(void)arg;
	b[C_SLEEP].tid = tu_gettid();
	atomic_fetch_add(&started, 1);
	while (!atomic_load(&stop)) {
		struct timespec ts = { 3600, 0 };
		long r;

		errno = SENTINEL;
		r = nanosleep(&ts, &ts);
		book(C_SLEEP, r, errno);
	}
	return NULL;
}

/* Gives every blocked thread something to return with. */
static void feed(void)
{
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (write(pipes[C_READ][1], "x", 1) != 1 ||
	    write(pipes[C_EPOLL][1], "x", 1) != 1 ||
	    write(pipes[C_POLL][1], "x", 1) != 1)
		TAP_NOTE("a pipe write failed: %s", strerror(errno));
	if (fd >= 0) {
		if (connect(fd, (struct sockaddr *)&addr, addr_len) != 0)
			TAP_NOTE("connect: %s", strerror(errno));
		close(fd);
	}
}

static int setup(void)
{
	for (int c = 0; c < NCALLS; c++)
		if (pipe2(pipes[c], O_CLOEXEC) != 0)
			return -1;
	memset(&addr, 0, sizeof(addr));
	addr.sun_family = AF_UNIX;
	/* abstract: nothing on disk to clean up */
	addr_len = offsetof(struct sockaddr_un, sun_path) + 1 +
		   (socklen_t)snprintf(addr.sun_path + 1,
				       sizeof(addr.sun_path) - 1,
				       "stackwatch-eintr-%d", (int)getpid());
	listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (listen_fd < 0 ||
	    bind(listen_fd, (struct sockaddr *)&addr, addr_len) != 0 ||
	    listen(listen_fd, 64) != 0)
		return -1;
	return 0;
}

/* Dumps DUMPS times, each with every blocker asleep; counts answers. */
static int dump_all(int *failed)
{
	int answered = 0, notes = 0;

	for (int i = 0; i < DUMPS; i++) {
		struct sw_dump_opts o;
		struct sw_dump *d = NULL;

		if (i % FEED_EVERY == FEED_EVERY - 1)
			feed();
		for (int c = 0; c < NCALLS; c++)
			tu_wait_state(b[c].tid, 'S');
		sw_dump_opts_init(&o);
		o.symbolize = 0;
		if (sw_dump_self(&o, &d) != 0) {
			(*failed)++;
			continue;
		}
		for (int c = 0; c < NCALLS; c++) {
			const struct sw_thread *t = tu_find_thread(d, b[c].tid);

			if (t && t->status == SW_ST_OK)
				answered++;
			else if (notes++ < 5)
				TAP_NOTE("dump %d: the %s thread is %s", i,
					 call_name[c],
					 t ? dump_status_name(t->status)
					   : "missing");
		}
		sw_dump_free(d);
	}
	return answered;
}

int main(void)
{
	static void *(*const mains[NCALLS])(void *) = {
		reader_main, acceptor_main, epoller_main,
		poller_main, sleeper_main,
	};
	pthread_t th[NCALLS];
	int failed = 0, answered;

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

	if (setup() != 0) {
		TAP_OK(0, "set up pipes and a listening socket: %s",
		       strerror(errno));
		return tap_done();
	}
	for (int c = 0; c < NCALLS; c++)
		pthread_create(&th[c], NULL, mains[c], NULL);
	while (atomic_load(&started) < NCALLS)
		tu_sleep_ms(1);

	answered = dump_all(&failed);
	atomic_store(&stop, true);
	feed();
	/* nanosleep() has an hour to go: wake it the way a dump does */
	while (pthread_tryjoin_np(th[C_SLEEP], NULL) != 0) {
		struct sw_dump_opts o;
		struct sw_dump *d = NULL;

		sw_dump_opts_init(&o);
		o.symbolize = 0;
		if (sw_dump_self(&o, &d) == 0)
			sw_dump_free(d);
		tu_sleep_ms(1);
	}
	for (int c = 0; c < C_SLEEP; c++)
		pthread_join(th[c], NULL);
	for (int c = 0; c < NCALLS; c++)
		TAP_NOTE("%-10s returned %lu, EINTR %lu, other errors %lu, "
			 "errno changed %lu",
			 call_name[c], b[c].returned, b[c].eintr, b[c].other,
			 b[c].bad_errno);

	TAP_OK(failed == 0, "%d dumps succeed (%d failed)", DUMPS, failed);
	TAP_OK(answered == DUMPS * NCALLS,
	       "the handler ran on each blocked thread in every dump (%d of "
	       "%d)",
	       answered, DUMPS * NCALLS);
	TAP_OK(b[C_READ].eintr == 0 && b[C_READ].other == 0 &&
		       b[C_READ].returned >= DUMPS / FEED_EVERY,
	       "read() on a pipe never saw EINTR: restarted after every "
	       "dump (%lu reads)",
	       b[C_READ].returned);
	TAP_OK(b[C_ACCEPT].eintr == 0 && b[C_ACCEPT].other == 0 &&
		       b[C_ACCEPT].returned >= DUMPS / FEED_EVERY,
	       "accept() never saw EINTR: restarted after every dump (%lu "
	       "accepted)",
	       b[C_ACCEPT].returned);
	for (int c = C_EPOLL; c < NCALLS; c++)
		TAP_OK(b[c].eintr > 0 && b[c].other == 0,
		       "%s is never restarted (signal(7)): it returned EINTR "
		       "%lu times",
		       call_name[c], b[c].eintr);
	for (int c = 0; c < NCALLS; c++)
		TAP_OK(b[c].bad_errno == 0,
		       "%s: errno was still the sentinel after each success "
		       "(%lu changed)",
		       call_name[c], b[c].bad_errno);
	return tap_done();
}
