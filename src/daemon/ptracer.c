/*
 * ptracer.c - the daemon's side of the snapshot helper (ptracer.h):
 * starting it, locking the daemon out of what only the helper may do,
 * taking turns for snapshots, and the requests themselves (helper.c
 * serves them).
 *
 * Turns: the helper takes one snapshot of a user's process at a time, and
 * one more for a requester with priority, so that root and the admin
 * group never wait behind anyone's queue. Requesters without priority
 * wait in one queue per uid, and the queues are served round-robin by
 * uid: a user who asks for a hundred snapshots delays only their own.
 */
#define _GNU_SOURCE
#include "broker.h"
#include "fdmsg.h"
#include "peer.h"
#include "ptracer.h"

#include <errno.h>
#include <grp.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "collector/collect.h"
#include "cond.h"
#include "cores.h"
#include "gate.h"
#include "log.h"
#include "model/clock.h"
#include "model/procfs.h"
#include "modfile.h"
#include "privsep/parsers.h"
#include "privsep/filter.h"
#include "ptracer_msg.h"
#include "symbols/unwind.h"

/*
 * Snapshots in flight at once, and of them for requesters without
 * priority: one uid at most one, so that another user's small snapshot
 * never waits behind one user's snapshot of ten thousand threads; and
 * one slot is left for root, the admin group and the token.
 */
#define SLOTS_ALL 3
#define SLOTS_USERS 2

static _Atomic unsigned long nsnapshots;
static _Atomic unsigned long nkreads;
static int kread_err = 1; /* 1: not asked yet */
static char kread_why[240];
static int perf_err = -EAGAIN;
static char perf_why[160] = "not known";
static int filter_err = -EAGAIN;
static char filter_why[200] = "not known";
static pthread_mutex_t kread_lock = PTHREAD_MUTEX_INITIALIZER;

/* A request for a snapshot waiting for its turn. */
struct turn {
	struct asker who;
	bool granted;
	struct turn *next;
};

static pthread_mutex_t turn_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t turn_cond;
static pthread_once_t turn_once = PTHREAD_ONCE_INIT;
static struct turn *turns; /* waiting, oldest first */
static unsigned busy_all, busy_users;
static uid_t busy_uid[SLOTS_USERS]; /* the first busy_users: whose */
static _Atomic unsigned nwaiting;
static uid_t rr_last; /* the uid whose queue was served last */
static bool rr_started;

unsigned long ptracer_snapshots(void)
{
	return atomic_load(&nsnapshots);
}

unsigned long ptracer_kernel_reads(void)
{
	return atomic_load(&nkreads);
}

unsigned ptracer_waiting(void)
{
	return atomic_load(&nwaiting);
}

pid_t ptracer_pid(void)
{
	pid_t pids[CORES];

	return cores_pids(pids) ? pids[0] : -1;
}

int ptracer_start(bool kernel_reads)
{
	return cores_start(kernel_reads);
}

int ptracer_lockdown(uid_t uid, gid_t gid, char *why, size_t size)
{
	char cwhy[160];
	int rc;

	if (caps_keep(PTRACER_SERVICE_CAPS, cwhy, sizeof(cwhy)) < 0)
		log_warn("cannot give up capabilities: %s", cwhy);
#if defined(__SANITIZE_ADDRESS__)
	snprintf(why, size,
		 "an AddressSanitizer build: its leak checker ptraces the "
		 "process at exit");
	return -ENOSYS;
#endif
	rc = filter_lock_service(uid, gid, why, size);
	/* It denies with EPERM what our handler never calls: our own
	 * threads stay dumpable by signal. */
	if (rc == 0)
		collect_trust_own_seccomp();
	return rc;
}

int ptracer_drop(uid_t uid, gid_t gid, char *why, size_t size)
{
	pid_t pids[CORES];

	if (getuid() != 0 || geteuid() != 0 || !cores_pids(pids))
		return 0;
	/* glibc makes every thread of ours take each of these. */
	if (setgroups(0, NULL) < 0 || setresgid(gid, gid, gid) < 0 ||
	    setresuid(uid, uid, uid) < 0) {
		int rc = -errno;

		snprintf(why, size, "cannot become uid %u: %s", (unsigned)uid,
			 strerror(-rc));
		return rc;
	}
#if defined(__SANITIZE_ADDRESS__)
	/* Its leak checker attaches to us at exit. */
	prctl(PR_SET_DUMPABLE, 1);
#else
	prctl(PR_SET_DUMPABLE, 0);
#endif
	broker_use();
	peer_set_holder(broker_find_holder, broker_holds);
	return 0;
}

