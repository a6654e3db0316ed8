/*
 * cores.c - the privileged core's processes, from the service's side
 * (cores.h).
 *
 * A slot per core: its control socket, pid and pidfd. The supervising
 * thread polls every live core's pidfd (it died) and control socket (it
 * started a new peer, whose socket it sends), and after a death or a new
 * core tells both live cores who their peer is (REQ_PEER). Requests go
 * to the cores alive in turn, so both take snapshots.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cores.h"
#include "log.h"
#include "model/clock.h"
#include "ptracer.h"
#include "ptracer_msg.h"

struct core {
	int fd; /* control socket; -1: no core here */
	pid_t pid;
	int pidfd;   /* -1 with fd */
	bool child;  /* ours to reap: one of the two first */
	bool broken; /* a send found its socket closed: dying */
};

static struct core cores[CORES] = { { -1, 0, -1, false, false },
				    { -1, 0, -1, false, false } };
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned next_core;
static pthread_t supervisor;
static bool supervising;
static int wake[2] = { -1, -1 }; /* the supervisor's: stop */
static uint64_t gone_since_ns;	 /* a core missing since; 0: none */

static bool alive(const struct core *c)
{
	return c->fd >= 0 && !c->broken;
}

/* Starts one core: our executable again, fd 3 its control socket. */
static int start_one(struct core *c, bool kernel_reads)
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
		static char name[] = "stackwatchd", opt[] = "--snapshot-helper",
			    off[] = "--no-kernel-reads";
		char *argv[] = { name, opt, kernel_reads ? NULL : off, NULL };

		/* fd 3 without close-on-exec; everything else closes. */
		if (sv[1] == PTRACER_FD)
			fcntl(PTRACER_FD, F_SETFD, 0);
		else if (dup2(sv[1], PTRACER_FD) < 0)
			_exit(127);
		execv("/proc/self/exe", argv);
		_exit(127);
	}
	close(sv[1]);
	c->fd = sv[0];
	c->pid = pid;
	c->pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	c->child = true;
	c->broken = false;
	return 0;
}

/* Sends a REQ_PEER to core i naming core j (under lock). */
static void tell_peer(size_t i, size_t j)
{
	struct request rq = { .magic = PTRACER_MAGIC, .kind = REQ_PEER };
	char ctrl[CMSG_SPACE(sizeof(int))];
	struct iovec io = { &rq, sizeof(rq) };
	struct msghdr mh = { .msg_iov = &io,
			     .msg_iovlen = 1,
			     .msg_control = ctrl,
			     .msg_controllen = sizeof(ctrl) };
	struct cmsghdr *c;

	if (!alive(&cores[i]) || !alive(&cores[j]) || cores[j].pidfd < 0)
		return;
	memset(ctrl, 0, sizeof(ctrl));
	c = CMSG_FIRSTHDR(&mh);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(c), &cores[j].pidfd, sizeof(int));
	(void)!sendmsg(cores[i].fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
}

int cores_start(bool kernel_reads)
{
	int rc = -ECHILD, ok = 0;

	for (size_t i = 0; i < CORES; i++) {
		int r = start_one(&cores[i], kernel_reads);

		if (r == 0)
			ok++;
		else
			rc = r;
	}
	if (!ok)
		return rc;
	pthread_mutex_lock(&lock);
	tell_peer(0, 1);
	tell_peer(1, 0);
	if (ok < CORES)
		gone_since_ns = clock_now_ns();
	pthread_mutex_unlock(&lock);
	return 0;
}

/* Core i is gone: its slot emptied, reaped when it was ours (lock). */
static void bury(size_t i)
{
	struct core *c = &cores[i];

	log_warn("the snapshot helper pid %d is gone%s", (int)c->pid,
		 alive(&cores[1 - i]) ? ": its peer starts another" : "");
	close(c->fd);
	if (c->pidfd >= 0)
		close(c->pidfd);
	if (c->child)
		waitpid(c->pid, NULL, WNOHANG);
	c->fd = -1;
	c->pidfd = -1;
	c->pid = 0;
	c->broken = false;
	if (!gone_since_ns)
		gone_since_ns = clock_now_ns();
}

/*
 * A message of core i on its control socket: a new peer, taken into the
 * empty slot (its socket closed when there is none). Under lock.
 */
