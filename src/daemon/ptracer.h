/*
 * ptracer.h - the daemon's snapshot helper: the one process of stackwatchd
 * that may ptrace.
 *
 * A daemon that can stop and read any process is a prize, so that power
 * is kept away from the code that parses HTTP and agent messages, after
 * OpenBSD's privilege separation. At start-up, before any thread exists,
 * the daemon starts a helper (itself, re-executed with
 * --snapshot-helper) and then forbids itself ptrace(2),
 * process_vm_readv(2) and process_vm_writev(2) with a seccomp filter.
 * The helper reads fixed-size requests (a pid the daemon has already
 * authorized, a deadline, and a fresh socket for the answer), takes each
 * snapshot in a short-lived child of its own, so that every tracee is
 * released when that child exits whatever happened, and answers raw
 * copies only (snapshot.h's bytes). It also answers the access check of
 * ptracer_check(), under the requester's credentials, which only it may
 * take. It parses nothing else, and it dies with the daemon.
 */
#ifndef SWD_PTRACER_H
#define SWD_PTRACER_H

#include <stdbool.h>
#include <sys/types.h>

#include "model/dump.h"
#include "snapshot/snapshot.h"

#include "privsep/caps.h"

/*
 * The capabilities each process keeps (what is not here is dropped for
 * good at start, whoever started the daemon): the helper reads other
 * processes (CAP_SYS_PTRACE, CAP_BPF, CAP_PERFMON, at real-time
 * priority: CAP_SYS_NICE), opens what they map (CAP_DAC_READ_SEARCH,
 * CAP_CHECKPOINT_RESTORE), reads their kernel stacks for root and the
 * admin group (CAP_SYS_ADMIN, when it has it: not under the unit) and
 * takes a requester's credentials for the access check (CAP_SETUID,
 * CAP_SETGID); the daemon proper keeps until
 * its sockets are bound (a port below 1024: CAP_NET_BIND_SERVICE) what
 * it read with before (CAP_SYS_PTRACE, CAP_DAC_READ_SEARCH,
 * CAP_CHECKPOINT_RESTORE, CAP_SYS_ADMIN), then gives up root
 * and all of them (ptracer_drop(), CAP_SETUID, CAP_SETGID): from there
 * on a core reads for it (broker.h).
 */
#define PTRACER_CORE_CAPS                                           \
	(CAPS_BIT(19) | CAPS_BIT(2) | CAPS_BIT(40) | CAPS_BIT(23) | \
	 CAPS_BIT(6) | CAPS_BIT(7) | CAPS_BIT(38) | CAPS_BIT(39) |  \
	 CAPS_BIT(21))
#define PTRACER_SERVICE_CAPS                                        \
	(CAPS_BIT(19) | CAPS_BIT(2) | CAPS_BIT(40) | CAPS_BIT(21) | \
	 CAPS_BIT(10) | CAPS_BIT(6) | CAPS_BIT(7))

/* The helper is gone (killed): no snapshot can be taken until restart. */
#define PTRACER_EGONE (-21201)

/*
 * Whom a read is for. Snapshots are shared out among requesters: those
 * with priority (root, the admin group, the token) take a slot of their
 * own and never wait behind anyone's queue; everybody else waits in a
 * queue per uid, served round-robin by uid, one snapshot of a uid at a
 * time and two of different uids at once, so that no user's snapshot
 * waits behind another user's (of ten thousand threads, say). The
 * daemon's own sampling of a process goes in its owner's queue.
 */
struct asker {
	uid_t uid;
	bool priority;
};

/*
 * A requester's credentials as the kernel's ptrace read rule weighs them
 * (PTRACE_MODE_READ_FSCREDS): its effective (file system) uid and gid
 * and its effective capabilities.
 */
struct ptracer_cred {
	uid_t uid;
	gid_t gid;
	uint64_t caps;
};

/* A process to check, and the thread of it to check it by. */
struct ptracer_task {
	pid_t pid;
	pid_t tid;
};

#define PTRACER_CHECK_MAX 4096 /* tasks in one ptracer_check() */

/*
 * Starts the helper from the daemon's own executable. Call it before any
 * thread is started. Returns 0 or a negative errno (the daemon then runs
 * without snapshots and says so).
 */
int ptracer_start(bool kernel_reads);

/*
 * Whether the helper reads blocked threads from the kernel: 0, or why
 * not (a negative errno, and a sentence in why). Asked once, then kept.
 */
int ptracer_kernel_status(char *why, size_t size);

/* Whether the helper's own seccomp filter is in force: 0, or why not (as
 * ptracer_kernel_status()). */
int ptracer_filter_status(char *why, size_t size);

/* Whether it samples running threads of processes without the agent by
 * perf (else they are ptraced): as ptracer_kernel_status(). */
int ptracer_perf_status(char *why, size_t size);

