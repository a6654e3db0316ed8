/*
 * access.h - who may see what: the daemon runs as root, and shows a
 * requester no more than the kernel would let it read with gdb or
 * eu-stack (INTERFACE.md, "Who may see what").
 *
 * A requester sees everything when it is root, is in the admin group, or
 * presented the bearer token. Anyone else sees a process exactly when the
 * kernel's ptrace read rule (PTRACE_MODE_READ_FSCREDS: uids and gids,
 * capabilities, dumpable, namespaces, security modules) lets a process
 * with the requester's credentials read it: the snapshot helper asks the
 * kernel under those credentials (ptracer_check()). Without the helper,
 * a stricter rule of our own stands in: all of the process's uids the
 * requester's, all of its gids the requester's gid, no capability the
 * requester lacks, and dumpable. Anyone the kernel cannot name (peer.h)
 * sees no process.
 *
 * A target is bound to what its process was when it was first met
 * (procid.h): a process that ran another program or changed its
 * credentials since is not that target any more, for anyone. So the rule
 * is checked, and the target checked unchanged, before a read and again
 * after it (registry.h), and what a target's history holds is always
 * what the process was when the rule allowed it.
 *
 * An invisible process is absent from every list and not found by pid.
 */
#ifndef SWD_ACCESS_H
#define SWD_ACCESS_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "peer.h"
#include "ptracer.h"
#include "history.h"
#include "registry.h"

struct access {
	struct peer peer;
	bool all; /* root, the admin group or the token */
	/* CAP_SYS_ADMIN over the host, or the admin group: the kernel's
	 * own stacks of threads (/proc/PID/task/TID/stack). */
	bool kernel_stacks;
	struct asker who; /* whom reads are for (ptracer.h) */
};

/*
 * Who p is allowed to be: token says it presented the configured bearer
 * token; admin_gid is the admin group's gid, or (gid_t)-1 for none.
 */
void access_init(struct access *a, const struct peer *p, bool token,
		 gid_t admin_gid);

/*
 * Whether a may read the kernel's stacks of threads: the kernel gives
 * /proc/PID/task/TID/stack to CAP_SYS_ADMIN only, and so do we, and to
 * the admin group. Everyone else gets the wait channel's one name.
 */
bool access_kernel_stacks(const struct access *a);

/*
 * Whether a may see t now: t's process unchanged (else t is forgotten)
 * and the rule above. Reads /proc and asks the helper; blocks briefly.
 */
bool access_sees(const struct access *a, struct target *t);

/*
 * access_sees() of each of ts (n of them) at once, into ok[i]: one round
 * trip to the helper for all of them.
 */
void access_sees_all(const struct access *a, struct target **ts, size_t n,
		     bool *ok);

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

/* access_sees_pid() of each of pids (n of them) at once, into ok[i]. */
void access_sees_pids(const struct access *a, const pid_t *pids, size_t n,
		      bool *ok);

/*
 * Any process a may see, with the agent or without (then a ptrace entry,
 * registry_get_process()). A process a may not see is refused before any
 * entry is made, so nothing is ever stopped for it. NULL when absent or
 * hidden.
 */
struct target *access_get_process(struct registry *reg, const struct access *a,
				  pid_t pid);

/*
 * Why pid is not found for a, into buf (size bytes), for a 404: "no
 * process N" when a may see every process (then saying so gives nothing
 * away) and there is no process pid; otherwise the one sentence "pid N is
 * not a process you may see", for a process a may not see and for none
 * at all alike. Reads /proc. Returns buf.
 */
const char *access_unseen_why(const struct access *a, pid_t pid, char *buf,
			      size_t size);

/*
 * Threads: the rule above is asked of a process as a whole, by one of
 * its threads; a thread that keeps credentials of its own (tcred.h,
 * marked SW_TF_OTHER_CREDS) is read by a only when the kernel's rule
 * lets a read that thread itself. past says that the dump is not the
 * target's read of now but a sample of its history, taken when the
 * thread's credentials were what they were then: a marked thread of it
 * is read only by those who see everything.
 */

/*
 * What of sd a may read: sd itself (a new reference) when a reads all of
 * it, else a private copy (grouped anew) without the threads it may not
 * read (their number in hidden_threads), and without the symbols and
 * lines of modules whose file a may not read (the process may have
 * mapped it before it dropped its privileges: the symbol table and debug
 * information were never in its memory). NULL on no memory. One round
 * trip to the helper for the marked threads, and a look at the process's
 * mappings, at most.
 */
struct sdump *access_view(const struct access *a, struct sdump *sd, bool past);

#endif /* SWD_ACCESS_H */
