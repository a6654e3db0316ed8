/*
 * waits.c - the calls that wait for signals or install a mask while they
 * wait, made exactly as the program asked, and kept out of our dumps' way.
 *
 * The sets and masks are the program's (sigmask.c says why): a thread that
 * blocks our signal is never signalled, so a wait with a mask that blocks
 * it is never cut short by us, and a signal someone else sends on our
 * number reaches the program's sigwaitinfo(), sigtimedwait() or signalfd
 * as it would without us.
 *
 * Two things are left to do here. A thread in sigwait(), sigwaitinfo() or
 * sigtimedwait() on a set that holds our signal shows it unblocked while it
 * waits (the kernel opens the set for the wait), yet a signal of ours
 * would be taken by the wait, not by our handler: such a thread is marked
 * for the dumper (waits_takes_ours()) before the wait starts, and should a
 * signal of ours reach the wait all the same (sent on a look at the
 * thread taken just before), the wait drops it and goes on. And a wait
 * whose mask lets our signal through (ppoll(), pselect(), epoll_pwait()
 * with a mask that opens it) is interrupted by our handler like by any
 * handled signal, and these calls are never restarted by the kernel
 * (signal(7)): when our handler ran during the call (handler_tls.runs
 * moved), the call is made again with what is left of its timeout; an
 * EINTR that another handler caused alone is returned as it came (one
 * that came in the same instant as ours is not: the kernel does not say
 * which handlers ran). sigsuspend() is not made again.
 *
 * Not signal context: these run on the program's threads as calls.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/signalfd.h>
#include <time.h>

#include "collector/signal/handler.h"
#include "collector/signal/sigctx.h"
#include "collector/signal/sigmask.h"
#include "model/clock.h"
#include "waits.h"

static void *next_fn(void *volatile *slot, const char *name)
{
	void *f = *slot;

	if (!f) {
		f = dlsym(RTLD_NEXT, name);
		*slot = f;
	}
	return f;
}

static void *volatile real_sigwait,
	*volatile real_sigwaitinfo,
		*volatile real_sigtimedwait,
			*volatile real_sigsuspend,
				*volatile real_signalfd,
					*volatile real_ppoll,
						*volatile real_pselect,
							*volatile real_epoll_pwait,
								*volatile real_epoll_pwait2;

void waits_init(void)
{
	next_fn(&real_sigwait, "sigwait");
	next_fn(&real_sigwaitinfo, "sigwaitinfo");
	next_fn(&real_sigtimedwait, "sigtimedwait");
	next_fn(&real_sigsuspend, "sigsuspend");
	next_fn(&real_signalfd, "signalfd");
	next_fn(&real_ppoll, "ppoll");
	next_fn(&real_pselect, "pselect");
	next_fn(&real_epoll_pwait, "epoll_pwait");
	next_fn(&real_epoll_pwait2, "epoll_pwait2");
}

/* Takes note of a claim in set (sigmask.c) and passes it on. */
static const sigset_t *noted(const sigset_t *set)
{
	sigmask_claim(set);
	return set;
}

/*
 * The threads in a wait that takes our signal, by tid; 0 for a free
 * entry. Past WAITS_TAKERS of them at once a thread is not marked, and a
 * signal of ours that its wait takes is dropped (the dumper then reports
 * it "timeout").
 */
#define WAITS_TAKERS 256
static _Atomic pid_t takers[WAITS_TAKERS];
static _Atomic int ntakers;

/* Marks this thread when set holds our signal. The entry, or -1. */
static int taker_enter(const sigset_t *set)
{
	int signo = handler_signo;
	pid_t tid;

	if (signo <= 0 || !set || sigismember(set, signo) != 1)
		return -1;
	tid = (pid_t)syscall(SYS_gettid);
	atomic_fetch_add(&ntakers, 1);
	for (int i = 0; i < WAITS_TAKERS; i++) {
		pid_t none = 0;

		if (atomic_compare_exchange_strong(&takers[i], &none, tid))
			return i;
	}
	atomic_fetch_sub(&ntakers, 1);
	return -1;
}

static void taker_leave(int i)
{
	if (i < 0)
		return;
	atomic_store(&takers[i], 0);
	atomic_fetch_sub(&ntakers, 1);
}

bool waits_takes_ours(pid_t tid)
{
	if (atomic_load(&ntakers) <= 0)
		return false;
	for (int i = 0; i < WAITS_TAKERS; i++)
		if (atomic_load(&takers[i]) == tid)
			return true;
	return false;
}

/* A wait cancelled in the middle (they are cancellation points). */
static void taker_cancelled(void *arg)
{
	taker_leave(*(int *)arg);
}

/* Whether a wait's result rc, with its siginfo si, is a signal of ours. */
static bool took_ours(int rc, const siginfo_t *si)
{
	return rc > 0 && rc == handler_signo && handler_sent_by_us(si);
}

