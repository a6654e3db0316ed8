/*
 * test_it_ptrace.c - processes without the agent, end to end: dumped by
 * the real daemon through its snapshot helper over HTTP, by the CLI's
 * own snapshot (--local), and from core files (one made by gcore, one by
 * a real crash), each compared with eu-stack thread for thread. Then the
 * hard cases: a process under gdb (a clear error naming gdb), a stopped
 * process (dumped and left stopped), a zombie and a kernel thread (clear
 * errors), and the daemon killed with SIGKILL in the middle of a
 * snapshot of 1000 threads (the target runs on, no thread left stopped or
 * traced). Needs root (the daemon traces a process of another session).
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <limits.h>
#include <dirent.h>
#include <pthread.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include "itest.h"
#include "tap.h"

static char fixture[512], cli[512];

struct plain {
	pid_t pid;
	int out, in;
};

/* Starts the plain fixture with args; waits for "ready". */
static int plain_start(struct plain *p, const char *a1, const char *a2)
{
	int o[2], i[2];

	if (pipe(o) < 0 || pipe(i) < 0)
		return -1;
	p->pid = fork();
	if (p->pid == 0) {
		dup2(o[1], 1);
		dup2(i[0], 0);
		close(o[0]);
		close(i[1]);
		execl(fixture, fixture, a1, a2, (char *)NULL);
		_exit(127);
	}
	close(o[1]);
	close(i[0]);
	p->out = o[0];
	p->in = i[1];
	return p->pid > 0 ? 0 : -1;
}

static void plain_stop(struct plain *p)
{
	if (p->pid <= 0)
		return;
	close(p->in);
	close(p->out);
	itest_kill(p->pid);
	p->pid = -1;
}

/* The ticker's count, asked over stdin; -1 when no answer. */
static long plain_beats(struct plain *p)
{
	char line[64];

	if (write(p->in, "\n", 1) != 1 ||
	    !itest_read_line(p->out, line, sizeof(line)))
		return -1;
	return strncmp(line, "beats ", 6) == 0 ? atol(line + 6) : -1;
}

/* Whether the ticker still runs: its count grows over 100 ms. */
static bool plain_runs(struct plain *p)
{
	long a = plain_beats(p), b;

	itest_sleep_ms(100);
	b = plain_beats(p);
	return a >= 0 && b > a;
}

/* State and TracerPid of one task; false when it is gone. */
static bool task_state(pid_t pid, pid_t tid, char *state, long *tracer)
{
	char path[96], buf[2048];
	const char *s, *t;
	FILE *f;
	size_t n;

	snprintf(path, sizeof(path), "/proc/%d/task/%d/status", (int)pid,
		 (int)tid);
	f = fopen(path, "re");
	if (!f)
		return false;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	s = strstr(buf, "\nState:");
	t = strstr(buf, "\nTracerPid:");
	if (!s || !t)
		return false;
	s += 7;
	while (*s == ' ' || *s == '\t')
		s++;
	*state = *s;
	*tracer = atol(t + 11);
	return true;
}

/*
 * Counts the tasks of pid that are stopped (t or T) or traced; *n gets
 * the number of tasks.
 */
static int tasks_held(pid_t pid, int *n, bool count_T)
{
	char path[64];
	struct dirent *e;
	DIR *d;
	int held = 0;

	*n = 0;
	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	d = opendir(path);
	if (!d)
		return -1;
	while ((e = readdir(d))) {
		char st;
		long tracer;

		if (!isdigit((unsigned char)e->d_name[0]))
			continue;
		if (!task_state(pid, atoi(e->d_name), &st, &tracer))
			continue;
		(*n)++;
		if (tracer != 0 || st == 't' || (count_T && st == 'T'))
			held++;
	}
	closedir(d);
	return held;
}

static cJSON *get_stacks(const struct itest_daemon *d, pid_t pid, int *status)
{
	char target[96];

	snprintf(target, sizeof(target),
		 "/api/v1/stacks?pid=%d&timeout_ms=5000", (int)pid);
	return itest_get_json(d, target, status);
}

