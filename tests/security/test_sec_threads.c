/*
 * test_sec_threads.c - a thread that keeps credentials of its own is
 * read only by whom the kernel lets read that thread.
 *
 * tests/fixtures/mixed_creds, started by root, keeps one thread at root
 * (in kept_root_secret()) and drops the others to nobody with raw
 * system calls, dumpable. The kernel lets nobody read those, not the
 * root thread. It runs twice: under the agent (a target, sampled, with a
 * history) and without (read by the kernel or ptrace when asked). For
 * each, nobody's stacks (JSON, text, folded), pprof threads, the page's
 * history (profile, diff) and a pprof profile run hold no frame of the
 * root thread (nor its name) and say how many threads were left out,
 * while they hold nobody's own thread; root's hold the root thread. A
 * line to the fixture moves its root thread on, for the diff.
 */
#define _GNU_SOURCE
#include <zlib.h>

#include "sectest.h"
#include "tap.h"

#define SECRET "kept_root" /* kept_root_secret(), kept_root_moved() */
#define SECRET_THREAD "rootkeeper"
#define OWN "nobody_waits"

/* The body of a, gunzipped when it is gzip; malloc'd, NUL-ended. */
static char *plain_body(const struct sec_answer *a, size_t len)
{
	const unsigned char *in = (const unsigned char *)a->body;
	size_t cap = 1 << 22;
	char *out = malloc(cap + 1);
	z_stream z = { 0 };

	if (!out)
		return NULL;
	if (len < 2 || in[0] != 0x1f || in[1] != 0x8b) {
		memcpy(out, a->body, len < cap ? len : cap);
		out[len < cap ? len : cap] = '\0';
		return out;
	}
	if (inflateInit2(&z, 16 + MAX_WBITS) != Z_OK) {
		free(out);
		return NULL;
	}
	z.next_in = (unsigned char *)in;
	z.avail_in = (unsigned)len;
	z.next_out = (unsigned char *)out;
	z.avail_out = (unsigned)cap;
	inflate(&z, Z_FINISH);
	out[cap - z.avail_out] = '\0';
	/* protobuf strings are not NUL-ended: make every NUL a space */
	for (size_t i = 0; i < cap - z.avail_out; i++)
		if (!out[i])
			out[i] = ' ';
	inflateEnd(&z);
	return out;
}

/* GET path as uid over the unix socket; the body, plain, malloc'd. */
static char *get(const struct itest_daemon *d, uid_t uid, const char *path,
		 int *status)
{
	struct sec_answer *a = calloc(1, sizeof(*a));
	struct sec_pending pg;
	size_t len = 0;
	char *body;
	ssize_t n;

	if (!a)
		return NULL;
	/* sec_get_finish() stops at a NUL: read the raw bytes here. */
	sec_get_start(uid, uid, NULL, 0, d->url, d->http_sock, NULL, path, &pg);
	if (pg.fd >= 0 &&
	    read(pg.fd, &a->status, sizeof(a->status)) == sizeof(a->status))
		while ((n = read(pg.fd, a->body + len,
				 sizeof(a->body) - 1 - len)) > 0)
			len += (size_t)n;
	if (pg.fd >= 0)
		close(pg.fd);
	if (pg.pid > 0)
		waitpid(pg.pid, NULL, 0);
	*status = a->status;
	body = plain_body(a, len);
	free(a);
	return body;
}

/* The "hidden_threads" of a stacks JSON body, -1 when absent. */
static int hidden_of(const char *body)
{
	cJSON *j = cJSON_Parse(body);
	cJSON *h = cJSON_GetObjectItem(j, "hidden_threads");
	int n = cJSON_IsNumber(h) ? (int)h->valuedouble : -1;

	cJSON_Delete(j);
	return n;
}

/*
 * One view of pid: nobody's holds none of the root thread's frames (and,
 * with own, its own thread's), root's holds them.
 */
static void check_view(const struct itest_daemon *d, const char *what,
		       const char *fmt, pid_t pid, bool own)
{
	/* Without symbols, the thread's name is what there is of it. */
	const char *mark = strstr(fmt, "symbols=0") ? SECRET_THREAD : SECRET;
	char path[160];
	char *mine, *roots;
	int st_n, st_r;

	sec_path_pid(path, sizeof(path), fmt, pid);
	mine = get(d, SEC_NOBODY, path, &st_n);
	roots = get(d, 0, path, &st_r);
	TAP_OK(st_n == 200 && mine && !strstr(mine, mark) &&
		       !strstr(mine, SECRET_THREAD) &&
		       (!own || strstr(mine, OWN)),
	       "%s: nobody's %s has no frame of the root thread%s (%d)", what,
	       path, own ? ", and its own thread's" : "", st_n);
	TAP_OK(st_r == 200 && roots && strstr(roots, mark),
	       "%s: root's %s has the root thread (%d)", what, path, st_r);
	free(mine);
	free(roots);
}

