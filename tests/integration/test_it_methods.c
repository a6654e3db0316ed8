/*
 * test_it_methods.c - a thread read from the kernel has the stack the
 * agent's signal path gives it: the workload fixture, under the agent,
 * is dumped by the daemon (its blocked threads read from the kernel,
 * with no signal) and then dumps itself through sw_dump_self() (every
 * thread signalled, each unwinding itself). Its parked threads do not
 * move between the two, so their functions must match one for one.
 */
#define _GNU_SOURCE
#include <cjson/cJSON.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "itest.h"
#include "tap.h"

/* Reads the fixture's self-dump: lines up to "end", joined. */
static char *read_self_dump(int fd)
{
	size_t cap = 1 << 20, len = 0;
	char *buf = malloc(cap), line[65536];

	if (!buf)
		return NULL;
	buf[0] = '\0';
	while (itest_read_line(fd, line, sizeof(line))) {
		size_t n = strlen(line);

		if (strcmp(line, "end") == 0)
			return buf;
		if (strcmp(line, "failed") == 0)
			break;
		if (len + n + 2 > cap) {
			char *nb = realloc(buf, cap * 2);

			if (!nb)
				break;
			buf = nb;
			cap *= 2;
		}
		memcpy(buf + len, line, n);
		len += n;
		buf[len++] = '\n';
		buf[len] = '\0';
	}
	free(buf);
	return NULL;
}

/* A thread's object in a dump's JSON, by tid. */
static cJSON *thread_of(cJSON *doc, int tid)
{
	cJSON *t;

	cJSON_ArrayForEach(t, cJSON_GetObjectItem(doc, "threads"))
	{
		cJSON *id = cJSON_GetObjectItem(t, "tid");

		if (cJSON_IsNumber(id) && id->valueint == tid)
			return t;
	}
	return NULL;
}

/* Its frames' functions joined by ';' into buf ("" when not read). */
static const char *functions(cJSON *doc, cJSON *t, char *buf, size_t size)
{
	cJSON *g = cJSON_GetObjectItem(t, "group"), *f;
	size_t off = 0;

	buf[0] = '\0';
	if (!cJSON_IsNumber(g))
		return buf;
	cJSON_ArrayForEach(
		f,
		cJSON_GetObjectItem(
			cJSON_GetArrayItem(cJSON_GetObjectItem(doc, "groups"),
					   g->valueint),
			"frames"))
	{
		cJSON *fn = cJSON_GetObjectItem(f, "function");

		off += (size_t)snprintf(
			buf + off, off < size ? size - off : 0, "%s;",
			cJSON_IsString(fn) ? fn->valuestring : "??");
		if (off >= size)
			break;
	}
	return buf;
}

static const char *str(cJSON *o, const char *key)
{
	cJSON *v = cJSON_GetObjectItem(o, key);

	return cJSON_IsString(v) ? v->valuestring : "";
}

/* Whether a thread of this name is one of the workload's parked ones. */
static bool parked(const char *name)
{
	return !strcmp(name, "waiter") || !strcmp(name, "deep") ||
	       !strcmp(name, "cxx");
}

/* How many of its parked threads doc read from the kernel. */
static int parked_by_kernel(cJSON *doc)
{
	cJSON *t, *threads = cJSON_GetObjectItem(doc, "threads");
	int n = 0;

	cJSON_ArrayForEach(t, threads) n +=
		parked(str(t, "name")) &&
		strcmp(str(t, "method"), "kernel") == 0;
	return n;
}

