/*
 * test_sec_load.c - one user asking for a great deal at once does not
 * hold up everybody else's requests.
 *
 * nobody runs a process of 10,000 threads and 1,000 processes of its
 * own, then asks for all of it at once and again and again, from 16
 * clients at a time, for a few seconds: the process table, the stacks of
 * the big process in text and as pprof, every target's stacks. Meanwhile
 * root and another user (65533) ask for the stacks of a small process
 * of their own every 200 ms. Each of their requests is answered, within
 * its timeout (a dump's deadline); the latencies, before the load and
 * under it, are printed as notes. nobody's requests beyond the few it
 * may have at work wait for their turn (turns.h), which /metrics counts,
 * and are answered too.
 */
#define _GNU_SOURCE
#include <stdatomic.h>

#include "sectest.h"
#include "tap.h"

#define OTHER_UID 65533
#define BIG_THREADS 10000
#define HERD 1000
#define CLIENTS 16
#define LOAD_S 6

/* A process of nobody's whose HERD children pause. Its pid (a group). */
static pid_t start_herd(void)
{
	int p[2];
	pid_t pid;
	char c;

	if (pipe(p) < 0)
		return -1;
	pid = fork();
	if (pid == 0) {
		setpgid(0, 0);
		close(p[0]);
		if (sec_become(SEC_NOBODY, SEC_NOBODY, NULL, 0) < 0)
			_exit(126);
		for (int i = 0; i < HERD; i++)
			if (fork() == 0) {
				close(p[1]);
				for (;;)
					pause();
			}
		(void)!write(p[1], "r", 1);
		for (;;)
			pause();
	}
	close(p[1]);
	if (pid < 0 || read(p[0], &c, 1) != 1)
		pid = -1;
	close(p[0]);
	return pid;
}

/* plain_target of BIG_THREADS threads as nobody. Its pid (a group). */
static pid_t start_big(void)
{
	char fixture[256], n[16];
	char *argv[] = { fixture, n, NULL };
	int p[2], q[2];
	pid_t pid;
	bool ready;

	snprintf(fixture, sizeof(fixture), "%s/fixtures/plain_target",
		 itest_target_build());
	snprintf(n, sizeof(n), "%d", BIG_THREADS);
	if (pipe(p) < 0 || pipe(q) < 0)
		return -1;
	pid = fork();
	if (pid == 0) {
		setpgid(0, 0);
		dup2(p[1], 1);
		dup2(q[0], 0);
		close(p[0]);
		close(p[1]);
		close(q[0]);
		close(q[1]);
		if (sec_become(SEC_NOBODY, SEC_NOBODY, NULL, 0) < 0)
			_exit(126);
		execv(argv[0], argv);
		_exit(127);
	}
	close(p[1]);
	close(q[0]);
	ready = pid > 0 && itest_wait_line(p[0], "ready");
	close(p[0]);
	/* q[1] stays open: the fixture reads its stdin until it closes. */
	if (!ready && pid > 0) {
		kill(-pid, SIGKILL);
		waitpid(pid, NULL, 0);
		return -1;
	}
	return pid;
}

/*
 * A client of nobody's: asks for the paths one after another until
 * LOAD_S seconds passed; exits with the number of 200s (capped).
 */
static pid_t start_client(const struct itest_daemon *d, pid_t big, pid_t group)
{
	pid_t pid = fork();

	if (pid == 0) {
		char paths[4][96];
		long end = itest_now_ms() + LOAD_S * 1000L;
		int ok = 0;

		setpgid(0, group);
		if (sec_become(SEC_NOBODY, SEC_NOBODY, NULL, 0) < 0)
			_exit(0);
		snprintf(paths[0], sizeof(paths[0]), "/api/v1/processes");
		snprintf(paths[1], sizeof(paths[1]),
			 "/api/v1/stacks?pid=%d&format=text", (int)big);
		snprintf(paths[2], sizeof(paths[2]),
			 "/debug/pprof/threads?pid=%d", (int)big);
		snprintf(paths[3], sizeof(paths[3]), "/api/v1/stacks");
		for (int i = 0; itest_now_ms() < end; i++) {
			struct http_opts o;
			struct http_response r;

			http_opts_init(&o);
			o.unix_socket = d->http_sock;
			o.timeout_ms = 15000;
			memset(&r, 0, sizeof(r));
			if (http_get("http://localhost", paths[i % 4], &o,
				     &r) == 0 &&
			    r.status == 200)
				ok++;
			http_response_release(&r);
		}
		_exit(ok > 250 ? 250 : ok);
	}
	if (pid > 0)
		setpgid(pid, group ? group : pid);
	return pid;
}