static void check_process(const struct itest_daemon *d, const char *what,
			  pid_t pid, bool history)
{
	char path[96];
	char *body;
	int st;

	snprintf(path, sizeof(path), "/api/v1/stacks?pid=%d", (int)pid);
	body = get(d, SEC_NOBODY, path, &st);
	TAP_OK(st == 200 && body && hidden_of(body) >= 1,
	       "%s: nobody's dump says threads were left out "
	       "(hidden_threads %d)",
	       what, body ? hidden_of(body) : -2);
	free(body);
	body = get(d, 0, path, &st);
	TAP_OK(st == 200 && body && hidden_of(body) == -1,
	       "%s: root's dump leaves nothing out", what);
	free(body);
	check_view(d, what, "/api/v1/stacks?pid=%d", pid, true);
	check_view(d, what, "/api/v1/stacks?pid=%d&format=text", pid, true);
	check_view(d, what, "/api/v1/stacks?pid=%d&format=folded", pid, true);
	check_view(d, what, "/api/v1/stacks?pid=%d&symbols=0&format=json", pid,
		   false);
	check_view(d, what, "/debug/pprof/threads?pid=%d", pid, true);
	check_view(d, what, "/debug/pprof/threads?pid=%d&debug=1", pid, true);
	check_view(d, what, "/debug/pprof/profile?seconds=1&pid=%d", pid, true);
	if (!history)
		return;
	check_view(d, what, "/api/v1/profile?pid=%d", pid, true);
}

/*
 * The diff of pid across the root thread's move (a line to in): root's
 * shows the root thread changed, nobody's does not show it at all.
 */
static void check_diff(const struct itest_daemon *d, pid_t pid, int in)
{
	TAP_OK(write(in, "move\n", 5) == 5, "the root thread is moved on");
	/* Periodic samples after the move, and one well before it. */
	itest_sleep_ms(1000);
	check_view(d, "under the agent", "/api/v1/diff?pid=%d&since=2.5", pid,
		   false);
}

/* Starts mixed_creds as root, with the agent or not; its pid. */
static pid_t start(const struct itest_daemon *d, bool agent, int *in)
{
	char fixture[256];
	char *argv[] = { fixture, NULL };
	int out = -1;
	pid_t pid;

	snprintf(fixture, sizeof(fixture), "%s/fixtures/mixed_creds",
		 itest_target_build());
	if (agent) {
		pid = itest_spawn_io(d, argv, &out, in);
	} else {
		int p[2], q[2];

		if (pipe(p) < 0 || pipe(q) < 0)
			return -1;
		pid = fork();
		if (pid == 0) {
			dup2(p[1], 1);
			dup2(q[0], 0);
			close(p[0]);
			close(p[1]);
			close(q[0]);
			close(q[1]);
			execv(argv[0], argv);
			_exit(127);
		}
		close(p[1]);
		close(q[0]);
		out = p[0];
		*in = q[1];
	}
	if (pid > 0 && !itest_wait_line(out, "ready")) {
		itest_kill(pid);
		pid = -1;
	}
	if (out >= 0)
		close(out);
	return pid;
}

/*
 * Waits until nobody may dump pid (the agent registers it again once it
 * has dropped: a process with other credentials is another target).
 */
static bool nobody_sees(const struct itest_daemon *d, pid_t pid)
{
	char path[96];
	int st = 0;

	snprintf(path, sizeof(path), "/api/v1/stacks?pid=%d", (int)pid);
	for (long end = itest_now_ms() + 15000; itest_now_ms() < end;
	     itest_sleep_ms(100)) {
		free(get(d, SEC_NOBODY, path, &st));
		if (st == 200)
			return true;
	}
	return false;
}

int main(void)
{
	static const char *const args[] = { "--sample-interval", "200",
					    "--profile-hz", "19", NULL };
	struct itest_daemon d;
	int in_a = -1, in_p = -1;
	pid_t with, without;

	if (geteuid() != 0) {
		TAP_SKIP("needs root: the fixture keeps a root thread");
		return tap_done();
	}
	if (itest_daemon_start_args(&d, args) < 0) {
		TAP_OK(0, "the daemon starts");
		return tap_done();
	}
	chmod(d.dir, 0711);
	without = start(&d, false, &in_p);
	with = start(&d, true, &in_a);
	TAP_OK(without > 0 && with > 0,
	       "mixed_creds runs, with the agent and without");
	TAP_OK(nobody_sees(&d, without) && nobody_sees(&d, with),
	       "nobody may read both processes (their main thread is its)");
	/* Samples for the history: a diff half a second back. */
	itest_sleep_ms(1500);
	check_process(&d, "without the agent", without, false);
	check_process(&d, "under the agent", with, true);
	check_diff(&d, with, in_a);

	if (in_a >= 0)
		close(in_a);
	if (in_p >= 0)
		close(in_p);
	itest_kill(with);
	itest_kill(without);
	TAP_OK(!itest_alive(with) && !itest_alive(without),
	       "the fixtures are gone");
	TAP_OK(itest_daemon_stop(&d) == 0, "the daemon stops cleanly");
	itest_daemon_cleanup(&d);
	return tap_done();
}
