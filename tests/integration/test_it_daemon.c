/*
 * test_it_daemon.c - the daemon end to end: the workload fixture under the
 * agent, dumped over HTTP as JSON, text and folded; the daemon's own entry;
 * a stopped target answered with 504 within its deadline; unregistered
 * pids are 404; SIGTERM exits 0, also while a request waits on a target
 * that cannot answer: new clients are refused, that request gets its 504
 * first, and the daemon is gone within the request's deadline plus a
 * margin. /api/v1/processes: CPU, thread states, stuck threads, deadlock
 * and method of processes whose threads are known (a spinner and parked
 * threads without the agent, a sleep, a deadlocked program under it).
 */
#include <pthread.h>

#include "itest.h"
#include "tap.h"

static cJSON *find_group_with(cJSON *doc, const char *function)
{
	cJSON *g, *f;

	cJSON_ArrayForEach(g, cJSON_GetObjectItem(doc, "groups"))
	{
		cJSON_ArrayForEach(f, cJSON_GetObjectItem(g, "frames"))
		{
			cJSON *fn = cJSON_GetObjectItem(f, "function");

			if (cJSON_IsString(fn) &&
			    strstr(fn->valuestring, function))
				return g;
		}
	}
	return NULL;
}

static cJSON *find_frame(cJSON *group, const char *function)
{
	cJSON *f;

	cJSON_ArrayForEach(f, cJSON_GetObjectItem(group, "frames"))
	{
		cJSON *fn = cJSON_GetObjectItem(f, "function");

		/* C++ names carry their parameters: "waiter_wait()". */
		if (cJSON_IsString(fn) &&
		    strncmp(fn->valuestring, function, strlen(function)) == 0 &&
		    strchr("(", fn->valuestring[strlen(function)]))
			return f;
	}
	return NULL;
}

static const char *str(cJSON *o, const char *key)
{
	cJSON *v = cJSON_GetObjectItem(o, key);

	return cJSON_IsString(v) ? v->valuestring : "";
}

static void check_workload_json(cJSON *doc, pid_t pid)
{
	cJSON *g, *f, *t;
	int n;

	TAP_OK(doc != NULL, "JSON of the workload parses");
	if (!doc)
		return;
	TAP_OK(cJSON_GetObjectItem(doc, "pid")->valuedouble == pid,
	       "pid is the daemon's view of the target");
	n = cJSON_GetArraySize(cJSON_GetObjectItem(doc, "threads"));
	TAP_OK(n >= 64 + 8 + 5, "all threads listed (%d)", n);
	g = find_group_with(doc, "waiter_wait");
	TAP_OK(g && cJSON_GetObjectItem(g, "count")->valuedouble >= 64,
	       "64 waiters in one group");
	f = g ? find_frame(g, "waiter_wait") : NULL;
	TAP_OK(f && strstr(str(f, "file"), "workload.cc") &&
		       cJSON_GetObjectItem(f, "line")->valuedouble > 0,
	       "waiter_wait has file:line (%s)", f ? str(f, "file") : "none");
	g = find_group_with(doc, "deep_rec");
	TAP_OK(g && cJSON_GetArraySize(cJSON_GetObjectItem(g, "frames")) >= 30,
	       "deep recursion through static functions unwound");
	g = find_group_with(doc, "sw_fixture::Worker::run");
	TAP_OK(g != NULL, "C++ frame demangled");
	t = itest_thread_named(doc, "spinner");
	TAP_OK(t && strcmp(str(t, "state"), "R") == 0 &&
		       strcmp(str(t, "status"), "ok") == 0,
	       "spinner is running and dumped");
	t = itest_thread_named(doc, "sw-agent");
	TAP_OK(t && strcmp(str(t, "status"), "ok") == 0,
	       "the agent thread is in the dump");
}

