/*
 * ksnap.h - snapshots that read blocked threads from the kernel.
 */
#ifndef SW_KSNAP_H
#define SW_KSNAP_H

#include "kread/kread.h"
#include "snapshot/snapshot.h"

/*
 * snap_take_with() for pid, its blocked threads read through k (buffer
 * slot, as kread_process()) first: those carry SNAP_M_KERNEL. With k
 * NULL, or when the kernel read fails as a whole, it is a plain
 * snap_take_with(). flags as snap_take_with()'s; stats may be NULL.
 */
int ksnap_take(struct kread *k, int slot, pid_t pid, int timeout_ms,
	       unsigned flags, struct snap **out, struct kread_stats *stats);

/*
 * ksnap_take() that copies nothing of the threads in same (sorted by
 * tid) that have not run since (kread_process_same()): those come with
 * reused set, and with the futex wait given in same, if any.
 */
int ksnap_take_same(struct kread *k, int slot, pid_t pid, int timeout_ms,
		    unsigned flags, const struct kread_expect *same,
		    size_t nsame, struct snap **out, struct kread_stats *stats);

#endif /* SW_KSNAP_H */
