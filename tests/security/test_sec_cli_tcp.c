/*
 * test_sec_cli_tcp.c - the CLI sends its token, and trusts an answer,
 * only where the daemon is.
 *
 * With no --url, the CLI talks to the daemon's unix socket; when that
 * socket is stale (its daemon gone) or absent, it used to fall back to
 * the default http://127.0.0.1:9407, where any local user can listen
 * first: such a listener got STACKWATCH_TOKEN and could show forged
 * stacks. The test runs in network and mount namespaces of its own, so
 * that port 9407 and /run/stackwatch are its own whatever runs on the
 * host. A listener run by nobody takes 127.0.0.1:9407 and answers with a
 * forged target list; the CLI, run by root:
 * - with a stale socket at /run/stackwatch/http.sock and a token: exits
 *   3 saying why, the listener receives nothing, nothing forged printed;
 * - with the stale socket and no token: the same (the listener is
 *   nobody's, not root's: refused before anything is sent);
 * - with no socket at all and a token: the same;
 * - with --url naming the listener (the user's choice): it is used.
 * Then with the real daemon on 127.0.0.1:9407 (root's, with a token
 * file) the CLI works in both first cases; and nobody's CLI takes
 * nobody's own listener (a user's own daemon).
 */
#define _GNU_SOURCE
#include <net/if.h>
#include <netinet/in.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "sectest.h"
#include "tap.h"

#define PORT 9407
#define TOKEN "s3cret-token-of-the-test"
#define FORGED "FORGED-BY-THE-LISTENER"

static char got_path[128]; /* what the listener received, appended */

/* Brings up lo in our new network namespace. 0 or -1. */
static int loopback_up(void)
{
	struct ifreq ifr = { 0 };
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	int rc = -1;

	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "lo");
	if (fd >= 0 && ioctl(fd, SIOCGIFFLAGS, &ifr) == 0) {
		ifr.ifr_flags |= IFF_UP;
		rc = ioctl(fd, SIOCSIFFLAGS, &ifr);
	}
	if (fd >= 0)
		close(fd);
	return rc;
}

/*
 * Network and mount namespaces of our own, with a fresh /run: 0, or -1
 * when this host does not let us (then the test skips).
 */
static int own_namespaces(void)
{
	if (unshare(CLONE_NEWNET | CLONE_NEWNS) < 0 ||
	    mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 ||
	    mount("tmpfs", "/run", "tmpfs", 0, "mode=0755") < 0 ||
	    loopback_up() < 0)
		return -1;
	return mkdir("/run/stackwatch", 0755);
}

/*
 * A listener on 127.0.0.1:PORT run by uid: appends what each client sends
 * to got_path and answers a forged target list. Its pid, or -1.
 */
