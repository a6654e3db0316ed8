/*
 * test_peer.c - who is asking, as the daemon tells it (src/daemon/peer.c),
 * on real sockets of this host: the kernel's word, never the client's.
 *
 * Over TCP from loopback, the owner of a connection must be proven by the
 * process that holds the client's socket:
 * - a client that connected and closed before the daemon accepted leaves
 *   an orphan (no inode), which socket diagnostics report as root's: it
 *   is anonymous, never root;
 * - a live client is its process's user, with that process's gid, groups
 *   and capabilities (not the user database's: a process of uid nobody
 *   running with gid 1 and no other groups is not in nobody's groups);
 * - a client that half-closed its side but still holds the socket is
 *   still proven.
 * Over the unix socket: SO_PEERCRED and the peer's effective capabilities.
 *
 * Needs root (clients run as nobody); skipped otherwise.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <grp.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "daemon/peer.h"
#include "tap.h"

#define NOBODY 65534

static int port;

static int listen_tcp(void)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	socklen_t len = sizeof(sa);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    listen(fd, 16) < 0 ||
	    getsockname(fd, (struct sockaddr *)&sa, &len) < 0)
		return -1;
	port = ntohs(sa.sin_port);
	return fd;
}

static int become(uid_t uid, gid_t gid)
{
	return setgroups(0, NULL) || setresgid(gid, gid, gid) ||
	       setresuid(uid, uid, uid);
}

/*
 * How a client behaves once connected. FROM_THREAD connects from a thread
 * it starts after the fork (the newest task of the host is a thread, not
 * its process); OLD waits while 64 more processes start and end after it,
 * so that it is no longer among the newest pids.
 */
enum client { CLOSE_AT_ONCE, STAY, HALF_CLOSE, FROM_THREAD, OLD };

static int connect_port(void)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	int fd;

	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	sa.sin_port = htons((uint16_t)port);
	fd = socket(AF_INET, SOCK_STREAM, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		return -1;
	return fd;
}

static void *connect_thread(void *arg)
{
	*(int *)arg = connect_port();
	return NULL;
}

/*
 * A client as uid/gid (no other groups) connected to our port. It tells
 * "connected" on *ready (a pipe), then closes and exits (CLOSE_AT_ONCE) or
 * waits until *hold (a pipe) closes. Returns its pid.
 */
static pid_t client(uid_t uid, gid_t gid, enum client how, int *ready,
		    int *hold)
{
	int r[2], h[2];
	pid_t pid;

	if (pipe(r) < 0 || pipe(h) < 0)
		return -1;
	pid = fork();
	if (pid == 0) {
		int fd = 0; /* FROM_THREAD: 0 until the thread connected */
		char c;

		close(r[0]);
		close(h[1]);
		if (become(uid, gid) < 0)
			_exit(1);
		if (how == FROM_THREAD) {
			pthread_t t;

			/* The thread stays: its tid is the newest task. */
			if (pthread_create(&t, NULL, connect_thread, &fd) != 0)
				_exit(1);
			while (!__atomic_load_n(&fd, __ATOMIC_ACQUIRE))
				usleep(1000);
		} else {
			fd = connect_port();
		}
		if (fd < 0)
			_exit(1);
		for (int i = 0; how == OLD && i < 64; i++) {
			pid_t k = fork();

			if (k == 0)
				_exit(0);
			if (k > 0)
				waitpid(k, NULL, 0);
		}
		if (how == HALF_CLOSE)
			shutdown(fd, SHUT_WR);
		if (how == CLOSE_AT_ONCE)
			close(fd);
		(void)!write(r[1], "c", 1);
		if (how != CLOSE_AT_ONCE)
			(void)!read(h[0], &c, 1);
		_exit(0);
	}
	close(r[1]);
	close(h[0]);
	*ready = r[0];
	*hold = h[1];
	return pid;
}

static int accept_one(int lfd)
{
	struct pollfd p = { .fd = lfd, .events = POLLIN };

	if (poll(&p, 1, 5000) != 1)
		return -1;
	return accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
}

