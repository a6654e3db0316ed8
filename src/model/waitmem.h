/*
 * waitmem.h - the memory around the futex words that threads sleep on,
 * copied from their process without touching it (struct sw_wait).
 */
#ifndef SW_WAITMEM_H
#define SW_WAITMEM_H

#include <sys/types.h>

#include "dump.h"

/*
 * Fills the mem of every thread of d that has a wait: up to
 * SW_WAIT_BEFORE bytes before the futex word and the rest after it, never
 * past the word's own page (mapped, since the kernel took the word), read
 * with process_vm_readv from process pid (our own pid for ourselves:
 * nothing can fault, nothing blocks, no lock is taken). A wait whose
 * memory cannot be read keeps nmem 0. Returns how many were read.
 */
size_t waitmem_read(pid_t pid, struct sw_dump *d);

/*
 * What is copied for w: [*from, *from + *len), at most SW_WAIT_BEFORE
 * bytes before the word and SW_WAIT_MEM in all, inside the word's page.
 */
void waitmem_window(const struct sw_wait *w, uint64_t *from, size_t *len);

/* The same for n waits of process pid. */
size_t waitmem_fill(pid_t pid, struct sw_wait **ws, size_t n);

#endif /* SW_WAITMEM_H */
