/*
 * rolling.h - the rolling profile of the page's Profile view: a target's
 * samples over a window of its history, merged into one flame graph's
 * worth of stacks.
 */
#ifndef SWD_ROLLING_H
#define SWD_ROLLING_H

#include <stdbool.h>

#include <cjson/cJSON.h>

#include "registry.h"

#define ROLLING_MAX_GROUPS 4096 /* stacks in one answer, the largest */

/*
 * {"pid", "comm", "mode", "unit", "samples", "from", "to", "total",
 * "groups": [{"count", "frames"}]}: the stacks of t's samples taken
 * between since_s and until_s seconds ago (by the monotonic clock),
 * identical stacks of every sample merged, largest first. A group's count
 * is thread-samples (unit "threads": every ok thread of every sample), or
 * with cpu the CPU time (unit "ms") each thread used between the sample
 * before and this one, given to its stack in this one (the first sample
 * of the window gives nothing). total is their sum. from and to are the
 * first and last sample's collected_at (absent with no sample). Of each
 * sample, the threads a may read (access_view(), as past samples).
 * 0 or -ENOMEM.
 */
struct access;
int rolling_profile(struct target *t, const struct access *a, double since_s,
		    double until_s, bool cpu, cJSON **out);

#endif /* SWD_ROLLING_H */