static void check_formats(const struct itest_daemon *d, pid_t pid)
{
	struct http_response r;
	char path[128];

	memset(&r, 0, sizeof(r));
	snprintf(path, sizeof(path), "/api/v1/stacks?pid=%d&format=text",
		 (int)pid);
	TAP_OK(itest_get(d, path, &r) == 0 && r.status == 200 &&
		       strncmp(r.body, "Process ", 8) == 0 &&
		       strstr(r.body, "in waiter_wait() at workload.cc:"),
	       "text format");
	http_response_release(&r);
	snprintf(path, sizeof(path), "/stacks?pid=%d&format=folded", (int)pid);
	TAP_OK(itest_get(d, path, &r) == 0 && r.status == 200 &&
		       strstr(r.body, "waiter_wait"),
	       "folded format");
	if (r.body) {
		/* "comm;outer;...;inner COUNT" for every line. */
		char *line = strtok(r.body, "\n");
		bool good = line != NULL;

		for (; line; line = strtok(NULL, "\n")) {
			char *sp = strrchr(line, ' ');

			if (!sp || atoi(sp + 1) <= 0 || !strchr(line, ';'))
				good = false;
		}
		TAP_OK(good, "every folded line is frames then a count");
	}
	http_response_release(&r);
	snprintf(path, sizeof(path), "/stacks?pid=%d", (int)pid);
	/* The page renders in the browser (tests/web): here, its shell. */
	TAP_OK(itest_get(d, path, &r) == 0 && r.status == 200 &&
		       strstr(r.body, "<html") &&
		       strstr(r.body, "/static/app.js"),
	       "HTML page of one process");
	http_response_release(&r);
}

static void check_errors(const struct itest_daemon *d, pid_t target)
{
	int status;
	cJSON *j;

	j = itest_get_json(d, "/api/v1/stacks?pid=4194304", &status);
	TAP_OK(status == 404 && j && cJSON_GetObjectItem(j, "error") &&
		       cJSON_GetObjectItem(j, "status")->valuedouble == 404,
	       "a pid no process has: 404 with a JSON error");
	cJSON_Delete(j);
	j = itest_get_json(d, "/api/v1/stacks?pid=abc", &status);
	TAP_OK(status == 400 && j && cJSON_GetObjectItem(j, "error"),
	       "a bad pid is 400");
	cJSON_Delete(j);
	j = itest_get_json(d, "/api/v1/stacks?timeout_ms=0", &status);
	TAP_OK(status == 400, "timeout_ms out of range is 400");
	cJSON_Delete(j);
	TAP_OK(itest_alive(target), "the target lives");
}

/* Starts argv without the agent, in a process group of its own. */
static pid_t spawn_plain(char *const argv[], int *out, int *in)
{
	int o[2], i[2];
	pid_t pid;

	if (pipe(o) < 0 || pipe(i) < 0)
		return -1;
	pid = fork();
	if (pid == 0) {
		setpgid(0, 0);
		dup2(o[1], 1);
		dup2(i[0], 0);
		close(o[0]);
		close(i[1]);
		execv(argv[0], argv);
		_exit(127);
	}
	close(o[1]);
	close(i[0]);
	*out = o[0];
	*in = i[1];
	return pid;
}

static void kill_group(pid_t pid)
{
	if (pid <= 0)
		return;
	kill(-pid, SIGKILL);
	waitpid(pid, NULL, 0);
}

/* The entry of pid in a /api/v1/processes answer, or NULL. */
static cJSON *process_entry(cJSON *doc, pid_t pid)
{
	cJSON *p;

	cJSON_ArrayForEach(p, cJSON_GetObjectItem(doc, "processes"))
	{
		if (cJSON_GetObjectItem(p, "pid")->valuedouble == pid)
			return p;
	}
	return NULL;
}

static double num(cJSON *o, const char *key)
{
	cJSON *v = cJSON_GetObjectItem(o, key);

	return cJSON_IsNumber(v) ? v->valuedouble : -1;
}

/* The sum of thread_states, and the count of state c in it. */
static int states_of(cJSON *p, const char *c, int *total)
{
	cJSON *st = cJSON_GetObjectItem(p, "thread_states"), *e;
	int n = 0;

	*total = 0;
	cJSON_ArrayForEach(e, st)
	{
		*total += (int)e->valuedouble;
		if (strcmp(e->string, c) == 0)
			n = (int)e->valuedouble;
	}
	return cJSON_IsObject(st) ? n : -1;
}

/*
 * plain_target 2 without the agent: 2 parked threads, a ticker, a
 * spinner and main (5, one always R); sleep(1): one thread in S using no
 * CPU; lock_cxx under the agent: a deadlock, once a dump has sampled it.
 */
