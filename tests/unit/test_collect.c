/*
 * test_collect.c - the collector end to end: a real process with threads of
 * every kind (tests/fixtures/workload.cc) dumps itself, and we check the
 * JSON it prints against what that process says it started; then the API
 * in this process: options, errors, concurrent callers.
 *
 * The fixture runs as $BUILD/fixtures/workload (BUILD defaults to "build").
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "model/dump.h"
#include "stackwatch.h"
#include "tap.h"
#include "testutil.h"

/* What the fixture wrote to its --roles file. */
#define MAX_ROLES 512
struct roles {
	int pid;
	int expected;
	int n;
	struct {
		int tid;
		char role[16];
	} t[MAX_ROLES];
};

static const char *build_dir(void)
{
	const char *b = getenv("BUILD");

	return b && *b ? b : "build";
}

/* Runs cmd through the shell; returns its stdout (malloc'd) and status. */
static char *run_capture(const char *cmd, int *status)
{
	FILE *p = popen(cmd, "r");
	size_t len = 0, cap = 65536;
	char *out;

	*status = -1;
	if (!p)
		return NULL;
	out = malloc(cap);
	while (out) {
		size_t n;

		if (cap - len < 4096) {
			char *bigger = realloc(out, cap * 2);
			if (!bigger) {
				free(out);
				out = NULL;
				break;
			}
			out = bigger;
			cap *= 2;
		}
		n = fread(out + len, 1, cap - len - 1, p);
		if (n == 0)
			break;
		len += n;
	}
	*status = pclose(p);
	if (out)
		out[len] = '\0';
	return out;
}

static bool exited_ok(int status)
{
	return status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

static int read_roles(const char *path, struct roles *r)
{
	FILE *f = fopen(path, "r");
	char line[128];

	memset(r, 0, sizeof(*r));
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		int tid;
		char role[16];

		if (sscanf(line, "pid %d", &r->pid) == 1)
			continue;
		if (sscanf(line, "expected %d", &r->expected) == 1)
			continue;
		if (sscanf(line, "thread %d %15s", &tid, role) == 2 &&
		    r->n < MAX_ROLES) {
			r->t[r->n].tid = tid;
			snprintf(r->t[r->n].role, sizeof(r->t[r->n].role), "%s",
				 role);
			r->n++;
		}
	}
	fclose(f);
	return 0;
}

static const char *role_of(const struct roles *r, int tid)
{
	for (int i = 0; i < r->n; i++)
		if (r->t[i].tid == tid)
			return r->t[i].role;
	return NULL;
}

static int count_role(const struct roles *r, const char *role)
{
	int n = 0;

	for (int i = 0; i < r->n; i++)
		n += !strcmp(r->t[i].role, role);
	return n;
}

static int first_of_role(const struct roles *r, const char *role)
{
	for (int i = 0; i < r->n; i++)
		if (!strcmp(r->t[i].role, role))
			return r->t[i].tid;
	return -1;
}

/* ---- JSON helpers ---- */

static const char *jstr(const cJSON *o, const char *key)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);

	return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* The number at key, or def when absent or not a number. */
static double jnum(const cJSON *o, const char *key, double def)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);

	return cJSON_IsNumber(v) ? v->valuedouble : def;
}

static const cJSON *jthread(const cJSON *root, int tid)
{
	const cJSON *threads =
		cJSON_GetObjectItemCaseSensitive(root, "threads");
	const cJSON *t;

	cJSON_ArrayForEach(t, threads)
	{
		if ((int)jnum(t, "tid", -1) == tid)
			return t;
	}
	return NULL;
}

/* The group object a thread object points to, or NULL. */
static const cJSON *jgroup_of(const cJSON *root, const cJSON *thread)
{
	const cJSON *groups = cJSON_GetObjectItemCaseSensitive(root, "groups");
	const cJSON *g = cJSON_GetObjectItemCaseSensitive(thread, "group");

	if (!cJSON_IsNumber(g))
		return NULL;
	return cJSON_GetArrayItem(groups, g->valueint);
}

static bool jgroup_has_tid(const cJSON *group, int tid)
{
	const cJSON *tids = cJSON_GetObjectItemCaseSensitive(group, "tids");
	const cJSON *v;

	cJSON_ArrayForEach(v, tids)
	{
		if (cJSON_IsNumber(v) && v->valueint == tid)
			return true;
	}
	return false;
}

static bool jname_is(const cJSON *frame, const char *fn)
{
	return tu_name_is(jstr(frame, "function"), fn);
}

/* How many frames of a group are function fn. */
static int jcount_fn(const cJSON *group, const char *fn)
{
	const cJSON *frames = cJSON_GetObjectItemCaseSensitive(group, "frames");
	const cJSON *f;
	int n = 0;

	cJSON_ArrayForEach(f, frames)
	{
		n += jname_is(f, fn);
	}
	return n;
}

