/*
 * symmemo.h - the symbols of a target's last dumps, by stack: a dump
 * whose every stack and futex word were named before, against the same
 * modules, is named from here, with no parser asked (a warm read of a
 * parked process of a thousand threads would otherwise send them all to
 * a worker and back to learn what it learned the time before).
 *
 * A stack is known by its addresses, its flags and which of them are
 * exact, against a module table that must be the dump's, module for
 * module (path, range, load bias and build-id). Only stacks whose frames
 * lie in modules with a build-id are kept, and nothing of a dump whose
 * symbols were partial: a module is the same file by its build-id, the
 * rule the debug files are found by, so nothing stale is served after a
 * rebuilt library is mapped again. Bounded: past its bounds it starts
 * over. Not thread-safe: the caller serializes (one per target).
 */
#ifndef SWD_SYMMEMO_H
#define SWD_SYMMEMO_H

#include <stddef.h>
#include <stdint.h>

#include "model/dump.h"

#define SYMMEMO_MAX_STACKS 4096
#define SYMMEMO_MAX_BYTES ((size_t)2 << 20)
#define SYMMEMO_MAX_WAITS 1024 /* futex words known to have no name */

struct symmemo;

/*
 * Names d (raw, not symbolized) from *m when everything it needs is
 * there: every thread with status ok by its stack, every futex word a
 * thread waits on, the same modules. Then d is as sym_dump() would leave
 * it (symbolized, frames in its memory, shared by threads of one stack,
 * its lock names), *hits the addresses named, and 1 is returned; 0 and d
 * untouched otherwise; -ENOMEM (d's frames then released).
 */
int symmemo_fill(const struct symmemo *m, struct sw_dump *d, uint64_t *hits);

/*
 * Keeps the stacks of d, just symbolized whole (not partial), in *m
 * (made when NULL; started over when d's modules are not *m's). Out of
 * memory keeps less.
 */
void symmemo_update(struct symmemo **m, const struct sw_dump *d);

/* Stacks kept, and the bytes they take. */
size_t symmemo_stacks(const struct symmemo *m);
size_t symmemo_bytes(const struct symmemo *m);

void symmemo_free(struct symmemo *m);

#endif /* SWD_SYMMEMO_H */
