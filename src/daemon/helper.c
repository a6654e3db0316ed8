/*
 * helper.c - the snapshot helper process (ptracer.h): stackwatchd
 * re-executed with --snapshot-helper, the one process of the daemon that
 * may ptrace and take other credentials.
 *
 * One thread, one loop: it reads requests (ptracer_msg.h) from the
 * daemon, takes each snapshot in a child of its own (so that every tracee
 * is released when that child exits, even by SIGKILL), watches its
 * children's deadlines, and answers access checks at once, between them,
 * under the requester's credentials. It parses nothing but its requests.
 *
 * Two helpers run, each the keeper of the other (cores.h): when its peer
 * dies, a helper starts a new one from its own executable (at once, then
 * with a backoff while they keep dying) and hands the new one's control
 * socket to the daemon. A helper ends when the daemon does: its control
 * socket closes.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "broker.h"
#include "fdmsg.h"
#include "kread/ksnap.h"
#include "kread/perfsample.h"
#include "model/procfs.h"
#include "privsep/filter.h"
#include "privsep/worker.h"
#include "log.h"
#include "model/clock.h"
#include "ptracer_msg.h"

#define MAX_CHECK                 \
	(sizeof(struct request) + \
	 PTRACER_CHECK_MAX * sizeof(struct request_task))
#define MAX_SAME                  \
	(sizeof(struct request) + \
	 PTRACER_SAME_MAX * sizeof(struct request_same))
#define MAX_REQUEST (MAX_CHECK > MAX_SAME ? MAX_CHECK : MAX_SAME)

struct child {
	pid_t pid;	/* 0: a free entry */
	uint64_t until; /* CLOCK_MONOTONIC: killed past it */
};

static struct child children[PTRACER_MAX_CHILDREN];

#define SLOT_WAIT_MS 200 /* for a child to exit, before saying busy */

/* The kernel reader, loaded once; each child reads in its own slot. */
static struct kread *kr;
static struct helper_status kr_status;

/*
 * The peer this helper keeps: its pidfd (-1: none known, or gone), and
 * when to start a new one when it is gone (0: not due).
 */
static int peer_pidfd = -1;
static uint64_t respawn_at_ns;
static uint64_t peer_started_ns; /* 0: the daemon started it */
static unsigned peer_failures;	 /* quick deaths in a row */
static int exe_fd = -1;		 /* our own program, O_PATH */
static bool kernel_reads_on;
/* For the test suite: a pause before each restart, so that the time in
 * between can be looked at ($STACKWATCH_TEST_RESPAWN_MS). */
static uint64_t respawn_test_ms;

/* A peer that lived less than this died at start: back off. */
#define PEER_QUICK_NS (10ull * 1000000000ull)
#define PEER_BACKOFF_MAX_MS 10000

/*
 * Receives one request into buf (MAX_REQUEST bytes). Returns 1 with the
 * request (*len bytes), *answer_fd and, for a snapshot, *pinned (the process's
 * pidfd, or -1), 0 for a malformed one (skipped), -1 when the daemon is gone.
 */