static void check_processes(const struct itest_daemon *d, pid_t workload)
{
	char plain_bin[256], lock_bin[256], path[128];
	char *plain_argv[] = { plain_bin, (char *)"2", NULL };
	char *sleep_argv[] = { (char *)"/bin/sleep", (char *)"300", NULL };
	char *lock_argv[] = { lock_bin, NULL };
	int pout = -1, pin = -1, sout = -1, sin = -1, lout = -1;
	int status, total, r;
	pid_t plain, idle, lock;
	cJSON *doc, *p;

	snprintf(plain_bin, sizeof(plain_bin), "%s/fixtures/plain_target",
		 itest_build());
	snprintf(lock_bin, sizeof(lock_bin), "%s/fixtures/lock_cxx",
		 itest_build());
	plain = spawn_plain(plain_argv, &pout, &pin);
	idle = spawn_plain(sleep_argv, &sout, &sin);
	lock = itest_spawn(d, lock_argv, &lout);
	TAP_OK(plain > 0 && itest_wait_line(pout, "ready") && idle > 0 &&
		       lock > 0 && itest_wait_line(lout, "ready") &&
		       itest_wait_registered(d, lock, 10000),
	       "processes: the fixtures are up");
	/* A dump puts the deadlock into lock_cxx's history. */
	snprintf(path, sizeof(path), "/api/v1/stacks?pid=%d", (int)lock);
	cJSON_Delete(itest_get_json(d, path, &status));
	doc = itest_get_json(d, "/api/v1/processes", &status);
	TAP_OK(status == 200 && doc, "processes: 200 (%d)", status);

	p = process_entry(doc, plain);
	r = states_of(p, "R", &total);
	TAP_OK(p && r >= 1 && states_of(p, "S", &total) >= 3 && total == 5 &&
		       num(p, "threads") == 5,
	       "processes: plain_target's 5 threads by state, one spinning "
	       "(R %d, %d in all)",
	       r, total);
	TAP_OK(p && num(p, "cpu_pct") > 10 &&
		       num(p, "cpu_pct") <= 100 * num(p, "threads"),
	       "processes: its spinner shows in cpu_pct, since it started "
	       "(%.1f)",
	       p ? num(p, "cpu_pct") : -1);
	TAP_OK(p && strcmp(str(p, "method"), "ptrace") == 0 &&
		       num(p, "stuck") == 0 &&
		       cJSON_IsFalse(cJSON_GetObjectItem(p, "deadlock")),
	       "processes: without the agent, method ptrace, nothing stuck");
	p = process_entry(doc, idle);
	TAP_OK(p && states_of(p, "S", &total) == 1 && total == 1 &&
		       num(p, "cpu_pct") >= 0 && num(p, "cpu_pct") < 5,
	       "processes: sleep has one thread in S and no CPU (%.1f)",
	       p ? num(p, "cpu_pct") : -1);
	p = process_entry(doc, lock);
	TAP_OK(p && strcmp(str(p, "method"), "agent") == 0 &&
		       cJSON_IsTrue(cJSON_GetObjectItem(p, "deadlock")) &&
		       num(p, "stuck") >= 2,
	       "processes: lock_cxx, under the agent, is deadlocked, its 2 "
	       "threads stuck (%g)",
	       p ? num(p, "stuck") : -1);
	/* Its churn thread starts and joins threads all the time: the
	 * count of /proc/PID/stat and the states read after may differ. */
	p = process_entry(doc, workload);
	r = states_of(p, "S", &total);
	TAP_OK(p && strcmp(str(p, "method"), "agent") == 0 && r >= 64 &&
		       states_of(p, "R", &total) >= 1 && total >= 64 + 8 + 5 &&
		       cJSON_IsFalse(cJSON_GetObjectItem(p, "deadlock")),
	       "processes: the workload's threads by state, its 64 waiters "
	       "in S, its spinner in R (S %d, %d in all)",
	       r, total);
	cJSON_Delete(doc);

	/* Half a second on: measured since the reading above. */
	itest_sleep_ms(600);
	doc = itest_get_json(d, "/api/v1/processes", &status);
	p = process_entry(doc, plain);
	TAP_OK(p && num(p, "cpu_pct") > 10,
	       "processes: cpu_pct since the previous reading (%.1f)",
	       p ? num(p, "cpu_pct") : -1);
	p = process_entry(doc, idle);
	TAP_OK(p && num(p, "cpu_pct") >= 0 && num(p, "cpu_pct") < 5,
	       "processes: and sleep's still none (%.1f)",
	       p ? num(p, "cpu_pct") : -1);
	cJSON_Delete(doc);

	kill_group(plain);
	kill_group(idle);
	itest_kill(lock);
	{
		int fds[] = { pout, pin, sout, sin, lout };

		for (size_t i = 0; i < sizeof(fds) / sizeof(fds[0]); i++)
			if (fds[i] >= 0)
				close(fds[i]);
	}
	TAP_OK(!itest_alive(plain) && !itest_alive(idle) && !itest_alive(lock),
	       "processes: the fixtures are gone");
}