static const cJSON *jframe_fn(const cJSON *group, const char *fn)
{
	const cJSON *frames = cJSON_GetObjectItemCaseSensitive(group, "frames");
	const cJSON *f;

	cJSON_ArrayForEach(f, frames)
	{
		if (jname_is(f, fn))
			return f;
	}
	return NULL;
}

static bool jhas_fn_substr(const cJSON *group, const char *s)
{
	const cJSON *frames = cJSON_GetObjectItemCaseSensitive(group, "frames");
	const cJSON *f;

	cJSON_ArrayForEach(f, frames)
	{
		const char *fn = jstr(f, "function");
		if (fn && strstr(fn, s))
			return true;
	}
	return false;
}

static bool ends_with(const char *s, const char *suffix)
{
	size_t a = s ? strlen(s) : 0, b = strlen(suffix);

	return s && a >= b && !strcmp(s + a - b, suffix);
}

static bool is_hex(const char *s)
{
	if (!s || strncmp(s, "0x", 2) != 0 || !s[2])
		return false;
	for (s += 2; *s; s++)
		if (!strchr("0123456789abcdefABCDEF", *s))
			return false;
	return true;
}

/* The 1-based line of path that contains marker, or -1. */
static int marker_line(const char *path, const char *marker)
{
	FILE *f = fopen(path, "r");
	char line[1024];
	int n = 0, found = -1;

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		n++;
		if (strstr(line, marker)) {
			found = n;
			break;
		}
	}
	fclose(f);
	return found;
}

/* ---- checks on the fixture's JSON ---- */

/* The rules every dump obeys, whatever the process. */
static void check_invariants(const cJSON *root, const char *what)
{
	const cJSON *threads =
		cJSON_GetObjectItemCaseSensitive(root, "threads");
	const cJSON *groups = cJSON_GetObjectItemCaseSensitive(root, "groups");
	const cJSON *t, *g;
	int nthreads = cJSON_GetArraySize(threads);
	int ngroups = cJSON_GetArraySize(groups);
	int nok = 0, bad_name = 0, bad_group = 0, bad_error = 0;
	int bad_count = 0, bad_order = 0, bad_id = 0, bad_frame = 0;
	int multi = 0, stray = 0, empty = 0;
	double prev = 1e18;
	int idx = 0;

	TAP_OK(cJSON_IsArray(threads) && cJSON_IsArray(groups),
	       "%s: threads and groups are arrays", what);
	TAP_OK(jnum(root, "threads_total", -1) == nthreads,
	       "%s: threads_total (%g) is the number of threads listed (%d)",
	       what, jnum(root, "threads_total", -1), nthreads);

	cJSON_ArrayForEach(t, threads)
	{
		const char *status = jstr(t, "status");
		const char *name = jstr(t, "name");
		int tid = (int)jnum(t, "tid", -1);
		int in = 0;

		if ((!name || !*name) && !bad_name++)
			TAP_NOTE("%s: thread %d has no name (status %s)", what,
				 tid, status ? status : "(null)");
		if (status && !strcmp(status, "ok")) {
			nok++;
			g = jgroup_of(root, t);
			if (!g || !jgroup_has_tid(g, tid))
				bad_group++;
			cJSON_ArrayForEach(g, groups)
			{
				in += jgroup_has_tid(g, tid);
			}
			if (in != 1)
				multi++;
		} else {
			const char *err = jstr(t, "error");
			if (!cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(
				    t, "group")))
				bad_group++;
			if (!err || !*err)
				bad_error++;
		}
	}
	TAP_OK(jnum(root, "threads_ok", -1) == nok,
	       "%s: threads_ok (%g) counts the ok threads (%d)", what,
	       jnum(root, "threads_ok", -1), nok);
	TAP_OK(bad_name == 0, "%s: no thread has an empty name (%d do)", what,
	       bad_name);
	TAP_OK(bad_group == 0,
	       "%s: every ok thread's group lists it, others have group null "
	       "(%d wrong)",
	       what, bad_group);
	TAP_OK(multi == 0,
	       "%s: every ok thread is in exactly one group (%d not)", what,
	       multi);
	TAP_OK(bad_error == 0,
	       "%s: every thread that is not ok has an error (%d lack one)",
	       what, bad_error);

	cJSON_ArrayForEach(g, groups)
	{
		const cJSON *tids = cJSON_GetObjectItemCaseSensitive(g, "tids");
		const cJSON *frames =
			cJSON_GetObjectItemCaseSensitive(g, "frames");
		const cJSON *v, *f;
		double count = jnum(g, "count", -1);

		if (count != cJSON_GetArraySize(tids))
			bad_count++;
		if (count > prev)
			bad_order++;
		prev = count;
		if (jnum(g, "id", -1) != idx)
			bad_id++;
		if (cJSON_GetArraySize(frames) == 0)
			empty++;
		cJSON_ArrayForEach(v, tids)
		{
			const cJSON *th = jthread(root, v->valueint);
			const char *st = th ? jstr(th, "status") : NULL;
			if (!st || strcmp(st, "ok"))
				stray++;
		}
		cJSON_ArrayForEach(f, frames)
		{
			const char *mod = jstr(f, "module");
			if (!is_hex(jstr(f, "ip")) ||
			    !is_hex(jstr(f, "offset")) || !mod || !*mod)
				bad_frame++;
		}
		idx++;
	}
	TAP_OK(bad_count == 0, "%s: each group's count is len(tids) (%d not)",
	       what, bad_count);
	TAP_OK(bad_order == 0, "%s: groups are sorted by count, largest first",
	       what);
	TAP_OK(bad_id == 0, "%s: each group's id is its index", what);
	TAP_OK(stray == 0, "%s: groups list only ok threads (%d others)", what,
	       stray);
	TAP_OK(empty == 0, "%s: no group has an empty stack (%d do)", what,
	       empty);
	TAP_OK(bad_frame == 0,
	       "%s: every frame has a hex ip and offset and a module (%d lack)",
	       what, bad_frame);
	TAP_OK(ngroups > 0, "%s: there are groups (%d)", what, ngroups);
	TAP_OK(jnum(root, "elapsed_us", -1) > 0, "%s: elapsed_us > 0 (%g)",
	       what, jnum(root, "elapsed_us", -1));
	TAP_OK(jnum(root, "skew_us", -1) >= 0 &&
		       jnum(root, "skew_us", -1) <=
			       jnum(root, "elapsed_us", -1),
	       "%s: 0 <= skew_us (%g) <= elapsed_us (%g)", what,
	       jnum(root, "skew_us", -1), jnum(root, "elapsed_us", -1));
}

