/*
 * scheduler.h - periodic sampling of every target (--sample-interval).
 *
 * The Qpid lesson: an idle checker that queued the same job again and
 * again while a connection was busy filled the heap. Here one scheduler
 * thread keeps each target's next-due time on the monotonic clock and
 * hands every due target to a fixed pool of workers, but only if that
 * target has no job queued already: an atomic flag is set when its job is
 * queued and cleared by the worker before it samples and advances the
 * target's ticker. So the queue never holds more jobs than there are
 * targets, a target that stays overdue (a stopped process) cannot be
 * queued twice nor starve the others, and each pass waits at least 1 ms,
 * so nothing spins.
 */
#ifndef SWD_SCHEDULER_H
#define SWD_SCHEDULER_H

#include <stdbool.h>
#include <stddef.h>

#include "registry.h"
#include "stacks.h"

#define SCHED_WORKERS 4
#define SCHED_MAX_PROFILES 64 /* profile runs at a time */
/* Of them, the last ones only requesters who see everything may take. */
#define SCHED_PROFILE_RESERVE 8
/* Runs of one requester at a time (--max-profiles-per-user). */
#define SCHED_PROFILES_PER_USER 4
#define SCHED_WATCH_MS 250 /* how often the clients of runs are looked at */

struct scheduler;
struct profile_run;

/*
 * Who asks for a profile run, for the limits on runs. A requester that
 * sees everything (root, the admin group, the token) has no share of its
 * own and may take the reserve; any other has at most the per-user
 * number of runs at a time, counted by key. A run whose client hangs up
 * (its socket fd reads end of stream, or fails) ends within
 * SCHED_WATCH_MS.
 */
struct access;

struct sched_requester {
	const char *key; /* peer.h's key: "uid N", an address, anonymous */
	bool all;	 /* sees everything */
	int fd;		 /* the client's socket; -1: not watched */
	/* Who it is: what of each sample its run may read (access.h). */
	const struct access *acc;
};

/*
 * Starts the scheduler and its workers sampling agents every interval_ms
 * and the processes without the agent that the registry keeps
 * (registry_keep_ptraced()) every ptrace_interval_ms, with dumps of
 * timeout_ms; and the targets of profile runs profile_hz times a second
 * while a run wants them. 0 samples none of that kind; all 0 start
 * nothing (*out is NULL). Returns 0 or a negative errno.
 */
int sched_start(struct registry *reg, struct stacks *st, int interval_ms,
		int ptrace_interval_ms, int profile_hz, int timeout_ms,
		struct scheduler **out);

/*
 * How many profile runs one requester that does not see everything may
 * have at a time (at least 1; SCHED_PROFILES_PER_USER until set). s may
 * be NULL.
 */
void sched_set_profiles_per_user(struct scheduler *s, int n);

/* That number (0 when s is NULL). */
int sched_profiles_per_user(struct scheduler *s);

/* Profile runs in progress (0 when s is NULL). */
size_t sched_profiles(struct scheduler *s);

/*
 * Starts a profile run (profile.h) of ts (n targets: references the run
 * then owns) for seconds, for who (copied; who->fd must stay open until
 * done is called, which it does while the caller's connection is
 * suspended); done(arg) is called from the scheduler's thread when it is
 * finished, its profile in (*out)->out, or (*out)->rc -ECONNABORTED when
 * it ended early because its client hung up. The caller frees the run
 * with profile_free() after done. Every run's targets are sampled once
 * for all runs. Returns 0; -EDQUOT when who has its per-user number of
 * runs already; -EAGAIN at SCHED_MAX_PROFILES runs; -ENOSPC when only
 * the reserve is left and who does not see everything; -ENOTSUP when s
 * is NULL or samples no profiles; -ENOMEM (after an error ts is still
 * the caller's).
 */
int sched_profile(struct scheduler *s, struct target **ts, size_t n,
		  int seconds, const struct sched_requester *who,
		  void (*done)(void *arg), void *arg, struct profile_run **out);

/* Finishes every run now, with what it has (the daemon is stopping). */
void sched_profile_end_all(struct scheduler *s);

/* Stops and joins every thread; jobs in flight finish first. NULL ok. */
void sched_stop(struct scheduler *s);

/* Jobs queued and not yet taken by a worker (0 when s is NULL). */
size_t sched_queue_depth(struct scheduler *s);

/* The deepest the queue has been. */
size_t sched_queue_max(struct scheduler *s);

#endif /* SWD_SCHEDULER_H */