static int recv_request(int fd, uint8_t *buf, size_t *len, int *answer_fd,
			int *pinned)
{
	char ctrl[CMSG_SPACE(sizeof(int)) * 4];
	struct iovec io = { buf, MAX_REQUEST };
	struct msghdr mh = { .msg_iov = &io,
			     .msg_iovlen = 1,
			     .msg_control = ctrl,
			     .msg_controllen = sizeof(ctrl) };
	struct request rq;
	int fds[2];
	ssize_t n;

	*answer_fd = -1;
	*pinned = -1;
	do
		n = recvmsg(fd, &mh, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
	while (n < 0 && errno == EINTR);
	if (n < 0 && errno == EAGAIN)
		return 0;
	if (n <= 0)
		return -1; /* the daemon is gone */
	fdmsg_take_fds(&mh, fds, 2);
	*answer_fd = fds[0];
	*pinned = fds[1];
	memset(&rq, 0, sizeof(rq));
	if (n >= (ssize_t)sizeof(rq))
		memcpy(&rq, buf, sizeof(rq));
	if (n < (ssize_t)sizeof(rq) ||
	    (mh.msg_flags & (MSG_CTRUNC | MSG_TRUNC)) ||
	    rq.magic != PTRACER_MAGIC || *answer_fd < 0 ||
	    (rq.kind == REQ_SNAPSHOT &&
	     (rq.pid <= 0 || rq.n > PTRACER_SAME_MAX ||
	      (size_t)n != sizeof(rq) + rq.n * sizeof(struct request_same) ||
	      (rq.flags & ~(uint32_t)(REQF_KERNEL_ONLY | REQF_DEEP)))) ||
	    ((rq.kind == REQ_STATUS || rq.kind == REQ_PEER) &&
	     n != (ssize_t)sizeof(rq)) ||
	    (rq.kind == REQ_WORKER &&
	     (n != (ssize_t)sizeof(rq) || *pinned < 0)) ||
	    (rq.kind == REQ_BROKER &&
	     (size_t)n > sizeof(rq) + BROKER_PATH_MAX) ||
	    (rq.kind == REQ_CHECK &&
	     (rq.n > PTRACER_CHECK_MAX ||
	      (size_t)n != sizeof(rq) + rq.n * sizeof(struct request_task))) ||
	    (rq.kind != REQ_SNAPSHOT && rq.kind != REQ_CHECK &&
	     rq.kind != REQ_STATUS && rq.kind != REQ_PEER &&
	     rq.kind != REQ_WORKER && rq.kind != REQ_BROKER)) {
		if (*answer_fd >= 0)
			close(*answer_fd);
		if (*pinned >= 0)
			close(*pinned);
		*answer_fd = -1;
		*pinned = -1;
		return 0; /* malformed: skipped */
	}
	*len = (size_t)n;
	if (rq.kind != REQ_SNAPSHOT && rq.kind != REQ_WORKER && *pinned >= 0) {
		close(*pinned);
		*pinned = -1;
	}
	return 1;
}

/* Whether the asker still waits on the other end of fd. */
static bool asker_waits(int fd)
{
	struct pollfd p = { .fd = fd, .events = 0 };

	return poll(&p, 1, 0) == 0 || !(p.revents & (POLLHUP | POLLERR));
}

/*
 * The snapshot of rq (in a child, in buffer slot slot): blocked threads
 * from the kernel (those in same that did not run since, not even
 * copied), the others by perf or ptrace, or skipped with
 * REQF_KERNEL_ONLY.
 */
static int take(const struct request *rq, const struct request_same *same,
		int slot, int timeout_ms, struct snap **s)
{
	struct kread_expect *e = NULL;
	int r;

	if (kr && rq->n) {
		e = calloc(rq->n, sizeof(*e));
		for (uint32_t i = 0; e && i < rq->n; i++) {
			e[i].tid = same[i].tid;
			e[i].nvcsw = same[i].nvcsw;
			e[i].nivcsw = same[i].nivcsw;
			e[i].wait_addr = same[i].wait_addr;
			e[i].wait_op = same[i].wait_op;
		}
	}
	r = ksnap_take_same(
		kr, slot, rq->pid, timeout_ms,
		((rq->flags & REQF_KERNEL_ONLY) ? SNAP_GIVEN_ONLY : 0) |
			((rq->flags & REQF_DEEP) ? SNAP_DEEP : 0),
		e, e ? rq->n : 0, s, NULL);
	free(e);
	return r;
}

/* Starts the snapshot of rq in a child that exits when done. */
static void start_snapshot(int ctl, const struct request *rq,
			   const struct request_same *same, int answer_fd,
			   int pinned)
{
	uint64_t now = clock_now_ns();
	struct child *slot = NULL;
	pid_t self = getpid(), w;

	if (now >= rq->deadline_ns || !asker_waits(answer_fd))
		return;
	for (size_t i = 0; i < PTRACER_MAX_CHILDREN && !slot; i++)
		if (!children[i].pid)
			slot = &children[i];
	if (!slot) {
		snap_write(answer_fd, -EBUSY, NULL);
		return;
	}
	w = fork();
	if (w < 0) {
		snap_write(answer_fd, -errno, NULL);
		return;
	}
	if (w == 0) {
		struct snap *s = NULL;
		uint64_t left_ms = (rq->deadline_ns - now) / 1000000ull;
		sigset_t none;
		int r;

		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != self)
			_exit(1);
		close(ctl);
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		if (left_ms < 1)
			left_ms = 1;
		if (left_ms > PTRACER_MAX_MS)
			left_ms = PTRACER_MAX_MS;
		/* Room for a thousand threads' records at once: the
		 * snapshot is not held up by the daemon's reading. */
		setsockopt(answer_fd, SOL_SOCKET, SO_SNDBUF, &(int){ 1 << 20 },
			   sizeof(int));
		if (!kr && (rq->flags & REQF_KERNEL_ONLY))
			r = -EOPNOTSUPP;
		else if (pinned >= 0 && !procfs_pidfd_alive(pinned))
			r = -ESRCH; /* its pid may be another's by now */
		else
			r = take(rq, same, (int)(slot - children), (int)left_ms,
				 &s);
		/* Of the process the daemon pinned, or of none. */
		if (r == 0 && snap_keep_pinned(s, rq->pid, pinned) < 0) {
			snap_free(s);
			s = NULL;
			r = -ESRCH;
		}
		snap_write(answer_fd, r, s);
		_exit(0);
	}
	slot->pid = w;
	slot->until = rq->deadline_ns + PTRACER_GRACE_NS;
}

