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

/* Whether a failed call failed because our handler ran meanwhile. */
static bool ours_interrupted(int rc, uint32_t runs_before)
{
	return rc < 0 && errno == EINTR && handler_tls.runs != runs_before;
}

/*
 * A relative timeout as an absolute CLOCK_MONOTONIC deadline, and back:
 * what is left of it (zero once passed) for the next try.
 */
static uint64_t deadline_of(const struct timespec *t)
{
	return clock_now_ns() + (uint64_t)t->tv_sec * 1000000000ull +
	       (uint64_t)t->tv_nsec;
}

static struct timespec left_until(uint64_t deadline)
{
	uint64_t now = clock_now_ns();
	uint64_t left = deadline > now ? deadline - now : 0;
	struct timespec t = { (time_t)(left / 1000000000ull),
			      (long)(left % 1000000000ull) };

	return t;
}

/* Whether a relative timeout is one the kernel would take. */
static bool valid(const struct timespec *t)
{
	return t->tv_sec >= 0 && t->tv_nsec >= 0 && t->tv_nsec < 1000000000L;
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
	sigset_t copy;
	uint32_t runs;
	int rc;

	*(void **)&f = next_fn(&real_sigwaitinfo, "sigwaitinfo");
	if (!f) {
		errno = ENOSYS;
		return -1;
	}
	s = without_ours(set, &copy);
	do {
		runs = handler_tls.runs;
		rc = f(s, info);
	} while (ours_interrupted(rc, runs));
	return rc;
}

SW_INTERPOSER int sigtimedwait(const sigset_t *set, siginfo_t *info,
			       const struct timespec *timeout)
{
	int (*f)(const sigset_t *, siginfo_t *, const struct timespec *);
	struct timespec left;
	const sigset_t *s;
	uint64_t deadline = 0;
	sigset_t copy;
	uint32_t runs;
	int rc;

	*(void **)&f = next_fn(&real_sigtimedwait, "sigtimedwait");
	if (!f) {
		errno = ENOSYS;
		return -1;
	}
	s = without_ours(set, &copy);
	if (!timeout || !valid(timeout))
		return f(s, info, timeout); /* the kernel says what is wrong */
	deadline = deadline_of(timeout);
	left = *timeout;
	for (;;) {
		runs = handler_tls.runs;
		rc = f(s, info, &left);
		if (!ours_interrupted(rc, runs))
			return rc;
		left = left_until(deadline);
	}
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
	struct timespec left;
	const sigset_t *m;
	uint64_t deadline = 0;
	sigset_t copy;
	uint32_t runs;
	int rc;

	*(void **)&f = next_fn(&real_ppoll, "ppoll");
	if (!f) {
		errno = ENOSYS;
		return -1;
	}
	m = without_ours(mask, &copy);
	if (timeout && !valid(timeout))
		return f(fds, nfds, timeout, m);
	if (timeout) {
		deadline = deadline_of(timeout);
		left = *timeout;
	}
	for (;;) {
		runs = handler_tls.runs;
		rc = f(fds, nfds, timeout ? &left : NULL, m);
		if (!ours_interrupted(rc, runs))
			return rc;
		if (timeout)
			left = left_until(deadline);
	}
}

SW_INTERPOSER int pselect(int nfds, fd_set *rd, fd_set *wr, fd_set *ex,
			  const struct timespec *timeout, const sigset_t *mask)
{
	int (*f)(int, fd_set *, fd_set *, fd_set *, const struct timespec *,
		 const sigset_t *);
	fd_set r0, w0, e0;
	struct timespec left;
	const sigset_t *m;
	uint64_t deadline = 0;
	sigset_t copy;
	uint32_t runs;
	int rc;

	*(void **)&f = next_fn(&real_pselect, "pselect");
	if (!f) {
		errno = ENOSYS;
		return -1;
	}
	m = without_ours(mask, &copy);
	if (timeout && !valid(timeout))
		return f(nfds, rd, wr, ex, timeout, m);
	if (timeout) {
		deadline = deadline_of(timeout);
		left = *timeout;
	}
	/* The sets are the caller's question; asked again as they were. */
	if (rd)
		r0 = *rd;
	if (wr)
		w0 = *wr;
	if (ex)
		e0 = *ex;
	for (;;) {
		runs = handler_tls.runs;
		rc = f(nfds, rd, wr, ex, timeout ? &left : NULL, m);
		if (!ours_interrupted(rc, runs))
			return rc;
		if (rd)
			*rd = r0;
		if (wr)
			*wr = w0;
		if (ex)
			*ex = e0;
		if (timeout)
			left = left_until(deadline);
	}
}

/* An epoll timeout in ms (-1: none) made again from a deadline. */
static int ms_left(uint64_t deadline)
{
	uint64_t now = clock_now_ns();

	if (deadline <= now)
		return 0;
	/* Rounded up: a wait never ends before its time. */
	return (int)((deadline - now + 999999) / 1000000);
}

SW_INTERPOSER int epoll_pwait(int epfd, struct epoll_event *ev, int maxevents,
			      int timeout, const sigset_t *mask)
{
	int (*f)(int, struct epoll_event *, int, int, const sigset_t *);
	const sigset_t *m;
	uint64_t deadline = 0;
	int rc, left = timeout;
	sigset_t copy;
	uint32_t runs;

	*(void **)&f = next_fn(&real_epoll_pwait, "epoll_pwait");
	if (!f) {
		errno = ENOSYS;
		return -1;
	}
	m = without_ours(mask, &copy);
	if (timeout > 0)
		deadline = clock_now_ns() + (uint64_t)timeout * 1000000ull;
	for (;;) {
		runs = handler_tls.runs;
		rc = f(epfd, ev, maxevents, left, m);
		if (!ours_interrupted(rc, runs))
			return rc;
		if (timeout > 0)
			left = ms_left(deadline);
	}
}

SW_INTERPOSER int epoll_pwait2(int epfd, struct epoll_event *ev, int maxevents,
			       const struct timespec *timeout,
			       const sigset_t *mask)
{
	int (*f)(int, struct epoll_event *, int, const struct timespec *,
		 const sigset_t *);
	struct timespec left;
	const sigset_t *m;
	uint64_t deadline = 0;
	sigset_t copy;
	uint32_t runs;
	int rc;

	*(void **)&f = next_fn(&real_epoll_pwait2, "epoll_pwait2");
	if (!f) {
		errno = ENOSYS;
		return -1;
	}
	m = without_ours(mask, &copy);
	if (timeout && !valid(timeout))
		return f(epfd, ev, maxevents, timeout, m);
	if (timeout) {
		deadline = deadline_of(timeout);
		left = *timeout;
	}
	for (;;) {
		runs = handler_tls.runs;
		rc = f(epfd, ev, maxevents, timeout ? &left : NULL, m);
		if (!ours_interrupted(rc, runs))
			return rc;
		if (timeout)
			left = left_until(deadline);
	}
}
