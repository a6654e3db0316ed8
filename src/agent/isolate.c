/*
 * isolate.c - calls during which the agent's thread steps aside.
 *
 * Two kinds of call notice that the agent added a thread to the program:
 *
 * - unshare() of a user namespace (or of the thread group's memory or
 *   signal handlers) and setns() into a user or mount namespace work only
 *   in a process of one thread: with ours they fail with EINVAL, and
 *   sandboxes and container runtimes fork and do exactly this.
 * - glibc's set*id() and setgroups() change every thread's credentials at
 *   once, asking each thread to make the same call; our thread does not
 *   have the per-thread capabilities the program gave its own thread
 *   (capset after PR_SET_KEEPCAPS, as setpriv and libcap-ng do), fails,
 *   and glibc aborts the process rather than leave it half changed.
 *
 * So each of them runs with the agent thread stopped (agent_pause()) and
 * starts it again afterwards, with the caller's credentials. A dump asked
 * for meanwhile waits for the thread to come back. Calls made by raw
 * system call bypass this; they change only the calling thread anyway.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <grp.h>
#include <sched.h>
#include <unistd.h>

#include "agent.h"
#include "collector/signal/sigctx.h"

/* The next definition of name, that is libc's. NULL when missing. */
static void *next_fn(void *volatile *slot, const char *name)
{
	void *f = *slot;

	if (!f) {
		f = dlsym(RTLD_NEXT, name);
		*slot = f;
	}
	return f;
}

/*
 * Declares our definition of NAME: resolves libc's, stops the agent
 * thread when WHEN (an expression of the arguments) holds, calls it and
 * starts the thread again, errno kept.
 */
#define ISOLATED(ret, name, params, args, when)                                \
	SW_INTERPOSER ret name params /* NOLINT(bugprone-macro-parentheses) */ \
	{                                                                      \
		static void *volatile real_;                                   \
		ret(*f_) params; /* NOLINT(bugprone-macro-parentheses) */      \
		ret rc_;                                                       \
		int err_, pause_ = (when);                                     \
		*(void **)&f_ = next_fn(&real_, #name);                        \
		if (!f_) {                                                     \
			errno = ENOSYS;                                        \
			return -1;                                             \
		}                                                              \
		if (pause_)                                                    \
			agent_pause();                                         \
		rc_ = f_ args;                                                 \
		err_ = errno;                                                  \
		if (pause_)                                                    \
			agent_resume();                                        \
		errno = err_;                                                  \
		return rc_;                                                    \
	}

/* What unshare() refuses to do in a process of several threads. */
#define UNSHARE_ALONE (CLONE_NEWUSER | CLONE_THREAD | CLONE_SIGHAND | CLONE_VM)

ISOLATED(int, unshare, (int flags), (flags), (flags & UNSHARE_ALONE) != 0)
/* Any namespace type: 0 and pidfd sets may mean a user or mount one. */
ISOLATED(int, setns, (int fd, int nstype), (fd, nstype), 1)

ISOLATED(int, setuid, (uid_t uid), (uid), 1)
ISOLATED(int, setgid, (gid_t gid), (gid), 1)
ISOLATED(int, seteuid, (uid_t uid), (uid), 1)
ISOLATED(int, setegid, (gid_t gid), (gid), 1)
ISOLATED(int, setreuid, (uid_t r, uid_t e), (r, e), 1)
ISOLATED(int, setregid, (gid_t r, gid_t e), (r, e), 1)
ISOLATED(int, setresuid, (uid_t r, uid_t e, uid_t s), (r, e, s), 1)
ISOLATED(int, setresgid, (gid_t r, gid_t e, gid_t s), (r, e, s), 1)
ISOLATED(int, setgroups, (size_t n, const gid_t *list), (n, list), 1)
/* glibc's initgroups calls its own setgroups, not ours. */
ISOLATED(int, initgroups, (const char *user, gid_t group), (user, group), 1)
