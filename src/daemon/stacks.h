/*
 * stacks.h - the daemon's dumping service: asks a target for a raw dump,
 * symbolizes it with one symbolizer shared by all targets (its cache is per
 * build-id and offset, so the same library in many processes costs one
 * lookup), groups it, and counts what happened for /metrics.
 *
 * On top of that, per target: requests that arrive while a dump is in
 * flight wait for it instead of starting another (coalescing); a result
 * younger than 1/max_dump_rate s is served again, so no target is dumped
 * more often than that whatever the number of clients or samplers; and
 * the samples of the last history_seconds are kept (compacted: only each
 * group's representative keeps frames) to tell how long each thread's
 * stack has stayed the same, to flag stuck threads, to answer diffs and
 * to draw the Profile view.
 *
 * The history is kept by time, one sample per sampling interval: a
 * target sampled periodically keeps its periodic samples at least 3/4 of
 * an interval apart (a profile run's 19 a second do not crowd it), and a
 * dump asked for in between (the page, the CLI, the API) is kept only as
 * the newest sample until the next one comes, so no burst of requests
 * pushes a periodic sample out. A target that is not sampled keeps every
 * dump it is asked for. Beyond the time, --history N caps the count, and
 * the user's memory budget the bytes.
 */
#ifndef SWD_STACKS_H
#define SWD_STACKS_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "history.h"
#include "model/dump.h"
#include "modfile.h"
#include "registry.h"
#include "symbols/symbolize.h"

struct jitcache;
struct modfile_maps;

/* Gives each target the service's state; for registry_start(). */
extern const struct registry_hooks stacks_hooks;

/* Upper bounds (seconds) of the dump-duration histogram buckets. */
#define STACKS_NBUCKETS 12
extern const double stacks_buckets[STACKS_NBUCKETS];

enum stacks_result { RESULT_OK, RESULT_TIMEOUT, RESULT_ERROR, RESULT_COUNT };

struct stacks_metrics {
	_Atomic uint64_t dumps[RESULT_COUNT];
	_Atomic uint64_t cached; /* served from a result younger than 1/rate */
	_Atomic uint64_t threads[SW_ST_COUNT];
	_Atomic uint64_t signals_sent;
	_Atomic uint64_t snapshots;	       /* ptrace snapshots taken */
	_Atomic uint64_t reads[SW_READ_COUNT]; /* threads, by how read */
	_Atomic uint64_t reused; /* threads whose last unwind was kept */
	_Atomic uint64_t coalesced;
	/* Dumps named from their target's last stacks (symmemo.h), and
	 * the addresses they named so. */
	_Atomic uint64_t memo_dumps, memo_hits;
	_Atomic uint64_t duration_buckets[STACKS_NBUCKETS]; /* cumulative */
	_Atomic uint64_t duration_count;
	_Atomic uint64_t duration_sum_us;
};

/* The samples a user keeps, all targets together (stacks.c). */
struct stacks_use {
	uid_t uid;
	size_t bytes;
};

/* A dump refused: the user's samples would take more than allowed. */
#define STACKS_EHISTORY (-21002)

struct stacks {
	struct registry *reg;
	uint64_t min_interval_ns;   /* 1 s / max_dump_rate */
	size_t history;		    /* samples kept per target; 0: no limit */
	uint64_t history_ns;	    /* how far back they reach */
	uint64_t spacing_ns;	    /* agents' periodic samples kept apart */
	uint64_t ptrace_spacing_ns; /* sampled processes without; 0: none */
	int stuck_after_s;
	/* Frames without symbols (module and offset): parses nothing.
	 * Symbols are the parser workers' (parsers.h). */
	pthread_mutex_t sym_lock;
	struct sym *sym;
	uint64_t sym_budget_ns;		    /* symbolizing one dump */
	_Atomic uint64_t sym_busy_since_ns; /* 0: not symbolizing */
	size_t max_history_bytes;	    /* per user */
	pthread_mutex_t use_lock;	    /* use, nuse; a leaf */
	struct stacks_use *use;
	size_t nuse;
	_Atomic int helpers;  /* threads of all-target dumps, all requests */
	struct jitcache *jit; /* the targets' perf maps, shared, per user */
	struct stacks_metrics m;
};

