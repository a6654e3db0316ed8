/*
 * test_sec_http.c - what one local user can do to the daemon's HTTP side
 * (the daemon runs as root, the attacker as nobody):
 *
 * - hold connections open from many loopback addresses (127.0.0.2, ...),
 *   which dodges a per-address limit: the daemon counts them per
 *   requester, so nobody keeps 64 and everyone else is still answered;
 * - name its process and threads with bidirectional overrides, C1
 *   controls and zero-width characters: text and folded show '?';
 * - send a browser to a page that requests /api/v1/stacks (an <img>):
 *   refused as cross-site, while its own scripts are answered;
 * - have an answer rendered that is too large for its format (a dump of
 *   a million frames in a module with a long path): an error status with
 *   the reason, never a 200 with an empty or cut body.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include "sectest.h"
#include "tap.h"

#define FLOOD 600	/* connections nobody opens */
#define PER_PEER 64	/* what the daemon lets one requester hold */
#define OTHER_UID 65533 /* a second unprivileged user */

static char work[] = "/tmp/sw-sechttp-XXXXXX";

/* A TCP connection to 127.0.0.1:port from source address 127.x.y.z. */
static int connect_from(int port, unsigned n)
{
	struct sockaddr_in src = { .sin_family = AF_INET };
	struct sockaddr_in dst = { .sin_family = AF_INET,
				   .sin_port = htons((uint16_t)port) };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	src.sin_addr.s_addr =
		htonl(0x7f000000u | ((n / 250 + 1) << 8) | (n % 250 + 2));
	dst.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd >= 0 &&
	    (bind(fd, (struct sockaddr *)&src, sizeof(src)) < 0 ||
	     connect(fd, (struct sockaddr *)&dst, sizeof(dst)) < 0)) {
		close(fd);
		fd = -1;
	}
	return fd;
}

/*
 * As nobody: opens FLOOD connections from as many addresses, waits until
 * the number the daemon keeps open settles, and writes to report how
 * many connected and how many stay open; holds them until go is
 * readable, then closes them all and exits.
 */
static pid_t flood(int port, int report, int go)
{
	pid_t pid = fork();

	if (pid == 0) {
		static int fds[FLOOD];
		int counts[2] = { 0, 0 };
		char c;

		if (sec_become(SEC_NOBODY, SEC_NOBODY, NULL, 0) < 0)
			_exit(126);
		for (unsigned i = 0; i < FLOOD; i++) {
			fds[i] = connect_from(port, i);
			counts[0] += fds[i] >= 0;
		}
		/* Until the daemon has seen them all: what it keeps open
		 * stops changing (10 s at most, for a sanitized daemon). */
		for (int round = 0, last = -1, same = 0;
		     round < 100 && same < 10; round++) {
			itest_sleep_ms(100);
			counts[1] = 0;
			for (unsigned i = 0; i < FLOOD; i++) {
				struct pollfd p = { .fd = fds[i],
						    .events = POLLIN };

				if (fds[i] < 0)
					continue;
				/* Closed by the daemon: readable, the end. */
				if (poll(&p, 1, 0) == 1 &&
				    recv(fds[i], &c, 1, MSG_DONTWAIT) <= 0) {
					close(fds[i]);
					fds[i] = -1;
					continue;
				}
				counts[1]++;
			}
			same = counts[1] == last ? same + 1 : 0;
			last = counts[1];
		}
		(void)!write(report, counts, sizeof(counts));
		(void)!read(go, &c, 1);
		for (unsigned i = 0; i < FLOOD; i++)
			if (fds[i] >= 0)
				close(fds[i]);
		_exit(0);
	}
	return pid;
}

