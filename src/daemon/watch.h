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
 * dump (stacks_get for who with timeout_ms). Returns 0, -ENOENT when no
 * sample is that old, or the dump's error.
 */
int watch_diff(struct stacks *s, struct target *t, const struct asker *who,
	       double since_s, int timeout_ms, cJSON **out);

#endif /* SWD_WATCH_H */
