/*
 * test_it_service.c - the daemon as a systemd Type=notify service: the
 * real daemon started with NOTIFY_SOCKET pointing at a datagram socket of
 * ours, as systemd would. READY=1 must come only once HTTP and the agent
 * socket answer, STATUS= must follow the number of targets, WATCHDOG=1
 * must arrive every WatchdogUsec/2 (and not when no watchdog was asked
 * for, or when WATCHDOG_PID names another process), STOPPING=1 on SIGTERM.
 */
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "itest.h"
#include "tap.h"

#define MSG_MAX 4096

static char last_msg[MSG_MAX]; /* the datagram wait_for() matched last */

struct notify_sock {
	int fd;
	char dir[64];
	char path[108]; /* fits sun_path */
};

static int notify_open(struct notify_sock *n)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };

	snprintf(n->dir, sizeof(n->dir), "/tmp/sw-notify-XXXXXX");
	if (!mkdtemp(n->dir))
		return -1;
	snprintf(n->path, sizeof(n->path), "%s/notify.sock", n->dir);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", n->path);
	n->fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (n->fd < 0)
		return -1;
	return bind(n->fd, (struct sockaddr *)&sa, sizeof(sa));
}

static void notify_close(struct notify_sock *n)
{
	close(n->fd);
	unlink(n->path);
	rmdir(n->dir);
}

/*
 * Receives one datagram into buf within ms. Returns its length, or -1 on
 * timeout.
 */
static int recv_msg(int fd, char *buf, long ms)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	ssize_t n;

	if (poll(&p, 1, (int)(ms < 0 ? 0 : ms)) <= 0)
		return -1;
	n = recv(fd, buf, MSG_MAX - 1, 0);
	if (n < 0)
		return -1;
	buf[n] = '\0';
	return (int)n;
}

/* True when msg holds a line starting with prefix; its rest to out. */
static bool has_line(const char *msg, const char *prefix, char *out,
		     size_t size)
{
	size_t len = strlen(prefix);

	for (const char *l = msg; l && *l;) {
		const char *nl = strchr(l, '\n');
		size_t ll = nl ? (size_t)(nl - l) : strlen(l);

		if (ll >= len && strncmp(l, prefix, len) == 0) {
			if (out) {
				size_t m = ll - len < size - 1 ? ll - len
							       : size - 1;
				memcpy(out, l + len, m);
				out[m] = '\0';
			}
			return true;
		}
		l = nl ? nl + 1 : NULL;
	}
	return false;
}

/*
 * Waits up to ms for a datagram with a line starting with prefix; the
 * rest of the line goes to out. Counts the WATCHDOG=1 seen on the way.
 */
static bool wait_for(int fd, const char *prefix, long ms, char *out,
		     size_t size, int *watchdogs)
{
	char msg[MSG_MAX];

	for (long end = itest_now_ms() + ms; itest_now_ms() < end;) {
		if (recv_msg(fd, msg, end - itest_now_ms()) < 0)
			continue;
		if (watchdogs && has_line(msg, "WATCHDOG=1", NULL, 0))
			(*watchdogs)++;
		if (has_line(msg, prefix, out, size)) {
			memcpy(last_msg, msg, sizeof(last_msg));
			return true;
		}
	}
	return false;
}

/* Counts WATCHDOG=1 datagrams during ms. */
static int count_watchdogs(int fd, long ms)
{
	char msg[MSG_MAX];
	int n = 0;

	for (long end = itest_now_ms() + ms; itest_now_ms() < end;)
		if (recv_msg(fd, msg, end - itest_now_ms()) >= 0 &&
		    has_line(msg, "WATCHDOG=1", NULL, 0))
			n++;
	return n;
}

/* True when a unix stream socket accepts a connection at path. */
static bool socket_answers(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	bool ok;

	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	ok = fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;
	if (fd >= 0)
		close(fd);
	return ok;
}