/* Threads of the run match what the fixture started, one for one. */
static void check_threads(const cJSON *root, const struct roles *r,
			  const char *what)
{
	const cJSON *threads =
		cJSON_GetObjectItemCaseSensitive(root, "threads");
	const cJSON *t;
	int fixed = 0, children = 0, bad_child = 0, missing = 0, misnamed = 0;

	cJSON_ArrayForEach(t, threads)
	{
		int tid = (int)jnum(t, "tid", -1);
		const char *role = role_of(r, tid);
		const char *name = jstr(t, "name");
		const char *status = jstr(t, "status");

		if (role) {
			fixed++;
			/* The main thread keeps the program's name. */
			if (strcmp(role, "main") &&
			    (!name || strcmp(name, role)))
				misnamed++;
			continue;
		}
		/*
		 * Anything else is a short-lived child of the churn thread: it
		 * may have answered (then it has its name, "churn" or
		 * "churn-child"), exited during the dump, or been caught while
		 * starting or exiting, when glibc blocks every signal
		 * (blocked-signal); nothing else.
		 */
		children++;
		if (!status || (strcmp(status, "exited") &&
				strcmp(status, "blocked-signal") &&
				(strcmp(status, "ok") || !name ||
				 strncmp(name, "churn", 5)))) {
			bad_child++;
			TAP_NOTE("%s: unexpected thread %d name=%s status=%s "
				 "error=%s",
				 what, tid, name ? name : "(null)",
				 status ? status : "(null)",
				 jstr(t, "error") ? jstr(t, "error") : "");
		}
	}
	for (int i = 0; i < r->n; i++)
		if (!jthread(root, r->t[i].tid))
			missing++;
	TAP_OK(r->expected > 0 && r->n == r->expected,
	       "%s: the fixture reported its %d threads", what, r->expected);
	TAP_OK(fixed == r->expected && missing == 0,
	       "%s: every thread the fixture started is in the dump "
	       "(%d of %d, %d missing)",
	       what, fixed, r->expected, missing);
	TAP_OK(misnamed == 0, "%s: each thread has the name it set (%d not)",
	       what, misnamed);
	/* The churn thread joins each child before it starts the next. */
	TAP_OK(children <= 2 && bad_child == 0,
	       "%s: the only other threads are churn children, ok, exited or "
	       "blocked-signal (%d, %d unexpected)",
	       what, children, bad_child);
}

/* The process-wide fields. */
static void check_header(const cJSON *root, const struct roles *r,
			 int timeout_ms, const char *what)
{
	const char *s;

	TAP_OK(jnum(root, "pid", -1) == r->pid, "%s: pid is the fixture's (%d)",
	       what, r->pid);
	s = jstr(root, "comm");
	TAP_OK(s && !strcmp(s, "workload"), "%s: comm is \"workload\" (%s)",
	       what, s ? s : "(null)");
	s = jstr(root, "cmdline");
	TAP_OK(s && strstr(s, "workload dump"),
	       "%s: cmdline has the command (%s)", what, s ? s : "(null)");
	s = jstr(root, "collected_at");
	TAP_OK(s && ends_with(s, "Z") && strlen(s) >= 20,
	       "%s: collected_at is a UTC time (%s)", what, s ? s : "(null)");
	TAP_OK(jnum(root, "timeout_ms", -1) == timeout_ms,
	       "%s: timeout_ms is the one asked for (%d)", what, timeout_ms);
}