/* The non-inlined function names of a group's frames, ";"-joined. */
static void group_functions(cJSON *g, char *buf, size_t size)
{
	cJSON *f;
	size_t len = 0;

	buf[0] = '\0';
	cJSON_ArrayForEach(f, cJSON_GetObjectItem(g, "frames"))
	{
		cJSON *fn = cJSON_GetObjectItem(f, "function");

		if (cJSON_IsTrue(cJSON_GetObjectItem(f, "inlined")))
			continue;
		len += (size_t)snprintf(buf + len, size - len, "%s;",
					cJSON_IsString(fn) ? fn->valuestring
							   : "??");
		if (len >= size)
			break;
	}
}

static cJSON *group_of(cJSON *doc, int id)
{
	cJSON *g;

	cJSON_ArrayForEach(g, cJSON_GetObjectItem(doc, "groups"))
	{
		if (cJSON_GetObjectItem(g, "id")->valueint == id)
			return g;
	}
	return NULL;
}

static cJSON *thread_named(cJSON *doc, const char *name)
{
	cJSON *t;

	cJSON_ArrayForEach(t, cJSON_GetObjectItem(doc, "threads"))
	{
		cJSON *n = cJSON_GetObjectItem(t, "name");

		if (cJSON_IsString(n) && strcmp(n->valuestring, name) == 0)
			return t;
	}
	return NULL;
}

/* The functions of the thread called name, ";"-joined ("" if none). */
static void thread_functions(cJSON *doc, const char *name, char *buf,
			     size_t size)
{
	cJSON *t = thread_named(doc, name), *g;

	buf[0] = '\0';
	if (!t || !cJSON_IsNumber(cJSON_GetObjectItem(t, "group")))
		return;
	g = group_of(doc, cJSON_GetObjectItem(t, "group")->valueint);
	if (g)
		group_functions(g, buf, size);
}

