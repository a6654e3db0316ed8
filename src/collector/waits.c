/*
 * waits.c - the calls that wait for signals or install a mask while they
 * wait, made to behave as if our signal did not exist.
 *
 * A thread in sigwait() with a full set would take our signal as one it
 * waited for: our handler would not run (a timeout) and the program would
 * be handed a signal it never expected. A thread in ppoll(), pselect() or
 * epoll_pwait() with a full mask, sigsuspend() too, could not be dumped
 * while it waits. So our signal leaves every set a thread waits on and
 * every mask a wait installs (sigmask_filter()).
 *
 * Our signal then interrupts the wait like any handled signal, and these
 * calls are never restarted by the kernel (signal(7)): they would fail
 * with EINTR where the program, blocking everything, expected none. So
 * when our handler ran during the call (handler_tls.runs moved), the call
 * is made again with what is left of its timeout; an EINTR that another
 * handler caused alone is returned as it came (one that came in the same
 * instant as ours is not: the kernel does not say which handlers ran).
 * glibc's sigwait already retries; sigsuspend() is not made again.
 *
 * Not signal context: these run on the program's threads as calls.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/signalfd.h>
#include <time.h>

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

/* The set without our signal (it is "added to" the wait). */
static const sigset_t *without_ours(const sigset_t *set, sigset_t *copy)
{
	return sigmask_filter(SIG_BLOCK, set, copy);
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

static bool retry_again(struct retry *r, long rc)
{
	uint64_t now, left;

	if (rc >= 0 || errno != EINTR || handler_tls.runs == r->runs || r->once)
		return false;
	if (r->timeout) {
		now = clock_now_ns();
		left = r->deadline > now ? r->deadline - now : 0;
		r->left.tv_sec = (time_t)(left / 1000000000ull);
		r->left.tv_nsec = (long)(left % 1000000000ull);
	}
	r->runs = handler_tls.runs;
	return true;
}

SW_INTERPOSER int sigwait(const sigset_t *set, int *sig)
{
	int (*f)(const sigset_t *, int *);
	sigset_t copy;

	*(void **)&f = next_fn(&real_sigwait, "sigwait");
	if (!f)
		return ENOSYS;
	return f(without_ours(set, &copy), sig);
}

SW_INTERPOSER int sigwaitinfo(const sigset_t *set, siginfo_t *info)
{
	int (*f)(const sigset_t *, siginfo_t *);
	const sigset_t *s;
	struct retry r;
	sigset_t copy;
	int rc;

	*(void **)&f = next_fn(&real_sigwaitinfo, "sigwaitinfo");
	if (!f) {
		errno = ENOSYS;
		return -1;
	}
	s = without_ours(set, &copy);
	retry_begin(&r, NULL);
	do
		rc = f(s, info);
	while (retry_again(&r, rc));
	return rc;
}

SW_INTERPOSER int sigtimedwait(const sigset_t *set, siginfo_t *info,
			       const struct timespec *timeout)
{
	int (*f)(const sigset_t *, siginfo_t *, const struct timespec *);
	const sigset_t *s;
	struct retry r;
	sigset_t copy;
	int rc;

	*(void **)&f = next_fn(&real_sigtimedwait, "sigtimedwait");
	if (!f) {
		errno = ENOSYS;
		return -1;
	}
	s = without_ours(set, &copy);
	retry_begin(&r, timeout);
	do
		rc = f(s, info, r.timeout);
	while (retry_again(&r, rc));
	return rc;
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
	sigset_t copy;

	*(void **)&f = next_fn(&real_sigsuspend, "sigsuspend");
	if (!f) {
		errno = ENOSYS;
		return -1;
	}
	return f(without_ours(mask, &copy));
}

SW_INTERPOSER int signalfd(int fd, const sigset_t *mask, int flags)
{
	int (*f)(int, const sigset_t *, int);
	sigset_t copy;

	*(void **)&f = next_fn(&real_signalfd, "signalfd");
	if (!f) {
		errno = ENOSYS;
		return -1;
	}
	return f(fd, without_ours(mask, &copy), flags);
}

SW_INTERPOSER int ppoll(struct pollfd *fds, nfds_t nfds,
			const struct timespec *timeout, const sigset_t *mask)
{
	int (*f)(struct pollfd *, nfds_t, const struct timespec *,
		 const sigset_t *);
	const sigset_t *m;
	struct retry r;
	sigset_t copy;
	int rc;

	*(void **)&f = next_fn(&real_ppoll, "ppoll");
	if (!f) {
		errno = ENOSYS;
		return -1;
	}
	m = without_ours(mask, &copy);
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
	sigset_t copy;
	int rc;

	*(void **)&f = next_fn(&real_pselect, "pselect");
	if (!f) {
		errno = ENOSYS;
		return -1;
	}
	m = without_ours(mask, &copy);
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
	sigset_t copy;
	int rc;

	*(void **)&f = next_fn(&real_epoll_pwait, "epoll_pwait");
	if (!f) {
		errno = ENOSYS;
		return -1;
	}
	m = without_ours(mask, &copy);
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
	sigset_t copy;
	int rc;

	*(void **)&f = next_fn(&real_epoll_pwait2, "epoll_pwait2");
	if (!f) {
		errno = ENOSYS;
		return -1;
	}
	m = without_ours(mask, &copy);
	retry_begin(&r, timeout);
	do
		rc = f(epfd, ev, maxevents, r.timeout, m);
	while (retry_again(&r, rc));
	return rc;
}
