/*
 * test_it_pidns.c - a target in another pid namespace, as a container's
 * process is: `unshare -pf --mount-proc agent_target sigwait` under the
 * agent. The program is pid 1 in its namespace and its agent lists its
 * threads there; the daemon must register it and show every pid and tid
 * as the host sees them (what the test reads in the host's /proc): in
 * /api/v1/targets, in the JSON of one process and of all (threads and
 * groups), in the text format and through the CLI, with no thread lost.
 *
 * Needs root and a working unshare(1): skipped otherwise, with the reason.
 */
#include <dirent.h>

#include "itest.h"
#include "tap.h"

#define MAX_TIDS 64

/* The host's tids of pid, ascending; the count, or -1. */
static int host_tids(pid_t pid, pid_t *tids, int max)
{
	char path[64];
	struct dirent *de;
	int n = 0;
	DIR *dir;

	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	dir = opendir(path);
	if (!dir)
		return -1;
	while ((de = readdir(dir)) && n < max)
		if (de->d_name[0] >= '1' && de->d_name[0] <= '9')
			tids[n++] = (pid_t)atoi(de->d_name);
	closedir(dir);
	for (int i = 1; i < n; i++)
		for (int j = i; j > 0 && tids[j - 1] > tids[j]; j--) {
			pid_t x = tids[j];

			tids[j] = tids[j - 1];
			tids[j - 1] = x;
		}
	return n;
}

static bool has_tid(const pid_t *tids, int n, double tid)
{
	for (int i = 0; i < n; i++)
		if ((double)tids[i] == tid)
			return true;
	return false;
}

/* The first child of pid (unshare -f forks the program), or 0. */
static pid_t child_of(pid_t pid, long ms)
{
	char path[64], buf[64];

	snprintf(path, sizeof(path), "/proc/%d/task/%d/children", (int)pid,
		 (int)pid);
	for (long end = itest_now_ms() + ms; itest_now_ms() < end;) {
		FILE *f = fopen(path, "r");
		int child = 0;

		if (f && fgets(buf, sizeof(buf), f))
			child = atoi(buf);
		if (f)
			fclose(f);
		if (child > 0)
			return (pid_t)child;
		itest_sleep_ms(10);
	}
	return 0;
}

/* The unshare program, or NULL when there is none. */
static const char *find_unshare(void)
{
	static const char *const paths[] = { "/usr/bin/unshare",
					     "/bin/unshare" };

	for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++)
		if (access(paths[i], X_OK) == 0)
			return paths[i];
	return NULL;
}

/* Why a pid namespace cannot be made here, or NULL when it can. */
static const char *no_namespace(const char *unshare)
{
	static char why[96];
	int st;
	pid_t p;

	if (geteuid() != 0)
		return "not root (unshare -p needs CAP_SYS_ADMIN)";
	if (!unshare)
		return "no unshare(1) on this machine";
	p = fork();
	if (p == 0) {
		int null = open("/dev/null", O_WRONLY);

		dup2(null, 1);
		dup2(null, 2);
		execl(unshare, unshare, "-pf", "--mount-proc", "true",
		      (char *)NULL);
		_exit(127);
	}
	if (p < 0 || waitpid(p, &st, 0) != p || !WIFEXITED(st) ||
	    WEXITSTATUS(st) != 0) {
		snprintf(why, sizeof(why),
			 "unshare -pf --mount-proc true fails here (status %d)",
			 p > 0 && WIFEXITED(st) ? WEXITSTATUS(st) : -1);
		return why;
	}
	return NULL;
}

/* Checks the JSON of one process against the host's view. */
static void check_process(cJSON *doc, pid_t pid, const pid_t *tids, int n,
			  const char *what)
{
	cJSON *t, *g, *id;
	int nthreads = 0, foreign = 0, ok = 0;
	bool main_found = false;

	TAP_OK(doc && cJSON_GetObjectItem(doc, "pid") &&
		       cJSON_GetObjectItem(doc, "pid")->valuedouble == pid,
	       "%s: pid is the host's %d", what, (int)pid);
	cJSON_ArrayForEach(t, cJSON_GetObjectItem(doc, "threads"))
	{
		cJSON *tid = cJSON_GetObjectItem(t, "tid");
		cJSON *st = cJSON_GetObjectItem(t, "status");

		nthreads++;
		if (!cJSON_IsNumber(tid) || !has_tid(tids, n, tid->valuedouble))
			foreign++;
		if (cJSON_IsNumber(tid) && tid->valuedouble == pid)
			main_found = true;
		if (cJSON_IsString(st) && strcmp(st->valuestring, "ok") == 0)
			ok++;
	}
	TAP_OK(main_found, "%s: the main thread's tid is the host's %d", what,
	       (int)pid);
	TAP_OK(nthreads == n && foreign == 0 && ok == n,
	       "%s: all %d threads, each with a host tid, all dumped "
	       "(%d listed, %d not the host's, %d ok)",
	       what, n, nthreads, foreign, ok);
	foreign = 0;
	cJSON_ArrayForEach(g, cJSON_GetObjectItem(doc, "groups"))
	{
		cJSON_ArrayForEach(id, cJSON_GetObjectItem(g, "tids"))
		{
			if (!cJSON_IsNumber(id) ||
			    !has_tid(tids, n, id->valuedouble))
				foreign++;
		}
	}
	TAP_OK(foreign == 0, "%s: every group's tids are the host's", what);
}