/*
 * The group of the threads of one role: all of them, nobody else. Returns
 * it, or NULL (after a failed check) when the role's threads have none.
 */
static const cJSON *check_role_group(const cJSON *root, const struct roles *r,
				     const char *role, int want,
				     const char *what)
{
	const cJSON *t = jthread(root, first_of_role(r, role));
	const cJSON *g = t ? jgroup_of(root, t) : NULL;
	const cJSON *v;
	int n = count_role(r, role), others = 0;

	if (!TAP_OK(g != NULL, "%s: the %s threads have a group", what, role))
		return NULL;
	cJSON_ArrayForEach(v, cJSON_GetObjectItemCaseSensitive(g, "tids"))
	{
		const char *rv = role_of(r, v->valueint);
		others += !rv || strcmp(rv, role);
	}
	TAP_OK(n == want && jnum(g, "count", -1) == n && others == 0,
	       "%s: all %d %s threads share one group, nobody else in it "
	       "(count %g, %d others)",
	       what, want, role, jnum(g, "count", -1), others);
	return g;
}

/* 64 identical waiters: one group, exactly them, at the right line. */
static void check_waiters(const cJSON *root, const struct roles *r,
			  bool symbols, const char *what)
{
	const cJSON *g = check_role_group(root, r, "waiter", 64, what);
	const cJSON *f;
	const char *file, *mod;
	int want;

	if (!g)
		return;
	TAP_OK(jnum(g, "id", -1) == 0,
	       "%s: the waiters' group is the largest (id %g)", what,
	       jnum(g, "id", -1));
	if (!symbols)
		return;
	f = jframe_fn(g, "waiter_wait");
	if (!TAP_OK(f != NULL, "%s: the waiters' stack has waiter_wait", what))
		return;
	file = jstr(f, "file");
	want = file ? marker_line(file, "/* @waiter_wait */") : -1;
	TAP_OK(file && file[0] == '/' &&
		       ends_with(file, "/tests/fixtures/workload.cc"),
	       "%s: waiter_wait's file is the absolute path of workload.cc "
	       "(%s)",
	       what, file ? file : "(null)");
	TAP_OK(want > 0 && jnum(f, "line", -1) == want,
	       "%s: waiter_wait's line is the pthread_cond_wait call (%g, "
	       "want %d)",
	       what, jnum(f, "line", -1), want);
	mod = jstr(f, "module");
	TAP_OK(mod && ends_with(mod, "/fixtures/workload"),
	       "%s: waiter_wait's module is the fixture (%s)", what,
	       mod ? mod : "(null)");
	TAP_OK(jhas_fn_substr(g, "pthread_cond_wait"),
	       "%s: the waiters' stack has pthread_cond_wait", what);
}

/* 8 deep threads: one group, 30 frames of the static recursion. */
static void check_deep(const cJSON *root, const struct roles *r, bool symbols,
		       const char *what)
{
	const cJSON *g = check_role_group(root, r, "deep", 8, what);
	int nframes;

	if (!g)
		return;
	nframes = cJSON_GetArraySize(
		cJSON_GetObjectItemCaseSensitive(g, "frames"));
	TAP_OK(nframes >= 32, "%s: the deep stack has at least 32 frames (%d)",
	       what, nframes);
	if (!symbols)
		return;
	TAP_OK(jcount_fn(g, "deep_rec") == 30,
	       "%s: the deep stack has 30 frames of static deep_rec (%d)", what,
	       jcount_fn(g, "deep_rec"));
	TAP_OK(jframe_fn(g, "deep_block") != NULL,
	       "%s: the deep stack has deep_block", what);
}

/* The masked, spinning and C++ threads. */
static void check_singles(const cJSON *root, const struct roles *r,
			  bool symbols, const char *what)
{
	const cJSON *t, *g;
	const char *s;

	/* The thread that blocks every signal is not signalled. */
	t = jthread(root, first_of_role(r, "masked"));
	s = t ? jstr(t, "status") : NULL;
	TAP_OK(s && !strcmp(s, "blocked-signal"),
	       "%s: the masked thread is blocked-signal (%s)", what,
	       s ? s : "(null)");
	TAP_OK(t && jstr(t, "error") && *jstr(t, "error") &&
		       cJSON_IsNull(
			       cJSON_GetObjectItemCaseSensitive(t, "group")),
	       "%s: the masked thread has an error and group null", what);

	/* The spinner runs, and answers. */
	t = jthread(root, first_of_role(r, "spinner"));
	s = t ? jstr(t, "state") : NULL;
	TAP_OK(s && !strcmp(s, "R"), "%s: the spinner's state is R (%s)", what,
	       s ? s : "(null)");
	s = t ? jstr(t, "status") : NULL;
	TAP_OK(s && !strcmp(s, "ok"), "%s: the spinner's status is ok (%s)",
	       what, s ? s : "(null)");
	g = t ? jgroup_of(root, t) : NULL;
	if (symbols)
		TAP_OK(g && jframe_fn(g, "spin_loop"),
		       "%s: the spinner's stack has spin_loop", what);

	/* C++ names come demangled. */
	t = jthread(root, first_of_role(r, "cxx"));
	g = t ? jgroup_of(root, t) : NULL;
	if (symbols)
		TAP_OK(g && jhas_fn_substr(g, "sw_fixture::Worker::run"),
		       "%s: the C++ frame is demangled "
		       "(sw_fixture::Worker::run)",
		       what);
}

