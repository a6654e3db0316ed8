/*
 * test_it_ptrace.c - processes without the agent, end to end: dumped by
 * the real daemon through its snapshot helper over HTTP, by the CLI's
 * own snapshot (--local), and from core files (one made by gcore, one by
 * a real crash), each compared with eu-stack thread for thread. Then the
 * hard cases: a process under gdb (a clear error naming gdb), a stopped
 * process (dumped and left stopped), a zombie and a kernel thread (clear
 * errors), and the daemon killed with SIGKILL in the middle of a
 * snapshot of 1000 threads (the target runs on, no thread left stopped or
 * traced). Last, real programs started without the agent (redis-server,
 * memcached, nginx, PostgreSQL, node, a JVM, python3), each compared with
 * eu-stack on the threads that held still. Needs root (the daemon traces
 * a process of another session).
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <limits.h>
#include <dirent.h>
#include <glob.h>
#include <grp.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <pwd.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include "itest.h"
#include "tap.h"

static char fixture[512], cli[512];

/* The longest ";"-joined function list compared (a JVM's run long). */
#define FNS_SIZE 4096

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

static cJSON *thread_tid(cJSON *doc, pid_t tid)
{
	cJSON *t;

	cJSON_ArrayForEach(t, cJSON_GetObjectItem(doc, "threads"))
	{
		cJSON *n = cJSON_GetObjectItem(t, "tid");

		if (cJSON_IsNumber(n) && (pid_t)n->valueint == tid)
			return t;
	}
	return NULL;
}

/* The functions of doc's thread t, ";"-joined ("" if it has no stack). */
static void stack_functions(cJSON *doc, cJSON *t, char *buf, size_t size)
{
	cJSON *g;

	buf[0] = '\0';
	if (!t || !cJSON_IsNumber(cJSON_GetObjectItem(t, "group")))
		return;
	g = group_of(doc, cJSON_GetObjectItem(t, "group")->valueint);
	if (g)
		group_functions(g, buf, size);
}

/* The functions of the thread called name, ";"-joined ("" if none). */
static void thread_functions(cJSON *doc, const char *name, char *buf,
			     size_t size)
{
	stack_functions(doc, itest_thread_named(doc, name), buf, size);
}

/*
 * eu-stack's stacks (its text: "TID n:" then "#k 0x... function"), as
 * one ";"-joined function list per thread, keyed by tid. A frame without
 * a name is "??", as group_functions() has it.
 */
struct eu_thread {
	pid_t tid;
	char fns[FNS_SIZE];
};

static int eu_parse(const char *text, struct eu_thread *out, int max)
{
	const char *p = text;
	int n = -1;

	while (*p) {
		const char *e = strchr(p, '\n');
		size_t len = e ? (size_t)(e - p) : strlen(p);
		char line[2048];

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
			/*
			 * The function is the rest of the line after the
			 * address: a demangled C++ name has spaces in it.
			 */
			const char *fn =
				line + 1 + strspn(line + 1, "0123456789");
			size_t l = strlen(out[n].fns), fl;

			fn += strspn(fn, " ");
			if (strncmp(fn, "0x", 2) != 0)
				continue;
			fn += strcspn(fn, " ");
			fn += strspn(fn, " ");
			fl = strcspn(fn, "@");
			while (fl > 0 && isspace((unsigned char)fn[fl - 1]))
				fl--;
			if (fl == 0) {
				fn = "??";
				fl = 2;
			}
			snprintf(out[n].fns + l, sizeof(out[n].fns) - l,
				 "%.*s;", (int)fl, fn);
		}
	}
	return n + 1;
}

/*
 * Which of doc's threads compare_eu() compares: those for which
 * pick(thread, its functions, arg) is true.
 */
typedef bool (*thread_pick)(cJSON *t, const char *fns, void *arg);

/*
 * The threads named "parked" only, which cannot move in between: the
 * main thread may still be on its way back to read() after answering.
 */
static bool parked_only(cJSON *t, const char *fns, void *arg)
{
	cJSON *name = cJSON_GetObjectItem(t, "name");

	(void)fns;
	(void)arg;
	return cJSON_IsString(name) && strcmp(name->valuestring, "parked") == 0;
}

/*
 * Compares doc's threads that have a stack with eu-stack's, for those
 * pick allows (every one when pick is NULL). Returns how many were
 * compared (found in eu by tid); *diff how many differed.
 */