/*
 * Checks every "(N)" of the text of one process (the thread lists of its
 * groups) names a host tid, and that the main thread's is there.
 */
static void check_text(const char *body, pid_t pid, const pid_t *tids, int n,
		       const char *what)
{
	char want[64];
	int seen = 0, foreign = 0;

	snprintf(want, sizeof(want), "Process %d (", (int)pid);
	TAP_OK(body && strncmp(body, want, strlen(want)) == 0,
	       "%s: the header names the host's pid", what);
	for (const char *p = body ? strchr(body, '(') : NULL; p;
	     p = strchr(p + 1, '(')) {
		char *end;
		long v = strtol(p + 1, &end, 10);

		if (end == p + 1 || *end != ')' || p[1] < '0' || p[1] > '9')
			continue;
		seen++;
		if (!has_tid(tids, n, (double)v))
			foreign++;
	}
	snprintf(want, sizeof(want), "agent_target (%d)", (int)pid);
	TAP_OK(seen == n && foreign == 0 && body && strstr(body, want),
	       "%s: %d thread ids, each the host's, the main thread as "
	       "'%s' (%d seen, %d not the host's)",
	       what, n, want, seen, foreign);
}

/* Runs a command, captures its stdout. Its exit status, or -1. */
static int capture(const char *cmd, char *out, size_t size)
{
	FILE *p = popen(cmd, "r");
	size_t n = 0, r;
	int st;

	out[0] = '\0';
	if (!p)
		return -1;
	while (n < size - 1 && (r = fread(out + n, 1, size - 1 - n, p)) > 0)
		n += r;
	out[n] = '\0';
	st = pclose(p);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void check_target_list(const struct itest_daemon *d, pid_t pid)
{
	int status, found = 0;
	cJSON *j = itest_get_json(d, "/api/v1/targets", &status), *t;

	cJSON_ArrayForEach(t, cJSON_GetObjectItem(j, "targets"))
	{
		cJSON *p = cJSON_GetObjectItem(t, "pid");
		cJSON *c = cJSON_GetObjectItem(t, "comm");
		cJSON *th = cJSON_GetObjectItem(t, "threads");

		if (cJSON_IsNumber(p) && p->valuedouble == pid &&
		    cJSON_IsString(c) &&
		    strcmp(c->valuestring, "agent_target") == 0 &&
		    cJSON_IsNumber(th) && th->valuedouble == 6)
			found++;
		/* Its pid in the namespace, 1, is never shown. */
		if (cJSON_IsNumber(p) && p->valuedouble == 1)
			found = -100;
	}
	TAP_OK(status == 200 && found == 1,
	       "/api/v1/targets: agent_target as pid %d with its 6 threads",
	       (int)pid);
	cJSON_Delete(j);
}

static void check_all(const struct itest_daemon *d, pid_t pid, pid_t *tids,
		      int n)
{
	static char out[1 << 16];
	struct http_response r;
	char path[160];
	int status;
	cJSON *j, *p, *one = NULL;

	snprintf(path, sizeof(path), "/api/v1/stacks?pid=%d", (int)pid);
	j = itest_get_json(d, path, &status);
	TAP_OK(status == 200, "/api/v1/stacks?pid=%d: 200 (got %d)", (int)pid,
	       status);
	check_process(j, pid, tids, n, "JSON of the process");
	cJSON_Delete(j);

	j = itest_get_json(d, "/api/v1/stacks", &status);
	cJSON_ArrayForEach(p, cJSON_GetObjectItem(j, "processes"))
	{
		cJSON *pp = cJSON_GetObjectItem(p, "pid");

		if (cJSON_IsNumber(pp) && pp->valuedouble == pid)
			one = p;
	}
	check_process(one, pid, tids, n, "JSON of every process");
	cJSON_Delete(j);

	memset(&r, 0, sizeof(r));
	snprintf(path, sizeof(path), "/api/v1/stacks?pid=%d&format=text",
		 (int)pid);
	TAP_OK(itest_get(d, path, &r) == 0 && r.status == 200, "text: 200");
	check_text(r.body, pid, tids, n, "text");
	http_response_release(&r);

	snprintf(path, sizeof(path), "/stacks?pid=%d&format=folded", (int)pid);
	TAP_OK(itest_get(d, path, &r) == 0 && r.status == 200 &&
		       strstr(r.body, "agent_target;") &&
		       strstr(r.body, "run_sigwait"),
	       "folded: the stacks, symbolized");
	http_response_release(&r);

	snprintf(path, sizeof(path), "%s/stackwatch --url %s dump %d",
		 itest_build(), d->url, (int)pid);
	TAP_OK(capture(path, out, sizeof(out)) == 0,
	       "the CLI dumps it by its host pid");
	check_text(out, pid, tids, n, "the CLI's dump");
}

int main(void)
{
	static const char *const args[] = { "--sample-interval", "0",
					    "--log-level", "info", NULL };
	struct itest_daemon d;
	const char *unshare = find_unshare(), *why = no_namespace(unshare);
	char fixture[256], log[8192], preload[320];
	char *argv[11];
	pid_t outer, prog, tids[MAX_TIDS];
	int out = -1, n;
	FILE *f;

	if (why) {
		TAP_SKIP("a target in another pid namespace: %s", why);
		return tap_done();
	}
	if (itest_daemon_start_args(&d, args) < 0) {
		TAP_OK(0, "the daemon starts");
		return tap_done();
	}
	snprintf(fixture, sizeof(fixture), "%s/fixtures/agent_target",
		 itest_build());
	/*
	 * unshare(1) itself runs without the agent: it forks, and under
	 * AddressSanitizer (whose allocator, unlike glibc's, is not locked
	 * around fork) a fork while the agent thread allocates leaves the
	 * child waiting on a lock for good. The program gets the agent back.
	 */
	snprintf(preload, sizeof(preload),
		 "LD_PRELOAD=%s/libstackwatch-agent.so", itest_target_build());
	argv[0] = (char *)"/usr/bin/env";
	argv[1] = (char *)"-u";
	argv[2] = (char *)"LD_PRELOAD";
	argv[3] = (char *)unshare;
	argv[4] = (char *)"-pf";
	argv[5] = (char *)"--mount-proc";
	argv[6] = (char *)"/usr/bin/env";
	argv[7] = preload;
	argv[8] = fixture;
	argv[9] = (char *)"sigwait";
	argv[10] = NULL;
	outer = itest_spawn(&d, argv, &out);
	prog = child_of(outer, 10000);
	TAP_OK(prog > 0 && itest_wait_line(out, "ready"),
	       "agent_target runs in a new pid namespace (host pid %d)",
	       (int)prog);
	if (prog <= 0)
		goto out_kill;
	TAP_OK(itest_wait_registered(&d, prog, 10000),
	       "it registers under its host pid %d", (int)prog);
	n = host_tids(prog, tids, MAX_TIDS);
	TAP_NOTE("host tids of pid %d: %d of them, from %d to %d", (int)prog, n,
		 n > 0 ? (int)tids[0] : 0, n > 0 ? (int)tids[n - 1] : 0);
	TAP_OK(n == 6, "the host sees its 6 threads (main, 4 workers, agent)");
	check_target_list(&d, prog);
	check_all(&d, prog, tids, n);

	f = fopen(d.log, "r");
	n = f ? (int)fread(log, 1, sizeof(log) - 1, f) : 0;
	log[n > 0 ? n : 0] = '\0';
	if (f)
		fclose(f);
	TAP_OK(itest_daemon_stop(&d) == 0, "the daemon exits 0");
	TAP_OK(strstr(log, "in another pid namespace") &&
		       !strstr(log, "cannot translate"),
	       "the daemon noticed the namespace and translated every dump");
out_kill:
	/* It ends on SIGTERM (pid 1 of its namespace: the namespace goes
	 * with it), and unshare with it. */
	if (prog > 0)
		kill(prog, SIGTERM);
	for (long end = itest_now_ms() + 5000;
	     itest_now_ms() < end && itest_alive(outer);)
		itest_sleep_ms(10);
	if (prog > 0)
		kill(prog, SIGKILL);
	itest_kill(outer);
	if (out >= 0)
		close(out);
	if (d.pid > 0)
		itest_daemon_stop(&d);
	itest_daemon_cleanup(&d);
	return tap_done();
}
