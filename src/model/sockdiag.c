/*
 * sockdiag.c - the owner of a TCP socket, from the kernel's socket
 * diagnostics (sockdiag.h).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <poll.h>
#include <string.h>
#include <unistd.h>

#include "sockdiag.h"

bool sockdiag_loopback(const struct sockaddr_storage *ss)
{
	if (ss->ss_family == AF_INET) {
		const struct sockaddr_in *s = (const struct sockaddr_in *)ss;

		return (ntohl(s->sin_addr.s_addr) >> 24) == 127;
	}
	if (ss->ss_family == AF_INET6) {
		const struct sockaddr_in6 *s = (const struct sockaddr_in6 *)ss;
		const uint8_t *a = s->sin6_addr.s6_addr;

		if (IN6_IS_ADDR_LOOPBACK(&s->sin6_addr))
			return true;
		return IN6_IS_ADDR_V4MAPPED(&s->sin6_addr) && a[12] == 127;
	}
	return false;
}

/* Copies a socket address into a diag id's address field (network order). */
static void diag_addr(const struct sockaddr_storage *ss, __be32 out[4],
		      __be16 *port)
{
	memset(out, 0, 4 * sizeof(__be32));
	if (ss->ss_family == AF_INET) {
		const struct sockaddr_in *s = (const struct sockaddr_in *)ss;

		out[0] = s->sin_addr.s_addr;
		*port = s->sin_port;
	} else {
		const struct sockaddr_in6 *s = (const struct sockaddr_in6 *)ss;

		memcpy(out, &s->sin6_addr, 16);
		*port = s->sin6_port;
	}
}

int sockdiag_tcp_socket(const struct sockaddr_storage *src,
			const struct sockaddr_storage *dst, int timeout_ms,
			struct sockdiag_tcp *out)
{
	struct {
		struct nlmsghdr nlh;
		struct inet_diag_req_v2 req;
	} msg;
	struct sockaddr_nl nl = { .nl_family = AF_NETLINK };
	char buf[8192];
	struct pollfd pf;
	ssize_t n;
	int fd, rc = -ENOENT;

	if ((src->ss_family != AF_INET && src->ss_family != AF_INET6) ||
	    dst->ss_family != src->ss_family)
		return -EAFNOSUPPORT;
	memset(&msg, 0, sizeof(msg));
	msg.nlh.nlmsg_len = sizeof(msg);
	msg.nlh.nlmsg_type = SOCK_DIAG_BY_FAMILY;
	msg.nlh.nlmsg_flags = NLM_F_REQUEST;
	msg.req.sdiag_family = (uint8_t)src->ss_family;
	msg.req.sdiag_protocol = IPPROTO_TCP;
	msg.req.idiag_states = ~0u;
	diag_addr(src, msg.req.id.idiag_src, &msg.req.id.idiag_sport);
	diag_addr(dst, msg.req.id.idiag_dst, &msg.req.id.idiag_dport);
	msg.req.id.idiag_cookie[0] = INET_DIAG_NOCOOKIE;
	msg.req.id.idiag_cookie[1] = INET_DIAG_NOCOOKIE;

	fd = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
	if (fd < 0)
		return -errno;
	if (sendto(fd, &msg, sizeof(msg), 0, (struct sockaddr *)&nl,
		   sizeof(nl)) < 0) {
		rc = -errno;
		goto out;
	}
	pf.fd = fd;
	pf.events = POLLIN;
	if (poll(&pf, 1, timeout_ms) != 1) {
		rc = -ETIMEDOUT;
		goto out;
	}
	n = recv(fd, buf, sizeof(buf), 0);
	if (n < 0) {
		rc = -errno;
		goto out;
	}
	for (struct nlmsghdr *h = (struct nlmsghdr *)buf;
	     NLMSG_OK(h, (unsigned)n); h = NLMSG_NEXT(h, n)) {
		const struct inet_diag_msg *m;

		if (h->nlmsg_type == NLMSG_ERROR || h->nlmsg_type == NLMSG_DONE)
			break;
		if (h->nlmsg_type != SOCK_DIAG_BY_FAMILY ||
		    h->nlmsg_len < NLMSG_LENGTH(sizeof(*m)))
			continue;
		m = NLMSG_DATA(h);
		out->uid = m->idiag_uid;
		out->inode = m->idiag_inode;
		out->state = m->idiag_state;
		rc = 0;
		break;
	}
out:
	close(fd);
	return rc;
}