/* Reaps children that exited, and kills those past their deadline. */
static void tend_children(void)
{
	uint64_t now = clock_now_ns();
	pid_t w;
	int st;

	while ((w = waitpid(-1, &st, WNOHANG)) > 0) {
		for (size_t i = 0; i < PTRACER_MAX_CHILDREN; i++)
			if (children[i].pid == w)
				children[i].pid = 0;
		kread_forget(kr, w); /* killed in the middle of a read */
	}
	for (size_t i = 0; i < PTRACER_MAX_CHILDREN; i++)
		if (children[i].pid && now >= children[i].until)
			kill(children[i].pid, SIGKILL); /* reaped next time */
}

/*
 * With every slot taken, waits a little (SLOT_WAIT_MS at most) for a
 * child to exit: one that has answered is gone in a moment, and the
 * daemon, which has its answer, may ask again before it is reaped.
 */
static void wait_for_slot(int sfd)
{
	uint64_t until = clock_now_ns() + SLOT_WAIT_MS * 1000000ull;

	for (;;) {
		struct pollfd p = { .fd = sfd, .events = POLLIN };
		struct signalfd_siginfo si;
		uint64_t now;

		for (size_t i = 0; i < PTRACER_MAX_CHILDREN; i++)
			if (!children[i].pid)
				return;
		now = clock_now_ns();
		if (now >= until)
			return;
		if (poll(&p, 1, (int)((until - now) / 1000000u) + 1) < 0 &&
		    errno != EINTR)
			return;
		while (read(sfd, &si, sizeof(si)) == (ssize_t)sizeof(si))
			;
		tend_children();
	}
}

/*
 * Milliseconds until the next child's deadline or the peer's restart; -1
 * when none is due.
 */
static int next_deadline_ms(void)
{
	uint64_t now = clock_now_ns(), first = respawn_at_ns;

	for (size_t i = 0; i < PTRACER_MAX_CHILDREN; i++)
		if (children[i].pid && (!first || children[i].until < first))
			first = children[i].until;
	if (!first)
		return -1;
	return first <= now ? 0 : (int)((first - now) / 1000000u) + 1;
}

/* What the helper's own credentials were: restored after each check. */
struct own_cred {
	uid_t ruid, euid, suid;
	gid_t rgid, egid, sgid;
	struct __user_cap_header_struct hdr;
	struct __user_cap_data_struct caps[2];
};

static int save_cred(struct own_cred *o)
{
	o->hdr.version = _LINUX_CAPABILITY_VERSION_3;
	o->hdr.pid = 0;
	if (getresuid(&o->ruid, &o->euid, &o->suid) < 0 ||
	    getresgid(&o->rgid, &o->egid, &o->sgid) < 0 ||
	    syscall(SYS_capget, &o->hdr, o->caps) != 0)
		return -errno;
	return 0;
}

/*
 * Takes the requester's effective ids and capabilities (as far as ours
 * reach: never more than we hold). The real and saved ids stay ours, so
 * that restore_cred() can come back; nobody can signal or trace us
 * meanwhile (both look at the real and saved ids).
 */