static int compare_eu(cJSON *doc, const struct eu_thread *eu, int neu,
		      int *diff, thread_pick pick, void *arg)
{
	cJSON *t;
	int compared = 0;

	*diff = 0;
	cJSON_ArrayForEach(t, cJSON_GetObjectItem(doc, "threads"))
	{
		pid_t tid = (pid_t)cJSON_GetObjectItem(t, "tid")->valueint;
		char fns[FNS_SIZE];

		if (!cJSON_IsNumber(cJSON_GetObjectItem(t, "group")))
			continue;
		stack_functions(doc, t, fns, sizeof(fns));
		if (pick && !pick(t, fns, arg))
			continue;
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
	char fns[FNS_SIZE], target[96], cmd[1024];
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
	t = itest_thread_named(doc, "parked");
	TAP_OK(t && cJSON_GetObjectItem(t, "state")->valuestring[0] == 'S',
	       "a parked thread's state is the one before its stop (S)");
	held = tasks_held(p.pid, &n, true);
	TAP_OK(held == 0 && n == 11,
	       "afterwards no thread is stopped or traced (%d of %d)", held, n);
	TAP_OK(plain_runs(&p), "the target runs on");

	/* The same stacks as eu-stack's, thread for thread. */
	snprintf(cmd, sizeof(cmd), "eu-stack -p %d 2>/dev/null", (int)p.pid);
	itest_run_capture(cmd, out, sizeof(out));
	neu = eu_parse(out, eu, 64);
	compared = compare_eu(doc, eu, neu, &diff, parked_only, NULL);
	TAP_OK(compared == 8 && diff == 0,
	       "the parked threads have eu-stack's functions (%d compared, "
	       "%d differ)",
	       compared, diff);
	cJSON_Delete(doc);

	snprintf(target, sizeof(target), "/api/v1/stacks?pid=%d&format=text",
		 (int)p.pid);
	memset(&r, 0, sizeof(r));
	TAP_OK(itest_get(d, target, &r) == 0 && r.status == 200 &&
		       strstr(r.body, "\n(read: ") && strstr(r.body, " kernel"),
	       "the text format says how the stacks were taken");
	http_response_release(&r);

	/* The CLI through the daemon, and on its own. */
	snprintf(cmd, sizeof(cmd), "%s --url %s dump %d", cli, d->url,
		 (int)p.pid);
	TAP_OK(itest_run_capture(cmd, out, sizeof(out)) == 0 &&
		       strstr(out, "in plain_park ()"),
	       "stackwatch dump PID through the daemon");
	snprintf(cmd, sizeof(cmd), "%s dump --local --format json %d", cli,
		 (int)p.pid);
	status = itest_run_capture(cmd, out, sizeof(out));
	doc = cJSON_Parse(out);
	thread_functions(doc, "parked", fns, sizeof(fns));
	TAP_OK(status == 0 && doc &&
		       strcmp(cJSON_GetObjectItem(doc, "method")->valuestring,
			      "ptrace") == 0 &&
		       strstr(fns, "plain_park;plain_worker;"),
	       "stackwatch dump --local PID, without the daemon (%d)", status);
	compared = compare_eu(doc, eu, neu, &diff, parked_only, NULL);
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
	status = itest_run_capture(cmd, out, sizeof(out));
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
	t = itest_thread_named(doc, "parked");
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
	after = before;
	/*
	 * The spinner can be flagged by the first sample after the request:
	 * wait for a second one too.
	 */
	for (long end = itest_now_ms() + 8000;
	     itest_now_ms() < end && (!spinning || after < before + 2);) {
		itest_sleep_ms(200);
		after = itest_metric(&d, "stackwatch_ptrace_snapshots_total");
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
		int ntids = itest_tids(p.pid, tids, 2048), held, n;
		bool seen = false;
		pid_t helper, first = tids[ntids / 5],
			      last = tids[ntids * 4 / 5];
		long first0 = itest_task_switches(p.pid, first),
		     last0 = itest_task_switches(p.pid, last);

		/* The ptrace path itself: blocked threads are not read from
		 * the kernel here, so the snapshot stops each one. */
		if (itest_daemon_start_args(
			    &d, (const char *const[]){ "--no-kernel-reads",
						       NULL }) != 0) {
			TAP_OK(0, "daemon starts");
			break;
		}
		g.d = &d;
		g.pid = p.pid;
		pthread_create(&th, NULL, bg_get_main, &g);
		/*
		 * Kill it once the snapshot is under way: the threads go in
		 * tid order, each woken by its interrupt, so a parked thread
		 * a fifth of the way in has switched and one four fifths in
		 * has not yet.
		 */
		for (long end = itest_now_ms() + 5000;
		     itest_now_ms() < end && !seen;)
			seen = itest_task_switches(p.pid, first) != first0;
		seen = seen && first0 >= 0 &&
		       itest_task_switches(p.pid, last) == last0;
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
	/*
	 * Where the kill lands is the test's timing, not the daemon's: a
	 * poller descheduled on a busy machine sees the snapshot only once
	 * it is over (1 round in 4 here, 714b6f8 as well). Most rounds must
	 * land in the middle for the checks below to mean something.
	 */
	TAP_OK(mid >= rounds - 2,
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
	status = itest_run_capture(cmd, out, sizeof(out));
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
	itest_run_capture(cmd, out, sizeof(out));
	neu = eu_parse(out, eu, 64);
	compared = compare_eu(doc, eu, neu, &diff, NULL, NULL);
	TAP_OK(neu > 0 && compared == neu && diff == 0,
	       "%s: every thread as eu-stack --core has it (%d of %d, %d "
	       "differ)",
	       what, compared, neu, diff);
	cJSON_Delete(doc);
	snprintf(cmd, sizeof(cmd), "%s dump --core %s", cli, core);
	status = itest_run_capture(cmd, out, sizeof(out));
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
	itest_run_capture("cat /proc/sys/kernel/core_pattern", out,
			  sizeof(out));
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
	itest_run_capture(cmd, out, sizeof(out));
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

/*
 * Real programs, started here without the agent and dumped through the
 * daemon's ptrace snapshot: their stacks must have eu-stack's functions,
 * thread for thread. Each lives in real_dir and is stopped and reaped
 * before the next one starts.
 */
static char real_dir[64];

/* How a program shows it works after the dumps. */
struct probe {
	int port;	  /* a TCP port on 127.0.0.1, 0: it is alive */
	const char *ask;  /* what is sent there */
	const char *want; /* how the answer starts */
	const char *what; /* the check line's name for the exchange */
};

struct verdict {
	int total;   /* threads in the first dump */
	int settled; /* of them, with the same functions in the second */
	int same;    /* of those, with eu-stack's functions */
};

/* Whether command NAME is found in PATH. */
static bool installed(const char *name)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "command -v %s >/dev/null 2>&1", name);
	return system(cmd) == 0;
}

/*
 * A TCP port on 127.0.0.1 that nobody listens on right now (the kernel's
 * pick for port 0); 0 when none.
 */
static int free_port(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	socklen_t len = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), port = 0;

	if (fd < 0)
		return 0;
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0 &&
	    getsockname(fd, (struct sockaddr *)&a, &len) == 0)
		port = ntohs(a.sin_port);
	close(fd);
	return port;
}

