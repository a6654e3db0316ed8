/*
 * pprof.h - dumps as pprof profiles (the gzip-compressed protobuf that
 * `go tool pprof`, Parca, Grafana Pyroscope and the OpenTelemetry
 * collector read; schema in profile.proto, encoded with protobuf-c).
 *
 * A builder takes stacks one thread at a time with a value per sample
 * type and labels; threads with the same locations and labels become one
 * sample whose values are summed. Strings, functions, mappings and
 * locations are interned, so every id is defined once and nonzero, the
 * string table starts with "" and holds only valid UTF-8 (other bytes
 * become '?').
 *
 * Every frame becomes a location of its module's mapping (path, build-id,
 * address range); inlined frames are extra lines of the location of the
 * frame they are inlined into, innermost first, as the format wants. A
 * frame outside every module gets a mapping of its process named "[jit]"
 * when it has a function (a perf map named it) and "[unknown]" otherwise.
 */
#ifndef SW_PPROF_H
#define SW_PPROF_H

#include <stddef.h>
#include <stdint.h>

#include "model/dump.h"

#define PPROF_MAX_TYPES 4
#define PPROF_MAX_LABELS 8

struct pprof;

/* A sample label: key and value are copied (interned) when added. */
struct pprof_label {
	const char *key;
	const char *str;
};

/*
 * A new builder whose samples carry ntypes values (1 to PPROF_MAX_TYPES),
 * types[i][0] the type and types[i][1] the unit ("wall", "nanoseconds"),
 * with the given period type (same form) and period. NULL on out of
 * memory or bad arguments.
 */
struct pprof *pprof_new(const char *const (*types)[2], size_t ntypes,
			const char *const period_type[2], int64_t period);

/* The sample type readers show first: types[i] of pprof_new(). */
void pprof_set_default_type(struct pprof *p, size_t i);

/* The profile's start (Unix ns) and length (ns). */
void pprof_set_time(struct pprof *p, int64_t time_nanos,
		    int64_t duration_nanos);

/*
 * Adds values (one per type) for the stack of t, a thread of d with
 * frames (t's own, or those of the thread that stands for its group:
 * pass that one as frames_of), with nlabels labels (at most
 * PPROF_MAX_LABELS). Returns 0, -ENOMEM, or SW_ETOOBIG past the
 * builder's bounds (PPROF_MAX_BYTES in pprof.c).
 */
int pprof_add(struct pprof *p, const struct sw_dump *d,
	      const struct sw_thread *frames_of, const int64_t *values,
	      const struct pprof_label *labels, size_t nlabels);

/*
 * Encodes the profile and gzips it: *out (malloc'd, *len bytes) for the
 * caller to free. The builder stays usable (and must still be freed).
 * Returns 0, -ENOMEM or SW_ETOOBIG.
 */
int pprof_finish(struct pprof *p, void **out, size_t *len);

void pprof_free(struct pprof *p);

/* Samples in the builder (for tests and bounds). */
size_t pprof_nsamples(const struct pprof *p);

/*
 * The count profile of n dumps, the way Go writes its goroutine profile:
 * period and sample type (type, "count"), one sample per group of
 * identical stacks with its thread count as value, split further where
 * threads of one group differ in name or state, so that each sample's
 * labels - pid, comm, thread (the thread's name) and state - hold one
 * value each. Encoded as pprof_finish(). Returns 0, -ENOMEM or
 * SW_ETOOBIG.
 */
int render_pprof_count(const struct sw_dump *const *ds, size_t n,
		       const char *type, void **out, size_t *len);

#endif /* SW_PPROF_H */