/* Runs cmd, its stdout into buf; the exit status. */
static int run_capture(const char *cmd, char *buf, size_t size)
{
	FILE *f = popen(cmd, "r");
	size_t n = 0;
	int st;

	buf[0] = '\0';
	if (!f)
		return -1;
	while (n < size - 1) {
		size_t got = fread(buf + n, 1, size - 1 - n, f);

		if (got == 0)
			break;
		n += got;
	}
	buf[n] = '\0';
	st = pclose(f);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/*
 * eu-stack's stacks (its text: "TID n:" then "#k 0x... function"), as
 * one ";"-joined function list per thread, keyed by tid.
 */
struct eu_thread {
	pid_t tid;
	char fns[2048];
};

static int eu_parse(const char *text, struct eu_thread *out, int max)
{
	const char *p = text;
	int n = -1;

	while (*p) {
		const char *e = strchr(p, '\n');
		size_t len = e ? (size_t)(e - p) : strlen(p);
		char line[1024];

		if (len >= sizeof(line))
			len = sizeof(line) - 1;
		memcpy(line, p, len);
		line[len] = '\0';
		p = e ? e + 1 : p + len;
		if (strncmp(line, "TID ", 4) == 0) {
			if (n + 1 >= max)
				break;
			n++;
			out[n].tid = (pid_t)atoi(line + 4);
			out[n].fns[0] = '\0';
		} else if (line[0] == '#' && n >= 0) {
			char addr[64], fn[512] = "??";
			size_t l = strlen(out[n].fns);

			if (sscanf(line, "#%*d %63s %511s", addr, fn) < 1)
				continue;
			fn[strcspn(fn, "@")] = '\0';
			snprintf(out[n].fns + l, sizeof(out[n].fns) - l, "%s;",
				 fn);
		}
	}
	return n + 1;
}

/*
 * Compares doc's threads with eu-stack's, for the threads whose names are
 * in names (blocked ones: their stacks cannot move in between). Returns
 * how many were compared; *diff how many differed.
 */
static int compare_eu(cJSON *doc, const struct eu_thread *eu, int neu,
		      int *diff, bool names_any)
{
	cJSON *t;
	int compared = 0;

	*diff = 0;
	cJSON_ArrayForEach(t, cJSON_GetObjectItem(doc, "threads"))
	{
		pid_t tid = (pid_t)cJSON_GetObjectItem(t, "tid")->valueint;
		const char *name = cJSON_GetObjectItem(t, "name")->valuestring;
		cJSON *gid = cJSON_GetObjectItem(t, "group"), *g;
		char fns[2048];

		/*
		 * Only threads that cannot move in between: the main thread
		 * may still be on its way back to read() after answering.
		 */
		if (!names_any && strcmp(name, "parked") != 0)
			continue;
		if (!cJSON_IsNumber(gid))
			continue;
		g = group_of(doc, gid->valueint);
		group_functions(g, fns, sizeof(fns));
		for (int i = 0; i < neu; i++) {
			if (eu[i].tid != tid)
				continue;
			compared++;
			if (strcmp(eu[i].fns, fns) != 0) {
				if (*diff < 3)
					TAP_NOTE("tid %d: eu-stack %s, "
						 "stackwatch %s",
						 (int)tid, eu[i].fns, fns);
				(*diff)++;
			}
		}
	}
	return compared;
}

static void test_http(const struct itest_daemon *d)
{
	struct plain p = { 0 };
	struct http_response r;
	char fns[2048], target[96], cmd[1024];
	static char out[1 << 20];
	cJSON *doc, *t;
	int status, n, held;
	static struct eu_thread eu[64];
	int neu, diff, compared;

	if (plain_start(&p, "8", NULL) < 0 ||
	    !itest_wait_line(p.out, "ready")) {
		TAP_OK(0, "the plain fixture starts");
		return;
	}
	doc = get_stacks(d, p.pid, &status);
	TAP_OK(status == 200 && doc, "a process without the agent: 200 (%d)",
	       status);
	TAP_OK(doc && cJSON_IsString(cJSON_GetObjectItem(doc, "method")) &&
		       strcmp(cJSON_GetObjectItem(doc, "method")->valuestring,
			      "ptrace") == 0,
	       "method is ptrace");
	TAP_OK(doc &&
		       cJSON_IsNumber(
			       cJSON_GetObjectItem(doc, "paused_us_max")) &&
		       cJSON_IsNumber(
			       cJSON_GetObjectItem(doc, "paused_us_total")),
	       "paused_us_max and paused_us_total are there");
	TAP_OK(doc && cJSON_GetObjectItem(doc, "threads_ok")->valueint == 11,
	       "every thread is ok: main, 8 parked, ticker, spinner (%d)",
	       doc ? cJSON_GetObjectItem(doc, "threads_ok")->valueint : -1);
	thread_functions(doc, "parked", fns, sizeof(fns));
	TAP_OK(strstr(fns, "plain_park;plain_worker;start_thread") != NULL,
	       "a parked thread waits in plain_park from plain_worker (%s)",
	       fns);
	thread_functions(doc, "spinner", fns, sizeof(fns));
	TAP_OK(strstr(fns, "plain_spin;spinner;start_thread") != NULL,
	       "the spinner spins in plain_spin (%s)", fns);
	thread_functions(doc, "plain_target", fns, sizeof(fns));
	TAP_OK(strstr(fns, ";main;") != NULL,
	       "the main thread's stack runs down to main (%s)", fns);
	t = thread_named(doc, "parked");
	TAP_OK(t && cJSON_GetObjectItem(t, "state")->valuestring[0] == 'S',
	       "a parked thread's state is the one before its stop (S)");
	held = tasks_held(p.pid, &n, true);
	TAP_OK(held == 0 && n == 11,
	       "afterwards no thread is stopped or traced (%d of %d)", held, n);
	TAP_OK(plain_runs(&p), "the target runs on");

	/* The same stacks as eu-stack's, thread for thread. */
	snprintf(cmd, sizeof(cmd), "eu-stack -p %d 2>/dev/null", (int)p.pid);
	run_capture(cmd, out, sizeof(out));
	neu = eu_parse(out, eu, 64);
	compared = compare_eu(doc, eu, neu, &diff, false);
	TAP_OK(compared == 8 && diff == 0,
	       "the parked threads have eu-stack's functions (%d compared, "
	       "%d differ)",
	       compared, diff);
	cJSON_Delete(doc);

	snprintf(target, sizeof(target), "/api/v1/stacks?pid=%d&format=text",
		 (int)p.pid);
	memset(&r, 0, sizeof(r));
	TAP_OK(itest_get(d, target, &r) == 0 && r.status == 200 &&
		       strstr(r.body, "(ptrace snapshot: each thread was "
				      "paused for at most"),
	       "the text format says how the stacks were taken");
	http_response_release(&r);

	/* The CLI through the daemon, and on its own. */
	snprintf(cmd, sizeof(cmd), "%s --url %s dump %d", cli, d->url,
		 (int)p.pid);
	TAP_OK(run_capture(cmd, out, sizeof(out)) == 0 &&
		       strstr(out, "in plain_park ()"),
	       "stackwatch dump PID through the daemon");
	snprintf(cmd, sizeof(cmd), "%s dump --local --format json %d", cli,
		 (int)p.pid);
	status = run_capture(cmd, out, sizeof(out));
	doc = cJSON_Parse(out);
	thread_functions(doc, "parked", fns, sizeof(fns));
	TAP_OK(status == 0 && doc &&
		       strcmp(cJSON_GetObjectItem(doc, "method")->valuestring,
			      "ptrace") == 0 &&
		       strstr(fns, "plain_park;plain_worker;"),
	       "stackwatch dump --local PID, without the daemon (%d)", status);
	compared = compare_eu(doc, eu, neu, &diff, false);
	TAP_OK(compared == 8 && diff == 0,
	       "--local has eu-stack's functions too (%d compared, %d differ)",
	       compared, diff);
	cJSON_Delete(doc);
	held = tasks_held(p.pid, &n, true);
	TAP_OK(held == 0 && plain_runs(&p),
	       "after --local nothing is held and the target runs");
	plain_stop(&p);
}

static void test_gdb(const struct itest_daemon *d)
{
	struct plain p = { 0 };
	char cmd[1024], out[4096], want[64];
	cJSON *doc, *e;
	pid_t gdb;
	int status;
	long tracer = 0;
	char st;

	if (system("command -v gdb >/dev/null 2>&1") != 0) {
		TAP_SKIP("gdb is not installed");
		return;
	}
	if (plain_start(&p, "2", NULL) < 0 ||
	    !itest_wait_line(p.out, "ready")) {
		TAP_OK(0, "the plain fixture starts");
		return;
	}
	gdb = fork();
	if (gdb == 0) {
		char spid[16];
		int null = open("/dev/null", O_WRONLY);

		dup2(null, 1);
		dup2(null, 2);
		snprintf(spid, sizeof(spid), "%d", (int)p.pid);
		execlp("gdb", "gdb", "-q", "-nx", "-batch", "-p", spid, "-ex",
		       "shell sleep 3", (char *)NULL);
		_exit(127);
	}
	for (long end = itest_now_ms() + 10000; itest_now_ms() < end;) {
		if (task_state(p.pid, p.pid, &st, &tracer) && tracer == gdb)
			break;
		itest_sleep_ms(20);
	}
	TAP_OK(tracer == gdb, "gdb has attached to the target");
	doc = get_stacks(d, p.pid, &status);
	e = doc ? cJSON_GetObjectItem(doc, "error") : NULL;
	snprintf(want, sizeof(want), "traced by process %d (gdb)", (int)gdb);
	TAP_OK(status == 409 && cJSON_IsString(e) &&
		       strstr(e->valuestring, want),
	       "a process under gdb: 409 naming gdb (%d: %s)", status,
	       cJSON_IsString(e) ? e->valuestring : "-");
	cJSON_Delete(doc);
	snprintf(cmd, sizeof(cmd), "%s dump --local %d 2>&1", cli, (int)p.pid);
	status = run_capture(cmd, out, sizeof(out));
	TAP_OK(status == 1 && strstr(out, want),
	       "--local says the same and exits 1 (%d: %s)", status, out);
	waitpid(gdb, NULL, 0);
	itest_sleep_ms(100);
	doc = get_stacks(d, p.pid, &status);
	TAP_OK(status == 200, "once gdb is gone the process is dumped (%d)",
	       status);
	cJSON_Delete(doc);
	plain_stop(&p);
}

static void test_stopped(const struct itest_daemon *d)
{
	struct plain p = { 0 };
	cJSON *doc, *t;
	int status, n, held;
	char st = '?';
	long tracer;
	char fns[2048];

	if (plain_start(&p, "4", NULL) < 0 ||
	    !itest_wait_line(p.out, "ready")) {
		TAP_OK(0, "the plain fixture starts");
		return;
	}
	kill(p.pid, SIGSTOP);
	for (long end = itest_now_ms() + 5000; itest_now_ms() < end;) {
		if (task_state(p.pid, p.pid, &st, &tracer) && st == 'T')
			break;
		itest_sleep_ms(10);
	}
	doc = get_stacks(d, p.pid, &status);
	TAP_OK(status == 200 && doc &&
		       cJSON_GetObjectItem(doc, "threads_ok")->valueint == 7,
	       "a stopped process (state T) is dumped (%d)", status);
	thread_functions(doc, "parked", fns, sizeof(fns));
	TAP_OK(strstr(fns, "plain_park;plain_worker;") != NULL,
	       "with its stacks (%s)", fns);
	t = thread_named(doc, "parked");
	TAP_OK(t && cJSON_GetObjectItem(t, "state")->valuestring[0] == 'T',
	       "its threads are reported stopped (T)");
	cJSON_Delete(doc);
	itest_sleep_ms(100);
	held = 0;
	{
		int stopped = tasks_held(p.pid, &n, true);
		int traced = tasks_held(p.pid, &n, false);

		held = traced;
		TAP_OK(stopped == n && n == 7 && traced == 0,
		       "and left stopped, not traced (%d of %d stopped, %d "
		       "traced)",
		       stopped, n, traced);
	}
	kill(p.pid, SIGCONT);
	TAP_OK(held == 0 && plain_runs(&p), "SIGCONT resumes it as usual");
	plain_stop(&p);
}

static void test_refusals(const struct itest_daemon *d)
{
	struct plain p = { 0 };
	char line[64];
	cJSON *doc, *e;
	int status;
	pid_t child = 0, kthread = 0;
	DIR *dir;
	struct dirent *de;

	if (plain_start(&p, "zombie", NULL) < 0 ||
	    !itest_read_line(p.out, line, sizeof(line)) ||
	    sscanf(line, "child %d", &child) != 1 ||
	    !itest_wait_line(p.out, "ready")) {
		TAP_OK(0, "the zombie fixture starts");
		plain_stop(&p);
		return;
	}
	doc = get_stacks(d, child, &status);
	e = doc ? cJSON_GetObjectItem(doc, "error") : NULL;
	TAP_OK(status == 422 && cJSON_IsString(e) &&
		       strstr(e->valuestring, "zombie"),
	       "a zombie: 422, says so (%d: %s)", status,
	       cJSON_IsString(e) ? e->valuestring : "-");
	cJSON_Delete(doc);
	plain_stop(&p);

	/* A kernel thread, when this pid namespace shows one. */
	dir = opendir("/proc");
	while (dir && (de = readdir(dir)) && !kthread) {
		char path[300], buf[1024];
		FILE *f;
		unsigned long flags = 0;
		const char *q;

		if (!isdigit((unsigned char)de->d_name[0]))
			continue;
		snprintf(path, sizeof(path), "/proc/%s/stat", de->d_name);
		f = fopen(path, "re");
		if (!f)
			continue;
		buf[fread(buf, 1, sizeof(buf) - 1, f)] = '\0';
		fclose(f);
		q = strrchr(buf, ')');
		if (q &&
		    sscanf(q + 1, " %*c %*d %*d %*d %*d %*d %lu", &flags) ==
			    1 &&
		    (flags & 0x00200000))
			kthread = (pid_t)atoi(de->d_name);
	}
	if (dir)
		closedir(dir);
	if (!kthread) {
		TAP_SKIP("no kernel thread is visible in this pid namespace");
	} else {
		doc = get_stacks(d, kthread, &status);
		e = doc ? cJSON_GetObjectItem(doc, "error") : NULL;
		TAP_OK(status == 422 && cJSON_IsString(e) &&
			       strstr(e->valuestring, "kernel thread"),
		       "a kernel thread (pid %d): 422, says so (%d)",
		       (int)kthread, status);
		cJSON_Delete(doc);
	}
	doc = get_stacks(d, 4194304, &status);
	TAP_OK(status == 404, "a pid that does not exist: 404 (%d)", status);
	cJSON_Delete(doc);
}

/*
 * Periodic sampling is the agents' alone by default; --sample-ptrace
 * takes processes without the agent in, once opened, at their own
 * interval, and the watchdog then flags their stuck threads.
 */
static void test_sampling(void)
{
	static const char *const with[] = { "--sample-ptrace",
					    "--ptrace-interval",
					    "200",
					    "--stuck-after",
					    "1",
					    NULL };
	struct itest_daemon d;
	struct plain p = { 0 };
	double before, after;
	cJSON *doc, *t;
	int status;
	bool spinning = false;

	if (plain_start(&p, "2", NULL) < 0 ||
	    !itest_wait_line(p.out, "ready")) {
		TAP_OK(0, "the plain fixture starts");
		return;
	}
	if (itest_daemon_start(&d) == 0) {
		cJSON_Delete(get_stacks(&d, p.pid, &status));
		before = itest_metric(&d, "stackwatch_ptrace_snapshots_total");
		itest_sleep_ms(1500);
		after = itest_metric(&d, "stackwatch_ptrace_snapshots_total");
		TAP_OK(status == 200 && before == 1 && after == 1,
		       "by default a process without the agent is not sampled "
		       "(%g, then %g snapshots)",
		       before, after);
		itest_daemon_stop(&d);
		itest_daemon_cleanup(&d);
	}
	if (itest_daemon_start_args(&d, with) != 0) {
		TAP_OK(0, "daemon starts with --sample-ptrace");
		plain_stop(&p);
		return;
	}
	cJSON_Delete(get_stacks(&d, p.pid, &status));
	before = itest_metric(&d, "stackwatch_ptrace_snapshots_total");
	for (long end = itest_now_ms() + 8000;
	     itest_now_ms() < end && !spinning;) {
		itest_sleep_ms(200);
		doc = itest_get_json(&d, "/api/v1/stuck", &status);
		cJSON_ArrayForEach(t, cJSON_GetObjectItem(doc, "threads"))
		{
			cJSON *r = cJSON_GetObjectItem(t, "reason");
			cJSON *n = cJSON_GetObjectItem(t, "name");

			if (cJSON_IsString(r) && cJSON_IsString(n) &&
			    strcmp(n->valuestring, "spinner") == 0 &&
			    strcmp(r->valuestring, "spinning") == 0)
				spinning = true;
		}
		cJSON_Delete(doc);
	}
	after = itest_metric(&d, "stackwatch_ptrace_snapshots_total");
	TAP_OK(after >= before + 2,
	       "with --sample-ptrace it is sampled on its own (%g snapshots "
	       "more)",
	       after - before);
	TAP_OK(spinning, "and the watchdog flags its spinner as spinning");
	TAP_OK(plain_runs(&p), "the target runs on");
	itest_daemon_stop(&d);
	itest_daemon_cleanup(&d);
	plain_stop(&p);
}

struct bg_get {
	const struct itest_daemon *d;
	pid_t pid;
	int status;
};

static void *bg_get_main(void *arg)
{
	struct bg_get *g = arg;
	cJSON *doc = get_stacks(g->d, g->pid, &g->status);

	cJSON_Delete(doc);
	return NULL;
}

/* The tids of pid, ascending; n of them. */
static int list_tids(pid_t pid, pid_t *out, int max)
{
	char path[64];
	struct dirent *e;
	DIR *d;
	int n = 0;

	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	d = opendir(path);
	if (!d)
		return 0;
	while ((e = readdir(d)) && n < max)
		if (isdigit((unsigned char)e->d_name[0]))
			out[n++] = (pid_t)atoi(e->d_name);
	closedir(d);
	return n;
}

/* Gone, or a zombie that nobody reaped yet. */
static bool gone(pid_t pid)
{
	char path[64], buf[512];
	FILE *f;
	const char *q;
	bool z = false;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	f = fopen(path, "re");
	if (!f)
		return true;
	buf[fread(buf, 1, sizeof(buf) - 1, f)] = '\0';
	fclose(f);
	q = strrchr(buf, ')');
	z = q && (q[2] == 'Z' || q[2] == 'X');
	return z;
}

static void test_sigkill(void)
{
	struct plain p = { 0 };
	static pid_t tids[2048];
	int ok_runs = 0, mid = 0, rounds = 5, helpers_gone = 0;

	if (plain_start(&p, "1000", NULL) < 0 ||
	    !itest_wait_line(p.out, "ready")) {
		TAP_OK(0, "the plain fixture starts with 1000 threads");
		return;
	}
	for (int round = 0; round < rounds; round++) {
		struct itest_daemon d;
		struct bg_get g = { 0 };
		pthread_t th;
		int ntids = list_tids(p.pid, tids, 2048), held, n;
		bool seen = false;
		char st;
		long tracer = 0;
		pid_t helper;

		if (itest_daemon_start(&d) != 0) {
			TAP_OK(0, "daemon starts");
			break;
		}
		g.d = &d;
		g.pid = p.pid;
		pthread_create(&th, NULL, bg_get_main, &g);
		/* Kill it once the snapshot is under way: a thread traced. */
		for (long end = itest_now_ms() + 5000;
		     itest_now_ms() < end && !seen;) {
			for (int k = 1; k <= 4 && !seen; k++) {
				pid_t tid = tids[ntids * k / 5];

				if (task_state(p.pid, tid, &st, &tracer) &&
				    tracer != 0)
					seen = true;
			}
		}
		helper = itest_first_child(d.pid);
		kill(d.pid, SIGKILL);
		waitpid(d.pid, NULL, 0);
		d.pid = 0;
		pthread_join(th, NULL);
		mid += seen;
		itest_sleep_ms(300);
		helpers_gone += helper > 0 && gone(helper);
		held = tasks_held(p.pid, &n, true);
		if (held == 0 && n == 1003 && plain_runs(&p))
			ok_runs++;
		else
			TAP_NOTE("round %d: %d of %d threads held", round, held,
				 n);
		itest_daemon_cleanup(&d);
	}
	TAP_OK(mid == rounds,
	       "the daemon was killed during the snapshot (%d of %d times)",
	       mid, rounds);
	TAP_OK(ok_runs == rounds,
	       "after each SIGKILL no thread is stopped or traced and the "
	       "target runs on (%d of %d)",
	       ok_runs, rounds);
	TAP_OK(helpers_gone == rounds,
	       "no snapshot helper outlives its daemon (%d of %d gone)",
	       helpers_gone, rounds);
	plain_stop(&p);
}

/* Compares a core's stacks by --core with eu-stack --core's. */
static void check_core(const char *core, const char *exe, const char *what,
		       const char *must)
{
	char cmd[2048], fns[2048];
	static char out[1 << 20];
	static struct eu_thread eu[64];
	int status, neu, diff, compared;
	cJSON *doc;

	snprintf(cmd, sizeof(cmd), "%s dump --core %s --exe %s --format json",
		 cli, core, exe);
	status = run_capture(cmd, out, sizeof(out));
	doc = cJSON_Parse(out);
	TAP_OK(status == 0 && doc &&
		       strcmp(cJSON_GetObjectItem(doc, "method")->valuestring,
			      "core") == 0,
	       "%s: dump --core reads it (%d)", what, status);
	thread_functions(doc, "plain_target", fns, sizeof(fns));
	{
		bool found = false;
		cJSON *g;

		cJSON_ArrayForEach(g, cJSON_GetObjectItem(doc, "groups"))
		{
			group_functions(g, fns, sizeof(fns));
			if (strstr(fns, must))
				found = true;
		}
		TAP_OK(found, "%s: a stack holds %s", what, must);
	}
	snprintf(cmd, sizeof(cmd), "eu-stack --core %s -e %s 2>/dev/null", core,
		 exe);
	run_capture(cmd, out, sizeof(out));
	neu = eu_parse(out, eu, 64);
	compared = compare_eu(doc, eu, neu, &diff, true);
	TAP_OK(neu > 0 && compared == neu && diff == 0,
	       "%s: every thread as eu-stack --core has it (%d of %d, %d "
	       "differ)",
	       what, compared, neu, diff);
	cJSON_Delete(doc);
	snprintf(cmd, sizeof(cmd), "%s dump --core %s", cli, core);
	status = run_capture(cmd, out, sizeof(out));
	TAP_OK(status == 0 && strstr(out, "(from a core file)"),
	       "%s: the text format, the executable found from the core", what);
}

static void test_cores(void)
{
	char dir[] = "/tmp/sw-core-XXXXXX", core[4200], cmd[2048], out[4096];
	struct plain p = { 0 };
	pid_t c;
	int st;

#if defined(__SANITIZE_ADDRESS__)
	/*
	 * A sanitized fixture maps terabytes of shadow memory (gcore would
	 * write it all) and AddressSanitizer turns core dumps off.
	 */
	TAP_SKIP("core files of a program built with AddressSanitizer");
	return;
#endif
	if (!mkdtemp(dir)) {
		TAP_OK(0, "temporary directory");
		return;
	}
	if (system("command -v gcore >/dev/null 2>&1") != 0) {
		TAP_SKIP("gcore is not installed");
	} else if (plain_start(&p, "3", NULL) == 0 &&
		   itest_wait_line(p.out, "ready")) {
		snprintf(cmd, sizeof(cmd),
			 "gcore -o %s/gcore %d >/dev/null 2>&1", dir,
			 (int)p.pid);
		st = system(cmd);
		snprintf(core, sizeof(core), "%s/gcore.%d", dir, (int)p.pid);
		TAP_OK(st == 0 && access(core, R_OK) == 0, "gcore made %s",
		       core);
		plain_stop(&p);
		check_core(core, fixture, "gcore", "plain_park;plain_worker;");
	}

	/* A real crash, with the kernel's core (core_pattern "core"). */
	run_capture("cat /proc/sys/kernel/core_pattern", out, sizeof(out));
	if (out[0] == '|') {
		TAP_SKIP("core_pattern pipes cores to %s", out);
		goto out;
	}
	c = fork();
	if (c == 0) {
		struct rlimit rl = { RLIM_INFINITY, RLIM_INFINITY };
		int null = open("/dev/null", O_RDWR);

		dup2(null, 0);
		dup2(null, 1);
		dup2(null, 2);
		setrlimit(RLIMIT_CORE, &rl);
		if (chdir(dir) != 0)
			_exit(126);
		execl(fixture, fixture, "crash", "3", (char *)NULL);
		_exit(127);
	}
	waitpid(c, &st, 0);
	TAP_OK(WIFSIGNALED(st) && WCOREDUMP(st),
	       "the fixture crashed with a core dump (status %#x)", st);
	snprintf(cmd, sizeof(cmd), "ls -t %s | grep -v gcore | head -1", dir);
	run_capture(cmd, out, sizeof(out));
	out[strcspn(out, "\n")] = '\0';
	snprintf(core, sizeof(core), "%s/%s", dir, out);
	if (out[0] && access(core, R_OK) == 0)
		check_core(core, fixture, "a crash", "abort;plain_crash;main;");
	else
		TAP_OK(0, "the crash left a core file in %s", dir);
out:
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	(void)!system(cmd);
}

int main(void)
{
	struct itest_daemon d;

	if (geteuid() != 0) {
		TAP_SKIP("needs root");
		return tap_done();
	}
	snprintf(fixture, sizeof(fixture), "%s/fixtures/plain_target",
		 itest_build());
	snprintf(cli, sizeof(cli), "%s/stackwatch", itest_build());
	{
		/* Absolute: the crash test runs it from another directory. */
		char real[PATH_MAX];

		if (realpath(fixture, real) && strlen(real) < sizeof(fixture))
			memcpy(fixture, real, strlen(real) + 1);
	}
	if (itest_daemon_start(&d) != 0) {
		TAP_OK(0, "daemon starts");
		return tap_done();
	}
	test_http(&d);
	test_gdb(&d);
	test_stopped(&d);
	test_refusals(&d);
	itest_daemon_stop(&d);
	itest_daemon_cleanup(&d);
	test_sampling();
	test_sigkill();
	test_cores();
	return tap_done();
}