/*
 * One call made again as long as our handler is what interrupted it,
 * with what is left of a relative timeout (NULL: none). Used as
 *
 *	retry_begin(&r, timeout);
 *	do
 *		rc = f(..., r.timeout, ...);
 *	while (retry_again(&r, rc));
 *
 * A timeout the kernel would refuse is passed on as it is, once.
 */
struct retry {
	const struct timespec *timeout; /* what to pass this time */
	struct timespec left;
	uint64_t deadline; /* CLOCK_MONOTONIC ns */
	uint32_t runs;	   /* handler_tls.runs before the call */
	bool once;
};

static void retry_begin(struct retry *r, const struct timespec *timeout)
{
	r->timeout = timeout;
	r->once = timeout && (timeout->tv_sec < 0 || timeout->tv_nsec < 0 ||
			      timeout->tv_nsec >= 1000000000L);
	if (timeout && !r->once) {
		r->deadline = clock_now_ns() +
			      (uint64_t)timeout->tv_sec * 1000000000ull +
			      (uint64_t)timeout->tv_nsec;
		r->left = *timeout;
		r->timeout = &r->left;
	}
	r->runs = handler_tls.runs;
}

static bool retry_left(struct retry *r);

static bool retry_again(struct retry *r, long rc)
{
	if (rc >= 0 || errno != EINTR || handler_tls.runs == r->runs || r->once)
		return false;
	r->runs = handler_tls.runs;
	return retry_left(r);
}

/*
 * Before a wait is made again after it took a signal of ours: what is
 * left of its timeout. Always true (a wait with nothing left returns at
 * once, as the program's would have).
 */
static bool retry_left(struct retry *r)
{
	uint64_t now, left;

	if (r->timeout && !r->once) {
		now = clock_now_ns();
		left = r->deadline > now ? r->deadline - now : 0;
		r->left.tv_sec = (time_t)(left / 1000000000ull);
		r->left.tv_nsec = (long)(left % 1000000000ull);
	}
	return true;
}

/* One signal wait: what it asks, and what came of it. */
struct sigwait_call {
	const sigset_t *set;
	siginfo_t *info;		/* never NULL */
	const struct timespec *timeout; /* sigtimedwait()'s; NULL: none */
	bool timed;			/* sigtimedwait(), else sigwaitinfo() */
	int taker;
	int rc, err;
};

/*
 * The wait of c, made again after our handler cut it short or after it
 * took a signal of ours, with what is left of its timeout.
 */
SW_INTERPOSER static void sigwait_loop(struct sigwait_call *c)
{
	int (*wi)(const sigset_t *, siginfo_t *);
	int (*tw)(const sigset_t *, siginfo_t *, const struct timespec *);
	struct retry r;
	int rc;

	*(void **)&wi = next_fn(&real_sigwaitinfo, "sigwaitinfo");
	*(void **)&tw = next_fn(&real_sigtimedwait, "sigtimedwait");
	if (!(c->timed ? (void *)tw : (void *)wi)) {
		c->rc = -1;
		c->err = ENOSYS;
		return;
	}
	retry_begin(&r, c->timeout);
	do
		rc = c->timed ? tw(c->set, c->info, r.timeout)
			      : wi(c->set, c->info);
	while (retry_again(&r, rc) ||
	       (took_ours(rc, c->info) && retry_left(&r)));
	c->rc = rc;
	c->err = errno;
	if (took_ours(rc, c->info)) { /* the time ran out meanwhile */
		c->rc = -1;
		c->err = EAGAIN;
	}
}

/*
 * Makes c's wait with this thread marked for the dumper when the set
 * holds our signal, unmarked however the wait ends (these waits are
 * cancellation points).
 */
SW_INTERPOSER static void marked_wait(struct sigwait_call *c)
{
	sigmask_settle(c->timed ? waits_ts_ns(c->timeout) : -1);
	c->taker = taker_enter(noted(c->set));
	pthread_cleanup_push(taker_cancelled, &c->taker);
	sigwait_loop(c);
	pthread_cleanup_pop(0);
	taker_leave(c->taker);
}

/*
 * sigwait() by way of libc's sigwaitinfo(), which tells whose signal it
 * took; like glibc's own, it never fails with EINTR.
 */
SW_INTERPOSER int sigwait(const sigset_t *set, int *sig)
{
	siginfo_t si;
	struct sigwait_call c = { .set = set, .info = &si };

	do
		marked_wait(&c);
	while (c.rc < 0 && c.err == EINTR);
	if (c.rc < 0)
		return c.err;
	*sig = c.rc;
	return 0;
}

SW_INTERPOSER int sigwaitinfo(const sigset_t *set, siginfo_t *info)
{
	siginfo_t mine = { 0 };
	struct sigwait_call c = { .set = set, .info = info ? info : &mine };

	marked_wait(&c);
	errno = c.err;
	return c.rc;
}