/*
 * Connects to 127.0.0.1:port, sends ask and reads until the answer can be
 * told to start with want (ask and want NULL: only connects). Blocks for
 * at most 2 s a read.
 */
static bool tcp_ask(int port, const char *ask, const char *want)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	struct timeval tv = { 2, 0 };
	size_t n = 0, len = want ? strlen(want) : 0;
	char buf[128];
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	bool ok;

	if (fd < 0)
		return false;
	a.sin_port = htons((uint16_t)port);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	ok = connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0;
	if (ok && ask)
		ok = send(fd, ask, strlen(ask), MSG_NOSIGNAL) ==
		     (ssize_t)strlen(ask);
	while (ok && n < len && n < sizeof(buf)) {
		ssize_t got = read(fd, buf + n, sizeof(buf) - n);

		if (got <= 0)
			break;
		n += (size_t)got;
	}
	close(fd);
	return ok && n >= len && (len == 0 || memcmp(buf, want, len) == 0);
}

/* Waits up to 10 s for port to take connections while our child lives. */
static bool port_ready(pid_t pid, int port)
{
	for (long end = itest_now_ms() + 10000; itest_now_ms() < end;) {
		if (tcp_ask(port, NULL, NULL))
			return true;
		if (!itest_alive(pid))
			return false;
		itest_sleep_ms(20);
	}
	return false;
}

/* Waits up to 20 s (a JVM's start) for the line "ready" on fd. */
static bool line_ready(int fd)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };

	return poll(&p, 1, 20000) == 1 && itest_wait_line(fd, "ready");
}

/*
 * Starts argv (looked up in PATH) in real_dir, without the agent, as pw's
 * user when pw is not NULL; its stdout into a pipe whose end *out gets
 * when out is not NULL, else to /dev/null like its stdin and stderr. It
 * dies with this test (PR_SET_PDEATHSIG). Returns its pid or -1.
 */
