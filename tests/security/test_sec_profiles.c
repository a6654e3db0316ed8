/*
 * test_sec_profiles.c - what profile runs (/debug/pprof/profile) one user
 * can hold on a root daemon is bounded, and root keeps a way in:
 *
 * - nobody holds 4 runs of its own process (seconds=300); a 5th is a 429
 *   naming --max-profiles-per-user, while another user is answered;
 * - another user sends 64 runs at once: 4 run, 60 are refused, and root
 *   still gets a profile; once the user closes its connections the runs
 *   end within a second or so (the gauge stackwatch_profiles_in_progress
 *   drops to 0) and the user may start 4 again;
 * - 14 users hold 4 runs each (56): a 15th user is refused (503), the
 *   last 8 runs being kept for root, the admin group and the token; root
 *   holds 5 (no per-user cap) and still gets one more.
 *
 * Requesters are clients of ours in process groups of their own, killed
 * by group; each holds its connections until it is killed.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "sectest.h"
#include "tap.h"

#define GAUGE "stackwatch_profiles_in_progress"
#define PER_USER 4	/* --max-profiles-per-user's default */
#define MAX_RUNS 64	/* profile runs at a time */
#define RESERVE 8	/* of them, kept for root and the admin group */
#define OTHER_UID 65533 /* a second unprivileged user */
#define FIRST_UID 60000 /* users 60000, 60001, ... (no processes) */
#define HOLD_MAX 64	/* connections one holder opens at most */

/* A client of ours holding connections: its pid is its process group. */
struct holder {
	pid_t pid;
	int counts[3]; /* connected, answered, answered 429 */
};

