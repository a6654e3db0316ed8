/*
 * ptracer.c - the snapshot helper and the daemon's side of it
 * (ptracer.h).
 *
 * Requests go over a SOCK_SEQPACKET pair, one message each: the request
 * and, as SCM_RIGHTS, one end of a fresh stream socket that carries that
 * request's answer alone. A late, broken or abandoned answer therefore
 * never mixes with the next one: the daemon just closes its end, and the
 * helper skips a request whose asker is gone before it stops anything.
 */
#define _GNU_SOURCE
#include "ptracer.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
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

#include "log.h"
#include "model/clock.h"
#include "modfile.h"
#include "symbols/unwind.h"

#define PTRACER_MAGIC 0x52545053u      /* "SPTR" */
#define PTRACER_FD 3		       /* the helper's request socket */
#define PTRACER_GRACE_NS 1000000000ull /* answer after the deadline */
#define PTRACER_MAX_MS 60000

struct request {
	uint32_t magic;
	int32_t pid;
	uint64_t deadline_ns; /* CLOCK_MONOTONIC: the host's one clock */
};

static int ctl_fd = -1;
static pid_t helper_pid = -1;
static _Atomic unsigned long nsnapshots;

unsigned long ptracer_snapshots(void)
{
	return atomic_load(&nsnapshots);
}

pid_t ptracer_pid(void)
{
	return helper_pid;
}

int ptracer_start(void)
{
	int sv[2];
	pid_t pid;

	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
		return -errno;
	pid = fork();
	if (pid < 0) {
		int e = errno;

		close(sv[0]);
		close(sv[1]);
		return -e;
	}
	if (pid == 0) {
		static char name[] = "stackwatchd", opt[] = "--snapshot-helper";
		char *argv[] = { name, opt, NULL };

		/* fd 3 without close-on-exec; everything else closes. */
		if (sv[1] == PTRACER_FD) {
			fcntl(PTRACER_FD, F_SETFD, 0);
		} else if (dup2(sv[1], PTRACER_FD) < 0) {
			_exit(127);
		}
		execv("/proc/self/exe", argv);
		_exit(127);
	}
	close(sv[1]);
	ctl_fd = sv[0];
	helper_pid = pid;
	return 0;
}

int ptracer_lockdown(void)
{
#if defined(__SANITIZE_ADDRESS__)
	return -ENOSYS;
#elif defined(__x86_64__)
	/*
	 * What the helper holds and the daemon gives up: reading and writing
	 * other processes, and the real-time priority the helper freezes
	 * threads at (snapshot.c).
	 */
	static const unsigned denied[] = {
		__NR_ptrace,
		__NR_process_vm_readv,
		__NR_process_vm_writev,
		__NR_sched_setscheduler,
		__NR_sched_setattr,
		__NR_sched_setparam,
		__NR_setpriority,
	};
	enum { NDENIED = sizeof(denied) / sizeof(denied[0]) };
	struct sock_filter f[5 + NDENIED + 2];
	struct sock_fprog prog = { .len = 0, .filter = f };
	unsigned n = 0;

	f[n++] = (struct sock_filter)BPF_STMT(
		BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch));
	/* Another architecture's calls: denied, all of them. */
	f[n++] = (struct sock_filter)BPF_JUMP(
		BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 0, NDENIED + 3);
	f[n++] = (struct sock_filter)BPF_STMT(
		BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr));
	/* x32 calls have their own numbers: none of them either. */
	f[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K,
					      0x40000000u, NDENIED + 1, 0);
	for (unsigned i = 0; i < NDENIED; i++)
		f[n++] = (struct sock_filter)BPF_JUMP(
			BPF_JMP | BPF_JEQ | BPF_K, denied[i],
			(unsigned char)(NDENIED - i), 0);
	f[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K,
					      SECCOMP_RET_ALLOW);
	f[n++] = (struct sock_filter)BPF_STMT(
		BPF_RET | BPF_K,
		SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA));
	prog.len = (unsigned short)n;
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return -errno;
	if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER,
		    SECCOMP_FILTER_FLAG_TSYNC, &prog) != 0)
		return -errno;
	return 0;