static pid_t real_spawn(const char *const argv[], const struct passwd *pw,
			int *out)
{
	int p[2] = { -1, -1 };
	pid_t pid;

	if (out && pipe2(p, O_CLOEXEC) < 0)
		return -1;
	pid = fork();
	if (pid == 0) {
		int null = open("/dev/null", O_RDWR);

		dup2(null, 0);
		dup2(out ? p[1] : null, 1);
		dup2(null, 2);
		unsetenv("LD_PRELOAD");
		unsetenv("STACKWATCH_SOCKET");
		if (pw && (setgroups(0, NULL) != 0 || setgid(pw->pw_gid) != 0 ||
			   setuid(pw->pw_uid) != 0))
			_exit(126);
		if (pw)
			setenv("HOME", pw->pw_dir, 1);
		/* After setuid(), which clears it. */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (chdir(real_dir) != 0)
			_exit(126);
		execvp(argv[0], (char *const *)argv);
		_exit(127);
	}
	if (out) {
		close(p[1]);
		*out = pid > 0 ? p[0] : -1;
		if (pid < 0)
			close(p[0]);
	}
	return pid;
}

/* Runs argv as real_spawn() does and waits; true when it exits 0. */
static bool real_run(const char *const argv[], const struct passwd *pw)
{
	pid_t pid = real_spawn(argv, pw, NULL);
	int st;

	return pid > 0 && waitpid(pid, &st, 0) == pid && WIFEXITED(st) &&
	       WEXITSTATUS(st) == 0;
}

/* The children of pid's main thread (where these servers fork), n. */
static int children_of(pid_t pid, pid_t *out, int max)
{
	char path[64];
	FILE *f;
	int n = 0, c;

	snprintf(path, sizeof(path), "/proc/%d/task/%d/children", (int)pid,
		 (int)pid);
	f = fopen(path, "re");
	if (!f)
		return 0;
	while (n < max && fscanf(f, "%d", &c) == 1)
		out[n++] = (pid_t)c;
	fclose(f);
	return n;
}

/*
 * Stops our child pid with sig (its own way to end its children too:
 * SIGTERM for nginx, SIGQUIT for PostgreSQL) and reaps it; when it has
 * not exited within 10 s, it and every process below it are killed.
 * Accepts pid <= 0. Blocks.
 */
static void real_stop(pid_t pid, int sig)
{
	pid_t below[256];
	int n;

	if (pid <= 0)
		return;
	n = children_of(pid, below, 256);
	for (int i = 0; i < n; i++)
		n += children_of(below[i], below + n, 256 - n);
	kill(pid, sig);
	for (long end = itest_now_ms() + 10000; itest_now_ms() < end;) {
		if (waitpid(pid, NULL, WNOHANG) == pid)
			return;
		itest_sleep_ms(10);
	}
	TAP_NOTE("pid %d did not stop on signal %d: killed", (int)pid, sig);
	for (int i = 0; i < n; i++)
		kill(below[i], SIGKILL);
	itest_kill(pid);
}

/* A thread of the later dump again with the same functions: settled. */
static bool settled_in(cJSON *t, const char *fns, void *again)
{
	cJSON *tid = cJSON_GetObjectItem(t, "tid");
	char later[FNS_SIZE];

	if (!cJSON_IsNumber(tid))
		return false;
	t = thread_tid(again, (pid_t)tid->valueint);
	if (!t || !cJSON_IsNumber(cJSON_GetObjectItem(t, "group")))
		return false;
	stack_functions(again, t, later, sizeof(later));
	return strcmp(fns, later) == 0;
}

/* How many of doc's threads settled_in() again; *total: all of doc's. */
static int count_settled(cJSON *doc, cJSON *again, int *total)
{
	cJSON *t;
	int n = 0;

	*total = 0;
	cJSON_ArrayForEach(t, cJSON_GetObjectItem(doc, "threads"))
	{
		char fns[FNS_SIZE];

		(*total)++;
		if (!cJSON_IsNumber(cJSON_GetObjectItem(t, "group")))
			continue;
		stack_functions(doc, t, fns, sizeof(fns));
		n += settled_in(t, fns, again);
	}
	return n;
}

static bool by_ptrace(cJSON *doc)
{
	cJSON *m = cJSON_GetObjectItem(doc, "method");

	return cJSON_IsString(m) && strcmp(m->valuestring, "ptrace") == 0;
}

/*
 * Whether pid's stacks through the daemon have eu-stack's functions,
 * thread for thread. A real program's threads may move between two
 * dumps, so it is dumped through the daemon, by eu-stack, then through
 * the daemon again; a thread with the same functions in both of the
 * daemon's dumps held still (settled), and only those are compared. Every
 * settled thread must have eu-stack's functions, and at least half of
 * the threads (one at least) must have settled; else the three dumps are
 * taken again, three times in all. v gets the last try's counts. Blocks
 * for up to seconds.
 */
