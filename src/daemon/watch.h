/*
 * watch.h - what the samples tell over time: the threads the watchdog
 * flags (/api/v1/stuck) and what changed since a moment ago
 * (/api/v1/diff). INTERFACE.md gives both documents.
 */
#ifndef SWD_WATCH_H
#define SWD_WATCH_H

#include <cjson/cJSON.h>

#include "registry.h"
#include "stacks.h"

struct access;

/*
 * {"threads": [...], "deadlocks": [...]}: every stuck thread of every
 * target a may see (NULL: every target), from each one's newest samples,
 * and each cycle of lock waits among them. *count (when not NULL) gets
 * the number of threads. 0 or -ENOMEM.
 */
int watch_stuck(struct stacks *s, struct registry *reg, const struct access *a,
		cJSON **out, size_t *count);

/*
 * The diff of t between the sample at least since_s old and a current
 * dump (stacks_get for a's asker with timeout_ms), with "groups": the
 * groups whose count changed; of each, the threads a may read
 * (access_view()). Returns 0, -ENOENT when no sample is that old,
 * -ENOMEM, or the dump's error.
 */
int watch_diff(struct stacks *s, struct target *t, const struct access *a,
	       double since_s, int timeout_ms, cJSON **out);

/*
 * Why watch_diff() found no sample of t since_s old, as a sentence into
 * why. *retry_s gets the seconds until one will be, or -1 when the
 * history, sampled every sample_ms (0: only by requests), never reaches
 * back that far at its size.
 */
void watch_diff_why(struct stacks *s, struct target *t, double since_s,
		    int sample_ms, char *why, size_t size, double *retry_s);

#endif /* SWD_WATCH_H */
