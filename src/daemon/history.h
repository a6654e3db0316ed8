/*
 * history.h - a sample, and the samples one target keeps (stacks.h),
 * oldest first, in the order they were taken: a ring that grows as
 * needed, so dropping the oldest of a thousand samples moves nothing, and
 * a binary search by time, so finding the sample of a moment costs a few
 * comparisons however long the history is. The ring is not locked: the
 * caller holds its target's dump_lock.
 */
#ifndef SWD_HISTORY_H
#define SWD_HISTORY_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "model/dump.h"

/*
 * A dump shared by the requests it answers and the history that keeps it;
 * immutable once published, freed with its last reference.
 */
struct sdump {
	_Atomic int refs;
	struct sw_dump *d; /* symbolized, grouped, compacted */
	uint64_t mono_ns;  /* CLOCK_MONOTONIC when it was taken */
	uint64_t sched_ns; /* ... when its threads' schedstat was read */
	size_t bytes;	   /* what it costs to keep (dump_bytes()) */
};

void sdump_get(struct sdump *sd);
void sdump_put(struct sdump *sd); /* NULL ok */

struct history {
	struct sdump **v; /* cap slots, n of them used from head on */
	size_t cap, head, n;
};

/* Sample i, 0 the oldest; i < h->n. */
struct sdump *history_at(const struct history *h, size_t i);

/* The newest sample, or NULL when none. */
struct sdump *history_newest(const struct history *h);

/* Appends sd, taking over the caller's reference. 0 or -ENOMEM. */
int history_push(struct history *h, struct sdump *sd);

/* Removes the oldest (or newest) sample and hands its reference back. */
struct sdump *history_pop_oldest(struct history *h);
struct sdump *history_pop_newest(struct history *h);

/*
 * The index of the newest sample taken (mono_ns) at or before mono_ns,
 * or SIZE_MAX when every sample is later.
 */
size_t history_find(const struct history *h, uint64_t mono_ns);

/* Drops every reference and frees the ring. */
void history_release(struct history *h);

#endif /* SWD_HISTORY_H */