static bool like_eu(const struct itest_daemon *d, pid_t pid, struct verdict *v)
{
	static char out[1 << 20];
	static struct eu_thread eu[256];
	char cmd[64];
	bool ok = false;

	snprintf(cmd, sizeof(cmd), "eu-stack -p %d 2>/dev/null", (int)pid);
	for (int attempt = 1; attempt <= 3 && !ok; attempt++) {
		int s1, s2, neu, compared, diff;
		cJSON *doc = get_stacks(d, pid, &s1), *again;

		itest_run_capture(cmd, out, sizeof(out));
		again = get_stacks(d, pid, &s2);
		neu = eu_parse(out, eu, 256);
		v->settled = count_settled(doc, again, &v->total);
		compared = compare_eu(doc, eu, neu, &diff, settled_in, again);
		v->same = compared - diff;
		ok = s1 == 200 && s2 == 200 && by_ptrace(doc) &&
		     by_ptrace(again) && v->settled >= 1 &&
		     2 * v->settled >= v->total && compared == v->settled &&
		     diff == 0;
		if (!ok)
			TAP_NOTE("pid %d, try %d: HTTP %d and %d, %d of %d "
				 "threads settled, %d found in eu-stack's %d, "
				 "%d differ",
				 (int)pid, attempt, s1, s2, v->settled,
				 v->total, compared, neu, diff);
		cJSON_Delete(doc);
		cJSON_Delete(again);
	}
	return ok;
}

/*
 * One check line: pid's stacks as eu-stack has them (like_eu()), and
 * afterwards no thread of pid is stopped or traced and it works (pr).
 */
static void real_check(const struct itest_daemon *d, const char *name,
		       pid_t pid, const struct probe *pr)
{
	struct verdict v = { 0 };
	bool same = like_eu(d, pid, &v), works;
	int n, held = tasks_held(pid, &n, true);

	works = !gone(pid) &&
		(!pr->port || tcp_ask(pr->port, pr->ask, pr->want));
	if (held != 0)
		TAP_NOTE("%s: %d of its %d threads are left stopped or traced",
			 name, held, n);
	TAP_OK(same && held == 0 && works,
	       "%s: %d of %d threads as eu-stack has them (%d settled), then "
	       "it runs on%s%s",
	       name, v.same, v.total, v.settled,
	       pr->what ? " and answers " : "", pr->what ? pr->what : "");
}

/* A server on a TCP port of ours, started from argv, checked, killed. */
static void real_tcp(const struct itest_daemon *d, const char *const argv[],
		     const struct probe *pr)
{
	pid_t pid;

	if (!installed(argv[0])) {
		TAP_SKIP("%s is not installed", argv[0]);
		return;
	}
	pid = real_spawn(argv, NULL, NULL);
	if (pid > 0 && port_ready(pid, pr->port))
		real_check(d, argv[0], pid, pr);
	else
		TAP_OK(0, "%s starts on port %d", argv[0], pr->port);
	real_stop(pid, SIGKILL);
}

static void real_redis(const struct itest_daemon *d)
{
	int port = free_port();
	char sport[16];
	const char *argv[] = {
		"redis-server", "--port",	sport, "--bind",
		"127.0.0.1",	"--save",	"",    "--appendonly",
		"no",		"--io-threads", "4",   NULL
	};
	struct probe pr = { port, "PING\r\n", "+PONG", "PING" };

	snprintf(sport, sizeof(sport), "%d", port);
	real_tcp(d, argv, &pr);
}

static void real_memcached(const struct itest_daemon *d)
{
	int port = free_port();
	char sport[16];
	const char *argv[] = { "memcached", "-u", "nobody", "-l",
			       "127.0.0.1", "-p", sport,    "-U",
			       "0",	    "-t", "4",	    NULL };
	struct probe pr = { port, "version\r\n", "VERSION", "version" };

	snprintf(sport, sizeof(sport), "%d", port);
	real_tcp(d, argv, &pr);
}