static int assume_cred(const struct own_cred *o, const struct request *rq)
{
	struct __user_cap_header_struct hdr = o->hdr;
	struct __user_cap_data_struct c[2];

	if (setresgid((gid_t)-1, rq->gid, (gid_t)-1) < 0 ||
	    setresuid((uid_t)-1, rq->uid, (uid_t)-1) < 0)
		return -errno;
	memcpy(c, o->caps, sizeof(c));
	c[0].effective = (uint32_t)rq->caps & c[0].permitted;
	c[1].effective = (uint32_t)(rq->caps >> 32) & c[1].permitted;
	if (syscall(SYS_capset, &hdr, c) != 0)
		return -errno;
	return 0;
}

/* Back to our own credentials; a helper that cannot, exits. */
static void restore_cred(const struct own_cred *o)
{
	struct __user_cap_header_struct hdr = o->hdr;
	struct __user_cap_data_struct c[2];

	memcpy(c, o->caps, sizeof(c));
	if (setresuid((uid_t)-1, o->euid, (uid_t)-1) < 0 ||
	    setresgid((gid_t)-1, o->egid, (gid_t)-1) < 0 ||
	    syscall(SYS_capset, &hdr, c) != 0) {
		fprintf(stderr, "stackwatchd: the snapshot helper cannot take "
				"its own credentials back: exiting\n");
		_exit(1);
	}
}

/*
 * The access check (ptracer_check()): each task's ns/mnt link read under
 * the requester's credentials, which the kernel allows exactly when its
 * ptrace read rule does; one byte per task on answer_fd.
 */
static void check(const struct own_cred *o, const struct request *rq,
		  const struct request_task *tasks, int answer_fd)
{
	uint8_t *ok = calloc(rq->n ? rq->n : 1, 1);
	pid_t self = getpid();
	size_t done = 0;

	if (!ok)
		return; /* the daemon sees the socket close: nothing allowed */
	if (assume_cred(o, rq) == 0) {
		for (uint32_t i = 0; i < rq->n; i++) {
			char path[80], link[64];

			/* The kernel lets a process read itself, always. */
			if (tasks[i].pid <= 0 || tasks[i].tid <= 0 ||
			    tasks[i].pid == self)
				continue;
			snprintf(path, sizeof(path), "/proc/%d/task/%d/ns/mnt",
				 (int)tasks[i].pid, (int)tasks[i].tid);
			ok[i] = readlink(path, link, sizeof(link)) > 0;
		}
	}
	restore_cred(o);
	while (done < rq->n) {
		ssize_t w = write(answer_fd, ok + done, rq->n - done);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			break;
		done += (size_t)w;
	}
	free(ok);
}

/*
 * Says once, at start, when snapshots cannot run at real-time priority
 * (snapshot.c): pauses then also hold whatever else the CPU runs.
 */
static void warn_priority(void)
{
	struct sched_param rt = { .sched_priority = 1 }, normal = { 0 };

	if (sched_setscheduler(0, SCHED_FIFO | SCHED_RESET_ON_FORK, &rt) == 0) {
		sched_setscheduler(0, SCHED_OTHER, &normal);
		return;
	}
	log_warn("snapshots run at normal priority (%s: CAP_SYS_NICE or "
		 "RLIMIT_RTPRIO needed); a busy CPU lengthens each thread's "
		 "pause",
		 strerror(errno));
}

/*
 * Loads the kernel reader unless told not to, and keeps why not for
 * REQ_STATUS.
 */
static void start_kread(bool wanted)
{
	memset(&kr_status, 0, sizeof(kr_status));
	if (!wanted) {
		kr_status.kread_err = -ECANCELED;
		kr_status.perf_err = -ECANCELED;
		snprintf(kr_status.why, sizeof(kr_status.why),
			 "turned off (--no-kernel-reads)");
		snprintf(kr_status.perf_why, sizeof(kr_status.perf_why),
			 "turned off (--no-kernel-reads)");
		return;
	}
	kr_status.kread_err =
		kread_open(&kr, kr_status.why, sizeof(kr_status.why));
	kr_status.perf_err = perf_sample_check(kr_status.perf_why,
					       sizeof(kr_status.perf_why));
}

/* The core's own seccomp filter (privsep/filter.h), but in ASan builds. */
static int lock_core(char *why, size_t size)
{
#if defined(__SANITIZE_ADDRESS__)
	snprintf(why, size,
		 "an AddressSanitizer build: its leak checker ptraces the "
		 "process at exit");
	return -ENOSYS;
#else
	return filter_lock_core(exe_fd, why, size);
#endif
}

/*
 * Starts a new peer from our own program, with a new control socket, and
 * hands the daemon that socket's other end and the new peer's pid on ctl.
 * Nothing is said when it cannot: the restart is tried again later.
 */