#else
	return -ENOSYS;
#endif
}

void ptracer_stop(void)
{
	if (ctl_fd >= 0) {
		close(ctl_fd);
		ctl_fd = -1;
	}
	if (helper_pid > 0) {
		int st;
		uint64_t until = clock_now_ns() + 2000000000ull;

		while (waitpid(helper_pid, &st, WNOHANG) == 0) {
			struct timespec ts = { 0, 10000000 };

			if (clock_now_ns() >= until) {
				kill(helper_pid, SIGKILL);
				waitpid(helper_pid, &st, 0);
				break;
			}
			nanosleep(&ts, NULL);
		}
		helper_pid = -1;
	}
}

/* Sends one request with fd attached. */
static int send_request(const struct request *rq, int fd)
{
	char ctrl[CMSG_SPACE(sizeof(int))];
	struct iovec io = { (void *)rq, sizeof(*rq) };
	struct msghdr mh = { .msg_iov = &io,
			     .msg_iovlen = 1,
			     .msg_control = ctrl,
			     .msg_controllen = sizeof(ctrl) };
	struct cmsghdr *c;

	memset(ctrl, 0, sizeof(ctrl));
	c = CMSG_FIRSTHDR(&mh);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(c), &fd, sizeof(int));
	for (;;) {
		ssize_t n = sendmsg(ctl_fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);

		if (n == (ssize_t)sizeof(*rq))
			return 0;
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return -EBUSY;
		return PTRACER_EGONE;
	}
}

/* Opens a module of the snapshotted process from its own mappings. */
static int open_mapped(void *arg, uint64_t start, const char *path)
{
	struct sw_module m = { .path = (char *)path, .start = start };

	return modfile_open(arg, &m);
}

int ptracer_dump(pid_t pid, int pidfd, int timeout_ms, struct sw_dump **out,
		 pid_t *tracer)
{
	struct request rq = { .magic = PTRACER_MAGIC, .pid = pid };
	struct snap *s = NULL;
	struct modfile_maps mm;
	int sv[2], rc;

	*out = NULL;
	*tracer = 0;
	if (ctl_fd < 0)
		return PTRACER_EGONE;
	if (timeout_ms < 1 || timeout_ms > PTRACER_MAX_MS)
		return -EINVAL;
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
		return -errno;
	rq.deadline_ns = clock_now_ns() + (uint64_t)timeout_ms * 1000000ull;
	rc = send_request(&rq, sv[1]);
	close(sv[1]);
	if (rc == 0)
		rc = snap_read(sv[0], rq.deadline_ns + PTRACER_GRACE_NS, &s);
	close(sv[0]);
	if (rc == -EPIPE) /* the helper gave up on it: past the deadline */
		rc = -ETIMEDOUT;
	if (rc == SNAP_ETRACED && s)
		*tracer = s->tracer;
	if (rc != 0) {
		snap_free(s);
		return rc;
	}
	atomic_fetch_add(&nsnapshots, 1);
	if (s->pid != pid) {
		snap_free(s);
		return SW_EFORMAT;
	}
	rc = modfile_maps_read(pid, pidfd, &mm);
	if (rc == 0) {
		rc = unwind_snapshot(s, open_mapped, &mm, out);
		modfile_maps_release(&mm);
	}
	snap_free(s);
	return rc;
}

/* The helper's side. */