/* 0 or -ENOMEM. history: samples kept per target at most, 0 no limit. */
int stacks_init(struct stacks *s, struct registry *reg, int max_dump_rate,
		int history, int stuck_after_s);

/* Sets the history's reach and spacing (stacks_set_history()). */
struct stacks_history_opts {
	int seconds;		/* how far back (default 900) */
	int sample_interval_ms; /* agents' periodic sampling; 0: none */
	int ptrace_interval_ms; /* processes without the agent; 0: none */
};
void stacks_set_history(struct stacks *s, const struct stacks_history_opts *o);

/*
 * Whether t is sampled periodically: an agent with a sample interval, a
 * process without the agent with --sample-ptrace (the daemon itself
 * counts as an agent).
 */
bool stacks_sampled(const struct stacks *s, const struct target *t);

/*
 * What t's history holds: *samples of them, the oldest taken at
 * *from (CLOCK_REALTIME; zero when none), *bytes of memory.
 */
void stacks_history_span(struct target *t, size_t *samples,
			 struct timespec *from, size_t *bytes);
void stacks_release(struct stacks *s);

/*
 * The per-dump symbolizing budget (default 500 ms) and the bytes of
 * samples one user's targets keep together (default 256 MiB), root's
 * included: each target keeps its share of them, at least its newest
 * sample while the user's total allows, and a dump that cannot be kept
 * fails with STACKS_EHISTORY.
 */
void stacks_set_limits(struct stacks *s, int symbolize_budget_ms,
		       size_t max_history_bytes);

/*
 * The bytes that one user's perf maps may take together (default 128
 * MiB, root's included), a map shared by several targets counted once. A
 * map that does not fit is not used: its dump says so (jit_map_refused)
 * and its JIT frames stay unnamed.
 */
#define STACKS_DEFAULT_JIT_BYTES ((size_t)128 << 20)
void stacks_set_jit_limit(struct stacks *s, size_t max_jit_bytes);

/* The bytes of samples uid keeps now. */
size_t stacks_use_of(struct stacks *s, uid_t uid);

/*
 * True when one symbolization has been going on for longer than limit_ns
 * (far past its budget: a lookup is stuck), for the watchdog.
 */
bool stacks_sym_stuck(struct stacks *s, uint64_t now_ns, uint64_t limit_ns);

/*
 * stacks_get() of every target of ts (n of them) at once, under one
 * deadline of timeout_ms (plus the agents' grace) for them all: silent
 * agents cost that deadline once, not once each. rcs[i] and sds[i] are
 * target i's result (sds[i] NULL unless rcs[i] is 0). A target not yet
 * asked when the deadline passes gets -ETIMEDOUT without being signalled.
 */
void stacks_get_many(struct stacks *s, struct target **ts, size_t n,
		     const struct asker *who, int timeout_ms,
		     struct sdump **sds, int *rcs);

/*
 * Dumps t for who (ptracer.h) with the given deadline: raw dump from the
 * agent (or in-process for the daemon itself), symbolized when symbols is
 * true, grouped. Returns 0 with *out owned by the caller, or the error of
 * target_dump_raw(). Blocks up to the deadline.
 */
int stacks_dump(struct stacks *s, struct target *t, const struct asker *who,
		int timeout_ms, bool symbols, struct sw_dump **out);

/*
 * stacks_dump() keeping max_frames frames per thread (0: as many as
 * there are, up to SW_MAX_FRAMES_HARD), a thread with more marked
 * SW_TF_TRUNCATED. A thread read by the agent's handler has at most
 * SW_MAX_FRAMES (its slot). Never cached nor kept in the history: what
 * the watchdog and the diff compare is the usual depth. It takes its
 * turn as every dump of t does (one at a time, at most --max-dump-rate a
 * second), waiting for it within timeout_ms: -ETIMEDOUT when it does
 * not come. Blocks.
 */
int stacks_dump_frames(struct stacks *s, struct target *t,
		       const struct asker *who, int timeout_ms, bool symbols,
		       unsigned max_frames, struct sw_dump **out);

/*
 * stacks_dump_frames() of ts (n of them), one after the other under one
 * deadline of timeout_ms: sds[i] (an sdump of its own, never cached)
 * and rcs[i] as stacks_get_many() has them, except that sds[i] may hold
 * no dump when rcs[i] is an error.
 */