/* The caller's own stack starts at the caller of sw_dump_self. */
static void check_caller(const cJSON *root, const struct roles *r, bool symbols,
			 const char *what)
{
	const cJSON *t = jthread(root, r->pid);
	const cJSON *g = t ? jgroup_of(root, t) : NULL;
	const cJSON *f =
		g ? cJSON_GetArrayItem(
			    cJSON_GetObjectItemCaseSensitive(g, "frames"), 0)
		  : NULL;
	const char *s = t ? jstr(t, "status") : NULL;
	const char *file;

	TAP_OK(s && !strcmp(s, "ok"), "%s: the calling thread is ok (%s)", what,
	       s ? s : "(null)");
	if (!symbols) {
		/* No names: the frame must at least be in the fixture. */
		s = f ? jstr(f, "module") : NULL;
		TAP_OK(s && ends_with(s, "/fixtures/workload"),
		       "%s: the calling thread's first frame is in the fixture "
		       "(%s)",
		       what, s ? s : "(null)");
		return;
	}
	s = f ? jstr(f, "function") : NULL;
	TAP_OK(s && !strcmp(s, "fixture_dump"),
	       "%s: the calling thread's first frame is fixture_dump, no "
	       "library frame (%s)",
	       what, s ? s : "(null)");
	file = f ? jstr(f, "file") : NULL;
	TAP_OK(file && jnum(f, "line", -1) ==
			       marker_line(file, "/* @fixture_dump */"),
	       "%s: ... at the line that calls sw_dump_self (%g)", what,
	       f ? jnum(f, "line", -1) : -1);
	TAP_OK(g && jframe_fn(g, "main"),
	       "%s: the calling thread's stack reaches main", what);
}

/* Without symbols there are no names, only addresses. */
static void check_no_names(const cJSON *root, const char *what)
{
	const cJSON *groups = cJSON_GetObjectItemCaseSensitive(root, "groups");
	const cJSON *g, *f;
	int named = 0;

	cJSON_ArrayForEach(g, groups)
	{
		cJSON_ArrayForEach(
			f, cJSON_GetObjectItemCaseSensitive(g, "frames"))
		{
			named += cJSON_HasObjectItem(f, "function") ||
				 cJSON_HasObjectItem(f, "file") ||
				 cJSON_HasObjectItem(f, "line");
		}
	}
	TAP_OK(named == 0, "%s: no frame has function, file or line (%d do)",
	       what, named);
}

static void check_fixture_json(const cJSON *root, const struct roles *r,
			       bool symbols, int timeout_ms, const char *what)
{
	check_invariants(root, what);
	check_threads(root, r, what);
	check_header(root, r, timeout_ms, what);
	check_waiters(root, r, symbols, what);
	check_deep(root, r, symbols, what);
	check_singles(root, r, symbols, what);
	check_caller(root, r, symbols, what);
	if (!symbols)
		check_no_names(root, what);
}

/* Runs the fixture with args; returns its parsed JSON (or NULL). */
static cJSON *run_fixture_json(const char *args, struct roles *r,
			       const char *what)
{
	char roles_path[] = "/tmp/sw-test-roles-XXXXXX";
	char cmd[1024];
	char *out;
	cJSON *root = NULL;
	int fd, status;

	fd = mkstemp(roles_path);
	if (fd < 0) {
		TAP_OK(0, "%s: mkstemp: %s", what, strerror(errno));
		return NULL;
	}
	close(fd);
	snprintf(cmd, sizeof(cmd), "'%s/fixtures/workload' dump %s --roles %s",
		 build_dir(), args, roles_path);
	out = run_capture(cmd, &status);
	TAP_OK(out && exited_ok(status),
	       "%s: `workload dump%s%s` exits 0 "
	       "(status 0x%x)",
	       what, *args ? " " : "", args, (unsigned)status);
	TAP_OK(read_roles(roles_path, r) == 0 && r->pid > 0,
	       "%s: the fixture wrote its roles", what);
	unlink(roles_path);
	if (out) {
		root = cJSON_Parse(out);
		TAP_OK(root != NULL, "%s: the output is JSON (%zu bytes)", what,
		       strlen(out));
	}
	free(out);
	return root;
}