void ptracer_stop(void)
{
	cores_stop();
}

static void turn_init(void)
{
	cond_init_monotonic(&turn_cond);
}

/*
 * The next turn of a requester without priority (under turn_lock): the
 * oldest of the uid that follows rr_last among those waiting whose uid
 * has no snapshot in flight, wrapping around. NULL when none may go.
 */
static bool uid_busy(uid_t u)
{
	for (unsigned i = 0; i < busy_users; i++)
		if (busy_uid[i] == u)
			return true;
	return false;
}

static struct turn *next_user_turn(void)
{
	struct turn *after = NULL, *lowest = NULL;

	for (struct turn *t = turns; t; t = t->next) {
		uid_t u = t->who.uid;

		if (t->who.priority || uid_busy(u))
			continue;
		if (rr_started && u > rr_last && (!after || u < after->who.uid))
			after = t;
		if (!lowest || u < lowest->who.uid)
			lowest = t;
	}
	return after ? after : lowest;
}

/* Unlinks t from the waiting list (under turn_lock). */
static void unlink_turn(struct turn *t)
{
	for (struct turn **pp = &turns; *pp; pp = &(*pp)->next) {
		if (*pp == t) {
			*pp = t->next;
			atomic_fetch_sub(&nwaiting, 1);
			return;
		}
	}
}

/* Gives free slots to waiting turns (under turn_lock). */
static void grant(void)
{
	while (busy_all < SLOTS_ALL) {
		struct turn *pick = NULL;

		for (struct turn *t = turns; t && !pick; t = t->next)
			if (t->who.priority)
				pick = t;
		if (!pick && busy_users < SLOTS_USERS) {
			pick = next_user_turn();
			if (pick) {
				rr_last = pick->who.uid;
				rr_started = true;
			}
		}
		if (!pick)
			return;
		unlink_turn(pick);
		pick->granted = true;
		busy_all++;
		if (!pick->who.priority)
			busy_uid[busy_users++] = pick->who.uid;
		pthread_cond_broadcast(&turn_cond);
	}
}

/*
 * Waits for who's turn until deadline_ns (CLOCK_MONOTONIC). 0 once it is
 * granted (end it with end_turn()), -ETIMEDOUT otherwise.
 */
static int take_turn(const struct asker *who, uint64_t deadline_ns)
{
	struct turn me = { .who = *who };
	struct timespec ts = { .tv_sec = (time_t)(deadline_ns / 1000000000ull),
			       .tv_nsec = (long)(deadline_ns % 1000000000ull) };
	struct turn **pp;

	pthread_once(&turn_once, turn_init);
	pthread_mutex_lock(&turn_lock);
	for (pp = &turns; *pp; pp = &(*pp)->next)
		;
	*pp = &me;
	atomic_fetch_add(&nwaiting, 1);
	grant();
	while (!me.granted) {
		if (pthread_cond_timedwait(&turn_cond, &turn_lock, &ts) ==
			    ETIMEDOUT &&
		    !me.granted) {
			unlink_turn(&me);
			pthread_mutex_unlock(&turn_lock);
			return -ETIMEDOUT;
		}
	}
	pthread_mutex_unlock(&turn_lock);
	return 0;
}

static void end_turn(const struct asker *who)
{
	pthread_mutex_lock(&turn_lock);
	busy_all--;
	for (unsigned i = 0; !who->priority && i < busy_users; i++)
		if (busy_uid[i] == who->uid) {
			busy_uid[i] = busy_uid[--busy_users];
			break;
		}
	grant();
	pthread_mutex_unlock(&turn_lock);
}

/*
 * Sends one request (hdr, then len bytes of body) to a core with fd (the
 * answer's socket) and, when not -1, pinned attached.
 */