/* nginx in the foreground (our child): its master, and two workers. */
static void real_nginx(const struct itest_daemon *d)
{
	int port = free_port();
	char prefix[128], conf[160];
	const char *argv[] = {
		"/usr/sbin/nginx", "-c", conf, "-p", prefix, NULL
	};
	struct probe pr = { port, "GET / HTTP/1.0\r\n\r\n", "HTTP/1.1 204",
			    "HTTP" };
	pid_t master = -1, worker = 0;
	FILE *f;

	if (access("/usr/sbin/nginx", X_OK) != 0) {
		TAP_SKIP("nginx is not installed");
		return;
	}
	snprintf(prefix, sizeof(prefix), "%s/nginx", real_dir);
	snprintf(conf, sizeof(conf), "%s/nginx.conf", prefix);
	mkdir(prefix, 0755);
	f = fopen(conf, "we");
	if (f) {
		fprintf(f,
			"daemon off;\n"
			"worker_processes 2;\n"
			"pid %s/nginx.pid;\n"
			"error_log %s/error.log;\n"
			"events { worker_connections 64; }\n"
			"http { access_log off;\n"
			"  client_body_temp_path %s; proxy_temp_path %s;\n"
			"  fastcgi_temp_path %s; uwsgi_temp_path %s;\n"
			"  scgi_temp_path %s;\n"
			"  server { listen 127.0.0.1:%d; return 204; } }\n",
			prefix, prefix, prefix, prefix, prefix, prefix, prefix,
			port);
		if (fclose(f) == 0)
			master = real_spawn(argv, NULL, NULL);
	}
	if (master > 0 && port_ready(master, port))
		for (long end = itest_now_ms() + 5000;
		     itest_now_ms() < end &&
		     children_of(master, &worker, 1) == 0;)
			itest_sleep_ms(20);
	if (worker > 0) {
		real_check(d, "nginx worker", worker, &pr);
		real_check(d, "nginx master", master, &pr);
	} else {
		TAP_OK(0, "nginx starts on port %d with its workers", port);
	}
	real_stop(master, SIGTERM);
}

/* The newest /usr/lib/postgresql/VERSION/bin, into buf; false if none. */
static bool pg_bindir(char *buf, size_t size)
{
	static const char base[] = "/usr/lib/postgresql/";
	glob_t g;
	int best = -1;

	if (glob("/usr/lib/postgresql/*/bin/postgres", 0, NULL, &g) != 0)
		return false;
	for (size_t i = 0; i < g.gl_pathc; i++) {
		const char *p = g.gl_pathv[i];
		int v = atoi(p + strlen(base));
		size_t len = strlen(p) - strlen("/postgres");

		if (v > best && len < size) {
			best = v;
			snprintf(buf, size, "%.*s", (int)len, p);
		}
	}
	globfree(&g);
	return best >= 0;
}

/* Whether file holds word (postmaster.pid says "ready" once it is). */
static bool file_has(const char *path, const char *word)
{
	char buf[4096];
	FILE *f = fopen(path, "re");
	size_t n;

	if (!f)
		return false;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	return strstr(buf, word) != NULL;
}

/* The child of pm whose process title holds what; 0 when none. */
static pid_t pg_child(pid_t pm, const char *what)
{
	pid_t kids[64];
	int n = children_of(pm, kids, 64);

	for (int i = 0; i < n; i++) {
		char path[64], title[512];
		FILE *f;
		size_t len;

		snprintf(path, sizeof(path), "/proc/%d/cmdline", (int)kids[i]);
		f = fopen(path, "re");
		if (!f)
			continue;
		len = fread(title, 1, sizeof(title) - 1, f);
		fclose(f);
		for (size_t k = 0; k < len; k++)
			if (title[k] == '\0')
				title[k] = ' ';
		title[len] = '\0';
		if (strstr(title, what))
			return kids[i];
	}
	return 0;
}

/*
 * PostgreSQL as postgres, in real_dir (0711, so that postgres reaches
 * its data directory), its socket there and no TCP: the postmaster, a
 * backend sleeping in a query of psql, and the walwriter, which
 * PostgreSQL up to 15 forks in its SIGUSR1 handler: its stack holds the
 * signal trampoline (__restore_rt), whose address is where the handler
 * returns to, looked up as it is, not at pc - 1 as a return address.
 */