static void test_fixture(void)
{
	struct roles *r = malloc(sizeof(*r));
	cJSON *root;
	char cmd[1024], *out;
	int status;

	root = run_fixture_json("", r, "json");
	if (root)
		check_fixture_json(root, r, true, SW_DEFAULT_TIMEOUT_MS,
				   "json");
	cJSON_Delete(root);

	root = run_fixture_json("--no-symbols --timeout 700", r, "no-symbols");
	if (root)
		check_fixture_json(root, r, false, 700, "no-symbols");
	cJSON_Delete(root);

	snprintf(cmd, sizeof(cmd), "'%s/fixtures/workload' dump --format text",
		 build_dir());
	out = run_capture(cmd, &status);
	TAP_OK(out && exited_ok(status), "text: the fixture exits 0");
	if (out) {
		TAP_OK(!strncmp(out, "Process ", 8) &&
			       strstr(out, " (workload): "),
		       "text: starts with the Process header");
		TAP_OK(strstr(out, "\n64 threads: waiter") != NULL,
		       "text: has the block of the 64 waiters");
		TAP_OK(strstr(out, " in waiter_wait") != NULL,
		       "text: names waiter_wait");
		TAP_OK(strstr(out, "not dumped:") && strstr(out, "masked (") &&
			       strstr(out, "blocked-signal"),
		       "text: lists the masked thread as not dumped");
	}
	free(out);

	snprintf(cmd, sizeof(cmd),
		 "'%s/fixtures/workload' dump --format folded", build_dir());
	out = run_capture(cmd, &status);
	TAP_OK(out && exited_ok(status), "folded: the fixture exits 0");
	if (out) {
		bool found = false;
		for (char *line = strtok(out, "\n"); line;
		     line = strtok(NULL, "\n"))
			if (strstr(line, ";waiter_wait") &&
			    ends_with(line, " 64"))
				found = true;
		TAP_OK(found, "folded: one line for the 64 waiters");
	}
	free(out);
	free(r);
}

/* ---- the API in this process ---- */

#define INPROC_THREADS 3
static pthread_mutex_t ip_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t ip_cv = PTHREAD_COND_INITIALIZER;
static bool ip_stop;
static pid_t ip_tids[INPROC_THREADS];
static int ip_ready;

__attribute__((noinline)) static void inproc_wait(void)
{
	while (!ip_stop)
		pthread_cond_wait(&ip_cv, &ip_mu);
}

static void *inproc_main(void *arg)
{
	pthread_mutex_lock(&ip_mu);
	ip_tids[(intptr_t)arg] = tu_gettid();
	ip_ready++;
	pthread_cond_broadcast(&ip_cv);
	inproc_wait();
	pthread_mutex_unlock(&ip_mu);
	return NULL;
}

/* The caller of sw_dump_self: its stack must start here. */
__attribute__((noinline)) static int inproc_dump_caller(
	const struct sw_dump_opts *o, struct sw_dump **d)
{
	int rc = sw_dump_self(o, d);

	__asm__ volatile("" ::: "memory"); /* not a tail call */
	return rc;
}

static int count_status(const struct sw_dump *d, enum sw_status st)
{
	int n = 0;

	for (size_t i = 0; i < d->nthreads; i++)
		n += d->threads[i].status == st;
	return n;
}

static void test_errors(void)
{
	static const int codes[] = {
		SW_EHANDLER, SW_ENOSIGNAL,  SW_ENOTINIT, SW_EBUSY, SW_EFORMAT,
		SW_ETOOBIG,  SW_EINHANDLER, -ENOMEM,	 -EINVAL,  -ESRCH,
	};
	int empty = 0;
	const char *s;

	for (size_t i = 0; i < sizeof(codes) / sizeof(codes[0]); i++) {
		s = sw_strerror(codes[i]);
		if (!s || !*s)
			empty++;
	}
	TAP_OK(empty == 0, "sw_strerror has a sentence for every code");
	s = sw_strerror(SW_EHANDLER);
	TAP_OK(s && strstr(s, "signal handler replaced"),
	       "sw_strerror(SW_EHANDLER) says the handler was replaced (%s)",
	       s ? s : "(null)");
	TAP_OK(sw_strerror(12345678) != NULL && sw_strerror(-99999999) != NULL,
	       "sw_strerror never returns NULL");
	TAP_OK(strcmp(sw_strerror(SW_EHANDLER), sw_strerror(SW_EBUSY)) != 0,
	       "different codes have different sentences");
	sw_dump_free(NULL);
	TAP_OK(1, "sw_dump_free(NULL) returns");
}