static int send_request(const struct request *rq, const void *body, size_t len,
			int fd, int pinned)
{
	int fds[2] = { fd, pinned };

	return cores_send(rq, sizeof(*rq), body, len, fds, pinned >= 0 ? 2 : 1);
}

/* What a parser worker unwinding a snapshot of pid is handed. */
struct unwinding {
	pid_t pid;
	int pidfd;
	const struct asker *who;
	bool turn;   /* who's turn still held */
	bool early;  /* read the mappings while the snapshot is taken */
	bool wanted; /* the worker asked for them */
	int maps_rc; /* 1: not read yet */
	struct modfile_maps mm;
};

/*
 * The processes whose last snapshot had something to unwind, by pid
 * (a slot each, the last to claim it): their next one likely has too, so
 * their mappings are read while the helper takes it, not after. A wrong
 * guess costs a read of the mappings, or the wait for one.
 */
#define WANTED_SLOTS 256
static _Atomic pid_t wanted_maps[WANTED_SLOTS];

/* The process's mappings, read once a worker wants them. */
static int unwinding_maps(void *arg, const struct procmaps **pm)
{
	struct unwinding *u = arg;

	u->wanted = true;
	if (u->maps_rc == 1)
		u->maps_rc = modfile_maps_read(u->pid, u->pidfd, &u->mm);
	*pm = &u->mm.pm;
	return u->maps_rc;
}

/* The helper is taking the snapshot: the mappings meanwhile. */
static void unwinding_early(void *arg)
{
	struct unwinding *u = arg;

	if (u->early && u->maps_rc == 1)
		u->maps_rc = modfile_maps_read(u->pid, u->pidfd, &u->mm);
}

/* Opens a module of the snapshotted process from its own mappings. */
static int open_mapped(void *arg, uint64_t start, const char *path)
{
	struct unwinding *u = arg;
	struct sw_module m = { .path = (char *)path, .start = start };
	const struct procmaps *pm;

	if (unwinding_maps(u, &pm) != 0)
		return -ESRCH;
	return modfile_open(&u->mm, &m);
}

/* The snapshot is read: the next requester's turn may come. */
static void snapped(void *arg, int rc)
{
	struct unwinding *u = arg;

	(void)rc;
	if (u->turn)
		end_turn(u->who);
	u->turn = false;
}

static int read_exactly(int fd, void *buf, size_t n, uint64_t deadline_ns);

/*
 * The helper's snapshot of pid, taken in who's turn, unwound into *out by
 * a parser worker: of the process pinned by pidfd (given to the helper;
 * -1: none), or -ESRCH. The core writes the snapshot straight to the
 * worker; the turn ends once it is read.
 */