static void test_connections(const struct itest_daemon *d)
{
	struct sec_answer *a = calloc(1, sizeof(*a));
	int report[2], go[2], counts[2] = { -1, -1 };
	pid_t f;

	if (!a || pipe(report) < 0 || pipe(go) < 0) {
		TAP_OK(false, "pipes");
		free(a);
		return;
	}
	f = flood(d->port, report[1], go[0]);
	close(report[1]);
	close(go[0]);
	if (read(report[0], counts, sizeof(counts)) != sizeof(counts))
		counts[0] = counts[1] = -1;
	TAP_OK(counts[0] == FLOOD,
	       "nobody connects %d times from %d loopback addresses (%d)",
	       FLOOD, FLOOD, counts[0]);
	TAP_OK(counts[1] == PER_PEER,
	       "the daemon keeps %d of them open and closes the rest (%d "
	       "open)",
	       PER_PEER, counts[1]);
	sec_get_as(OTHER_UID, OTHER_UID, NULL, 0, d->url, NULL, NULL,
		   "/api/v1/targets", a);
	TAP_OK(a->status == 200,
	       "meanwhile another user is answered over TCP (%d)", a->status);
	sec_get_as(0, 0, NULL, 0, d->url, NULL, NULL, "/healthz", a);
	TAP_OK(a->status == 200, "and root (%d)", a->status);
	sec_get_as(SEC_NOBODY, SEC_NOBODY, NULL, 0, d->url, NULL, NULL,
		   "/api/v1/targets", a);
	TAP_OK(a->status == 0, "nobody's next connection is not (%d)",
	       a->status);
	(void)!write(go[1], "x", 1);
	close(go[1]);
	close(report[0]);
	waitpid(f, NULL, 0);
	/* The daemon sees them close (a sanitized one takes its time). */
	for (long end = itest_now_ms() + 10000; itest_now_ms() < end;
	     itest_sleep_ms(100)) {
		sec_get_as(SEC_NOBODY, SEC_NOBODY, NULL, 0, d->url, NULL, NULL,
			   "/api/v1/targets", a);
		if (a->status == 200)
			break;
	}
	TAP_OK(a->status == 200,
	       "once nobody closed them, it is answered again (%d)", a->status);
	free(a);
}

/*
 * A dump of 4000 threads x 250 frames in a module without symbols at a
 * long path: as text or folded it is far more than the 64 MiB a
 * rendering may take.
 */
static void test_too_large(const struct itest_daemon *d, const char *bin)
{
	static const char *const formats[] = { "text", "folded" };
	pid_t h = sec_start_hostile(d, "big", "4000", "250", bin);
	char path[128];

	TAP_OK(h > 0, "an agent of nobody with 1 M frames in %.40s...", bin);
	for (size_t i = 0; i < 2; i++) {
		struct http_opts o;
		struct http_response r;

		http_opts_init(&o);
		o.timeout_ms = 60000;
		o.max_body = 1u << 30;
		memset(&r, 0, sizeof(r));
		snprintf(path, sizeof(path),
			 "/api/v1/stacks?pid=%d&format=%s&timeout_ms=5000",
			 (int)h, formats[i]);
		if (http_get(d->url, path, &o, &r) < 0)
			r.status = 0;
		TAP_OK(r.status == 500 && r.body && strstr(r.body, "too large"),
		       "as %s: a 500 saying it is too large (%d, %zu bytes)",
		       formats[i], r.status, r.body_len);
		http_response_release(&r);
	}
	itest_kill(h);
}

/*
 * Sends the raw request req as uid to 127.0.0.1:port, in a child; the
 * status of the answer (0: none) and its first bytes in body.
 */
static int raw_as(uid_t uid, int port, const char *req, char *body, size_t size)
{
	int p[2], status = 0;
	ssize_t n, got = 0;
	pid_t pid;

	body[0] = '\0';
	if (pipe(p) < 0)
		return 0;
	pid = fork();
	if (pid == 0) {
		char buf[65536];
		size_t len = 0;
		int fd;

		close(p[0]);
		if (sec_become(uid, uid, NULL, 0) < 0)
			_exit(1);
		fd = connect_from(port, 0);
		if (fd < 0 || write(fd, req, strlen(req)) < 0)
			_exit(1);
		shutdown(fd, SHUT_WR);
		while (len < sizeof(buf) - 1 &&
		       (n = read(fd, buf + len, sizeof(buf) - 1 - len)) > 0)
			len += (size_t)n;
		(void)!write(p[1], buf, len);
		_exit(0);
	}
	close(p[1]);
	while (got < (ssize_t)size - 1 &&
	       (n = read(p[0], body + got, size - 1 - (size_t)got)) > 0)
		got += n;
	body[got] = '\0';
	close(p[0]);
	waitpid(pid, NULL, 0);
	sscanf(body, "HTTP/1.%*d %d", &status);
	return status;
}