static void test_inproc_defaults(void)
{
	struct sw_dump *d = NULL;
	char *json = NULL, *text = NULL;
	int before = tu_count_tasks(), after, rc, with_fn = 0;
	const struct sw_thread *self;
	char desc[512];

	rc = inproc_dump_caller(NULL, &d);
	after = tu_count_tasks();
	if (!TAP_OK(rc == 0 && d, "sw_dump_self(NULL): defaults work (%s)",
		    sw_strerror(rc)))
		return;
	TAP_OK(sw_signal() >= SIGRTMIN && sw_signal() <= SIGRTMAX,
	       "sw_signal() is a real-time signal once installed (%d)",
	       sw_signal());
	TAP_OK(d->timeout_ms == SW_DEFAULT_TIMEOUT_MS,
	       "the default timeout is %d ms (%d)", SW_DEFAULT_TIMEOUT_MS,
	       d->timeout_ms);
	TAP_OK(before == after && (int)d->nthreads == before,
	       "the dump has as many threads as /proc/self/task (%zu, %d)",
	       d->nthreads, before);
	TAP_OK(count_status(d, SW_ST_OK) == (int)d->nthreads,
	       "every thread of this process is ok (%d of %zu)",
	       count_status(d, SW_ST_OK), d->nthreads);
	for (int i = 0; i < INPROC_THREADS; i++) {
		const struct sw_thread *t = tu_find_thread(d, ip_tids[i]);
		with_fn += t && tu_count_fn(t, "inproc_wait") == 1 &&
			   tu_count_fn(t, "inproc_main") == 1;
	}
	TAP_OK(with_fn == INPROC_THREADS,
	       "each helper thread is in inproc_wait < inproc_main (%d of %d)",
	       with_fn, INPROC_THREADS);
	self = tu_find_thread(d, tu_gettid());
	TAP_OK(self && self->nframes > 0 &&
		       tu_name_is(self->frames[0].function,
				  "inproc_dump_caller"),
	       "in-process: the caller's first frame is inproc_dump_caller "
	       "(%s)",
	       self ? tu_describe_stack(self, desc, sizeof(desc)) : "missing");
	TAP_OK(self && tu_count_fn(self, "test_inproc_defaults") == 1 &&
		       tu_count_fn(self, "main") == 1,
	       "in-process: ... then test_inproc_defaults and main");
	TAP_OK(d->ngroups >= 2 && d->groups[0].count == INPROC_THREADS,
	       "the %d helpers form the largest group (%zu)", INPROC_THREADS,
	       d->ngroups ? d->groups[0].count : 0);

	rc = sw_dump_json(d, &json);
	TAP_OK(rc == 0 && json && json[0] == '{',
	       "sw_dump_json renders the dump");
	rc = sw_dump_text(d, &text);
	TAP_OK(rc == 0 && text && !strncmp(text, "Process ", 8),
	       "sw_dump_text renders the dump");
	free(json);
	free(text);
	sw_dump_free(d);
}

static void test_inproc_options(void)
{
	static char sentinel;
	struct sw_dump_opts o;
	struct sw_dump *d = NULL;
	int rc, named = 0, unnamed_ok = 1;
	cJSON *root;
	char *json = NULL;

	sw_dump_opts_init(&o);
	TAP_OK(o.size == sizeof(o) && o.timeout_ms == SW_DEFAULT_TIMEOUT_MS &&
		       o.symbolize && o.window == SW_DEFAULT_WINDOW,
	       "sw_dump_opts_init fills in the defaults");
	o.timeout_ms = 500;
	o.symbolize = 0;
	o.window = 1;
	rc = inproc_dump_caller(&o, &d);
	if (!TAP_OK(rc == 0 && d,
		    "timeout 500, no symbols, window 1: works "
		    "(%s)",
		    sw_strerror(rc)))
		return;
	TAP_OK(d->timeout_ms == 500, "the dump records its timeout (%d)",
	       d->timeout_ms);
	TAP_OK(count_status(d, SW_ST_OK) == (int)d->nthreads,
	       "window 1: every thread is ok (%d of %zu)",
	       count_status(d, SW_ST_OK), d->nthreads);
	for (size_t i = 0; i < d->nthreads; i++) {
		const struct sw_thread *t = &d->threads[i];
		if (t->nframes == 0)
			unnamed_ok = 0;
		for (size_t j = 0; j < t->nframes; j++)
			named += t->frames[j].function != NULL ||
				 t->frames[j].file != NULL;
	}
	TAP_OK(named == 0 && unnamed_ok,
	       "symbolize 0: frames without function or file (%d named)",
	       named);
	rc = sw_dump_json(d, &json);
	root = rc == 0 ? cJSON_Parse(json) : NULL;
	TAP_OK(root && jnum(root, "timeout_ms", -1) == 500,
	       "the JSON says timeout_ms 500");
	if (root)
		check_invariants(root, "in-process no-symbols");
	cJSON_Delete(root);
	free(json);
	sw_dump_free(d);

	d = (struct sw_dump *)(void *)&sentinel; /* must be overwritten */
	o.timeout_ms = 0;
	rc = sw_dump_self(&o, &d);
	TAP_OK(rc < 0 && d == NULL,
	       "timeout 0 is refused and *out is NULL (%s)", sw_strerror(rc));
	sw_dump_opts_init(&o);
	o.window = 0;
	rc = sw_dump_self(&o, &d);
	TAP_OK(rc < 0 && d == NULL, "window 0 is refused (%s)",
	       sw_strerror(rc));
	rc = sw_dump_self(NULL, NULL);
	TAP_OK(rc == -EINVAL, "out NULL is -EINVAL (%s)", sw_strerror(rc));
}

