/*
 * perfsample.h - reads a thread that is on a CPU without stopping it:
 * one perf sample (registers and the top of its user stack) taken by the
 * kernel while the thread runs.
 */
#ifndef SW_PERFSAMPLE_H
#define SW_PERFSAMPLE_H

#include <stdint.h>
#include <sys/types.h>

#include "snapshot/snapshot.h"

/*
 * Samples thread tid of pid once it has run a few microseconds, waiting
 * until deadline_ns (CLOCK_MONOTONIC) at most. Fills t's registers, sp,
 * stack copy (at most 64 KiB: the rest is cut), captured_ns, method and
 * status. Returns 0; -EAGAIN when no sample came (the thread did not run:
 * it is blocked now, so the kernel read can take it), -ESRCH when it
 * exited, or another negative errno (perf_event_open refused).
 */
int perf_sample_thread(pid_t pid, pid_t tid, uint64_t deadline_ns,
		       struct snap_thread *t);

/*
 * Whether this process may take such samples (of its own thread, as a
 * check): 0, or a negative errno with a sentence in why.
 */
int perf_sample_check(char *why, size_t size);

#endif /* SW_PERFSAMPLE_H */