static pid_t plant_listener(uid_t uid)
{
	struct sockaddr_in a = { .sin_family = AF_INET,
				 .sin_port = htons(PORT),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int ready[2];
	char c = 0;
	pid_t pid;

	if (pipe(ready) < 0)
		return -1;
	pid = fork();
	if (pid == 0) {
		int out = open(got_path, O_WRONLY | O_APPEND | O_CLOEXEC);
		int one = 1, s;

		setpgid(0, 0);
		close(ready[0]);
		if (out < 0 || sec_become(uid, uid, NULL, 0) < 0)
			_exit(1);
		s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (bind(s, (struct sockaddr *)&a, sizeof(a)) < 0 ||
		    listen(s, 16) < 0)
			_exit(1);
		(void)!write(ready[1], "r", 1);
		for (;;) {
			static const char answer[] =
				"HTTP/1.0 200 OK\r\n"
				"Content-Type: application/json\r\n\r\n"
				"{\"targets\":[{\"pid\":4242,\"comm\":\"" FORGED
				"\",\"cmdline\":\"" FORGED "\",\"uid\":0,"
				"\"signal\":38,\"threads\":1,\"self\":false}]}";
			struct pollfd p;
			char buf[4096];
			ssize_t n;
			int c2 = accept(s, NULL, NULL);

			if (c2 < 0)
				continue;
			p.fd = c2;
			p.events = POLLIN;
			if (poll(&p, 1, 1000) == 1 &&
			    (n = read(c2, buf, sizeof(buf))) > 0)
				(void)!write(out, buf, (size_t)n);
			(void)!write(c2, answer, sizeof(answer) - 1);
			close(c2);
		}
	}
	close(ready[1]);
	if (pid < 0 || read(ready[0], &c, 1) != 1) {
		close(ready[0]);
		if (pid > 0)
			itest_kill(pid);
		return -1;
	}
	close(ready[0]);
	setpgid(pid, pid);
	return pid;
}

/* The bytes the listener has received, and empties its record. */
static long received(bool *token)
{
	char buf[8192] = "";
	long n = 0;
	int fd = open(got_path, O_RDWR | O_CLOEXEC);

	if (fd >= 0) {
		n = (long)read(fd, buf, sizeof(buf) - 1);
		if (n < 0)
			n = 0;
		buf[n] = '\0';
		if (ftruncate(fd, 0) < 0)
			n = -1;
		close(fd);
	}
	*token = strstr(buf, TOKEN) != NULL;
	return n;
}

/* A socket file at path that no one listens on: a daemon gone. */
static int stale_socket(const char *path)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	int rc;

	snprintf(a.sun_path, sizeof(a.sun_path), "%s", path);
	unlink(path);
	rc = s < 0 ? -1 : bind(s, (struct sockaddr *)&a, sizeof(a));
	if (s >= 0)
		close(s);
	return rc;
}

struct run {
	int status;	/* exit status, -1 when it did not exit */
	char out[4096]; /* stdout */
	char err[4096]; /* stderr */
};

/*
 * Runs `stackwatch ARGS targets` as uid with the token (or none), and
 * without STACKWATCH_URL and STACKWATCH_HTTP_SOCKET.
 */
static void run_cli(uid_t uid, const char *token, const char *url,
		    struct run *r)
{
	char cmd[1024], errpath[160];
	FILE *f;
	size_t n;
	int st;

	snprintf(errpath, sizeof(errpath), "%s.err", got_path);
	snprintf(cmd, sizeof(cmd),
		 "setpriv --reuid=%u --regid=%u --clear-groups env -u "
		 "STACKWATCH_URL -u STACKWATCH_HTTP_SOCKET -u XDG_RUNTIME_DIR "
		 "%s%s %s/stackwatch %s%s targets 2>%s",
		 (unsigned)uid, (unsigned)uid, token ? "STACKWATCH_TOKEN=" : "",
		 token ? token : "", sec_cli_dir(), url ? "--url " : "",
		 url ? url : "", errpath);
	memset(r, 0, sizeof(*r));
	f = popen(cmd, "r");
	n = f ? fread(r->out, 1, sizeof(r->out) - 1, f) : 0;
	r->out[n] = '\0';
	st = f ? pclose(f) : -1;
	r->status = st >= 0 && WIFEXITED(st) ? WEXITSTATUS(st) : -1;
	f = fopen(errpath, "r");
	n = f ? fread(r->err, 1, sizeof(r->err) - 1, f) : 0;
	while (n && r->err[n - 1] == '\n')
		n--;
	r->err[n] = '\0';
	if (f)
		fclose(f);
	unlink(errpath);
}

/* A refusal: exit 3, one line that says why, nothing sent or shown. */
static void check_refused(const char *what, const struct run *r,
			  const char *because)
{
	bool token;
	long got = received(&token);

	TAP_OK(r->status == 3, "%s: the CLI exits 3 (%d)", what, r->status);
	TAP_OK(r->err[0] && !strchr(r->err, '\n') && strstr(r->err, because),
	       "%s: it says why in one line (%s)", what, r->err);
	TAP_OK(got == 0 && !token,
	       "%s: the listener receives nothing (%ld bytes)", what, got);
	TAP_OK(!strstr(r->out, FORGED) && !strstr(r->err, FORGED),
	       "%s: nothing the listener sent is printed", what);
}