/* Several threads dump at once: every dump complete, every thread ok. */
#define CONCURRENT 4
#define CONCURRENT_DUMPS 25
static int conc_failures[CONCURRENT];
static pid_t conc_tids[CONCURRENT];
static atomic_int conc_blocked; /* a concurrent caller was blocked-signal */
static pthread_mutex_t conc_mu = PTHREAD_MUTEX_INITIALIZER;
static char conc_first[256]; /* the first failure, under conc_mu */

static bool is_conc_caller(pid_t tid)
{
	for (int i = 0; i < CONCURRENT; i++)
		if (conc_tids[i] == tid)
			return true;
	return false;
}

/*
 * Whether a concurrent dump is right: every thread ok, except that another
 * caller of sw_dump_self may be blocked-signal: it may be unwinding itself
 * at that moment, and libunwind blocks every signal around its
 * dl_iterate_phdr calls. Records the first failure.
 */
static bool conc_dump_ok(int i, int rc, const struct sw_dump *d)
{
	const struct sw_thread *bad = NULL;

	for (size_t j = 0; rc == 0 && j < d->nthreads && !bad; j++) {
		const struct sw_thread *t = &d->threads[j];

		if (t->status == SW_ST_OK)
			continue;
		if (t->status == SW_ST_BLOCKED && is_conc_caller(t->tid))
			atomic_fetch_add(&conc_blocked, 1);
		else
			bad = t;
	}
	if (rc == 0 && !bad)
		return true;
	pthread_mutex_lock(&conc_mu);
	if (!conc_first[0])
		snprintf(conc_first, sizeof(conc_first),
			 "dump %d: %s; thread %d (%s) %s: %s", i,
			 sw_strerror(rc), bad ? (int)bad->tid : 0,
			 bad ? bad->name : "",
			 bad ? dump_status_name(bad->status) : "",
			 bad && bad->error ? bad->error : "");
	pthread_mutex_unlock(&conc_mu);
	return false;
}

/*
 * Threads that start or exit have every signal blocked for a moment
 * (glibc's pthread_create and thread exit), and so has the thread calling
 * pthread_create: a true "blocked-signal". The barriers keep that out of
 * the dumps.
 */
static pthread_barrier_t conc_start, conc_end;

static void *concurrent_main(void *arg)
{
	int id = (int)(intptr_t)arg;

	conc_tids[id] = tu_gettid();
	pthread_barrier_wait(&conc_start);
	for (int i = 0; i < CONCURRENT_DUMPS; i++) {
		struct sw_dump_opts o;
		struct sw_dump *d = NULL;
		int rc;

		sw_dump_opts_init(&o);
		o.symbolize = i % 5 == 0;
		rc = sw_dump_self(&o, &d);
		if (!conc_dump_ok(i, rc, d))
			conc_failures[id]++;
		sw_dump_free(d);
	}
	pthread_barrier_wait(&conc_end);
	return NULL;
}

static void test_concurrent(void)
{
	pthread_t th[CONCURRENT];
	int failures = 0;

	/* We wait too: pthread_create blocks signals in its caller. */
	pthread_barrier_init(&conc_start, NULL, CONCURRENT + 1);
	pthread_barrier_init(&conc_end, NULL, CONCURRENT);
	for (int i = 0; i < CONCURRENT; i++)
		pthread_create(&th[i], NULL, concurrent_main,
			       (void *)(intptr_t)i);
	pthread_barrier_wait(&conc_start);
	for (int i = 0; i < CONCURRENT; i++) {
		pthread_join(th[i], NULL);
		failures += conc_failures[i];
	}
	pthread_barrier_destroy(&conc_start);
	pthread_barrier_destroy(&conc_end);
	if (failures)
		TAP_NOTE("first failure: %s", conc_first);
	TAP_NOTE("a concurrent caller was blocked-signal %d times",
		 atomic_load(&conc_blocked));
	TAP_OK(failures == 0,
	       "%d threads x %d concurrent dumps: all complete, all threads ok "
	       "but callers inside sw_dump_self (%d failed)",
	       CONCURRENT, CONCURRENT_DUMPS, failures);
}

int main(void)
{
	pthread_t th[INPROC_THREADS];

	test_fixture();
	test_errors();

	for (int i = 0; i < INPROC_THREADS; i++)
		pthread_create(&th[i], NULL, inproc_main, (void *)(intptr_t)i);
	pthread_mutex_lock(&ip_mu);
	while (ip_ready < INPROC_THREADS)
		pthread_cond_wait(&ip_cv, &ip_mu);
	pthread_mutex_unlock(&ip_mu);
	for (int i = 0; i < INPROC_THREADS; i++)
		tu_wait_state(ip_tids[i], 'S');

	test_inproc_defaults();
	test_inproc_options();
	test_concurrent();

	pthread_mutex_lock(&ip_mu);
	ip_stop = true;
	pthread_cond_broadcast(&ip_cv);
	pthread_mutex_unlock(&ip_mu);
	for (int i = 0; i < INPROC_THREADS; i++)
		pthread_join(th[i], NULL);
	return tap_done();
}