/* One GET as uid of pid's stacks: its status, its time in *ms. */
static int timed(const struct itest_daemon *d, uid_t uid, pid_t pid, long *ms)
{
	struct sec_answer *a = calloc(1, sizeof(*a));
	char path[96];
	long t0 = itest_now_ms();
	int st;

	snprintf(path, sizeof(path), "/api/v1/stacks?pid=%d&format=text",
		 (int)pid);
	if (!a)
		return 0;
	sec_get_as(uid, uid, NULL, 0, d->url, d->http_sock, NULL, path, a);
	*ms = itest_now_ms() - t0;
	st = a->status;
	free(a);
	return st;
}

/* A metric's value from root's /metrics, -1 when absent. */
static double metric(const struct itest_daemon *d, const char *name)
{
	return itest_metric(d, name);
}

static int cmp_long(const void *a, const void *b)
{
	long x = *(const long *)a, y = *(const long *)b;

	return (x > y) - (x < y);
}

/* "p50 N ms, max M ms" of v (n of them, sorted here). */
static void describe(long *v, int n, char *buf, size_t size)
{
	qsort(v, (size_t)n, sizeof(*v), cmp_long);
	snprintf(buf, size, "p50 %ld ms, max %ld ms (%d requests)",
		 n ? v[n / 2] : -1, n ? v[n - 1] : -1, n);
}

int main(void)
{
	static const char *const args[] = { "--sample-interval", "0", NULL };
	struct itest_daemon d;
	pid_t herd, big, mine, theirs, clients[CLIENTS], group = 0;
	long idle[10], root_ms[64], other_ms[64];
	int nroot = 0, nother = 0, bad = 0, answered = 0;
	double waited_before, waiting_max = 0;
	char line[160];

	if (geteuid() != 0) {
		TAP_SKIP("needs root: the daemon runs as root, requesters as "
			 "other users");
		return tap_done();
	}
	if (itest_daemon_start_args(&d, args) < 0) {
		TAP_OK(0, "the daemon starts");
		return tap_done();
	}
	chmod(d.dir, 0711);
	mine = sec_sleeper(0, 0);
	theirs = sec_sleeper(OTHER_UID, OTHER_UID);
	herd = start_herd();
	big = start_big();
	TAP_OK(mine > 0 && theirs > 0 && sec_wait_comm(mine, "sleep") &&
		       sec_wait_comm(theirs, "sleep"),
	       "root and user %d each run a sleep", OTHER_UID);
	TAP_OK(herd > 0 && big > 0,
	       "nobody runs %d processes and one of %d threads", HERD + 1,
	       BIG_THREADS);
	for (int i = 0; i < 10; i++) {
		int st = timed(&d, 0, mine, &idle[i]);

		bad += st != 200;
	}
	describe(idle, 10, line, sizeof(line));
	TAP_NOTE("root's dumps of its sleep, idle: %s", line);
	waited_before = metric(&d, "stackwatch_http_turn_waits_total");

	for (int i = 0; i < CLIENTS; i++) {
		clients[i] = start_client(&d, big, group);
		if (!group)
			group = clients[i];
	}
	for (long end = itest_now_ms() + (LOAD_S - 1) * 1000L;
	     itest_now_ms() < end && nroot < 64;) {
		double w;

		bad += timed(&d, 0, mine, &root_ms[nroot++]) != 200;
		bad += timed(&d, OTHER_UID, theirs, &other_ms[nother++]) != 200;
		w = metric(&d, "stackwatch_http_requests_waiting_turn");
		if (w > waiting_max)
			waiting_max = w;
		itest_sleep_ms(200);
	}
	for (int i = 0; i < CLIENTS; i++) {
		int st;

		if (clients[i] > 0 &&
		    waitpid(clients[i], &st, 0) == clients[i] && WIFEXITED(st))
			answered += WEXITSTATUS(st);
	}
	describe(root_ms, nroot, line, sizeof(line));
	TAP_NOTE("root's dumps of its sleep under nobody's load: %s", line);
	describe(other_ms, nother, line, sizeof(line));
	TAP_NOTE("user %d's dumps of its sleep under nobody's load: %s",
		 OTHER_UID, line);
	TAP_OK(bad == 0 && nroot > 5,
	       "root's and user %d's requests are all answered within their "
	       "timeout under nobody's load (%d failed)",
	       OTHER_UID, bad);
	TAP_OK(answered > 0, "nobody's requests are answered too (%d)",
	       answered);
	TAP_OK(metric(&d, "stackwatch_http_turn_waits_total") > waited_before &&
		       waiting_max >= 1,
	       "nobody's requests beyond its turns waited for them (%g at "
	       "once at most)",
	       waiting_max);

	kill(-group, SIGKILL);
	kill(-herd, SIGKILL);
	kill(-big, SIGKILL);
	waitpid(herd, NULL, 0);
	waitpid(big, NULL, 0);
	itest_kill(mine);
	itest_kill(theirs);
	TAP_OK(!itest_alive(herd) && !itest_alive(big) && !itest_alive(mine),
	       "every process of the test is gone");
	TAP_OK(itest_daemon_stop(&d) == 0, "the daemon stops cleanly");
	itest_daemon_cleanup(&d);
	return tap_done();
}