static void check_stopped(const struct itest_daemon *d, pid_t pid)
{
	char path[128];
	long t0, ms;
	int status;
	cJSON *j;

	kill(pid, SIGSTOP);
	/* Past the rate limit's window (1/30 s): no cached answer. */
	itest_sleep_ms(100);
	snprintf(path, sizeof(path), "/api/v1/stacks?pid=%d&timeout_ms=200",
		 (int)pid);
	t0 = itest_now_ms();
	j = itest_get_json(d, path, &status);
	ms = itest_now_ms() - t0;
	TAP_OK(status == 504 && j && cJSON_GetObjectItem(j, "error"),
	       "a stopped target is 504 (got %d)", status);
	TAP_OK(ms < 200 + 500 + 300,
	       "the 504 came within the deadline (%ld ms)", ms);
	cJSON_Delete(j);
	kill(pid, SIGCONT);
	itest_sleep_ms(100);
	snprintf(path, sizeof(path), "/api/v1/stacks?pid=%d", (int)pid);
	j = itest_get_json(d, path, &status);
	TAP_OK(status == 200 && find_group_with(j, "waiter_wait"),
	       "after SIGCONT the next dump is whole again");
	cJSON_Delete(j);
}

/* A request made on a thread of its own, and what came of it. */
struct pending_get {
	const struct itest_daemon *d;
	char path[128];
	int rc;
	int status;
	cJSON *doc;
	long done_ms; /* itest_now_ms() when the answer (or error) came */
	char error[256];
};

static void *pending_get_main(void *arg)
{
	struct pending_get *g = arg;
	struct http_response r;

	memset(&r, 0, sizeof(r));
	g->rc = itest_get(g->d, g->path, &r);
	g->done_ms = itest_now_ms();
	g->status = r.status;
	g->doc = g->rc == 0 ? cJSON_Parse(r.body) : NULL;
	snprintf(g->error, sizeof(g->error), "%s", r.error);
	http_response_release(&r);
	return NULL;
}

/*
 * SIGTERM while a request waits for a stopped target (timeout_ms=1500):
 * the design promises that the daemon finishes the requests in flight
 * within their deadlines and exits 0. So the request gets its 504 JSON
 * (not a reset), and the daemon exits 0 no later than the request's
 * deadline (its timeout plus the daemon's 500 ms grace for an agent)
 * plus a margin for a loaded machine.
 */
static void test_sigterm_in_flight(void)
{
	enum { TIMEOUT_MS = 1500, GRACE_MS = 500, MARGIN_MS = 1500 };
	struct pending_get g = { .rc = -1 };
	struct itest_daemon d;
	char bin[256], *argv[3];
	int out = -1, st = 0;
	long t0, t_term, t_exit = -1;
	pthread_t th;
	pid_t pid;

	if (itest_daemon_start(&d) < 0) {
		TAP_OK(0, "sigterm: the daemon starts");
		return;
	}
	snprintf(bin, sizeof(bin), "%s/fixtures/agent_target", itest_build());
	argv[0] = bin;
	argv[1] = (char *)"sigwait";
	argv[2] = NULL;
	pid = itest_spawn(&d, argv, &out);
	if (!TAP_OK(itest_wait_line(out, "ready") &&
			    itest_wait_registered(&d, pid, 10000),
		    "sigterm: a target registered"))
		goto out_kill;
	kill(pid, SIGSTOP);
	g.d = &d;
	snprintf(g.path, sizeof(g.path), "/api/v1/stacks?pid=%d&timeout_ms=%d",
		 (int)pid, TIMEOUT_MS);
	t0 = itest_now_ms();
	pthread_create(&th, NULL, pending_get_main, &g);
	itest_sleep_ms(400); /* the request is waiting for the agent */
	t_term = itest_now_ms();
	kill(d.pid, SIGTERM);
	itest_sleep_ms(200);
	{
		struct http_response r;
		int rc;

		memset(&r, 0, sizeof(r));
		rc = itest_get(&d, "/healthz", &r);
		TAP_OK(rc == -ECONNREFUSED,
		       "sigterm: meanwhile a new client is refused at once "
		       "(rc %d: %s)",
		       rc, rc ? r.error : "answered");
		http_response_release(&r);
	}
	for (long end = t0 + 15000; itest_now_ms() < end;) {
		if (waitpid(d.pid, &st, WNOHANG) == d.pid) {
			t_exit = itest_now_ms();
			d.pid = 0;
			break;
		}
		itest_sleep_ms(5);
	}
	pthread_join(th, NULL);
	TAP_OK(t_exit >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0,
	       "sigterm: the daemon exits 0 with a request in flight "
	       "(status 0x%x)",
	       st);
	TAP_OK(t_exit >= 0 && t_exit - t0 <= TIMEOUT_MS + GRACE_MS + MARGIN_MS,
	       "sigterm: it was gone %ld ms after SIGTERM, %ld ms after the "
	       "request (bound: %d + %d + %d ms)",
	       t_exit - t_term, t_exit - t0, TIMEOUT_MS, GRACE_MS, MARGIN_MS);
	TAP_OK(g.rc == 0 && g.status == 504 && g.doc &&
		       cJSON_IsString(cJSON_GetObjectItem(g.doc, "error")),
	       "sigterm: the request in flight got its 504 JSON, %ld ms after "
	       "it was made (rc %d, status %d, %s)",
	       g.done_ms - t0, g.rc, g.status, g.rc ? g.error : "answered");
	cJSON_Delete(g.doc);
	kill(pid, SIGCONT);
out_kill:
	itest_kill(pid);
	if (out >= 0)
		close(out);
	if (d.pid > 0)
		itest_daemon_stop(&d);
	itest_daemon_cleanup(&d);
}