static void spawn_peer(int ctl)
{
	static char name[] = "stackwatchd", opt[] = "--snapshot-helper",
		    off[] = "--no-kernel-reads", empty[] = "";
	char *argv[] = { name, opt, kernel_reads_on ? NULL : off, NULL };
	struct core_msg m = { .magic = CORE_MSG_MAGIC, .kind = CORE_NEW_PEER };
	char ctrl[CMSG_SPACE(sizeof(int))];
	struct iovec io = { &m, sizeof(m) };
	struct msghdr mh = { .msg_iov = &io,
			     .msg_iovlen = 1,
			     .msg_control = ctrl,
			     .msg_controllen = sizeof(ctrl) };
	struct cmsghdr *c;
	int sv[2];
	pid_t pid;

	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
		return;
	pid = fork();
	if (pid == 0) {
		/* fd 3 without close-on-exec, the daemon's end in its place */
		if (dup2(sv[1], PTRACER_FD) < 0)
			_exit(127);
		syscall(SYS_execveat, exe_fd, empty, argv, environ,
			AT_EMPTY_PATH);
		_exit(127);
	}
	close(sv[1]);
	if (pid < 0) {
		close(sv[0]);
		return;
	}
	m.pid = pid;
	memset(ctrl, 0, sizeof(ctrl));
	c = CMSG_FIRSTHDR(&mh);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(c), &sv[0], sizeof(int));
	/* A daemon that cannot take it closes nothing of ours: the new
	 * peer ends with its control socket, and is started again. */
	(void)!sendmsg(ctl, &mh, MSG_NOSIGNAL);
	close(sv[0]);
	peer_started_ns = clock_now_ns();
	respawn_at_ns = 0;
	/* Kept from now on, before the daemon says so too (REQ_PEER). */
	peer_pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
}

/* The peer is gone: a new one is due, at once or after a backoff. */
static void peer_gone(void)
{
	uint64_t now = clock_now_ns(), ms;

	close(peer_pidfd);
	peer_pidfd = -1;
	if (peer_started_ns && now - peer_started_ns < PEER_QUICK_NS)
		peer_failures++;
	else
		peer_failures = 0;
	ms = peer_failures ? 250ull << (peer_failures - 1) : 0;
	if (ms > PEER_BACKOFF_MAX_MS)
		ms = PEER_BACKOFF_MAX_MS;
	ms += respawn_test_ms;
	respawn_at_ns = now + ms * 1000000ull;
}

/* Takes pidfd as the peer to keep (REQ_PEER). */
static void take_peer(int pidfd)
{
	if (peer_pidfd >= 0)
		close(peer_pidfd);
	peer_pidfd = pidfd;
	respawn_at_ns = 0;
}

/*
 * Starts a parser worker from our own program on sock (REQ_WORKER), as
 * the user the daemon named if we are root, and answers on answer_fd
 * with its pid and pidfd. It is reaped with our other children.
 */
static void spawn_worker(const struct request *rq, int answer_fd, int sock)
{
	static char name[] = "stackwatchd", opt[] = "--parser-worker",
		    empty[] = "";
	char *argv[] = { name, opt, NULL };
	struct worker_started ws = { 0, 0 };
	int pidfd = -1;
	pid_t pid;

	pid = fork();
	if (pid == 0) {
		gid_t gid = (gid_t)rq->gid;

		if (getuid() == 0 && rq->uid != 0 &&
		    (setgroups(1, &gid) < 0 || setresgid(gid, gid, gid) < 0 ||
		     setresuid(rq->uid, rq->uid, rq->uid) < 0))
			_exit(126);
		if (dup2(sock, WORKER_FD) < 0)
			_exit(127);
		close_range(WORKER_FD + 1, ~0u, CLOSE_RANGE_CLOEXEC);
		syscall(SYS_execveat, exe_fd, empty, argv, environ,
			AT_EMPTY_PATH);
		_exit(127);
	}
	if (pid < 0)
		ws.err = -errno;
	else
		ws.pid = pid;
	if (pid > 0)
		pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	(void)fdmsg_send(answer_fd, &ws, sizeof(ws), NULL, 0, pidfd);
	if (pidfd >= 0)
		close(pidfd);
}