static int snapshot_unwound(pid_t pid, int pidfd, const struct asker *who,
			    uint64_t deadline_ns, uint32_t flags,
			    const struct ptracer_same *same, size_t nsame,
			    unsigned max_frames, struct sw_dump **out,
			    pid_t *tracer)
{
	struct request_same *body = NULL;
	struct request rq = { .magic = PTRACER_MAGIC,
			      .kind = REQ_SNAPSHOT,
			      .pid = pid,
			      .flags = flags,
			      .deadline_ns = deadline_ns };
	struct unwinding u = {
		.pid = pid, .pidfd = pidfd, .who = who, .maps_rc = 1
	};
	struct parse_files files = { .arg = &u,
				     .maps = unwinding_maps,
				     .open_mapped = open_mapped,
				     .snapped = snapped,
				     .early = unwinding_early };
	uint64_t now;
	int sv[2], rc;
	/* Asked under its lock (once; main() may not have yet): whether
	 * the helper will read this process from the kernel. */
	bool kernel = ptracer_kernel_status(NULL, 0) == 0;

	rc = take_turn(who, deadline_ns);
	if (rc < 0)
		return rc;
	u.turn = true;
	now = clock_now_ns();
	gate_hold(pid, "ptrace", who->uid,
		  now < deadline_ns ? (int)((deadline_ns - now) / 1000000u)
				    : 0);
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) {
		rc = -errno;
		goto out;
	}
	if (nsame > PTRACER_SAME_MAX)
		nsame = PTRACER_SAME_MAX;
	if (nsame && kernel)
		body = calloc(nsame, sizeof(*body));
	for (size_t i = 0; body && i < nsame; i++) {
		body[i].tid = same[i].tid;
		body[i].nvcsw = same[i].nvcsw;
		body[i].nivcsw = same[i].nivcsw;
		body[i].wait_addr = same[i].wait_addr;
		body[i].wait_op = same[i].wait_op;
	}
	rq.n = body ? (uint32_t)nsame : 0;
	rc = send_request(&rq, body, rq.n * sizeof(*body), sv[1], pidfd);
	free(body);
	close(sv[1]);
	if (rc == 0 && kernel)
		atomic_fetch_add(&nkreads, 1);
	/* Nothing kept from before: everything is to be unwound. */
	u.early =
		nsame == 0 ||
		atomic_load(&wanted_maps[(unsigned)pid % WANTED_SLOTS]) == pid;
	if (rc == 0) {
		rc = parsers_unwind(sv[0], pid, max_frames,
				    deadline_ns + PTRACER_GRACE_NS, &files, out,
				    tracer);
		if (u.wanted)
			atomic_store(&wanted_maps[(unsigned)pid % WANTED_SLOTS],
				     pid);
		else if (rc == 0)
			atomic_compare_exchange_strong(
				&wanted_maps[(unsigned)pid % WANTED_SLOTS],
				&(pid_t){ pid }, 0);
	} else {
		close(sv[0]);
	}
	if (rc == -EPIPE) /* the helper gave up on it: past the deadline */
		rc = -ETIMEDOUT;
	/* The symbolizer of this dump takes the mappings over. */
	if (u.maps_rc == 0)
		modfile_pass_put(&u.mm);
out:
	if (u.turn)
		end_turn(who);
	return rc;
}

/* ptracer_dump() with the request's flags, keeping max_frames frames. */
static int dump_with(pid_t pid, int pidfd, const struct asker *who,
		     int timeout_ms, uint32_t flags,
		     const struct ptracer_same *same, size_t nsame,
		     unsigned max_frames, struct sw_dump **out, pid_t *tracer)
{
	uint64_t deadline;
	int rc;

	*out = NULL;
	*tracer = 0;
	if (timeout_ms < 1 || timeout_ms > PTRACER_MAX_MS)
		return -EINVAL;
	deadline = clock_now_ns() + (uint64_t)timeout_ms * 1000000ull;
	rc = snapshot_unwound(pid, pidfd, who, deadline, flags, same, nsame,
			      max_frames, out, tracer);
	/* The worker died on a file of the process, refused from now on,
	 * or it died before it could say (killed): once more, while there
	 * is time. */
	if ((rc == PARSERS_EAGAIN || rc == PARSERS_EFAILED) &&
	    clock_now_ns() < deadline)
		rc = snapshot_unwound(pid, pidfd, who, deadline, flags, same,
				      nsame, max_frames, out, tracer);
	if (rc == 0)
		atomic_fetch_add(&nsnapshots, 1);
	/* Read here: the worker may open nothing. */
	if (rc == 0 && !(*out)->cmdline)
		procfs_read_cmdline(pid, &(*out)->cmdline);
	if (rc == 0 && (*out)->pid != pid) {
		sw_dump_free(*out);
		*out = NULL;
		rc = SW_EFORMAT;
	}
	return rc;
}

int ptracer_dump(pid_t pid, int pidfd, const struct asker *who, int timeout_ms,
		 struct sw_dump **out, pid_t *tracer)
{
	return dump_with(pid, pidfd, who, timeout_ms, 0, NULL, 0, 0, out,
			 tracer);
}

int ptracer_dump_same(pid_t pid, int pidfd, const struct asker *who,
		      int timeout_ms, bool kernel_only,
		      const struct ptracer_same *same, size_t nsame,
		      struct sw_dump **out, pid_t *tracer)
{
	return ptracer_dump_frames(pid, pidfd, who, timeout_ms, kernel_only,
				   same, nsame, 0, out, tracer);
}