static int recv_request(int fd, struct request *rq, int *answer_fd)
{
	char ctrl[CMSG_SPACE(sizeof(int)) * 4];
	struct iovec io = { rq, sizeof(*rq) };
	struct msghdr mh = { .msg_iov = &io,
			     .msg_iovlen = 1,
			     .msg_control = ctrl,
			     .msg_controllen = sizeof(ctrl) };
	ssize_t n;

	*answer_fd = -1;
	do
		n = recvmsg(fd, &mh, MSG_CMSG_CLOEXEC);
	while (n < 0 && errno == EINTR);
	if (n <= 0)
		return -1; /* the daemon is gone */
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c;
	     c = CMSG_NXTHDR(&mh, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		for (size_t k = 0;
		     k < (c->cmsg_len - CMSG_LEN(0)) / sizeof(int); k++) {
			int got;

			memcpy(&got, CMSG_DATA(c) + k * sizeof(int),
			       sizeof(int));
			if (*answer_fd < 0)
				*answer_fd = got;
			else
				close(got);
		}
	}
	if (n != (ssize_t)sizeof(*rq) || (mh.msg_flags & MSG_CTRUNC) ||
	    rq->magic != PTRACER_MAGIC || rq->pid <= 0 || *answer_fd < 0) {
		if (*answer_fd >= 0)
			close(*answer_fd);
		*answer_fd = -1;
		return 0; /* malformed: skipped */
	}
	return 1;
}

/* Whether the asker still waits on the other end of fd. */
static bool asker_waits(int fd)
{
	struct pollfd p = { .fd = fd, .events = 0 };

	return poll(&p, 1, 0) == 0 || !(p.revents & (POLLHUP | POLLERR));
}

/* One request, in a child that exits when done (releasing any tracee). */
static void serve(int ctl, const struct request *rq, int answer_fd)
{
	uint64_t now = clock_now_ns();
	pid_t self = getpid(), w;
	sigset_t chld;

	if (now >= rq->deadline_ns || !asker_waits(answer_fd))
		return;
	w = fork();
	if (w < 0) {
		snap_write(answer_fd, -errno, NULL);
		return;
	}
	if (w == 0) {
		struct snap *s = NULL;
		uint64_t left_ms = (rq->deadline_ns - now) / 1000000ull;
		int r;

		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != self)
			_exit(1);
		close(ctl);
		if (left_ms < 1)
			left_ms = 1;
		if (left_ms > PTRACER_MAX_MS)
			left_ms = PTRACER_MAX_MS;
		r = snap_take(rq->pid, (int)left_ms, &s);
		snap_write(answer_fd, r, s);
		_exit(0);
	}
	/* Bounded: the child's deadline, a grace, then SIGKILL. */
	sigemptyset(&chld);
	sigaddset(&chld, SIGCHLD);
	for (;;) {
		int st;
		uint64_t t = clock_now_ns(),
			 until = rq->deadline_ns + PTRACER_GRACE_NS;
		struct timespec ts;

		if (waitpid(w, &st, WNOHANG) == w)
			return;
		if (t >= until) {
			kill(w, SIGKILL);
			waitpid(w, &st, 0);
			return;
		}
		ts.tv_sec = (time_t)((until - t) / 1000000000ull);
		ts.tv_nsec = (long)((until - t) % 1000000000ull);
		sigtimedwait(&chld, NULL, &ts);
	}
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

int ptracer_main(int fd)
{
	int type = 0;
	socklen_t len = sizeof(type);
	sigset_t chld;

	prctl(PR_SET_PDEATHSIG, SIGKILL);
	prctl(PR_SET_NAME, "sw-ptrace");
	/* The daemon died before we could follow it: nothing to serve. */
	if (getppid() == 1)
		return 0;
	if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) != 0 ||
	    type != SOCK_SEQPACKET) {
		fprintf(stderr, "stackwatchd: --snapshot-helper is started by "
				"stackwatchd itself\n");
		return 2;
	}
	warn_priority();
	signal(SIGPIPE, SIG_IGN);
	signal(SIGINT, SIG_IGN); /* a ^C of the daemon is the daemon's */
	signal(SIGTERM, SIG_IGN);
	sigemptyset(&chld);
	sigaddset(&chld, SIGCHLD);
	sigprocmask(SIG_BLOCK, &chld, NULL);
	for (;;) {
		struct request rq = { 0 };
		int answer_fd, r = recv_request(fd, &rq, &answer_fd);

		if (r < 0)
			return 0;
		if (r == 0)
			continue;
		serve(fd, &rq, answer_fd);
		close(answer_fd);
	}
}