static void test_notify_with_watchdog(void)
{
	static const char *const args[] = { "--sample-interval", "0", NULL };
	char sleep_bin[] = "/bin/sleep", sleep_s[] = "30";
	char *const sleeper[] = { sleep_bin, sleep_s, NULL };
	struct notify_sock ns;
	struct itest_daemon d;
	struct http_response r;
	char status[256], want[256];
	int watchdogs = 0, n, rc;
	pid_t agent;

	if (notify_open(&ns) < 0) {
		TAP_OK(0, "notify socket: %s", strerror(errno));
		return;
	}
	setenv("NOTIFY_SOCKET", ns.path, 1);
	setenv("WATCHDOG_USEC", "400000", 1);
	unsetenv("WATCHDOG_PID");
	rc = itest_daemon_start_args(&d, args);
	unsetenv("NOTIFY_SOCKET");
	unsetenv("WATCHDOG_USEC");
	if (!TAP_OK(rc == 0, "the daemon starts with NOTIFY_SOCKET set"))
		goto out_cleanup;

	TAP_OK(wait_for(ns.fd, "READY=1", 5000, NULL, 0, &watchdogs),
	       "READY=1 arrives");
	last_msg[MSG_MAX - 1] = '\0';
	/* READY=1 promises that both doors are open, right now. */
	memset(&r, 0, sizeof(r));
	rc = itest_get(&d, "/healthz", &r);
	TAP_OK(rc == 0 && r.status == 200,
	       "HTTP answers as soon as READY=1 arrived (status %d)", r.status);
	http_response_release(&r);
	TAP_OK(socket_answers(d.sock),
	       "the agent socket accepts as soon as READY=1 arrived");

	snprintf(want, sizeof(want), "1 target, serving %s", d.url);
	/* The first STATUS= travels with READY=1. */
	rc = has_line(last_msg, "STATUS=", status, sizeof(status));
	TAP_OK(rc && strcmp(status, want) == 0,
	       "STATUS= comes with READY=1: '%s'", rc ? status : "(none)");

	n = count_watchdogs(ns.fd, 2000);
	/* WatchdogUsec/2 = 200 ms: 10 in 2 s, give or take scheduling. */
	TAP_OK(n >= 6 && n <= 11,
	       "WATCHDOG=1 every WatchdogUsec/2: %d in 2 s at 400 ms", n);

	agent = itest_spawn(&d, sleeper, NULL);
	TAP_OK(itest_wait_registered(&d, agent, 10000), "an agent registers");
	snprintf(want, sizeof(want), "2 targets, serving %s", d.url);
	rc = wait_for(ns.fd, "STATUS=", 5000, status, sizeof(status), NULL);
	TAP_OK(rc && strcmp(status, want) == 0,
	       "STATUS= follows a new target: '%s'", rc ? status : "(none)");
	itest_kill(agent);
	snprintf(want, sizeof(want), "1 target, serving %s", d.url);
	rc = wait_for(ns.fd, "STATUS=", 5000, status, sizeof(status), NULL);
	TAP_OK(rc && strcmp(status, want) == 0,
	       "STATUS= follows a target that went away: '%s'",
	       rc ? status : "(none)");

	kill(d.pid, SIGTERM);
	TAP_OK(wait_for(ns.fd, "STOPPING=1", 5000, NULL, 0, NULL),
	       "STOPPING=1 arrives on SIGTERM");
	TAP_OK(itest_daemon_stop(&d) == 0, "the daemon exits 0");
out_cleanup:
	itest_daemon_cleanup(&d);
	notify_close(&ns);
}

/*
 * Without WATCHDOG_USEC, or with a WATCHDOG_PID of another process, no
 * WATCHDOG=1 goes out; READY=1 and STOPPING=1 still do.
 */
static void test_notify_no_watchdog(const char *watchdog_pid)
{
	static const char *const args[] = { "--sample-interval", "0", NULL };
	struct notify_sock ns;
	struct itest_daemon d;
	int rc, n;

	if (notify_open(&ns) < 0) {
		TAP_OK(0, "notify socket: %s", strerror(errno));
		return;
	}
	setenv("NOTIFY_SOCKET", ns.path, 1);
	if (watchdog_pid) {
		setenv("WATCHDOG_USEC", "200000", 1);
		setenv("WATCHDOG_PID", watchdog_pid, 1);
	}
	rc = itest_daemon_start_args(&d, args);
	unsetenv("NOTIFY_SOCKET");
	unsetenv("WATCHDOG_USEC");
	unsetenv("WATCHDOG_PID");
	if (!TAP_OK(rc == 0, "the daemon starts (watchdog pid %s)",
		    watchdog_pid ? watchdog_pid : "unset"))
		goto out_cleanup;
	TAP_OK(wait_for(ns.fd, "READY=1", 5000, NULL, 0, NULL),
	       "READY=1 arrives (watchdog pid %s)",
	       watchdog_pid ? watchdog_pid : "unset");
	n = count_watchdogs(ns.fd, 700);
	TAP_OK(n == 0, "no WATCHDOG=1 when %s (got %d)",
	       watchdog_pid ? "WATCHDOG_PID is another process"
			    : "no watchdog was asked for",
	       n);
	kill(d.pid, SIGTERM);
	TAP_OK(wait_for(ns.fd, "STOPPING=1", 5000, NULL, 0, NULL),
	       "STOPPING=1 arrives (watchdog pid %s)",
	       watchdog_pid ? watchdog_pid : "unset");
	TAP_OK(itest_daemon_stop(&d) == 0, "the daemon exits 0");
out_cleanup:
	itest_daemon_cleanup(&d);
	notify_close(&ns);
}

/* A start-up error sends no READY=1. */
static void test_no_ready_on_error(void)
{
	static const char *const args[] = { "--timeout", "0", NULL };
	struct notify_sock ns;
	struct itest_daemon d;
	char msg[MSG_MAX];
	bool ready = false;
	int rc;

	if (notify_open(&ns) < 0) {
		TAP_OK(0, "notify socket: %s", strerror(errno));
		return;
	}
	setenv("NOTIFY_SOCKET", ns.path, 1);
	rc = itest_daemon_start_args(&d, args);
	unsetenv("NOTIFY_SOCKET");
	while (recv_msg(ns.fd, msg, 200) >= 0)
		ready |= has_line(msg, "READY=1", NULL, 0);
	TAP_OK(rc < 0 && !ready, "a start-up error exits without READY=1");
	if (rc == 0)
		itest_daemon_stop(&d);
	itest_daemon_cleanup(&d);
	notify_close(&ns);
}

int main(void)
{
	signal(SIGPIPE, SIG_IGN);
	test_notify_with_watchdog();
	test_notify_no_watchdog(NULL);
	test_notify_no_watchdog("1");
	test_no_ready_on_error();
	return tap_done();
}