int ptracer_dump_frames(pid_t pid, int pidfd, const struct asker *who,
			int timeout_ms, bool kernel_only,
			const struct ptracer_same *same, size_t nsame,
			unsigned max_frames, struct sw_dump **out,
			pid_t *tracer)
{
	uint32_t flags = kernel_only ? REQF_KERNEL_ONLY : 0;

	*out = NULL;
	*tracer = 0;
	if (kernel_only && ptracer_kernel_status(NULL, 0) != 0)
		return -EOPNOTSUPP;
	if (max_frames > SW_MAX_FRAMES)
		flags |= REQF_DEEP;
	return dump_with(pid, pidfd, who, timeout_ms, flags, same, nsame,
			 max_frames, out, tracer);
}

int ptracer_kernel_dump(pid_t pid, int pidfd, const struct asker *who,
			int timeout_ms, struct sw_dump **out)
{
	pid_t tracer;

	return ptracer_dump_same(pid, pidfd, who, timeout_ms, true, NULL, 0,
				 out, &tracer);
}

int ptracer_kernel_status(char *why, size_t size)
{
	struct request rq = { .magic = PTRACER_MAGIC, .kind = REQ_STATUS };
	struct helper_status hs = { 0 };
	int sv[2], rc;

	pthread_mutex_lock(&kread_lock);
	if (kread_err == 1 && cores_state(NULL, 0) == 2) {
		kread_err = PTRACER_EGONE;
		snprintf(kread_why, sizeof(kread_why),
			 "no snapshot helper runs");
	} else if (kread_err == 1) {
		rc = socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv);
		if (rc == 0) {
			rc = send_request(&rq, NULL, 0, sv[1], -1);
			close(sv[1]);
			if (rc == 0)
				rc = read_exactly(sv[0], &hs, sizeof(hs),
						  clock_now_ns() +
							  PTRACER_GRACE_NS * 5);
			close(sv[0]);
		} else {
			rc = -errno;
		}
		if (rc == 0) {
			hs.why[sizeof(hs.why) - 1] = '\0';
			hs.perf_why[sizeof(hs.perf_why) - 1] = '\0';
			kread_err = hs.kread_err > 0 ? -EINVAL : hs.kread_err;
			snprintf(kread_why, sizeof(kread_why), "%s", hs.why);
			perf_err = hs.perf_err > 0 ? -EINVAL : hs.perf_err;
			snprintf(perf_why, sizeof(perf_why), "%s", hs.perf_why);
			hs.filter_why[sizeof(hs.filter_why) - 1] = '\0';
			filter_err =
				hs.filter_err > 0 ? -EINVAL : hs.filter_err;
			snprintf(filter_why, sizeof(filter_why), "%s",
				 hs.filter_why);
		} else {
			kread_err = rc;
			snprintf(kread_why, sizeof(kread_why),
				 "the snapshot helper did not say: %s",
				 sw_strerror(rc));
		}
	}
	rc = kread_err;
	if (why && size)
		snprintf(why, size, "%s", kread_why);
	pthread_mutex_unlock(&kread_lock);
	return rc;
}

int ptracer_filter_status(char *why, size_t size)
{
	int rc;

	ptracer_kernel_status(NULL, 0); /* asks the helper once */
	pthread_mutex_lock(&kread_lock);
	rc = filter_err;
	if (why && size)
		snprintf(why, size, "%s", filter_why);
	pthread_mutex_unlock(&kread_lock);
	return rc;
}

int ptracer_perf_status(char *why, size_t size)
{
	int rc;

	ptracer_kernel_status(NULL, 0); /* asks the helper once */
	pthread_mutex_lock(&kread_lock);
	rc = perf_err;
	if (why && size)
		snprintf(why, size, "%s", perf_why);
	pthread_mutex_unlock(&kread_lock);
	return rc;
}