int main(void)
{
	struct itest_daemon d;
	static const char *const args[] = { "--sample-interval", "0", NULL };
	char fixture[256], target[64], line[256];
	char serve[] = "serve", waiters[] = "--waiters", n8[] = "8";
	char *argv[] = { fixture, serve, waiters, n8, NULL };
	char a[8192], b[8192];
	cJSON *kdoc = NULL, *sdoc = NULL, *t;
	int out = -1, in = -1, compared = 0, differ = 0, kernel = 0, status;
	cJSON *threads;
	char *self = NULL;
	pid_t pid;

	snprintf(fixture, sizeof(fixture), "%s/fixtures/workload",
		 itest_target_build());
	if (itest_daemon_start_args(&d, args) != 0) {
		TAP_OK(0, "the daemon starts");
		return tap_done();
	}
	pid = itest_spawn_io(&d, argv, &out, &in);
	TAP_OK(pid > 0 && itest_wait_line(out, "ready") &&
		       itest_wait_registered(&d, pid, 10000),
	       "the workload runs under the agent and registers");
	snprintf(target, sizeof(target), "/api/v1/stacks?pid=%d", (int)pid);
	/*
	 * A first dump on a busy machine may stop symbolizing at its time
	 * budget (symbols_partial); the symbols are cached by the next. And
	 * just after "ready" a parked thread may still be on its way to its
	 * wait (slowly, under a sanitizer): then it is read by signal.
	 */
	for (int i = 0; i < 10; i++) {
		cJSON_Delete(kdoc);
		kdoc = itest_get_json(&d, target, &status);
		if (!kdoc || (!cJSON_IsTrue(cJSON_GetObjectItem(
				      kdoc, "symbols_partial")) &&
			      parked_by_kernel(kdoc) == 17))
			break;
		itest_sleep_ms(100);
	}
	TAP_OK(kdoc != NULL && status == 200 &&
		       !cJSON_IsTrue(
			       cJSON_GetObjectItem(kdoc, "symbols_partial")),
	       "the daemon dumps it, every frame symbolized (%d)", status);
	/* Then it dumps itself: every thread signalled. */
	if (write(in, "dump\n", 5) == 5)
		self = read_self_dump(out);
	sdoc = self ? cJSON_Parse(self) : NULL;
	TAP_OK(sdoc != NULL, "it dumps itself through sw_dump_self()");
	threads = kdoc ? cJSON_GetObjectItem(kdoc, "threads") : NULL;
	cJSON_ArrayForEach(t, threads)
	{
		const char *name = str(t, "name");
		int tid = cJSON_GetObjectItem(t, "tid")->valueint;
		cJSON *u = sdoc ? thread_of(sdoc, tid) : NULL;

		/* Parked threads only: the others move between the two. */
		if (!parked(name))
			continue;
		kernel += strcmp(str(t, "method"), "kernel") == 0;
		if (!u || strcmp(str(u, "status"), "ok") != 0)
			continue;
		compared++;
		if (strcmp(functions(kdoc, t, a, sizeof(a)),
			   functions(sdoc, u, b, sizeof(b))) != 0) {
			if (differ++ < 3)
				TAP_NOTE("%s (%d): kernel %s\n  signal %s",
					 name, tid, a, b);
		}
	}
	if (kernel != 17 && kdoc) {
		char *m = cJSON_PrintUnformatted(
			cJSON_GetObjectItem(kdoc, "methods"));

		TAP_NOTE("methods %s", m ? m : "?");
		free(m);
		snprintf(line, sizeof(line),
			 "grep -h 'kernel read' %s/daemon.log", d.dir);
		if (system(line) != 0)
			TAP_NOTE("no kernel reads line in the log");
	}
	TAP_OK(kernel == 17,
	       "its parked threads were read from the kernel (%d of 17)",
	       kernel);
	if (differ && getenv("SW_METHODS_KEEP")) {
		char *all = cJSON_Print(kdoc);
		FILE *f = fopen(getenv("SW_METHODS_KEEP"), "w");

		if (f && all)
			fputs(all, f);
		if (f)
			fclose(f);
		free(all);
	}
	TAP_OK(compared == 17 && differ == 0,
	       "each has the functions the signal path gives it (%d "
	       "compared, %d differ)",
	       compared, differ);
	cJSON_Delete(kdoc);
	cJSON_Delete(sdoc);
	free(self);
	if (in >= 0)
		close(in);
	itest_kill(pid);
	if (out >= 0) {
		while (itest_read_line(out, line, sizeof(line)))
			;
		close(out);
	}
	itest_daemon_stop(&d);
	itest_daemon_cleanup(&d);
	return tap_done();
}