static void hear(size_t i)
{
	char ctrl[CMSG_SPACE(sizeof(int))];
	struct core_msg m;
	struct iovec io = { &m, sizeof(m) };
	struct msghdr mh = { .msg_iov = &io,
			     .msg_iovlen = 1,
			     .msg_control = ctrl,
			     .msg_controllen = sizeof(ctrl) };
	struct cmsghdr *c;
	int fd = -1;
	ssize_t n = recvmsg(cores[i].fd, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
	size_t j = 1 - i;

	if (n <= 0)
		return;
	c = CMSG_FIRSTHDR(&mh);
	if (c && c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS &&
	    c->cmsg_len == CMSG_LEN(sizeof(int)))
		memcpy(&fd, CMSG_DATA(c), sizeof(int));
	if (fd < 0)
		return;
	if (n != sizeof(m) || m.magic != CORE_MSG_MAGIC ||
	    m.kind != CORE_NEW_PEER || m.pid <= 0 || cores[j].fd >= 0) {
		close(fd); /* that core ends with its control socket */
		return;
	}
	cores[j].fd = fd;
	cores[j].pid = m.pid;
	cores[j].pidfd = (int)syscall(SYS_pidfd_open, m.pid, 0);
	cores[j].child = false;
	cores[j].broken = false;
	log_notice("the snapshot helper pid %d took over from the one that "
		   "was gone",
		   (int)m.pid);
	tell_peer(i, j);
	tell_peer(j, i);
	if (alive(&cores[i]))
		gone_since_ns = 0;
}

static void *supervise(void *arg)
{
	(void)arg;
	for (;;) {
		struct pollfd p[2 * CORES + 1];
		size_t n = 0, at[2 * CORES];

		pthread_mutex_lock(&lock);
		for (size_t i = 0; i < CORES; i++) {
			if (cores[i].fd < 0)
				continue;
			p[n].fd = cores[i].pidfd >= 0 ? cores[i].pidfd
						      : cores[i].fd;
			p[n].events = POLLIN;
			at[n++] = i;
			p[n].fd = cores[i].fd;
			p[n].events = POLLIN;
			at[n++] = i + CORES;
		}
		pthread_mutex_unlock(&lock);
		p[n].fd = wake[0];
		p[n].events = POLLIN;
		if (poll(p, n + 1, -1) < 0 && errno != EINTR)
			return NULL;
		if (p[n].revents)
			return NULL;
		pthread_mutex_lock(&lock);
		for (size_t k = 0; k < n; k++) {
			size_t i = at[k] % CORES;

			if (!p[k].revents || cores[i].fd < 0)
				continue;
			if (at[k] < CORES || (p[k].revents & POLLHUP))
				bury(i);
			else
				hear(i);
		}
		pthread_mutex_unlock(&lock);
	}
}

int cores_supervise(void)
{
	int rc;

	if (pipe2(wake, O_CLOEXEC) < 0)
		return -errno;
	rc = pthread_create(&supervisor, NULL, supervise, NULL);
	if (rc != 0)
		return -rc;
	supervising = true;
	return 0;
}

int cores_send(const void *hdr, size_t hlen, const void *body, size_t len,
	       const int *fds, size_t nfds)
{
	char ctrl[CMSG_SPACE(2 * sizeof(int))];
	struct iovec io[2] = { { (void *)hdr, hlen }, { (void *)body, len } };
	struct msghdr mh = {
		.msg_iov = io,
		.msg_iovlen = len ? 2 : 1,
		.msg_control = nfds ? ctrl : NULL,
		.msg_controllen = nfds ? CMSG_SPACE(nfds * sizeof(int)) : 0
	};
	int rc = PTRACER_EGONE;

	if (nfds > 2)
		return -EINVAL;
	if (nfds) {
		struct cmsghdr *c;

		memset(ctrl, 0, sizeof(ctrl));
		c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(nfds * sizeof(int));
		memcpy(CMSG_DATA(c), fds, nfds * sizeof(int));
	}
	pthread_mutex_lock(&lock);
	for (size_t tries = 0; tries < CORES && rc == PTRACER_EGONE; tries++) {
		struct core *c = &cores[next_core++ % CORES];
		ssize_t n;

		if (!alive(c))
			continue;
		do
			n = sendmsg(c->fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
		while (n < 0 && errno == EINTR);
		if (n == (ssize_t)(hlen + len))
			rc = 0;
		else if (n < 0 && errno == EAGAIN)
			rc = -EBUSY;
		else
			c->broken = true; /* the supervisor buries it */
	}
	pthread_mutex_unlock(&lock);
	return rc;
}

size_t cores_pids(pid_t *pids)
{
	size_t n = 0;

	pthread_mutex_lock(&lock);
	for (size_t i = 0; i < CORES; i++)
		if (alive(&cores[i]))
			pids[n++] = cores[i].pid;
	pthread_mutex_unlock(&lock);
	return n;
}

int cores_state(char *why, size_t size)
{
	size_t n = 0;
	uint64_t since;

	pthread_mutex_lock(&lock);
	for (size_t i = 0; i < CORES; i++)
		n += alive(&cores[i]);
	since = gone_since_ns;
	pthread_mutex_unlock(&lock);
	if (n == CORES)
		return 0;
	if (n == 0) {
		snprintf(why, size,
			 "no snapshot helper runs: processes without the "
			 "agent cannot be read, and blocked threads are read "
			 "by signal (restart stackwatchd)");
		return 2;
	}
	snprintf(why, size,
		 "a snapshot helper is being started again (for %.1f s): "
		 "reads go on through the other",
		 since ? (double)(clock_now_ns() - since) / 1e9 : 0.0);
	return 1;
}

void cores_stop(void)
{
	uint64_t until = clock_now_ns() + 2000000000ull;

	if (supervising) {
		(void)!write(wake[1], "x", 1);
		pthread_join(supervisor, NULL);
		supervising = false;
	}
	pthread_mutex_lock(&lock);
	for (size_t i = 0; i < CORES; i++)
		if (cores[i].fd >= 0) {
			close(cores[i].fd); /* it ends with its socket */
			cores[i].fd = -1;
		}
	for (size_t i = 0; i < CORES; i++) {
		struct core *c = &cores[i];

		if (!c->pid || !c->child)
			continue;
		while (waitpid(c->pid, NULL, WNOHANG) == 0) {
			struct timespec ts = { 0, 10000000 };

			if (clock_now_ns() >= until) {
				kill(c->pid, SIGKILL);
				waitpid(c->pid, NULL, 0);
				break;
			}
			nanosleep(&ts, NULL);
		}
	}
	for (size_t i = 0; i < CORES; i++) {
		if (cores[i].pidfd >= 0)
			close(cores[i].pidfd);
		cores[i].pidfd = -1;
		cores[i].pid = 0;
	}
	pthread_mutex_unlock(&lock);
}