int ptracer_spawn_worker(uid_t uid, gid_t gid, int sock, pid_t *pid, int *pidfd)
{
	struct request rq = { .magic = PTRACER_MAGIC,
			      .kind = REQ_WORKER,
			      .uid = uid,
			      .gid = gid };
	struct worker_started ws = { 0, 0 };
	ssize_t n = -1;
	int sv[2], rc;

	*pid = 0;
	*pidfd = -1;
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
		return -errno;
	rc = send_request(&rq, NULL, 0, sv[1], sock);
	close(sv[1]);
	if (rc == 0)
		n = fdmsg_recv(sv[0], &ws, sizeof(ws),
			       clock_now_ns() + 5 * PTRACER_GRACE_NS, pidfd);
	close(sv[0]);
	if (rc == 0 && n != (ssize_t)sizeof(ws))
		rc = n < 0 ? (int)n : SW_EFORMAT;
	if (rc == 0 && (ws.pid <= 0 || *pidfd < 0))
		rc = ws.err < 0 ? ws.err : SW_EFORMAT;
	if (rc < 0 && *pidfd >= 0) {
		close(*pidfd);
		*pidfd = -1;
	}
	if (rc == 0)
		*pid = ws.pid;
	return rc;
}

/* Reads exactly n bytes from fd before deadline_ns. 0 or -errno. */
static int read_exactly(int fd, void *buf, size_t n, uint64_t deadline_ns)
{
	uint8_t *p = buf;

	while (n > 0) {
		struct pollfd pf = { .fd = fd, .events = POLLIN };
		uint64_t now = clock_now_ns();
		ssize_t r;

		if (now >= deadline_ns)
			return -ETIMEDOUT;
		r = poll(&pf, 1, (int)((deadline_ns - now) / 1000000u) + 1);
		if (r < 0 && errno != EINTR)
			return -errno;
		if (r <= 0)
			continue;
		r = read(fd, p, n);
		if (r < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (r <= 0)
			return r < 0 ? -errno : -EPIPE;
		p += r;
		n -= (size_t)r;
	}
	return 0;
}

#define CHECK_TIMEOUT_NS 2000000000ull

/* ptracer_check() of at most PTRACER_CHECK_MAX tasks: one round trip. */
static int check_batch(const struct ptracer_cred *cred,
		       const struct ptracer_task *tasks, size_t n, bool *ok)
{
	struct request rq = { .magic = PTRACER_MAGIC,
			      .kind = REQ_CHECK,
			      .n = (uint32_t)n,
			      .uid = cred->uid,
			      .gid = cred->gid,
			      .caps = cred->caps };
	struct request_task *body;
	uint8_t *answer;
	int sv[2], rc;

	for (size_t i = 0; i < n; i++)
		ok[i] = false;
	if (n == 0)
		return 0;
	if (n > PTRACER_CHECK_MAX)
		return -E2BIG;
	body = calloc(n, sizeof(*body));
	answer = calloc(n, 1);
	if (!body || !answer) {
		free(body);
		free(answer);
		return -ENOMEM;
	}
	for (size_t i = 0; i < n; i++) {
		body[i].pid = tasks[i].pid;
		body[i].tid = tasks[i].tid;
	}
	rq.deadline_ns = clock_now_ns() + CHECK_TIMEOUT_NS;
	rc = socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0 ? -errno
									: 0;
	if (rc == 0) {
		rc = send_request(&rq, body, n * sizeof(*body), sv[1], -1);
		close(sv[1]);
		if (rc == 0)
			rc = read_exactly(sv[0], answer, n, rq.deadline_ns);
		close(sv[0]);
	}
	if (rc == -EPIPE)
		rc = PTRACER_EGONE;
	for (size_t i = 0; rc == 0 && i < n; i++)
		ok[i] = answer[i] == 1;
	free(body);
	free(answer);
	return rc;
}

int ptracer_check(const struct ptracer_cred *cred,
		  const struct ptracer_task *tasks, size_t n, bool *ok)
{
	int rc = 0;

	for (size_t i = 0; i < n; i++)
		ok[i] = false;
	for (size_t i = 0; rc == 0 && i < n; i += PTRACER_CHECK_MAX)
		rc = check_batch(cred, tasks + i,
				 n - i < PTRACER_CHECK_MAX ? n - i
							   : PTRACER_CHECK_MAX,
				 ok + i);
	if (rc != 0)
		for (size_t i = 0; i < n; i++)
			ok[i] = false;
	return rc;
}