/* A connection to d as the caller: TCP, or d's HTTP unix socket. */
static int connect_to(const struct itest_daemon *d, bool unix_socket)
{
	struct sockaddr_in in = { .sin_family = AF_INET,
				  .sin_port = htons((uint16_t)d->port) };
	struct sockaddr_un un = { .sun_family = AF_UNIX };
	int fd = socket(unix_socket ? AF_UNIX : AF_INET,
			SOCK_STREAM | SOCK_CLOEXEC, 0);
	int rc;

	if (fd < 0)
		return -1;
	if (unix_socket) {
		/* itest.h's paths fit: /tmp/sw-itest-XXXXXX/http.sock */
		snprintf(un.sun_path, sizeof(un.sun_path), "%.107s",
			 d->http_sock);
		rc = connect(fd, (struct sockaddr *)&un, sizeof(un));
	} else {
		in.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		rc = connect(fd, (struct sockaddr *)&in, sizeof(in));
	}
	if (rc < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

/*
 * In the holder: reads answers until want of the n connections fds have
 * one or 10 s passed (a refused run is answered at once, one that runs
 * is not); counts[1] the answered, counts[2] those with status 429.
 */
static void read_answers(const int *fds, int n, int want, int counts[3])
{
	static char got[HOLD_MAX][16];
	static size_t len[HOLD_MAX];
	struct pollfd p[HOLD_MAX];
	long end = itest_now_ms() + 10000;

	while (counts[1] < want && itest_now_ms() < end) {
		for (int i = 0; i < n; i++) {
			/* A negative fd: done with it, poll() skips it. */
			p[i].fd = len[i] == sizeof(got[i]) ? -1 : fds[i];
			p[i].events = POLLIN;
		}
		if (poll(p, (nfds_t)n, 100) <= 0)
			continue;
		for (int i = 0; i < n; i++) {
			ssize_t r;
			int status = 0;

			if (!(p[i].revents & (POLLIN | POLLHUP | POLLERR)))
				continue;
			r = read(fds[i], got[i] + len[i],
				 sizeof(got[i]) - len[i]);
			if (r <= 0) {
				len[i] = sizeof(got[i]); /* closed: done */
				continue;
			}
			len[i] += (size_t)r;
			if (len[i] < sizeof(got[i]))
				continue;
			counts[1]++;
			if (sscanf(got[i], "HTTP/1.%*d %d", &status) == 1 &&
			    status == 429)
				counts[2]++;
		}
	}
}

/*
 * Starts a holder as uid, in a process group of its own: it opens n
 * connections to d (TCP, or the unix socket), sends GET target on each,
 * waits until want of them are answered (10 s at most), reports, and
 * holds every connection until it is killed. Returns 0 with h filled, or
 * -1.
 */
static int hold(const struct itest_daemon *d, uid_t uid, bool unix_socket,
		int n, const char *target, int want, struct holder *h)
{
	int p[2];

	memset(h, 0, sizeof(*h));
	if (n > HOLD_MAX || pipe(p) < 0)
		return -1;
	h->pid = fork();
	if (h->pid == 0) {
		static int fds[HOLD_MAX];
		char req[512];
		int counts[3] = { 0, 0, 0 };

		setpgid(0, 0);
		close(p[0]);
		if (sec_become(uid, uid, NULL, 0) < 0)
			_exit(126);
		snprintf(req, sizeof(req),
			 "GET %s HTTP/1.1\r\nHost: localhost\r\n\r\n", target);
		for (int i = 0; i < n; i++) {
			ssize_t len = (ssize_t)strlen(req);

			fds[i] = connect_to(d, unix_socket);
			if (fds[i] >= 0 && write(fds[i], req, len) == len)
				counts[0]++;
		}
		read_answers(fds, n, want, counts);
		(void)!write(p[1], counts, sizeof(counts));
		for (;;)
			pause();
	}
	close(p[1]);
	if (h->pid < 0) {
		close(p[0]);
		return -1;
	}
	setpgid(h->pid, h->pid);
	if (read(p[0], h->counts, sizeof(h->counts)) != sizeof(h->counts)) {
		close(p[0]);
		return -1;
	}
	close(p[0]);
	return 0;
}

/* Kills the process group pg and reaps its leader; true when none is left. */
static bool kill_group(pid_t pg)
{
	if (pg <= 0)
		return true;
	kill(-pg, SIGKILL);
	waitpid(pg, NULL, 0);
	for (long end = itest_now_ms() + 5000; itest_now_ms() < end;
	     itest_sleep_ms(10))
		if (kill(-pg, 0) < 0 && errno == ESRCH)
			return true;
	return false;
}

/*
 * Checks that the gauge comes to want within ms (polling /metrics as
 * root): one line, what followed by the last value and the time taken.
 */
static bool check_gauge(const struct itest_daemon *d, double want, long ms,
			const char *what)
{
	long t0 = itest_now_ms(), took;
	double v = itest_metric(d, GAUGE);

	while (v != want && itest_now_ms() < t0 + ms) {
		itest_sleep_ms(20);
		v = itest_metric(d, GAUGE);
	}
	took = itest_now_ms() - t0;
	return TAP_OK(v == want, "%s (" GAUGE " %g after %ld ms)", what, v,
		      took);
}

/*
 * GETs target as uid over TCP; the status, and the body's first line in
 * a->body.
 */
static int get_as(const struct itest_daemon *d, uid_t uid, const char *target,
		  struct sec_answer *a)
{
	sec_get_as(uid, uid, NULL, 0, d->url, NULL, NULL, target, a);
	a->body[strcspn(a->body, "\n")] = '\0'; /* an error is one line */
	return a->status;
}

/*
 * Starts the agent_target fixture as nobody in a process group of its
 * own and waits until the daemon lists it.
 */
static pid_t start_nobodys(const struct itest_daemon *d)
{
	char fixture[256], sigwait[] = "sigwait", one[] = "1";
	char *argv[] = { fixture, sigwait, one, NULL };
	int out = -1;
	pid_t pid;

	snprintf(fixture, sizeof(fixture), "%s/fixtures/agent_target",
		 itest_target_build());
	pid = sec_spawn_as(d, SEC_NOBODY, SEC_NOBODY, argv, &out);
	if (pid > 0 && (!itest_wait_line(out, "ready") ||
			!itest_wait_registered(d, pid, 10000))) {
		kill_group(pid);
		pid = -1;
	}
	if (out >= 0)
		close(out);
	return pid;
}

/* ------------------------------------------- --max-profiles-per-user */

static void test_per_user(const struct itest_daemon *d)
{
	struct sec_answer *a = calloc(1, sizeof(*a));
	pid_t mine = start_nobodys(d);
	struct holder h = { 0 };
	char path[128];
	int rc, st;

	TAP_OK(a && mine > 0, "a process of nobody's, with the agent");
	if (!a || mine <= 0) {
		free(a);
		kill_group(mine);
		return;
	}
	snprintf(path, sizeof(path), "/debug/pprof/profile?pid=%d&seconds=300",
		 (int)mine);
	rc = hold(d, SEC_NOBODY, false, PER_USER, path, 0, &h);
	TAP_OK(rc == 0 && h.counts[0] == PER_USER,
	       "nobody asks for %d profiles of it, 300 s each (%d sent)",
	       PER_USER, h.counts[0]);
	check_gauge(d, PER_USER, 10000, "they are in progress");
	snprintf(path, sizeof(path), "/debug/pprof/profile?pid=%d&seconds=1",
		 (int)mine);
	st = get_as(d, SEC_NOBODY, path, a);
	TAP_OK(st == 429 && strstr(a->body, "--max-profiles-per-user") &&
		       strstr(a->body, " 4 "),
	       "a 5th is refused with a 429 naming the limit and the option "
	       "(%d %.200s)",
	       st, st == 200 ? "a profile" : a->body);
	st = get_as(d, OTHER_UID, "/debug/pprof/profile?seconds=1", a);
	TAP_OK(st == 200, "meanwhile another user gets a profile (%d)", st);
	st = sec_root_get(d, path, 10000, NULL);
	TAP_OK(st == 200, "and root gets one of nobody's process (%d)", st);
	TAP_OK(kill_group(h.pid), "nobody's client is gone, none of it left");
	check_gauge(d, 0, 5000, "its runs end with their client");
	st = get_as(d, SEC_NOBODY, path, a);
	TAP_OK(st == 200, "nobody gets a profile again (%d)", st);
	TAP_OK(kill_group(mine), "nobody's process is gone");
	free(a);
}

/* ------------------------------------- 64 runs at once, then closed */

static void test_flood(const struct itest_daemon *d)
{
	const char *path = "/debug/pprof/profile?seconds=300";
	struct holder h = { 0 };
	int rc, st;

	rc = hold(d, OTHER_UID, false, MAX_RUNS, path, MAX_RUNS - PER_USER, &h);
	TAP_OK(rc == 0 && h.counts[0] == MAX_RUNS,
	       "a user sends %d profile requests of 300 s at once (%d sent)",
	       MAX_RUNS, h.counts[0]);
	TAP_OK(h.counts[1] == MAX_RUNS - PER_USER &&
		       h.counts[2] == MAX_RUNS - PER_USER,
	       "%d are refused at once with a 429 (%d answered, %d 429)",
	       MAX_RUNS - PER_USER, h.counts[1], h.counts[2]);
	check_gauge(d, PER_USER, 10000, "4 run");
	st = sec_root_get(d, "/debug/pprof/profile?seconds=1", 10000, NULL);
	TAP_OK(st == 200, "root still gets a profile (%d)", st);
	TAP_OK(kill_group(h.pid), "the user closes them all, none of it left");
	check_gauge(d, 0, 5000, "every run ends with its client");
	rc = hold(d, OTHER_UID, false, PER_USER, path, 0, &h);
	TAP_OK(rc == 0 && h.counts[0] == PER_USER,
	       "the user asks for %d again (%d sent)", PER_USER, h.counts[0]);
	check_gauge(d, PER_USER, 10000, "they run, none is refused");
	TAP_OK(kill_group(h.pid), "closed again, none of it left");
	check_gauge(d, 0, 5000, "they end again");
}

/* --------------------------------------- the reserve of root's runs */

static void test_reserve(const struct itest_daemon *d)
{
	const char *path = "/debug/pprof/profile?seconds=300";
	const int users = (MAX_RUNS - RESERVE) / PER_USER;
	struct sec_answer *a = calloc(1, sizeof(*a));
	struct holder h[(MAX_RUNS - RESERVE) / PER_USER + 1];
	int held = 0, rc, st;
	bool gone = true;

	memset(h, 0, sizeof(h));
	for (int i = 0; i < users; i++) {
		rc = hold(d, FIRST_UID + (uid_t)i, true, PER_USER, path, 0,
			  &h[i]);
		held += rc == 0 && h[i].counts[0] == PER_USER;
	}
	TAP_OK(held == users,
	       "%d users ask for %d profiles each over the unix socket (%d)",
	       users, PER_USER, held);
	check_gauge(d, users * PER_USER, 10000, "they are in progress");
	st = a ? get_as(d, FIRST_UID + (uid_t)users,
			"/debug/pprof/profile?seconds=1", a)
	       : 0;
	TAP_OK(st == 503 && strstr(a->body, "root"),
	       "one more user is refused: the last %d are root's (%d %.200s)",
	       RESERVE, st, !a || st == 200 ? "a profile" : a->body);
	rc = hold(d, 0, true, PER_USER + 1, path, 0, &h[users]);
	TAP_OK(rc == 0 && h[users].counts[0] == PER_USER + 1,
	       "root asks for %d (%d sent)", PER_USER + 1, h[users].counts[0]);
	check_gauge(d, users * PER_USER + PER_USER + 1, 10000,
		    "all of root's run: no per-user cap");
	st = sec_root_get(d, "/debug/pprof/profile?seconds=1", 10000, NULL);
	TAP_OK(st == 200, "and root gets one more profile (%d)", st);
	for (int i = 0; i <= users; i++)
		gone = kill_group(h[i].pid) && gone;
	TAP_OK(gone, "every client closed, none of them left");
	check_gauge(d, 0, 5000, "every run ended");
	free(a);
}

int main(void)
{
	static const char *const args[] = { "--sample-interval", "0", NULL };
	struct itest_daemon d;

	if (geteuid() != 0) {
		TAP_SKIP("needs root: the daemon runs as root, requesters as "
			 "other users");
		return tap_done();
	}
	if (itest_daemon_start_args(&d, args) < 0) {
		TAP_OK(false, "the daemon starts");
		return tap_done();
	}
	chmod(d.dir, 0711); /* the sockets by name only */
	test_per_user(&d);
	test_flood(&d);
	test_reserve(&d);
	TAP_OK(itest_alive(d.pid), "the daemon is alive after it all");
	TAP_OK(itest_daemon_stop(&d) == 0, "the daemon stops cleanly");
	itest_daemon_cleanup(&d);
	return tap_done();
}
