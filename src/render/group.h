/*
 * group.h - gathers threads with the same stack into groups.
 *
 * Two threads have the same stack when their frames match one for one:
 * same module and function, and the same file:line where both have one
 * (the raw offset where a frame has no symbol), inlined frames included.
 * Offsets within one source line do not split a group.
 */
#ifndef SW_GROUP_H
#define SW_GROUP_H

#include <stdbool.h>

#include "model/dump.h"

/*
 * Rebuilds d->groups from the frames of every thread with status ok:
 * sorted by count, largest first (ties: the group whose smallest tid is
 * lower first), tids ascending, every ok thread in exactly one group and
 * threads[i].group set (-1 for threads that are not ok). Returns 0 or
 * -ENOMEM (then d has no groups).
 */
int group_dump(struct sw_dump *d);

/* True when two frame arrays are the same stack by the rule above. */
bool group_same_stack(const struct sw_dump *da, const struct sw_thread *a,
		      const struct sw_dump *db, const struct sw_thread *b);

/*
 * Hashes for telling stacks apart across dumps: each module's (its
 * build-id and path; malloc'd, NULL on no memory), then a stack's, equal
 * for two stacks that group_same_stack() finds the same.
 */
uint64_t *group_module_hashes(const struct sw_dump *d);
uint64_t group_stack_hash(const uint64_t *modhash, size_t nmodules,
			  const struct sw_thread *t);

#endif /* SW_GROUP_H */