/*
 * A web page that points an <img> at the daemon cannot make it dump
 * nobody's own target; nobody's script (no such headers) can.
 */
static void test_cross_site(const struct itest_daemon *d, pid_t h)
{
	char req[512], body[65536];
	int st;

	snprintf(req, sizeof(req),
		 "GET /api/v1/stacks?pid=%d HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n"
		 "Sec-Fetch-Site: cross-site\r\nSec-Fetch-Dest: image\r\n\r\n",
		 (int)h, d->port);
	st = raw_as(SEC_NOBODY, d->port, req, body, sizeof(body));
	TAP_OK(st == 403,
	       "nobody's browser, sent there by another site: "
	       "403 (%d)",
	       st);
	snprintf(req, sizeof(req),
		 "GET /api/v1/stacks?pid=%d HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n"
		 "Origin: http://evil.example\r\n\r\n",
		 (int)h, d->port);
	st = raw_as(SEC_NOBODY, d->port, req, body, sizeof(body));
	TAP_OK(st == 403, "a foreign Origin: 403 (%d)", st);
	snprintf(req, sizeof(req),
		 "GET /api/v1/stacks?pid=%d HTTP/1.1\r\nHost: 127.0.0.1:%d"
		 "\r\n\r\n",
		 (int)h, d->port);
	st = raw_as(SEC_NOBODY, d->port, req, body, sizeof(body));
	TAP_OK(st == 200, "nobody's own script: 200 (%d)", st);
}

/*
 * nobody's agent names itself with a right-to-left override, a C1
 * control and a zero-width space: text and folded answers show '?'.
 */
static void test_disguise(const struct itest_daemon *d)
{
	static const char name[] = "ev\xe2\x80\xaegnp\xc2\x85\xe2\x80\x8b";
	static const char *const formats[] = { "text", "folded" };
	struct sec_answer *a = calloc(1, sizeof(*a));
	pid_t h = sec_start_hostile(d, "name", name, NULL, NULL);
	char path[96];

	TAP_OK(a && h > 0, "an agent of nobody with a disguising name");
	for (size_t i = 0; a && h > 0 && i < 2; i++) {
		snprintf(path, sizeof(path), "/api/v1/stacks?pid=%d&format=%s",
			 (int)h, formats[i]);
		sec_get_as(SEC_NOBODY, SEC_NOBODY, NULL, 0, d->url, NULL, NULL,
			   path, a);
		TAP_OK(a->status == 200 && strstr(a->body, "ev?gnp??") &&
			       !strstr(a->body, "\xe2\x80\xae") &&
			       !strstr(a->body, "\xc2\x85"),
		       "as %s: shown as ev?gnp?? (%d)", formats[i], a->status);
	}
	if (h > 0)
		test_cross_site(d, h);
	itest_kill(h);
	free(a);
}

int main(void)
{
	static const char *const args[] = { "--sample-interval", "0", NULL };
	char bin[512], cmd[1200];
	struct itest_daemon d;

	if (geteuid() != 0) {
		TAP_SKIP("needs root: the daemon runs as root, requesters as "
			 "nobody");
		return tap_done();
	}
	if (!mkdtemp(work) || chmod(work, 0755) < 0) {
		TAP_OK(false, "a work directory");
		return tap_done();
	}
	/* A module without symbols, its name 240 characters long. */
	snprintf(bin, sizeof(bin), "%s/%0240d", work, 0);
	snprintf(cmd, sizeof(cmd), "strip -o '%s' '%s/stackwatchd'", bin,
		 itest_build());
	TAP_OK(system(cmd) == 0, "a stripped copy of the daemon");
	if (itest_daemon_start_args(&d, args) < 0) {
		TAP_OK(false, "the daemon starts");
		return tap_done();
	}
	chmod(d.dir, 0711); /* nobody may reach the agent socket */
	test_connections(&d);
	test_disguise(&d);
	test_too_large(&d, bin);
	TAP_OK(itest_alive(d.pid), "the daemon is alive after it all");
	TAP_OK(itest_daemon_stop(&d) == 0, "the daemon stops cleanly");
	itest_daemon_cleanup(&d);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", work);
	if (system(cmd) != 0)
		TAP_NOTE("could not remove %s", work);
	return tap_done();
}
