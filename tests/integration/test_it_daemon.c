/*
 * test_it_daemon.c - the daemon end to end: the workload fixture under the
 * agent, dumped over HTTP as JSON, text and folded; the daemon's own entry;
 * a stopped target answered with 504 within its deadline; unregistered
 * pids are 404; SIGTERM exits 0.
 */
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

static cJSON *find_thread(cJSON *doc, const char *name)
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
	t = find_thread(doc, "spinner");
	TAP_OK(t && strcmp(str(t, "state"), "R") == 0 &&
		       strcmp(str(t, "status"), "ok") == 0,
	       "spinner is running and dumped");
	t = find_thread(doc, "sw-agent");
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

	j = itest_get_json(d, "/api/v1/stacks?pid=1", &status);
	TAP_OK(status == 404 && j && cJSON_GetObjectItem(j, "error") &&
		       cJSON_GetObjectItem(j, "status")->valuedouble == 404,
	       "pid 1 is not a target: 404 with a JSON error");
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
	return tap_done();
}
