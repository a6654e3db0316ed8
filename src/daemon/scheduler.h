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

#include <stddef.h>

#include "registry.h"
#include "stacks.h"

#define SCHED_WORKERS 4
#define SCHED_MAX_PROFILES 64 /* profile runs at a time */

struct scheduler;
struct profile_run;

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
 * Starts a profile run (profile.h) of ts (n targets: references the run
 * then owns) for seconds; done(arg) is called from the scheduler's thread
 * when it is finished, its profile in (*out)->out. The caller frees the
 * run with profile_free() after done. Every run's targets are sampled
 * once for all runs. Returns 0; -EAGAIN past SCHED_MAX_PROFILES runs,
 * -ENOTSUP when s is NULL or samples no profiles, -ENOMEM (then ts is
 * still the caller's).
 */
int sched_profile(struct scheduler *s, struct target **ts, size_t n,
		  int seconds, void (*done)(void *arg), void *arg,
		  struct profile_run **out);

/* Finishes every run now, with what it has (the daemon is stopping). */
void sched_profile_end_all(struct scheduler *s);

/* Stops and joins every thread; jobs in flight finish first. NULL ok. */
void sched_stop(struct scheduler *s);

/* Jobs queued and not yet taken by a worker (0 when s is NULL). */
size_t sched_queue_depth(struct scheduler *s);

/* The deepest the queue has been. */
size_t sched_queue_max(struct scheduler *s);

#endif /* SWD_SCHEDULER_H */