static void wait_ready(int fd)
{
	char c;

	(void)!read(fd, &c, 1);
	close(fd);
}

static void test_orphan(int lfd)
{
	struct peer p = { 0 };
	int ready, hold, fd, rc;
	pid_t c = client(NOBODY, NOBODY, CLOSE_AT_ONCE, &ready, &hold);

	wait_ready(ready);
	waitpid(c, NULL, 0); /* gone: its socket is an orphan now */
	close(hold);
	fd = accept_one(lfd);
	rc = fd >= 0 ? peer_identify(fd, &p) : -1;
	TAP_OK(rc == 0, "a connection its client closed before it was "
			"accepted is identified");
	TAP_OK(!p.known,
	       "it is anonymous, not root (known %d, uid %u): its orphaned "
	       "socket has no owner to prove",
	       p.known, (unsigned)p.uid);
	if (fd >= 0)
		close(fd);
}

static void test_live(int lfd, enum client how, const char *what)
{
	struct peer p = { 0 };
	int ready, hold, fd, rc;
	pid_t c = client(NOBODY, 1, how, &ready, &hold);

	wait_ready(ready);
	fd = accept_one(lfd);
	rc = fd >= 0 ? peer_identify(fd, &p) : -1;
	TAP_OK(rc == 0 && p.known && p.uid == NOBODY && p.pid == c,
	       "%s: nobody, proven by its process %d (known %d, uid %u, pid "
	       "%d)",
	       what, (int)c, p.known, (unsigned)p.uid, (int)p.pid);
	TAP_OK(p.gid == 1 && p.ngroups == 0 && !peer_in_group(&p, NOBODY),
	       "%s: with that process's gid 1 and no other groups, not "
	       "nobody's groups from the user database (gid %u, %d groups)",
	       what, (unsigned)p.gid, p.ngroups);
	TAP_OK(p.caps == 0, "%s: and no capabilities (%llx)", what,
	       (unsigned long long)p.caps);
	close(hold);
	waitpid(c, NULL, 0);
	if (fd >= 0)
		close(fd);
}

/* Our own effective capabilities, from our status file. */
static unsigned long long own_caps(void)
{
	char line[256];
	unsigned long long v = ~0ull;
	FILE *f = fopen("/proc/self/status", "r");

	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "CapEff: %llx", &v) == 1)
			break;
	if (f)
		fclose(f);
	return v;
}

/* A unix socket peer: a child of ours, with our credentials. */
static void test_unix(void)
{
	int sv[2], r[2];
	struct peer p = { 0 };
	pid_t c;
	char ch;
	int rc;

	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) < 0 || pipe(r) < 0)
		return;
	c = fork();
	if (c == 0) {
		close(sv[0]);
		close(r[1]);
		(void)!read(r[0], &ch, 1);
		_exit(0);
	}
	close(sv[1]);
	close(r[0]);
	rc = peer_identify(sv[0], &p);
	TAP_OK(rc == 0 && p.known && p.unix_socket && p.uid == 0,
	       "a unix socket peer is known by SO_PEERCRED (uid %u)",
	       (unsigned)p.uid);
	TAP_OK(p.caps == own_caps(),
	       "with its effective capabilities, pinned by its pidfd (%llx, "
	       "ours %llx)",
	       (unsigned long long)p.caps, own_caps());
	close(r[1]);
	waitpid(c, NULL, 0);
	close(sv[0]);
}

int main(void)
{
	int lfd;

	signal(SIGPIPE, SIG_IGN);
	if (geteuid() != 0) {
		TAP_SKIP("needs root: clients run as nobody");
		return tap_done();
	}
	lfd = listen_tcp();
	if (lfd < 0) {
		TAP_OK(0, "listening on 127.0.0.1:0");
		return tap_done();
	}
	test_orphan(lfd);
	test_live(lfd, STAY, "a connected client");
	test_live(lfd, HALF_CLOSE, "a client that half-closed its side");
	test_live(lfd, FROM_THREAD,
		  "a client that connected from a thread, the newest task");
	test_live(lfd, OLD, "a client 64 processes older than the newest");
	test_unix();
	close(lfd);
	return tap_done();
}
