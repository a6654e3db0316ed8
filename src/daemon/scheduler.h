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

struct scheduler;

/*
 * Starts the scheduler and its workers sampling agents every interval_ms
 * and the processes without the agent that the registry keeps
 * (registry_keep_ptraced()) every ptrace_interval_ms, with dumps of
 * timeout_ms. 0 samples none of that kind; both 0 start nothing (*out is
 * NULL). Returns 0 or a negative errno.
 */
int sched_start(struct registry *reg, struct stacks *st, int interval_ms,
		int ptrace_interval_ms, int timeout_ms, struct scheduler **out);

/* Stops and joins every thread; jobs in flight finish first. NULL ok. */
void sched_stop(struct scheduler *s);

/* Jobs queued and not yet taken by a worker (0 when s is NULL). */
size_t sched_queue_depth(struct scheduler *s);

/* The deepest the queue has been. */
size_t sched_queue_max(struct scheduler *s);

#endif /* SWD_SCHEDULER_H */
