/*
 * access.h - who may see what: the daemon runs as root, and shows a
 * requester no more than the kernel's ptrace read rules would let it see
 * with gdb or eu-stack (INTERFACE.md, "Who may see what").
 *
 * A requester sees a target when it is root, is in the admin group,
 * presented the bearer token, or has the target's uid (its real,
 * effective and saved uids all the requester's) and the target is
 * dumpable. Anyone the kernel cannot name (peer.h) sees no target.
 * An invisible target is absent from every list and not found by pid.
 */
#ifndef SWD_ACCESS_H
#define SWD_ACCESS_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "peer.h"
#include "registry.h"

struct access {
	struct peer peer;
	bool all; /* root, the admin group or the token */
};

/*
 * Who p is allowed to be: token says it presented the configured bearer
 * token; admin_gid is the admin group's gid, or (gid_t)-1 for none.
 */
void access_init(struct access *a, const struct peer *p, bool token,
		 gid_t admin_gid);

/* Whether a may see t. Reads /proc for t's uids; blocks briefly. */
bool access_sees(const struct access *a, const struct target *t);

/*
 * registry_list() of what a may see: every live target it may see, each
 * with a reference, sorted by pid. Release with registry_put_all().
 */
int access_list(struct registry *reg, const struct access *a,
		struct target ***out, size_t *n);

/* registry_get() of a target a may see; NULL when absent or hidden. */
struct target *access_get(struct registry *reg, const struct access *a,
			  pid_t pid);

/* Whether a may see the process pid, agent or not. Reads /proc. */
bool access_sees_pid(const struct access *a, pid_t pid);

/*
 * Any process a may see, with the agent or without (then a ptrace entry,
 * registry_get_process()). A process a may not see is refused before any
 * entry is made, so nothing is ever stopped for it. NULL when absent or
 * hidden.
 */
struct target *access_get_process(struct registry *reg, const struct access *a,
				  pid_t pid);

#endif /* SWD_ACCESS_H */