static void check_planted(pid_t listener)
{
	const char *sock = "/run/stackwatch/http.sock";
	struct run r;
	bool token;
	long got;

	TAP_OK(listener > 0, "nobody listens on 127.0.0.1:%d", PORT);
	TAP_OK(stale_socket(sock) == 0, "a stale socket at %s", sock);
	run_cli(0, TOKEN, NULL, &r);
	check_refused("a stale socket, a token", &r, "STACKWATCH_TOKEN");
	run_cli(0, NULL, NULL, &r);
	check_refused("a stale socket, no token", &r, "uid 65534");
	unlink(sock);
	run_cli(0, TOKEN, NULL, &r);
	check_refused("no socket, a token", &r, "uid 65534");

	/* The listener works: the checks above could fail. */
	run_cli(0, TOKEN, "http://127.0.0.1:9407", &r);
	got = received(&token);
	TAP_OK(r.status == 0 && strstr(r.out, FORGED) && got > 0 && token,
	       "--url naming the listener is the user's choice: the token "
	       "goes there (exit %d, %ld bytes)",
	       r.status, got);
	run_cli(SEC_NOBODY, NULL, NULL, &r);
	got = received(&token);
	TAP_OK(r.status == 0 && strstr(r.out, FORGED) && got > 0,
	       "nobody's CLI takes nobody's own listener (exit %d)", r.status);
}

static void check_daemon(void)
{
	const char *sock = "/run/stackwatch/http.sock";
	char tokfile[160], port[32];
	const char *args[8];
	struct itest_daemon d;
	struct run r;
	int fd;

	snprintf(tokfile, sizeof(tokfile), "%s.token", got_path);
	fd = open(tokfile, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd >= 0) {
		(void)!write(fd, TOKEN "\n", strlen(TOKEN) + 1);
		close(fd);
	}
	snprintf(port, sizeof(port), "127.0.0.1:%d", PORT);
	args[0] = "--sample-interval";
	args[1] = "0";
	args[2] = "--token-file";
	args[3] = tokfile;
	args[4] = "--listen";
	args[5] = port;
	args[6] = NULL;
	if (itest_daemon_start_args(&d, args) < 0) {
		TAP_OK(0, "the daemon starts on 127.0.0.1:%d", PORT);
		unlink(tokfile);
		return;
	}
	stale_socket(sock);
	run_cli(0, NULL, NULL, &r);
	TAP_OK(r.status == 5 && strstr(r.err, "token"),
	       "with the daemon on TCP and a stale socket, the CLI reaches "
	       "it (it asks for its token: exit %d)",
	       r.status);
	unlink(sock);
	run_cli(0, TOKEN, NULL, &r);
	TAP_OK(r.status == 0 && strstr(r.out, "stackwatchd"),
	       "with the daemon on TCP and no socket, the CLI sends it the "
	       "token and lists its targets (exit %d)",
	       r.status);
	TAP_OK(itest_daemon_stop(&d) == 0, "the daemon stops cleanly");
	itest_daemon_cleanup(&d);
	unlink(tokfile);
}

int main(void)
{
	char dir[] = "/tmp/sw-cli-tcp-XXXXXX";
	pid_t listener;
	int fd;

	if (geteuid() != 0) {
		TAP_SKIP("needs root: network and mount namespaces of its own");
		return tap_done();
	}
	if (own_namespaces() < 0) {
		TAP_SKIP("no network and mount namespaces of our own here "
			 "(%s)",
			 strerror(errno));
		return tap_done();
	}
	if (!mkdtemp(dir)) {
		TAP_OK(0, "a temp dir");
		return tap_done();
	}
	snprintf(got_path, sizeof(got_path), "%s/got", dir);
	fd = open(got_path, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
	if (fd >= 0)
		close(fd);

	listener = plant_listener(SEC_NOBODY);
	check_planted(listener);
	if (listener > 0) {
		kill(-listener, SIGKILL);
		waitpid(listener, NULL, 0);
	}
	TAP_OK(listener <= 0 || !itest_alive(listener), "the listener is gone");
	check_daemon();

	unlink(got_path);
	rmdir(dir);
	return tap_done();
}
