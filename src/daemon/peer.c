/*
 * peer.c - who is asking (peer.h).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <poll.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "peer.h"

#define DIAG_TIMEOUT_MS 200

static void set_key_uid(struct peer *p)
{
	snprintf(p->key, sizeof(p->key), "uid %u", (unsigned)p->uid);
}

/* The groups of a user known by uid alone (TCP): the user database. */
static void groups_of_uid(struct peer *p)
{
	char buf[4096];
	struct passwd pw, *res = NULL;
	int n = PEER_MAX_GROUPS;

	p->ngroups = 0;
	if (getpwuid_r(p->uid, &pw, buf, sizeof(buf), &res) != 0 || !res)
		return;
	p->gid = pw.pw_gid;
	if (getgrouplist(pw.pw_name, pw.pw_gid, p->groups, &n) < 0)
		n = PEER_MAX_GROUPS; /* the first ones, then */
	p->ngroups = n;
}

static int identify_unix(int fd, struct peer *p)
{
	struct ucred cred;
	socklen_t len = sizeof(cred);

	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0)
		return 0; /* anonymous */
	p->known = true;
	p->unix_socket = true;
	p->uid = cred.uid;
	p->gid = cred.gid;
	p->pid = cred.pid;
	len = sizeof(p->groups);
	if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, p->groups, &len) == 0)
		p->ngroups = (int)(len / sizeof(gid_t));
	set_key_uid(p);
	return 0;
}

static bool loopback(const struct sockaddr_storage *ss)
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

/*
 * Asks the kernel for the client's own socket (its local address and
 * port are the connection's remote ones) and returns its owner's uid.
 * 0 with *uid set, or a negative errno.
 */
static int diag_owner(const struct sockaddr_storage *client,
		      const struct sockaddr_storage *server, uid_t *uid)
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

	memset(&msg, 0, sizeof(msg));
	msg.nlh.nlmsg_len = sizeof(msg);
	msg.nlh.nlmsg_type = SOCK_DIAG_BY_FAMILY;
	msg.nlh.nlmsg_flags = NLM_F_REQUEST;
	msg.req.sdiag_family = (uint8_t)client->ss_family;
	msg.req.sdiag_protocol = IPPROTO_TCP;
	msg.req.idiag_states = ~0u;
	diag_addr(client, msg.req.id.idiag_src, &msg.req.id.idiag_sport);
	diag_addr(server, msg.req.id.idiag_dst, &msg.req.id.idiag_dport);
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
	if (poll(&pf, 1, DIAG_TIMEOUT_MS) != 1) {
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
		*uid = m->idiag_uid;
		rc = 0;
		break;
	}
out:
	close(fd);
	return rc;
}

static int identify_tcp(int fd, struct peer *p)
{
	struct sockaddr_storage client = { 0 }, server = { 0 };
	socklen_t clen = sizeof(client), slen = sizeof(server);
	char host[INET6_ADDRSTRLEN] = "?";

	if (getpeername(fd, (struct sockaddr *)&client, &clen) < 0 ||
	    getsockname(fd, (struct sockaddr *)&server, &slen) < 0)
		return 0;
	if (client.ss_family == AF_INET)
		inet_ntop(AF_INET, &((struct sockaddr_in *)&client)->sin_addr,
			  host, sizeof(host));
	else if (client.ss_family == AF_INET6)
		inet_ntop(AF_INET6,
			  &((struct sockaddr_in6 *)&client)->sin6_addr, host,
			  sizeof(host));
	snprintf(p->key, sizeof(p->key), "address %s", host);
	if (!loopback(&client) || diag_owner(&client, &server, &p->uid) < 0)
		return 0; /* anonymous */
	p->known = true;
	groups_of_uid(p);
	set_key_uid(p);
	return 0;
}

int peer_identify(int fd, struct peer *out)
{
	struct sockaddr_storage ss = { 0 };
	socklen_t len = sizeof(ss);

	memset(out, 0, sizeof(*out));
	snprintf(out->key, sizeof(out->key), "anonymous");
	if (getsockname(fd, (struct sockaddr *)&ss, &len) < 0)
		return -errno;
	if (ss.ss_family == AF_UNIX)
		return identify_unix(fd, out);
	if (ss.ss_family == AF_INET || ss.ss_family == AF_INET6)
		return identify_tcp(fd, out);
	return 0;
}

bool peer_in_group(const struct peer *p, gid_t g)
{
	if (!p->known)
		return false;
	if (p->gid == g)
		return true;
	for (int i = 0; i < p->ngroups; i++)
		if (p->groups[i] == g)
			return true;
	return false;
}

int peer_process_uids(pid_t pid, uid_t uids[3], bool *dumpable)
{
	char path[64], buf[4096], *line;
	unsigned long r, e, s;
	struct stat st;
	ssize_t n;
	int fd;

	/*
	 * The file, not the directory: the kernel gives a process's /proc
	 * files to root while it is not dumpable (the directory's owner
	 * may still be the one it had when it was first looked up).
	 */
	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0) {
		close(fd);
		return -errno;
	}
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return n < 0 ? -errno : -EINVAL;
	buf[n] = '\0';
	line = strstr(buf, "\nUid:");
	if (!line || sscanf(line + 5, "%lu %lu %lu", &r, &e, &s) != 3)
		return -EINVAL;
	uids[0] = (uid_t)r;
	uids[1] = (uid_t)e;
	uids[2] = (uid_t)s;
	*dumpable = st.st_uid == uids[1];
	return 0;
}
