/*
 * fdmsg.c - one message with at most one descriptor (fdmsg.h).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "fdmsg.h"
#include "model/clock.h"

int fdmsg_send(int sock, const void *head, size_t hlen, const void *body,
	       size_t blen, int fd)
{
	char ctrl[CMSG_SPACE(sizeof(int))];
	struct iovec io[2] = { { (void *)head, hlen }, { (void *)body, blen } };
	struct msghdr mh = { .msg_iov = io, .msg_iovlen = blen ? 2 : 1 };

	if (fd >= 0) {
		struct cmsghdr *c;

		memset(ctrl, 0, sizeof(ctrl));
		mh.msg_control = ctrl;
		mh.msg_controllen = sizeof(ctrl);
		c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(c), &fd, sizeof(int));
	}
	return sendmsg(sock, &mh, MSG_NOSIGNAL | MSG_DONTWAIT) < 0 ? -errno : 0;
}

ssize_t fdmsg_recv(int sock, void *buf, size_t size, uint64_t until_ns, int *fd)
{
	char ctrl[CMSG_SPACE(sizeof(int)) * 2];
	struct iovec io = { buf, size };
	struct msghdr mh = { .msg_iov = &io,
			     .msg_iovlen = 1,
			     .msg_control = ctrl,
			     .msg_controllen = sizeof(ctrl) };
	struct pollfd pf = { .fd = sock, .events = POLLIN };
	ssize_t n = -ETIMEDOUT;

	*fd = -1;
	for (;;) {
		uint64_t now = clock_now_ns();
		int r = now < until_ns
				? poll(&pf, 1,
				       (int)((until_ns - now) / 1000000u) + 1)
				: 0;

		/* Our threads take dump signals too: the wait goes on. */
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -errno;
		if (r == 0)
			return -ETIMEDOUT;
		n = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
		if (n < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		break;
	}
	if (n < 0)
		return -errno;
	fdmsg_take_fds(&mh, fd, 1);
	return n;
}

void fdmsg_take_fds(struct msghdr *mh, int *fds, size_t nfds)
{
	size_t have = 0;

	for (size_t i = 0; i < nfds; i++)
		fds[i] = -1;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(mh); c; c = CMSG_NXTHDR(mh, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		for (size_t k = 0;
		     k < (c->cmsg_len - CMSG_LEN(0)) / sizeof(int); k++) {
			int got;

			memcpy(&got, CMSG_DATA(c) + k * sizeof(int),
			       sizeof(int));
			if (have < nfds)
				fds[have++] = got;
			else
				close(got);
		}
	}
}