static void real_postgres(const struct itest_daemon *d)
{
	const struct passwd *pw = getpwnam("postgres");
	char bin[128], data[128], pidfile[160], initdb[160], postgres[160];
	char psql[160];
	const char *init_argv[] = { initdb,  "-D", data,	  "-A",
				    "trust", "-N", "--no-locale", NULL };
	const char *pm_argv[] = {
		postgres, "-D", data, "-k", data, "-c", "listen_addresses=",
		NULL
	};
	const char *psql_argv[] = { psql,
				    "-X",
				    "-q",
				    "-h",
				    data,
				    "-c",
				    "select pg_sleep(600)",
				    "postgres",
				    NULL };
	struct probe alive = { 0 };
	pid_t pm = -1, client = -1, backend = 0;
	bool ready = false;

	if (!pw || !pg_bindir(bin, sizeof(bin))) {
		TAP_SKIP("PostgreSQL is not installed");
		return;
	}
	snprintf(initdb, sizeof(initdb), "%s/initdb", bin);
	snprintf(postgres, sizeof(postgres), "%s/postgres", bin);
	snprintf(psql, sizeof(psql), "%s/psql", bin);
	snprintf(data, sizeof(data), "%s/pg", real_dir);
	snprintf(pidfile, sizeof(pidfile), "%s/postmaster.pid", data);
	if (mkdir(data, 0700) != 0 ||
	    chown(data, pw->pw_uid, pw->pw_gid) != 0 ||
	    !real_run(init_argv, pw)) {
		TAP_OK(0, "initdb makes a cluster in %s", data);
		return;
	}
	pm = real_spawn(pm_argv, pw, NULL);
	for (long end = itest_now_ms() + 10000;
	     pm > 0 && !ready && itest_now_ms() < end && itest_alive(pm);) {
		ready = file_has(pidfile, "ready");
		itest_sleep_ms(20);
	}
	if (ready)
		client = real_spawn(psql_argv, pw, NULL);
	for (long end = itest_now_ms() + 10000;
	     client > 0 && !backend && itest_now_ms() < end;) {
		backend = pg_child(pm, "[local] SELECT");
		itest_sleep_ms(20);
	}
	if (backend) {
		pid_t walwriter = pg_child(pm, "walwriter");

		real_check(d, "postgres postmaster", pm, &alive);
		real_check(d, "postgres backend", backend, &alive);
		if (walwriter)
			real_check(d, "postgres walwriter", walwriter, &alive);
		else
			TAP_OK(0, "PostgreSQL has a walwriter");
	} else {
		TAP_OK(0, "PostgreSQL starts and psql's query runs (%s)",
		       ready ? "ready" : "not ready");
	}
	real_stop(pm, SIGQUIT);
	real_stop(client, SIGKILL);
}

/* node: an HTTP server, and libuv's pool started by one fs call. */
static void real_node(const struct itest_daemon *d)
{
	int port = free_port(), out = -1;
	char script[512];
	const char *argv[] = { "node", "-e", script, NULL };
	struct probe pr = { port, "GET / HTTP/1.0\r\n\r\n", "HTTP/1.1 200",
			    "HTTP" };
	pid_t pid;

	if (!installed("node")) {
		TAP_SKIP("node is not installed");
		return;
	}
	snprintf(script, sizeof(script),
		 "require('http').createServer((q, s) => s.end('ok'))"
		 ".listen(%d, '127.0.0.1', () => require('fs').stat('/', "
		 "() => console.log('ready')));",
		 port);
	pid = real_spawn(argv, NULL, &out);
	if (pid > 0 && line_ready(out))
		real_check(d, "node", pid, &pr);
	else
		TAP_OK(0, "node starts on port %d", port);
	if (out >= 0)
		close(out);
	real_stop(pid, SIGKILL);
}

/* A JVM: threads waiting on a monitor and sleeping, the main one waits. */
static void real_java(const struct itest_daemon *d)
{
	static const char source[] =
		"public class Waiters {\n"
		"  public static void main(String[] a) throws Exception {\n"
		"    Object lock = new Object();\n"
		"    for (int i = 0; i < 3; i++) {\n"
		"      Thread t = new Thread(() -> {\n"
		"        synchronized (lock) {\n"
		"          try { lock.wait(); } catch (InterruptedException e) "
		"{}\n"
		"        }\n"
		"      }, \"waiter-\" + i);\n"
		"      t.setDaemon(true);\n"
		"      t.start();\n"
		"    }\n"
		"    for (int i = 0; i < 2; i++) {\n"
		"      Thread t = new Thread(() -> {\n"
		"        try { Thread.sleep(600000); }\n"
		"        catch (InterruptedException e) {}\n"
		"      }, \"sleeper-\" + i);\n"
		"      t.setDaemon(true);\n"
		"      t.start();\n"
		"    }\n"
		"    System.out.println(\"ready\");\n"
		"    System.out.flush();\n"
		"    synchronized (lock) { lock.wait(); }\n"
		"  }\n"
		"}\n";
	char dir[128], file[160];
	const char *javac[] = { "javac", "-d", dir, file, NULL };
	const char *java[] = { "java", "-cp", dir, "Waiters", NULL };
	struct probe alive = { 0 };
	pid_t pid = -1;
	int out = -1;
	FILE *f;

	if (!installed("java") || !installed("javac")) {
		TAP_SKIP("java is not installed");
		return;
	}
	snprintf(dir, sizeof(dir), "%s/java", real_dir);
	snprintf(file, sizeof(file), "%s/Waiters.java", dir);
	mkdir(dir, 0755);
	f = fopen(file, "we");
	if (f && fputs(source, f) >= 0 && fclose(f) == 0 &&
	    real_run(javac, NULL))
		pid = real_spawn(java, NULL, &out);
	if (pid > 0 && line_ready(out))
		real_check(d, "java", pid, &alive);
	else
		TAP_OK(0, "javac compiles a class and java runs it");
	if (out >= 0)
		close(out);
	real_stop(pid, SIGKILL);
}