void stacks_dump_frames_many(struct stacks *s, struct target **ts, size_t n,
			     const struct asker *who, int timeout_ms,
			     bool symbols, unsigned max_frames,
			     struct sdump **sds, int *rcs);

/*
 * The newest dump of t no older than 1/max_dump_rate s: the cached one,
 * the one in flight (waited for, within timeout_ms plus the agent grace),
 * or a fresh one (for who: ptracer.h), which then joins t's history with
 * every thread's unchanged_s set. On success *out holds a reference the caller
 * drops with sdump_put(). Returns the error of the dump otherwise (a failed
 * dump is served again within the same interval, like a good one).
 */
int stacks_get(struct stacks *s, struct target *t, const struct asker *who,
	       int timeout_ms, struct sdump **out);

/*
 * stacks_get() with flags: STACKS_NOWAIT returns -EBUSY at once when a
 * dump of t is in flight (the sampler's way: a worker never waits for a
 * target that is slow to answer, so a stopped process holds at most one
 * worker however often it falls due).
 */
#define STACKS_NOWAIT 0x1
/*
 * STACKS_SAMPLE: a periodic sample's dump (target_dump_raw_sample()):
 * without the kernel path, the threads that have not run since the last
 * sample are not signalled, their stacks reused. A dump served from the
 * cache or one in flight is whatever that one was.
 */
#define STACKS_SAMPLE 0x2
int stacks_get_flags(struct stacks *s, struct target *t,
		     const struct asker *who, int timeout_ms, int flags,
		     struct sdump **out);

/*
 * A private copy of d without symbols (frames of ip, module and offset),
 * grouped by offsets. *out is freed with sw_dump_free().
 */
int stacks_unsymbolized(struct stacks *s, const struct sw_dump *d,
			struct sw_dump **out);

/*
 * The sample of t's history nearest to, and at least, age_s seconds old
 * at the time of now (a reference, or NULL when none is that old).
 */
struct sdump *stacks_sample_before(struct target *t, uint64_t now_ns,
				   double age_s);

/*
 * The samples of t's history taken between from_ns and to_ns (monotonic),
 * oldest first, each with a reference: *out (malloc'd, *n of them; the
 * caller drops each with sdump_put() and frees the array). 0 or -ENOMEM.
 */
int stacks_history(struct target *t, uint64_t from_ns, uint64_t to_ns,
		   struct sdump ***out, size_t *n);

/* A stuck thread: index into sd->d->threads, and why. */
struct stuck {
	size_t thread;
	const char *reason; /* "spinning", "blocked-in-kernel", "deadlock" */
};

/*
 * The threads of t's newest sample that are stuck: stack unchanged for at
 * least stuck_after seconds and either spinning (state R, and since the
 * newest sample at least stuck_after old that had the same stack it
 * wanted the CPU most of the time: spin.h) or blocked in the kernel
 * (state D), and at once the threads of a cycle of lock waits
 * (render/locks.h). Our own threads never are: none of the daemon's, nor
 * the agent's thread in its process. *sd gets a reference to that sample
 * (NULL when t has none) and *out a malloc'd array of n entries. Returns
 * 0 or -ENOMEM.
 */
int stacks_stuck(struct stacks *s, struct target *t, struct sdump **sd,
		 struct stuck **out, size_t *n);

/*
 * True when thread a of da and thread b of db have the same stack by the
 * rule of INTERFACE.md (both not ok counts as the same: no stack).
 */
bool stacks_same_thread_stack(const struct sw_dump *da,
			      const struct sw_thread *a,
			      const struct sw_dump *db,
			      const struct sw_thread *b);

/* Indices of d's threads sorted by tid (malloc'd); NULL on no memory. */
size_t *stacks_index_by_tid(const struct sw_dump *d);

/* The thread with tid in d through by_tid (indices sorted by tid), or NULL. */
const struct sw_thread *stacks_find_tid(const struct sw_dump *d,
					const size_t *by_tid, pid_t tid);

/* Symbol cache counters (taken under the lock). */
void stacks_sym_stats(struct stacks *s, uint64_t *hits, uint64_t *misses);

#endif /* SWD_STACKS_H */