/*
 * Forbids the calling process ptrace, the process_vm_* calls, bpf,
 * perf_event_open and every change of its credentials but to uid and gid
 * from now on (every thread, present and future; privsep/filter.h), and
 * keeps of its capabilities PTRACER_SERVICE_CAPS only: only the helper
 * reads other processes or takes a requester's credentials. Returns 0 or
 * a negative errno with why (size bytes). Builds with AddressSanitizer
 * skip the filter: its leak checker ptraces the process at exit.
 */
int ptracer_lockdown(uid_t uid, gid_t gid, char *why, size_t size);

/*
 * The service gives up root for uid and gid, every thread of it, and so
 * every capability; what it reads of other processes from then on, a
 * core reads for it (broker.h). Not dumpable (so not traceable by its
 * new user's other processes). Nothing to do when it is not root or no
 * core runs. 0 or a negative errno with why.
 */
int ptracer_drop(uid_t uid, gid_t gid, char *why, size_t size);

/*
 * Has a core start a parser worker (privsep/worker.h) on sock, as uid
 * and gid when the core runs as root. 0 with its pid and pidfd (the
 * core reaps it), or a negative errno (PTRACER_EGONE: no core runs).
 */
int ptracer_spawn_worker(uid_t uid, gid_t gid, int sock, pid_t *pid,
			 int *pidfd);

/* Ends the helper (closes its socket and reaps it). */
void ptracer_stop(void);

/*
 * A snapshot of pid through the helper within timeout_ms, for who (see
 * struct asker: the wait for a turn counts in timeout_ms), unwound here
 * (unwind.h) into a raw dump with method "ptrace" (*out). pidfd pins the
 * process: module files are opened from its own mappings. Returns 0, a
 * snapshot error (SNAP_E*, -ESRCH, -EPERM), -ETIMEDOUT, or
 * PTRACER_EGONE; *tracer gets the tracer's pid with SNAP_ETRACED.
 */
int ptracer_dump(pid_t pid, int pidfd, const struct asker *who, int timeout_ms,
		 struct sw_dump **out, pid_t *tracer);

/*
 * ptracer_dump() of the threads the kernel can give (those blocked):
 * the others are in *out with status skipped, nothing stopped or
 * signalled. -EOPNOTSUPP when the helper does not read from the kernel.
 */
int ptracer_kernel_dump(pid_t pid, int pidfd, const struct asker *who,
			int timeout_ms, struct sw_dump **out);

/* A thread read from the kernel before, with its switch counts then. */
struct ptracer_same {
	pid_t tid;
	uint64_t nvcsw;
	uint64_t nivcsw;
	uint64_t wait_addr; /* the futex it waited on, 0: none */
	uint32_t wait_op;
};

/*
 * ptracer_dump() (or ptracer_kernel_dump() with kernel_only) where the
 * threads of same (n of them) that have not run since are not read
 * again: they come in *out with SW_TF_REUSED and no stack, for the
 * caller to put back what it had (when the kernel path is off, every
 * thread is read as ever).
 */
int ptracer_dump_same(pid_t pid, int pidfd, const struct asker *who,
		      int timeout_ms, bool kernel_only,
		      const struct ptracer_same *same, size_t nsame,
		      struct sw_dump **out, pid_t *tracer);

/*
 * ptracer_dump_same() keeping max_frames frames per thread (as struct
 * snap's max_frames: 0 SW_MAX_FRAMES, at most SW_MAX_FRAMES_HARD); past
 * SW_MAX_FRAMES the stacks are copied up to SNAP_STACK_HARD each.
 */
int ptracer_dump_frames(pid_t pid, int pidfd, const struct asker *who,
			int timeout_ms, bool kernel_only,
			const struct ptracer_same *same, size_t nsame,
			unsigned max_frames, struct sw_dump **out,
			pid_t *tracer);

/*
 * Asks the kernel whether a process with credentials cred may read each
 * of tasks (n of them; PTRACER_CHECK_MAX a round trip): the helper takes those
 * credentials and reads each task's /proc/PID/task/TID/ns/mnt link, which
 * the kernel allows exactly under its ptrace read rule (uids and gids,
 * capabilities, dumpable, namespaces, security modules). ok[i] is set for
 * each task it may read. Returns 0, PTRACER_EGONE when there is no
 * helper, -ETIMEDOUT, or another negative errno; then nothing is allowed.
 * Blocks for one round trip to the helper.
 */
int ptracer_check(const struct ptracer_cred *cred,
		  const struct ptracer_task *tasks, size_t n, bool *ok);

/* The helper's side: serves requests on fd until it closes. Exits. */
int ptracer_main(int fd, bool kernel_reads);

/*
 * Snapshots answered by the helper since start, snapshot requests
 * waiting for their turn now, and the helper's pid.
 */
unsigned long ptracer_snapshots(void);
/* Requests that had the helper read a process from the kernel. */
unsigned long ptracer_kernel_reads(void);
unsigned ptracer_waiting(void);
pid_t ptracer_pid(void);

#endif /* SWD_PTRACER_H */
