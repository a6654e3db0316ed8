/*
 * metrics.h - the Prometheus text exposition of /metrics. The metric names
 * are a contract (INTERFACE.md); more may be added.
 */
#ifndef SWD_METRICS_H
#define SWD_METRICS_H

#include "registry.h"
#include "scheduler.h"
#include "stacks.h"

/*
 * Renders every metric into *out (malloc'd, text format 0.0.4). Returns
 * 0 or -ENOMEM. Takes each counter once; the stuck gauge walks the
 * targets' newest samples.
 */
int metrics_render(struct stacks *st, struct registry *reg,
		   struct scheduler *sched, char **out);

#endif /* SWD_METRICS_H */
