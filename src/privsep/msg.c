/*
 * msg.c - messages between the service and a parser worker (msg.h).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "model/clock.h"
#include "msg.h"

struct hdr {
	uint32_t magic;
	uint32_t type;
	uint32_t len;
	uint32_t pad;
};

/* Waits until fd is ready for events or deadline_ns. 0 or -ETIMEDOUT. */
static int wait_fd(int fd, short events, uint64_t deadline_ns)
{
	for (;;) {
		struct pollfd p = { .fd = fd, .events = events };
		int ms = -1, r;

		if (deadline_ns) {
			uint64_t now = clock_now_ns();

			if (now >= deadline_ns)
				return -ETIMEDOUT;
			ms = (int)((deadline_ns - now) / 1000000u) + 1;
		}
		r = poll(&p, 1, ms);
		if (r > 0)
			return 0;
		if (r < 0 && errno != EINTR)
			return -errno;
	}
}

static int send_all(int fd, const uint8_t *p, size_t n, uint64_t deadline_ns)
{
	while (n) {
		ssize_t w = send(fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);

		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && errno == EAGAIN) {
			int rc = wait_fd(fd, POLLOUT, deadline_ns);

			if (rc < 0)
				return rc;
			continue;
		}
		if (w < 0)
			return errno == ECONNRESET ? -EPIPE : -errno;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

int msg_send(int fd, uint32_t type, const void *body, size_t len,
	     const int *fds, unsigned nfds, uint64_t deadline_ns)
{
	struct hdr h = { MSG_MAGIC, type, (uint32_t)len, 0 };
	char ctrl[CMSG_SPACE(MSG_MAX_FDS * sizeof(int))];
	struct iovec io = { &h, sizeof(h) };
	struct msghdr mh = { .msg_iov = &io, .msg_iovlen = 1 };
	ssize_t w;
	int rc;

	if (len > MSG_MAX || nfds > MSG_MAX_FDS)
		return -EINVAL;
	if (nfds) {
		struct cmsghdr *c;

		memset(ctrl, 0, sizeof(ctrl));
		mh.msg_control = ctrl;
		mh.msg_controllen = CMSG_SPACE(nfds * sizeof(int));
		c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(nfds * sizeof(int));
		memcpy(CMSG_DATA(c), fds, nfds * sizeof(int));
	}
	for (;;) {
		w = sendmsg(fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (w >= 0)
			break;
		if (errno == EINTR)
			continue;
		if (errno != EAGAIN)
			return errno == ECONNRESET ? -EPIPE : -errno;
		rc = wait_fd(fd, POLLOUT, deadline_ns);
		if (rc < 0)
			return rc;
	}
	/* The descriptors went with the first byte; the rest is plain. */
	rc = send_all(fd, (const uint8_t *)&h + w, sizeof(h) - (size_t)w,
		      deadline_ns);
	return rc ? rc : send_all(fd, body, len, deadline_ns);
}

static int recv_all(int fd, uint8_t *p, size_t n, uint64_t deadline_ns)
{
	while (n) {
		ssize_t r = recv(fd, p, n, MSG_DONTWAIT);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0 && errno == EAGAIN) {
			int rc = wait_fd(fd, POLLIN, deadline_ns);

			if (rc < 0)
				return rc;
			continue;
		}
		if (r == 0)
			return -EPIPE;
		if (r < 0)
			return errno == ECONNRESET ? -EPIPE : -errno;
		p += r;
		n -= (size_t)r;
	}
	return 0;
}

int msg_recv(int fd, struct msg *m, uint64_t deadline_ns)
{
	char ctrl[CMSG_SPACE(8 * sizeof(int))];
	struct hdr h;
	struct iovec io = { &h, sizeof(h) };
	struct msghdr mh = { .msg_iov = &io,
			     .msg_iovlen = 1,
			     .msg_control = ctrl,
			     .msg_controllen = sizeof(ctrl) };
	ssize_t r;
	int rc;

	memset(m, 0, sizeof(*m));
	for (unsigned i = 0; i < MSG_MAX_FDS; i++)
		m->fds[i] = -1;
	for (;;) {
		r = recvmsg(fd, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
		if (r >= 0)
			break;
		if (errno == EINTR)
			continue;
		if (errno != EAGAIN)
			return errno == ECONNRESET ? -EPIPE : -errno;
		rc = wait_fd(fd, POLLIN, deadline_ns);
		if (rc < 0)
			return rc;
	}
	if (r == 0)
		return -EPIPE;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c;
	     c = CMSG_NXTHDR(&mh, c)) {
		size_t n;

		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t k = 0; k < n; k++) {
			int got;

			memcpy(&got, CMSG_DATA(c) + k * sizeof(int),
			       sizeof(int));
			if (m->nfds < MSG_MAX_FDS)
				m->fds[m->nfds++] = got;
			else
				close(got);
		}
	}
	rc = recv_all(fd, (uint8_t *)&h + r, sizeof(h) - (size_t)r,
		      deadline_ns);
	if (rc == 0 && (h.magic != MSG_MAGIC || h.len > MSG_MAX ||
			(mh.msg_flags & MSG_CTRUNC)))
		rc = -EPROTO;
	if (rc == 0 && h.len) {
		m->body = malloc(h.len);
		rc = m->body ? recv_all(fd, m->body, h.len, deadline_ns)
			     : -ENOMEM;
	}
	if (rc < 0) {
		msg_release(m);
		return rc;
	}
	m->type = h.type;
	m->len = h.len;
	return 0;
}

void msg_release(struct msg *m)
{
	free(m->body);
	m->body = NULL;
	for (unsigned i = 0; i < MSG_MAX_FDS; i++) {
		if (m->fds[i] >= 0)
			close(m->fds[i]);
		m->fds[i] = -1;
	}
	m->nfds = 0;
}