static void real_python(const struct itest_daemon *d)
{
	static const char script[] =
		"import threading, time\n"
		"ev = threading.Event()\n"
		"def nap():\n"
		"    while True:\n"
		"        time.sleep(600)\n"
		"for i in range(3):\n"
		"    threading.Thread(target=ev.wait, daemon=True,\n"
		"                     name='waiter-%d' % i).start()\n"
		"for i in range(2):\n"
		"    threading.Thread(target=nap, daemon=True,\n"
		"                     name='sleeper-%d' % i).start()\n"
		"print('ready', flush=True)\n"
		"ev.wait()\n";
	const char *argv[] = { "python3", "-c", script, NULL };
	struct probe alive = { 0 };
	pid_t pid;
	int out = -1;

	if (!installed("python3")) {
		TAP_SKIP("python3 is not installed");
		return;
	}
	pid = real_spawn(argv, NULL, &out);
	if (pid > 0 && line_ready(out))
		real_check(d, "python3", pid, &alive);
	else
		TAP_OK(0, "python3 starts");
	if (out >= 0)
		close(out);
	real_stop(pid, SIGKILL);
}

static void test_real_programs(const struct itest_daemon *d)
{
	long start = itest_now_ms();
	char cmd[128];

	snprintf(real_dir, sizeof(real_dir), "/tmp/sw-real-XXXXXX");
	if (!mkdtemp(real_dir) || chmod(real_dir, 0711) != 0) {
		TAP_OK(0, "temporary directory");
		return;
	}
	real_redis(d);
	real_memcached(d);
	real_nginx(d);
	real_postgres(d);
	real_node(d);
	real_java(d);
	real_python(d);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", real_dir);
	(void)!system(cmd);
	TAP_NOTE("the real programs took %ld ms", itest_now_ms() - start);
}

/* The "deep" thread of a dump's JSON, or NULL. */
static cJSON *deep_thread(cJSON *doc)
{
	cJSON *t;

	cJSON_ArrayForEach(t, cJSON_GetObjectItem(doc, "threads"))
	{
		cJSON *n = cJSON_GetObjectItem(t, "name");

		if (cJSON_IsString(n) && strcmp(n->valuestring, "deep") == 0)
			return t;
	}
	return NULL;
}

/*
 * A stack deeper than any copy (1.2 MiB): the thread says it was cut
 * short, in the JSON and in the text, through the daemon and --local.
 */
static void test_cut(const struct itest_daemon *d)
{
	struct plain p = { 0 };
	char cmd[1024], out[1 << 16];
	cJSON *doc, *t, *tr;
	int status;

	if (plain_start(&p, "deep", NULL) < 0 ||
	    !itest_wait_line(p.out, "ready")) {
		TAP_OK(0, "the deep fixture starts");
		plain_stop(&p);
		return;
	}
	doc = get_stacks(d, p.pid, &status);
	t = doc ? deep_thread(doc) : NULL;
	tr = t ? cJSON_GetObjectItem(t, "truncated") : NULL;
	TAP_OK(status == 200 && cJSON_IsString(tr) &&
		       strcmp(tr->valuestring, "stack") == 0,
	       "a thread deeper than its copy says \"truncated\": "
	       "\"stack\" (%d, %s)",
	       status, cJSON_IsString(tr) ? tr->valuestring : "absent");
	cJSON_Delete(doc);
	snprintf(cmd, sizeof(cmd), "%s dump --local %d", cli, (int)p.pid);
	TAP_OK(itest_run_capture(cmd, out, sizeof(out)) == 0 &&
		       strstr(out, "\n... (stack copy cut short: the frames "
				   "beyond it are not known)\n"),
	       "and the text of --local says so under its frames");
	plain_stop(&p);
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
	test_real_programs(&d);
	test_cut(&d);
	itest_daemon_stop(&d);
	itest_daemon_cleanup(&d);
	test_sampling();
	test_sigkill();
	test_cores();
	return tap_done();
}