int ptracer_main(int fd, bool kernel_reads)
{
	char cwhy[160];
	int type = 0, sfd;
	socklen_t len = sizeof(type);
	struct own_cred own;
	sigset_t chld;
	uint8_t *buf;

	prctl(PR_SET_NAME, "sw-ptrace");
	kernel_reads_on = kernel_reads;
	if (getenv("STACKWATCH_TEST_RESPAWN_MS"))
		respawn_test_ms = strtoull(getenv("STACKWATCH_TEST_RESPAWN_MS"),
					   NULL, 10);
	if (respawn_test_ms > 60000)
		respawn_test_ms = 60000;
	exe_fd = open("/proc/self/exe", O_PATH | O_CLOEXEC);
	if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) != 0 ||
	    type != SOCK_SEQPACKET) {
		fprintf(stderr, "stackwatchd: --snapshot-helper is started by "
				"stackwatchd itself\n");
		return 2;
	}
	if (caps_keep(PTRACER_CORE_CAPS, cwhy, sizeof(cwhy)) < 0)
		fprintf(stderr,
			"stackwatchd: the snapshot helper cannot give up "
			"capabilities: %s\n",
			cwhy);
	warn_priority();
	start_kread(kernel_reads);
	signal(SIGPIPE, SIG_IGN);
	signal(SIGINT, SIG_IGN); /* a ^C of the daemon is the daemon's */
	signal(SIGTERM, SIG_IGN);
	sigemptyset(&chld);
	sigaddset(&chld, SIGCHLD);
	sigprocmask(SIG_BLOCK, &chld, NULL);
	sfd = signalfd(-1, &chld, SFD_CLOEXEC | SFD_NONBLOCK);
	buf = malloc(MAX_REQUEST);
	if (sfd < 0 || !buf || save_cred(&own) < 0) {
		fprintf(stderr,
			"stackwatchd: the snapshot helper cannot "
			"start: %s\n",
			strerror(errno));
		free(buf);
		return 1;
	}
	/* Everything is open that will be: from here on, read only. */
	kr_status.filter_err =
		lock_core(kr_status.filter_why, sizeof(kr_status.filter_why));
	for (;;) {
		struct pollfd p[3] = { { .fd = fd, .events = POLLIN },
				       { .fd = sfd, .events = POLLIN },
				       { .fd = peer_pidfd, .events = POLLIN } };
		struct signalfd_siginfo si;
		struct request rq;
		int answer_fd, pinned, r;
		size_t r_len = 0;

		r = poll(p, peer_pidfd >= 0 ? 3 : 2, next_deadline_ms());
		if (r < 0 && errno != EINTR)
			break;
		while (read(sfd, &si, sizeof(si)) == (ssize_t)sizeof(si))
			;
		tend_children();
		if (peer_pidfd >= 0 && r > 0 && p[2].revents)
			peer_gone();
		if (respawn_at_ns && clock_now_ns() >= respawn_at_ns)
			spawn_peer(fd);
		if (r <= 0 || !(p[0].revents & (POLLIN | POLLHUP | POLLERR)))
			continue;
		r = recv_request(fd, buf, &r_len, &answer_fd, &pinned);
		if (r < 0)
			break;
		if (r == 0)
			continue;
		memcpy(&rq, buf, sizeof(rq));
		if (rq.kind == REQ_SNAPSHOT) {
			wait_for_slot(sfd);
			start_snapshot(
				fd, &rq,
				(const struct request_same *)(buf + sizeof(rq)),
				answer_fd, pinned);
		} else if (rq.kind == REQ_STATUS) {
			(void)!write(answer_fd, &kr_status, sizeof(kr_status));
		} else if (rq.kind == REQ_PEER) {
			take_peer(answer_fd);
			answer_fd = -1; /* kept */
		} else if (rq.kind == REQ_WORKER) {
			spawn_worker(&rq, answer_fd, pinned);
		} else if (rq.kind == REQ_BROKER) {
			broker_serve(&rq, buf + sizeof(rq), r_len - sizeof(rq),
				     answer_fd);
		} else
			check(&own, &rq,
			      (const struct request_task *)(buf + sizeof(rq)),
			      answer_fd);
		if (answer_fd >= 0)
			close(answer_fd);
		if (pinned >= 0)
			close(pinned);
	}
	/* The daemon is gone: so are our children (PR_SET_PDEATHSIG). */
	kread_close(kr);
	free(buf);
	close(sfd);
	return 0;
}
