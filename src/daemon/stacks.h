/*
 * stacks.h - the daemon's dumping service: asks a target for a raw dump,
 * symbolizes it with one symbolizer shared by all targets (its cache is per
 * build-id and offset, so the same library in many processes costs one
 * lookup), groups it, and counts what happened for /metrics.
 */
#ifndef SWD_STACKS_H
#define SWD_STACKS_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "dump.h"
#include "registry.h"
#include "symbolize.h"

/* Upper bounds (seconds) of the dump-duration histogram buckets. */
#define STACKS_NBUCKETS 12
extern const double stacks_buckets[STACKS_NBUCKETS];

enum stacks_result { RESULT_OK, RESULT_TIMEOUT, RESULT_ERROR, RESULT_COUNT };

struct stacks_metrics {
	_Atomic uint64_t dumps[RESULT_COUNT];
	_Atomic uint64_t threads[SW_ST_COUNT];
	_Atomic uint64_t signals_sent;
	_Atomic uint64_t coalesced;
	_Atomic uint64_t duration_buckets[STACKS_NBUCKETS]; /* cumulative */
	_Atomic uint64_t duration_count;
	_Atomic uint64_t duration_sum_us;
};

struct stacks {
	struct registry *reg;
	pthread_mutex_t sym_lock;
	struct sym *sym;
	pid_t sym_pid; /* whose modules are being opened; under sym_lock */
	struct stacks_metrics m;
};

/* 0 or -ENOMEM. */
int stacks_init(struct stacks *s, struct registry *reg);
void stacks_release(struct stacks *s);

/*
 * Dumps t with the given deadline: raw dump from the agent (or in-process
 * for the daemon itself), symbolized when symbols is true, grouped. Returns
 * 0 with *out owned by the caller, or the error of target_dump_raw().
 * Blocks up to the deadline.
 */
int stacks_dump(struct stacks *s, struct target *t, int timeout_ms,
		bool symbols, struct sw_dump **out);

/* Symbol cache counters (taken under the lock). */
void stacks_sym_stats(struct stacks *s, uint64_t *hits, uint64_t *misses);

#endif /* SWD_STACKS_H */
