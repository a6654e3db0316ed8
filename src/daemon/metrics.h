/*
 * metrics.h - the Prometheus text exposition of /metrics. The metric names
 * are a contract (INTERFACE.md); more may be added.
 */
#ifndef SWD_METRICS_H
#define SWD_METRICS_H

#include "registry.h"
#include "scheduler.h"
#include "stacks.h"

struct access;
struct turns;

/*
 * Renders every metric into *out (malloc'd, text format 0.0.4). Returns
 * 0 or -ENOMEM. Takes each counter once; the stuck gauge walks the
 * targets' newest samples. The per-target series (stackwatch_target_*)
 * are of the targets a may see (none when a is NULL). turns (turns.h)
 * may be NULL.
 */
int metrics_render(struct stacks *st, struct registry *reg,
		   struct scheduler *sched, struct turns *turns,
		   const struct access *a, char **out);

#endif /* SWD_METRICS_H */
