/*
 * kept.h - what the last read of a target found of each thread that was
 * read from the kernel: its switch counts and its unwound addresses.
 * The next read does not copy a thread that has not run since (same
 * counts, still blocked); its stack is the one kept here.
 */
#ifndef SWD_KEPT_H
#define SWD_KEPT_H

#include <stddef.h>

#include "model/dump.h"
#include "ptracer.h"

/*
 * The most addresses kept for one target (512 KiB of them): a process
 * with more is read whole each time, rather than cost the daemon a
 * second copy of its stacks beside its history.
 */
#define KEPT_MAX_ADDRS 65536

struct kept;

/*
 * The threads of k to offer the helper as read before (*out, n of
 * them, malloc'd; NULL and 0 when none), sorted by tid. A thread caught
 * in a futex wait goes with its wait: the lock word it waits on may
 * change without it, so the helper reads that word again.
 */
int kept_offer(const struct kept *k, struct ptracer_same **out, size_t *n);

/*
 * Puts back into d the addresses of each thread marked SW_TF_REUSED
 * from k; one that k does not have (it should) becomes an error.
 * Returns the number of threads put back.
 */
size_t kept_fill(const struct kept *k, struct sw_dump *d);

/*
 * Replaces *k with what d read from the kernel. On out of memory *k is
 * emptied: the next read copies every thread again.
 */
void kept_update(struct kept **k, const struct sw_dump *d);

void kept_free(struct kept *k);

#endif /* SWD_KEPT_H */
