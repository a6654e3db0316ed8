/*
 * tcred.h - threads that keep credentials of their own.
 *
 * The kernel decides ptrace access per thread: a server whose threads
 * drop to another user one by one (raw setresuid(2), which changes the
 * calling thread only), or whose one thread keeps root's credentials
 * while the others drop, has threads that its own user may not read.
 * The access rule (access.h) is asked of the process as a whole; this
 * file finds the threads it does not speak for.
 *
 * After each read of a target (registry.h), every thread that ran since
 * the previous read is asked of the kernel under the credentials of the
 * process itself (its procid: effective uid and gid, permitted
 * capabilities): a thread those may not read has credentials the process
 * does not, and is marked SW_TF_OTHER_CREDS. A thread that has not run
 * since (SW_TF_REUSED) cannot have changed its own credentials, and
 * keeps its mark. A requester allowed the process reads every unmarked
 * thread (what the process's credentials may read, so may its); a marked
 * one only when the kernel says so for that thread (access.h).
 *
 * Nothing is asked of a process that no requester bound by the rule may
 * see: not dumpable, of root, or with uids (or gids) that differ among
 * themselves; those are shown to root, the admin group and the token
 * only, who see every thread.
 */
#ifndef SWD_TCRED_H
#define SWD_TCRED_H

#include <sys/types.h>

#include "model/dump.h"
#include "procid.h"

/* The threads of one target found with credentials of their own. */
struct tcred;

/*
 * Marks d's threads (a fresh read of process pid, whose credentials are
 * id) by the rule above, *tc remembering the marks for the next read
 * (allocated on first use; free with tcred_free()). Every mark an agent
 * sent is overwritten. On failure (no memory, the helper gone and /proc
 * unreadable) every thread that could not be told is marked. Blocks for
 * one round trip to the helper at most. Not thread-safe for one *tc: the
 * caller holds the target's lock.
 */
void tcred_mark(struct tcred **tc, const struct procid *id, pid_t pid,
		struct sw_dump *d);

/* Whether any thread of d is marked. */
bool tcred_any(const struct sw_dump *d);

void tcred_free(struct tcred *tc); /* NULL ok */

#endif /* SWD_TCRED_H */