SW_INTERPOSER int sigtimedwait(const sigset_t *set, siginfo_t *info,
			       const struct timespec *timeout)
{
	siginfo_t mine = { 0 };
	struct sigwait_call c = { .set = set,
				  .info = info ? info : &mine,
				  .timeout = timeout,
				  .timed = true };

	marked_wait(&c);
	errno = c.err;
	return c.rc;
}

/*
 * Not made again: sigsuspend() is there to return once a handler ran, and
 * whether one of the program's ran besides ours cannot be told. A wait
 * loop (while (!flag) sigsuspend(...)) takes the early return in its
 * stride.
 */
SW_INTERPOSER int sigsuspend(const sigset_t *mask)
{
	int (*f)(const sigset_t *);

	sigmask_settle(-1);
	*(void **)&f = next_fn(&real_sigsuspend, "sigsuspend");
	if (!f) {
		errno = ENOSYS;
		return -1;
	}
	return f(noted(mask));
}

SW_INTERPOSER int signalfd(int fd, const sigset_t *mask, int flags)
{
	int (*f)(int, const sigset_t *, int);

	sigmask_settle(0);
	*(void **)&f = next_fn(&real_signalfd, "signalfd");
	if (!f) {
		errno = ENOSYS;
		return -1;
	}
	return f(fd, noted(mask), flags);
}

SW_INTERPOSER int ppoll(struct pollfd *fds, nfds_t nfds,
			const struct timespec *timeout, const sigset_t *mask)
{
	int (*f)(struct pollfd *, nfds_t, const struct timespec *,
		 const sigset_t *);
	const sigset_t *m;
	struct retry r;
	int rc;

	sigmask_settle(waits_ts_ns(timeout));
	*(void **)&f = next_fn(&real_ppoll, "ppoll");
	if (!f) {
		errno = ENOSYS;
		return -1;
	}
	m = noted(mask);
	retry_begin(&r, timeout);
	do
		rc = f(fds, nfds, r.timeout, m);
	while (retry_again(&r, rc));
	return rc;
}

SW_INTERPOSER int pselect(int nfds, fd_set *rd, fd_set *wr, fd_set *ex,
			  const struct timespec *timeout, const sigset_t *mask)
{
	int (*f)(int, fd_set *, fd_set *, fd_set *, const struct timespec *,
		 const sigset_t *);
	fd_set r0, w0, e0;
	const sigset_t *m;
	struct retry r;
	int rc;

	sigmask_settle(waits_ts_ns(timeout));
	*(void **)&f = next_fn(&real_pselect, "pselect");
	if (!f) {
		errno = ENOSYS;
		return -1;
	}
	m = noted(mask);
	/* The sets are the caller's question; asked again as they were. */
	if (rd)
		r0 = *rd;
	if (wr)
		w0 = *wr;
	if (ex)
		e0 = *ex;
	retry_begin(&r, timeout);
	for (;;) {
		rc = f(nfds, rd, wr, ex, r.timeout, m);
		if (!retry_again(&r, rc))
			return rc;
		if (rd)
			*rd = r0;
		if (wr)
			*wr = w0;
		if (ex)
			*ex = e0;
	}
}

SW_INTERPOSER int epoll_pwait(int epfd, struct epoll_event *ev, int maxevents,
			      int timeout, const sigset_t *mask)
{
	int (*f)(int, struct epoll_event *, int, int, const sigset_t *);
	struct timespec ts = { timeout / 1000, (timeout % 1000) * 1000000L };
	const sigset_t *m;
	struct retry r;
	int rc;

	sigmask_settle(timeout < 0 ? -1 : (int64_t)timeout * 1000000);
	*(void **)&f = next_fn(&real_epoll_pwait, "epoll_pwait");
	if (!f) {
		errno = ENOSYS;
		return -1;
	}
	m = noted(mask);
	/* In ms, rounded up on the way back: never ends before its time. */
	retry_begin(&r, timeout >= 0 ? &ts : NULL);
	do
		rc = f(epfd, ev, maxevents,
		       !r.timeout
			       ? timeout
			       : (int)(r.timeout->tv_sec * 1000 +
				       (r.timeout->tv_nsec + 999999) / 1000000),
		       m);
	while (retry_again(&r, rc));
	return rc;
}

SW_INTERPOSER int epoll_pwait2(int epfd, struct epoll_event *ev, int maxevents,
			       const struct timespec *timeout,
			       const sigset_t *mask)
{
	int (*f)(int, struct epoll_event *, int, const struct timespec *,
		 const sigset_t *);
	const sigset_t *m;
	struct retry r;
	int rc;

	sigmask_settle(waits_ts_ns(timeout));
	*(void **)&f = next_fn(&real_epoll_pwait2, "epoll_pwait2");
	if (!f) {
		errno = ENOSYS;
		return -1;
	}
	m = noted(mask);
	retry_begin(&r, timeout);
	do
		rc = f(epfd, ev, maxevents, r.timeout, m);
	while (retry_again(&r, rc));
	return rc;
}