int main(void)
{
	struct itest_daemon d;
	char bin[256], path[128];
	char *argv[3];
	int status, fd = -1;
	pid_t pid;
	cJSON *j, *t;
	bool self_found = false;

	if (itest_daemon_start(&d) < 0) {
		TAP_OK(0, "the daemon starts");
		return tap_done();
	}
	j = itest_get_json(&d, "/api/v1/targets", &status);
	cJSON_ArrayForEach(t, cJSON_GetObjectItem(j, "targets"))
	{
		if (cJSON_IsTrue(cJSON_GetObjectItem(t, "self")) &&
		    cJSON_GetObjectItem(t, "pid")->valuedouble == d.pid)
			self_found = true;
	}
	TAP_OK(status == 200 && self_found, "the daemon lists itself");
	cJSON_Delete(j);
	snprintf(path, sizeof(path), "/api/v1/stacks?pid=%d", (int)d.pid);
	j = itest_get_json(&d, path, &status);
	TAP_OK(status == 200 && j &&
		       cJSON_GetObjectItem(j, "threads_ok")->valuedouble >= 2,
	       "the daemon dumps its own threads");
	cJSON_Delete(j);

	snprintf(bin, sizeof(bin), "%s/fixtures/workload", itest_build());
	argv[0] = bin;
	argv[1] = (char *)"serve";
	argv[2] = NULL;
	pid = itest_spawn(&d, argv, &fd);
	TAP_OK(pid > 0 && itest_wait_line(fd, "ready"), "workload ready");
	TAP_OK(itest_wait_registered(&d, pid, 10000),
	       "workload registered with the daemon");
	snprintf(path, sizeof(path), "/api/v1/stacks?pid=%d", (int)pid);
	j = itest_get_json(&d, path, &status);
	TAP_OK(status == 200, "dump over HTTP (status %d)", status);
	check_workload_json(j, pid);
	cJSON_Delete(j);
	check_formats(&d, pid);
	check_errors(&d, pid);
	check_processes(&d, pid);
	check_stopped(&d, pid);

	j = itest_get_json(&d, "/api/v1/stacks", &status);
	TAP_OK(status == 200 && cJSON_GetArraySize(cJSON_GetObjectItem(
					j, "processes")) >= 2,
	       "all processes at once");
	cJSON_Delete(j);

	itest_kill(pid);
	close(fd);
	for (long end = itest_now_ms() + 5000;
	     itest_now_ms() < end && itest_registered(&d, pid);)
		itest_sleep_ms(20);
	TAP_OK(!itest_registered(&d, pid), "a dead target is unregistered");
	TAP_OK(itest_daemon_stop(&d) == 0, "SIGTERM: the daemon exits 0");
	itest_daemon_cleanup(&d);
	test_sigterm_in_flight();
	return tap_done();
}
