/*
 * test_render.c - the grouper (src/render/group.c) and the renderers
 * (render_json.c, render_text.c, render_folded.c, render.c) on dumps built
 * by hand: which threads group together, the order of groups, the JSON
 * schema of INTERFACE.md key by key, and the whole text and folded output
 * against golden strings.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cjson/cJSON.h>
#include <zlib.h>

#include "model/dump.h"
#include "model/utf8.h"
#include "render/group.h"
#include "render/pprof.h"
#include "render/profile.pb-c.h"
#include "render/render.h"
#include "stackwatch.h"
#include "tap.h"

#define EXE_BIAS 0x55d0c0c69000ULL
#define LIBC_BIAS 0x7f3e8c2b0000ULL

/* One frame as written in a test: strings are copied into the dump. */
struct fspec {
	uint64_t ip;
	int module;
	const char *function;
	const char *file;
	int line;
	bool inlined;
};

static const char libc[] = "/lib/x86_64-linux-gnu/libc.so.6";
static const char exe[] = "/usr/bin/myserver";

static const struct fspec worker_a[] = {
	{ 0x7f3e8c2d8df2, 1, "__futex_abstimed_wait_common", NULL, 0, false },
	{ 0x55d0c0c6a6db, 0, "worker_wait", "/src/worker.c", 40, false },
	{ 0x55d0c0c6a7a0, 0, "worker_main", "/src/worker.c", 60, false },
	{ 0x7f3e8c2dbfd4, 1, "start_thread", NULL, 0, false },
};

/* Same lines as worker_a, other offsets within worker_wait's line. */
static const struct fspec worker_b[] = {
	{ 0x7f3e8c2d8df2, 1, "__futex_abstimed_wait_common", NULL, 0, false },
	{ 0x55d0c0c6a6e0, 0, "worker_wait", "/src/worker.c", 40, false },
	{ 0x55d0c0c6a7a0, 0, "worker_main", "/src/worker.c", 60, false },
	{ 0x7f3e8c2dbfd4, 1, "start_thread", NULL, 0, false },
};

/* Another line of worker_wait. */
static const struct fspec worker_c[] = {
	{ 0x7f3e8c2d8df2, 1, "__futex_abstimed_wait_common", NULL, 0, false },
	{ 0x55d0c0c6a6f0, 0, "worker_wait", "/src/worker.c", 41, false },
	{ 0x55d0c0c6a7a0, 0, "worker_main", "/src/worker.c", 60, false },
	{ 0x7f3e8c2dbfd4, 1, "start_thread", NULL, 0, false },
};

static const struct fspec spin_inlined[] = {
	{ 0x55d0c0c6a900, 0, "spin_once", "/src/spin.c", 10, true },
	{ 0x55d0c0c6a900, 0, "spin_loop", "/src/spin.c", 20, false },
};

static const struct fspec spin_plain[] = {
	{ 0x55d0c0c6a900, 0, "spin_loop", "/src/spin.c", 20, false },
};

static const struct fspec loader[] = {
	{ 0x7f3e8c2d0000, 1, "[in dynamic loader]", NULL, 0, false },
};

static const struct fspec raw[] = {
	{ 0x1234, -1, NULL, NULL, 0, false },
	{ 0x55d0c0c6b000, 0, NULL, NULL, 0, false },
};

static void set_frames(struct sw_dump *d, struct sw_thread *t,
		       const struct fspec *fs, size_t n)
{
	t->frames = dump_alloc(d, n * sizeof(*t->frames));
	memset(t->frames, 0, n * sizeof(*t->frames));
	t->nframes = n;
	for (size_t i = 0; i < n; i++) {
		struct sw_frame *f = &t->frames[i];

		f->ip = fs[i].ip;
		f->module = fs[i].module;
		f->offset = fs[i].module < 0
				    ? fs[i].ip
				    : fs[i].ip - d->modules[fs[i].module].bias;
		f->function =
			fs[i].function ? dump_strdup(d, fs[i].function) : NULL;
		f->file = fs[i].file ? dump_strdup(d, fs[i].file) : NULL;
		f->line = fs[i].line;
		f->inlined = fs[i].inlined;
	}
}

static struct sw_thread *add_thread(struct sw_dump *d, pid_t tid,
				    const char *name, char state)
{
	struct sw_thread *t;

	d->threads = realloc(d->threads, (d->nthreads + 1) * sizeof(*t));
	t = &d->threads[d->nthreads++];
	memset(t, 0, sizeof(*t));
	t->tid = tid;
	snprintf(t->name, sizeof(t->name), "%s", name);
	t->state = state;
	t->group = -1;
	t->unchanged_s = -1;
	return t;
}

static void add_module(struct sw_dump *d, const char *path, uint64_t bias)
{
	struct sw_module *m;

	d->modules = realloc(d->modules, (d->nmodules + 1) * sizeof(*m));
	m = &d->modules[d->nmodules++];
	memset(m, 0, sizeof(*m));
	m->path = strdup(path);
	m->bias = bias;
	m->start = bias;
	m->end = bias + 0x100000;
}

#define SET(d, t, fs) set_frames(d, t, fs, sizeof(fs) / sizeof(fs[0]))

/* The process of INTERFACE.md's examples, threads deliberately unsorted. */
static struct sw_dump *make_dump(void)
{
	struct sw_dump *d = dump_new();
	struct sw_thread *t;

	d->pid = 4242;
	snprintf(d->comm, sizeof(d->comm), "myserver");
	d->cmdline = strdup("./myserver --port 80");
	d->collected_at.tv_sec = 1796005800; /* 2026-11-30T02:30:00Z */
	d->collected_at.tv_nsec = 123456789;
	d->elapsed_us = 812;
	d->skew_us = 640;
	d->timeout_ms = 1000;
	d->symbolized = true;
	add_module(d, exe, EXE_BIAS);
	add_module(d, libc, LIBC_BIAS);

	t = add_thread(d, 4251, "helper", 'S');
	dump_thread_set_error(t, SW_ST_TIMEOUT, "no answer within 1000 ms");
	t = add_thread(d, 4245, "worker-3", 'S');
	SET(d, t, worker_a);
	t = add_thread(d, 4243, "worker-1", 'S');
	SET(d, t, worker_a);
	t->utime_ms = 3;
	t->stime_ms = 1;
	t->unchanged_s = 12.5;
	t = add_thread(d, 4244, "worker-2", 'S');
	SET(d, t, worker_b);
	t = add_thread(d, 4246, "worker-4", 'S');
	SET(d, t, worker_c);
	t = add_thread(d, 4248, "spinner-2", 'R');
	SET(d, t, spin_plain);
	t = add_thread(d, 4247, "spinner-1", 'R');
	SET(d, t, spin_inlined);
	t = add_thread(d, 4250, "io-worker", 'S');
	dump_thread_set_error(t, SW_ST_BLOCKED,
			      "the thread blocks the dump signal");
	t = add_thread(d, 4249, "raw", 'S');
	SET(d, t, raw);
	return d;
}

static const struct sw_thread *thread_of(const struct sw_dump *d, pid_t tid)
{
	for (size_t i = 0; i < d->nthreads; i++)
		if (d->threads[i].tid == tid)
			return &d->threads[i];
	return NULL;
}

/* ----------------------------------------------------------- grouping */

static void test_grouping(struct sw_dump *d)
{
	static const pid_t first[] = { 4243, 4244, 4245 };
	static const pid_t singles[] = { 4246, 4247, 4248, 4249 };
	bool ok = true;

	TAP_OK(group_dump(d) == 0, "group_dump succeeds");
	TAP_OK(d->ngroups == 5, "five groups (got %zu)", d->ngroups);
	if (d->ngroups != 5)
		return;
	TAP_OK(d->groups[0].count == 3 &&
		       !memcmp(d->groups[0].tids, first, sizeof(first)),
	       "offsets within one line do not split; tids ascending");
	for (size_t i = 0; i < 4; i++)
		ok = ok && d->groups[i + 1].count == 1 &&
		     d->groups[i + 1].tids[0] == singles[i];
	TAP_OK(ok, "another line splits, inlined frames count, ties by tid");
	TAP_OK(d->threads[d->groups[0].rep].tid == 4243,
	       "a group's frames are those of its lowest tid");
	TAP_OK(thread_of(d, 4250)->group == -1 &&
		       thread_of(d, 4251)->group == -1,
	       "threads not ok are in no group");
	TAP_OK(thread_of(d, 4244)->group == 0 && thread_of(d, 4249)->group == 4,
	       "threads know their group");
	TAP_OK(group_same_stack(d, thread_of(d, 4243), d, thread_of(d, 4244)),
	       "group_same_stack: same lines");
	TAP_OK(!group_same_stack(d, thread_of(d, 4243), d, thread_of(d, 4246)),
	       "group_same_stack: different line");
	TAP_OK(!group_same_stack(d, thread_of(d, 4247), d, thread_of(d, 4248)),
	       "group_same_stack: an inlined frame differs");
}

/* The same stack compared across dumps whose module lists differ. */
static void test_across_dumps(void)
{
	struct sw_dump *a = dump_new(), *b = dump_new();
	struct sw_thread *ta, *tb;

	add_module(a, exe, EXE_BIAS);
	add_module(a, libc, LIBC_BIAS);
	add_module(b, libc, LIBC_BIAS);
	add_module(b, exe, EXE_BIAS);
	ta = add_thread(a, 1, "a", 'S');
	SET(a, ta, worker_a);
	tb = add_thread(b, 1, "b", 'S');
	SET(b, tb, worker_b);
	for (size_t i = 0; i < tb->nframes; i++)
		tb->frames[i].module = 1 - tb->frames[i].module;
	TAP_OK(group_same_stack(a, ta, b, tb),
	       "same stack across dumps with other module indices");
	free(b->modules[1].path);
	b->modules[1].path = strdup("/usr/bin/other");
	TAP_OK(!group_same_stack(a, ta, b, tb), "another module differs");
	sw_dump_free(a);
	sw_dump_free(b);
}

/* Many threads, few stacks: correct counts, and linear time. */
static void test_many(void)
{
	enum { NT = 20000, NSTACKS = 200, DEPTH = 20 };
	struct sw_dump *d = dump_new();
	struct timespec t0, t1;
	size_t total = 0;
	bool ok = true;
	double ms;

	add_module(d, exe, EXE_BIAS);
	d->threads = calloc(NT, sizeof(*d->threads));
	d->nthreads = NT;
	for (size_t i = 0; i < NT; i++) {
		struct sw_thread *t = &d->threads[i];
		char fn[32];

		t->tid = (pid_t)(100000 - i);
		t->frames = dump_alloc(d, DEPTH * sizeof(*t->frames));
		memset(t->frames, 0, DEPTH * sizeof(*t->frames));
		t->nframes = DEPTH;
		for (size_t k = 0; k < DEPTH; k++) {
			t->frames[k].module = 0;
			t->frames[k].ip = EXE_BIAS + 0x1000 + k * 16 + i % 7;
			t->frames[k].offset = t->frames[k].ip - EXE_BIAS;
			snprintf(fn, sizeof(fn), "fn_%zu", k);
			t->frames[k].function = dump_strdup(d, fn);
			t->frames[k].file = dump_strdup(d, "/src/many.c");
			/* Stack i % NSTACKS differs in its innermost line. */
			t->frames[k].line = k ? (int)k : (int)(i % NSTACKS) + 1;
		}
	}
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t0);
	TAP_OK(group_dump(d) == 0, "group %d threads", NT);
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t1);
	ms = (double)(t1.tv_sec - t0.tv_sec) * 1e3 +
	     (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
	TAP_NOTE("grouping %d threads of %d frames: %.2f ms of CPU", NT, DEPTH,
		 ms);
	TAP_OK(d->ngroups == NSTACKS, "%d groups (got %zu)", NSTACKS,
	       d->ngroups);
	for (size_t g = 0; g < d->ngroups; g++) {
		total += d->groups[g].count;
		ok = ok && d->groups[g].count == NT / NSTACKS;
		for (size_t k = 1; k < d->groups[g].count; k++)
			ok = ok &&
			     d->groups[g].tids[k - 1] < d->groups[g].tids[k];
		if (g)
			ok = ok &&
			     d->groups[g - 1].tids[0] < d->groups[g].tids[0];
	}
	TAP_OK(ok && total == NT, "every thread in one group, sorted");
	sw_dump_free(d);
}

/* --------------------------------------------------------------- JSON */

/* Whether o's keys are exactly keys[], in that order. */
static bool keys_are(const cJSON *o, const char *const *keys, size_t n)
{
	const cJSON *c = o ? o->child : NULL;
	size_t i = 0;

	for (; c; c = c->next, i++)
		if (i >= n || strcmp(c->string, keys[i]) != 0)
			return false;
	return i == n;
}

#define KEYS_ARE(o, ...)                                        \
	keys_are(o, (const char *const[]){ __VA_ARGS__ },       \
		 sizeof((const char *const[]){ __VA_ARGS__ }) / \
			 sizeof(char *))

static const cJSON *thread_json(const cJSON *threads, int tid)
{
	const cJSON *t;

	cJSON_ArrayForEach(t, threads)
	{
		const cJSON *id = cJSON_GetObjectItemCaseSensitive(t, "tid");
		if (cJSON_IsNumber(id) && id->valueint == tid)
			return t;
	}
	return NULL;
}

static void test_json(const struct sw_dump *d)
{
	char *s = NULL;
	cJSON *root, *threads, *groups, *g0, *frames;
	const cJSON *t, *f;
	bool ok = true;
	int gi = 0;

	TAP_OK(sw_dump_json(d, &s) == 0 && s, "sw_dump_json succeeds");
	root = cJSON_Parse(s);
	TAP_OK(root != NULL, "JSON parses back");
	TAP_OK(KEYS_ARE(root, "pid", "comm", "cmdline", "collected_at",
			"elapsed_us", "skew_us", "timeout_ms", "threads_total",
			"threads_ok", "method", "methods", "threads", "groups"),
	       "process keys in INTERFACE order");
	TAP_OK(!strcmp(cJSON_GetStringValue(
			       cJSON_GetObjectItem(root, "collected_at")),
		       "2026-11-30T02:30:00.123Z"),
	       "collected_at is ISO-8601 UTC with milliseconds");
	TAP_OK(cJSON_GetObjectItem(root, "pid")->valueint == 4242 &&
		       cJSON_GetObjectItem(root, "threads_total")->valueint ==
			       9 &&
		       cJSON_GetObjectItem(root, "threads_ok")->valueint == 7 &&
		       cJSON_GetObjectItem(root, "elapsed_us")->valueint ==
			       812 &&
		       cJSON_GetObjectItem(root, "skew_us")->valueint == 640 &&
		       cJSON_GetObjectItem(root, "timeout_ms")->valueint ==
			       1000 &&
		       !strcmp(cJSON_GetObjectItem(root, "cmdline")
				       ->valuestring,
			       "./myserver --port 80"),
	       "process values");
	threads = cJSON_GetObjectItem(root, "threads");
	groups = cJSON_GetObjectItem(root, "groups");
	TAP_OK(cJSON_GetArraySize(threads) == 9 &&
		       cJSON_GetArraySize(groups) == 5,
	       "nine threads, five groups");

	t = thread_json(threads, 4243);
	TAP_OK(KEYS_ARE(t, "tid", "name", "state", "utime_ms", "stime_ms",
			"status", "group", "unchanged_s"),
	       "ok thread keys (with unchanged_s)");
	TAP_OK(!strcmp(cJSON_GetObjectItem(t, "state")->valuestring, "S") &&
		       !strcmp(cJSON_GetObjectItem(t, "status")->valuestring,
			       "ok") &&
		       cJSON_GetObjectItem(t, "utime_ms")->valueint == 3 &&
		       cJSON_GetObjectItem(t, "group")->valueint == 0 &&
		       cJSON_GetObjectItem(t, "unchanged_s")->valuedouble ==
			       12.5,
	       "ok thread values");
	TAP_OK(KEYS_ARE(thread_json(threads, 4244), "tid", "name", "state",
			"utime_ms", "stime_ms", "status", "group"),
	       "unchanged_s only where known");
	t = thread_json(threads, 4250);
	TAP_OK(KEYS_ARE(t, "tid", "name", "state", "utime_ms", "stime_ms",
			"status", "error", "group"),
	       "thread not dumped has an error");
	TAP_OK(!strcmp(cJSON_GetObjectItem(t, "status")->valuestring,
		       "blocked-signal") &&
		       cJSON_IsNull(cJSON_GetObjectItem(t, "group")),
	       "blocked-signal thread with group null");

	cJSON_ArrayForEach(g0, groups)
	{
		const cJSON *tids = cJSON_GetObjectItem(g0, "tids"), *tid;

		ok = ok && KEYS_ARE(g0, "id", "count", "tids", "frames") &&
		     cJSON_GetObjectItem(g0, "id")->valueint == gi &&
		     cJSON_GetObjectItem(g0, "count")->valueint ==
			     cJSON_GetArraySize(tids);
		cJSON_ArrayForEach(tid, tids)
		{
			t = thread_json(threads, tid->valueint);
			ok = ok && t &&
			     cJSON_GetObjectItem(t, "group")->valueint == gi;
		}
		gi++;
	}
	TAP_OK(ok, "groups: keys, id = index, count = tids, members agree");

	frames = cJSON_GetObjectItem(cJSON_GetArrayItem(groups, 0), "frames");
	f = cJSON_GetArrayItem(frames, 1);
	TAP_OK(KEYS_ARE(f, "ip", "module", "offset", "function", "file", "line",
			"inlined"),
	       "frame keys in INTERFACE order");
	TAP_OK(!strcmp(cJSON_GetObjectItem(f, "ip")->valuestring,
		       "0x55d0c0c6a6db") &&
		       !strcmp(cJSON_GetObjectItem(f, "module")->valuestring,
			       exe) &&
		       !strcmp(cJSON_GetObjectItem(f, "offset")->valuestring,
			       "0x16db") &&
		       !strcmp(cJSON_GetObjectItem(f, "function")->valuestring,
			       "worker_wait") &&
		       !strcmp(cJSON_GetObjectItem(f, "file")->valuestring,
			       "/src/worker.c") &&
		       cJSON_GetObjectItem(f, "line")->valueint == 40 &&
		       cJSON_IsFalse(cJSON_GetObjectItem(f, "inlined")),
	       "frame values; the group shows its lowest tid's addresses");
	TAP_OK(KEYS_ARE(cJSON_GetArrayItem(frames, 0), "ip", "module", "offset",
			"function", "inlined"),
	       "no file or line where unknown");
	frames = cJSON_GetObjectItem(cJSON_GetArrayItem(groups, 2), "frames");
	TAP_OK(cJSON_IsTrue(cJSON_GetObjectItem(cJSON_GetArrayItem(frames, 0),
						"inlined")),
	       "inlined frame marked");
	frames = cJSON_GetObjectItem(cJSON_GetArrayItem(groups, 4), "frames");
	f = cJSON_GetArrayItem(frames, 0);
	TAP_OK(KEYS_ARE(f, "ip", "module", "offset", "inlined") &&
		       cJSON_IsNull(cJSON_GetObjectItem(f, "module")) &&
		       !strcmp(cJSON_GetObjectItem(f, "offset")->valuestring,
			       "0x1234"),
	       "unknown module: module null, offset = ip, no function");
	cJSON_Delete(root);
	free(s);
}

/* ------------------------------------------------------ text, folded */

static const char golden_text[] =
	"Process 4242 (myserver): 9 threads, 5 groups, collected in 0.8 ms\n"
	"3 threads: worker-1 (4243), worker-2 (4244), worker-3 (4245)\n"
	"state: 3 S; cpu 4 ms\n"
	"#0  0x00007f3e8c2d8df2 in __futex_abstimed_wait_common () from "
	"/lib/x86_64-linux-gnu/libc.so.6\n"
	"#1  0x000055d0c0c6a6db in worker_wait () at worker.c:40\n"
	"#2  0x000055d0c0c6a7a0 in worker_main () at worker.c:60\n"
	"#3  0x00007f3e8c2dbfd4 in start_thread () from "
	"/lib/x86_64-linux-gnu/libc.so.6\n"
	"\n"
	"1 thread: worker-4 (4246)\n"
	"state: 1 S; cpu 0 ms\n"
	"#0  0x00007f3e8c2d8df2 in __futex_abstimed_wait_common () from "
	"/lib/x86_64-linux-gnu/libc.so.6\n"
	"#1  0x000055d0c0c6a6f0 in worker_wait () at worker.c:41\n"
	"#2  0x000055d0c0c6a7a0 in worker_main () at worker.c:60\n"
	"#3  0x00007f3e8c2dbfd4 in start_thread () from "
	"/lib/x86_64-linux-gnu/libc.so.6\n"
	"\n"
	"1 thread: spinner-1 (4247)\n"
	"state: 1 R; cpu 0 ms\n"
	"#0  0x000055d0c0c6a900 in spin_once () at spin.c:10 (inlined)\n"
	"#1  0x000055d0c0c6a900 in spin_loop () at spin.c:20\n"
	"\n"
	"1 thread: spinner-2 (4248)\n"
	"state: 1 R; cpu 0 ms\n"
	"#0  0x000055d0c0c6a900 in spin_loop () at spin.c:20\n"
	"\n"
	"1 thread: raw (4249)\n"
	"state: 1 S; cpu 0 ms\n"
	"#0  0x0000000000001234 in ?? ()\n"
	"#1  0x000055d0c0c6b000 in ?? () from /usr/bin/myserver\n"
	"\n"
	"2 threads not dumped:\n"
	"  io-worker (4250): blocked-signal: the thread blocks the dump "
	"signal\n"
	"  helper (4251): timeout: no answer within 1000 ms\n";

static const char golden_folded[] =
	"myserver;start_thread;worker_main;worker_wait;"
	"__futex_abstimed_wait_common 3\n"
	"myserver;start_thread;worker_main;worker_wait;"
	"__futex_abstimed_wait_common 1\n"
	"myserver;spin_loop;spin_once 1\n"
	"myserver;spin_loop 1\n"
	"myserver;myserver+0x2000;0x1234 1\n";

/* Prints the first differing line of two texts, for a failing golden. */
static void show_diff(const char *want, const char *got)
{
	size_t i = 0, line = 1;

	while (want[i] && want[i] == got[i])
		if (want[i++] == '\n')
			line++;
	TAP_NOTE("first difference at line %zu: want \"%.60s\" got \"%.60s\"",
		 line, want + i, got + i);
}

static void test_text(const struct sw_dump *d)
{
	char *s = NULL, *f = NULL;
	bool same;

	TAP_OK(sw_dump_text(d, &s) == 0 && s, "sw_dump_text succeeds");
	same = s && !strcmp(s, golden_text);
	TAP_OK(same, "text output matches the golden text");
	if (!same && s)
		show_diff(golden_text, s);
	TAP_OK(sw_dump_folded(d, &f) == 0 && f, "sw_dump_folded succeeds");
	same = f && !strcmp(f, golden_folded);
	TAP_OK(same, "folded output matches the golden text");
	if (!same && f)
		show_diff(golden_folded, f);
	free(s);
	free(f);
}

/* A large group lists 8 names; names from the target cannot forge. */
static void test_text_edges(void)
{
	struct sw_dump *d = dump_new();
	char *s = NULL, *f = NULL, *j = NULL;
	struct sw_thread *t;
	cJSON *root;

	snprintf(d->comm, sizeof(d->comm), "a;b\nc");
	d->cmdline = strdup("bad \xff\xfe utf8 \xc3\xa9");
	add_module(d, exe, EXE_BIAS);
	add_module(d, libc, LIBC_BIAS);
	for (int i = 1; i <= 10; i++) {
		char name[16];

		snprintf(name, sizeof(name), i == 1 ? "ev\nil" : "t%d", i);
		t = add_thread(d, i, name, i > 7 ? 'R' : i == 7 ? 'D' : 'S');
		t->utime_ms = i == 2 ? 12000 : 0;
		t->stime_ms = i == 2 ? 500 : 0;
		SET(d, t, spin_plain);
	}
	t = add_thread(d, 11, "loader", 'S');
	SET(d, t, loader);
	TAP_OK(group_dump(d) == 0 && d->ngroups == 2,
	       "a group of ten, one of one");
	TAP_OK(sw_dump_text(d, &s) == 0 &&
		       strstr(s,
			      "10 threads: ev?il (1), t2 (2), t3 (3), t4 (4), "
			      "t5 (5), t6 (6), t7 (7), t8 (8), ...\n"),
	       "eight names listed, control characters replaced");
	TAP_OK(s && strstr(s, ", ...\nstate: 6 S, 3 R, 1 D; cpu 12.5 s\n#0 "),
	       "the group's states, most first, and its CPU time in seconds");
	TAP_OK(s && strstr(s, "\n1 thread: loader (11)\n"
			      "state: 1 S; cpu 0 ms\n"
			      "#0  0x00007f3e8c2d0000 in [in dynamic loader] "
			      "from /lib/x86_64-linux-gnu/libc.so.6\n"),
	       "placeholder frame printed without ()");
	TAP_OK(s && !strncmp(s, "Process 0 (a;b?c): 11 threads, 2 groups,", 40),
	       "header with a sanitized comm (%.40s)", s ? s : "");
	sw_dump_folded(d, &f);
	TAP_OK(f && !strcmp(f, "a?b?c;spin_loop 10\n"
			       "a?b?c;[in dynamic loader] 1\n"),
	       "folded: ';' and newlines in names replaced");
	TAP_OK(sw_dump_json(d, &j) == 0 && (root = cJSON_Parse(j)) != NULL,
	       "JSON with invalid UTF-8 input still parses");
	if (j && root) {
		TAP_OK(!strcmp(cJSON_GetObjectItem(root, "cmdline")
				       ->valuestring,
			       "bad ?? utf8 \xc3\xa9"),
		       "invalid UTF-8 replaced, valid kept");
		cJSON_Delete(root);
	}
	free(s);
	free(f);
	free(j);
	sw_dump_free(d);
}

/*
 * Names that would disguise what a reader sees: a right-to-left override
 * (U+202E), a C1 control (U+0085), a zero-width space, an isolate, a byte
 * order mark, stray and overlong bytes. Text and folded show '?' for each
 * of them and keep ordinary non-ASCII letters; JSON keeps valid UTF-8.
 */
static void test_text_disguise(void)
{
	static const struct {
		const char *name, *shown;
	} names[] = {
		{ "evil\xe2\x80\xaegnp.exe", "evil?gnp.exe" },
		{ "nel\xc2\x85line", "nel?line" },
		{ "zero\xe2\x80\x8bwidth", "zero?width" },
		{ "iso\xe2\x81\xa6late", "iso?late" },
		{ "\xef\xbb\xbf"
		  "bom",
		  "?bom" },
		{ "bad\xff\xc0\xaf", "bad???" },
		{ "caf\xc3\xa9-\xe6\x97\xa5", "caf\xc3\xa9-\xe6\x97\xa5" },
	};
	struct sw_dump *d = dump_new();
	char *s = NULL, *f = NULL, *j = NULL;
	cJSON *root = NULL, *th;
	size_t n = sizeof(names) / sizeof(names[0]);
	bool shown = true, kept = false;

	snprintf(d->comm, sizeof(d->comm), "srv\xe2\x80\xae;x");
	d->cmdline = strdup("run \xe2\x80\xae\xc2\x9b");
	add_module(d, exe, EXE_BIAS);
	for (size_t i = 0; i < n; i++) {
		struct sw_thread *t =
			add_thread(d, (pid_t)i + 1, names[i].name, 'S');

		SET(d, t, spin_plain);
	}
	TAP_OK(group_dump(d) == 0 && sw_dump_text(d, &s) == 0,
	       "a dump of disguised names renders as text");
	for (size_t i = 0; s && i < n; i++) {
		char want[64];

		snprintf(want, sizeof(want), "%s (%zu)", names[i].shown, i + 1);
		if (!strstr(s, want)) {
			shown = false;
			TAP_NOTE("missing '%s'", want);
		}
	}
	TAP_OK(s && shown,
	       "text: overrides, C1, zero-width, isolates, BOM and bad bytes "
	       "are '?', other letters kept");
	TAP_OK(s && !strncmp(s, "Process 0 (srv?;x)", 18),
	       "text: the command name too (%.18s)", s ? s : "");
	TAP_OK(sw_dump_folded(d, &f) == 0 && f && !strncmp(f, "srv??x;", 7),
	       "folded: the same (%.7s)", f ? f : "");
	if (sw_dump_json(d, &j) == 0)
		root = cJSON_Parse(j);
	th = cJSON_GetArrayItem(cJSON_GetObjectItem(root, "threads"), 0);
	th = cJSON_GetObjectItem(th, "name");
	kept = cJSON_IsString(th) && !strcmp(th->valuestring, names[0].name);
	TAP_OK(kept, "JSON keeps valid UTF-8 as it is (the page escapes it)");
	cJSON_Delete(root);
	free(s);
	free(f);
	free(j);
	sw_dump_free(d);
}

/* How cJSON prints the number v, for comparing our raw numbers with. */
static void cjson_number(double v, char *buf, size_t size)
{
	cJSON *n = cJSON_CreateNumber(v);
	char *s = cJSON_PrintUnformatted(n);

	snprintf(buf, size, "%s", s ? s : "?");
	cJSON_free(s);
	cJSON_Delete(n);
}

/*
 * The renderer formats integers and unchanged_s itself; every value must
 * come out as cJSON would print it, around every switch of its format
 * ("%d", "%1.15g", "%1.17g", exponents).
 */
static void test_json_numbers(void)
{
	static const uint64_t cpu[] = {
		0,
		1,
		999,
		2147483647ULL,
		2147483648ULL,
		4294967296ULL,
		999999999999999ULL,
		1000000000000000ULL,
		1000000000000001ULL,
		9007199254740993ULL,
		123456789012345678ULL,
		UINT64_MAX,
	};
	static const double unchanged[] = {
		0,	   0.0004,     0.0005,	    0.001,
		0.0015,	   0.1,	       0.232,	    0.1 + 0.2,
		1,	   7.0005,     12.5,	    59.9995,
		1234.5678, 99999.9995, 1e6 + 0.001, 999999999.999,
		1e9,	   1e9 + 0.25, 5e12,	    1e15,
	};
	enum { N = sizeof(unchanged) / sizeof(unchanged[0]) };
	static const struct fspec one[] = {
		{ 0x55d0c0c6a6db, 0, "f", "/src/f.c", 2147483647, false },
	};
	struct sw_dump *d = dump_new();
	char *s = NULL, want[512], a[64], b[64], c[64], e[64];
	bool ok = true;

	add_module(d, exe, EXE_BIAS);
	for (size_t i = 0; i < N; i++) {
		struct sw_thread *t = add_thread(
			d, i ? (pid_t)(2147483647 - i) : -5, "n", 'S');

		t->utime_ms = cpu[i % (sizeof(cpu) / sizeof(cpu[0]))];
		t->stime_ms = cpu[(i + 5) % (sizeof(cpu) / sizeof(cpu[0]))];
		t->unchanged_s = unchanged[i];
		SET(d, t, one);
	}
	TAP_OK(group_dump(d) == 0 && sw_dump_json(d, &s) == 0 && s,
	       "JSON of extreme numbers");
	for (size_t i = 0; s && i < N; i++) {
		const struct sw_thread *t = &d->threads[i];

		cjson_number(t->tid, a, sizeof(a));
		cjson_number((double)t->utime_ms, b, sizeof(b));
		cjson_number((double)t->stime_ms, c, sizeof(c));
		cjson_number((double)(long long)(t->unchanged_s * 1000 + 0.5) /
				     1000,
			     e, sizeof(e));
		snprintf(want, sizeof(want),
			 "{\"tid\":%s,\"name\":\"n\",\"state\":\"S\","
			 "\"utime_ms\":%s,\"stime_ms\":%s,\"status\":"
			 "\"ok\",\"group\":0,\"unchanged_s\":%s}",
			 a, b, c, e);
		if (!strstr(s, want)) {
			TAP_NOTE("missing %s", want);
			ok = false;
		}
	}
	TAP_OK(ok, "tids, CPU times, unchanged_s print as cJSON numbers do");
	TAP_OK(s && strstr(s, "\"line\":2147483647,"), "largest line");
	/* The tids of the one group, ascending, as a cJSON array prints. */
	snprintf(want, sizeof(want), "\"tids\":[-5");
	for (size_t i = N - 1; i > 0; i--) {
		cjson_number((double)(2147483647 - i), a, sizeof(a));
		snprintf(want + strlen(want), sizeof(want) - strlen(want),
			 ",%s", a);
	}
	strcat(want, "],");
	TAP_OK(s && strstr(s, want), "tids array as cJSON prints it");
	free(s);
	sw_dump_free(d);
}

/*
 * Names, states and errors of every byte: the JSON is exactly what cJSON
 * prints for the values it parses back to (a thread is written as text,
 * not as a tree), and those values are the bytes given, invalid UTF-8
 * made '?'.
 */
static void test_json_strings(void)
{
	struct sw_dump *d = dump_new();
	char *s = NULL, *again = NULL, err[300];
	cJSON *root = NULL, *threads;
	size_t wrong = 0, n = 0;

	for (int c = 1; c < 256; c += 15) {
		char name[SW_COMM_MAX];
		struct sw_thread *t;

		for (int i = 0; i < SW_COMM_MAX - 1; i++)
			name[i] = (char)(c + i < 256 ? c + i : '"');
		name[SW_COMM_MAX - 1] = '\0';
		t = add_thread(d, 100 + c, name, (char)c);
		if (c % 2) {
			for (int i = 0; i < 255; i++)
				err[i] = (char)(i + 1);
			err[255] = '\0';
			dump_thread_set_error(t, SW_ST_ERROR, err);
		}
		n++;
	}
	TAP_OK(group_dump(d) == 0 && sw_dump_json(d, &s) == 0 && s &&
		       (root = cJSON_Parse(s)) != NULL,
	       "JSON of names, states and errors of every byte parses");
	again = root ? cJSON_PrintUnformatted(root) : NULL;
	if (s && s[0] && s[strlen(s) - 1] == '\n')
		s[strlen(s) - 1] = '\0';
	TAP_OK(again && s && !strcmp(again, s),
	       "... and prints back byte for byte as cJSON prints it");
	threads = cJSON_GetObjectItem(root, "threads");
	for (size_t i = 0; i < n; i++) {
		const struct sw_thread *t = &d->threads[i];
		cJSON *o = cJSON_GetArrayItem(threads, (int)i);
		const char *got =
			cJSON_GetStringValue(cJSON_GetObjectItem(o, "name"));
		const unsigned char *w = (const unsigned char *)t->name;
		bool same = got && strlen(got) == strlen(t->name);

		for (size_t k = 0; same && w[k]; k++)
			same = (unsigned char)got[k] == w[k] ||
			       (got[k] == '?' && w[k] >= 0x80);
		wrong += !same;
	}
	TAP_OK(n && wrong == 0, "%zu names read back as given (%zu wrong)", n,
	       wrong);
	cJSON_free(again);
	cJSON_Delete(root);
	free(s);
	sw_dump_free(d);
}

/* The dump's memory: small and large pieces, aligned, all kept. */
static void test_dump_memory(void)
{
	struct sw_dump *d = dump_new();
	size_t big = (2u << 20) + 3;
	char *long_name = malloc(big + 1);
	const char *small[300], *large;
	void *p;
	bool ok = true;

	memset(long_name, 'x', big);
	long_name[big] = '\0';
	for (size_t i = 0; i < 300; i++) {
		char name[32];

		snprintf(name, sizeof(name), "fn_%zu", i);
		small[i] = dump_strdup(d, name);
		if (i == 150)
			large = dump_strdup(d, long_name);
	}
	p = dump_alloc(d, 24);
	for (size_t i = 0; i < 300; i++) {
		char name[32];

		snprintf(name, sizeof(name), "fn_%zu", i);
		ok = ok && small[i] && !strcmp(small[i], name);
	}
	TAP_OK(ok && large && !strcmp(large, long_name),
	       "strings of the dump, small and larger than a block");
	TAP_OK(p && (uintptr_t)p % 16 == 0, "dump_alloc is aligned");
	TAP_OK(!dump_alloc(d, SIZE_MAX - 8), "an impossible size fails");
	free(long_name);
	sw_dump_free(d);
}

static void test_empty(void)
{
	struct sw_dump *d = dump_new();
	char *s = NULL;

	snprintf(d->comm, sizeof(d->comm), "idle");
	TAP_OK(group_dump(d) == 0 && d->ngroups == 0, "empty dump groups");
	TAP_OK(sw_dump_text(d, &s) == 0 &&
		       !strcmp(s, "Process 0 (idle): 0 threads, 0 groups, "
				  "collected in 0.0 ms\n"),
	       "empty dump text");
	free(s);
	TAP_OK(sw_dump_folded(d, &s) == 0 && !strcmp(s, ""),
	       "empty dump folded is empty");
	free(s);
	TAP_OK(sw_dump_json(d, &s) == 0 && strstr(s, "\"threads\":[]") &&
		       strstr(s, "\"groups\":[]") &&
		       strstr(s, "\"cmdline\":\"\""),
	       "empty dump JSON");
	free(s);
	TAP_OK(sw_dump_json(NULL, &s) == -EINVAL && !s, "NULL dump rejected");
	sw_dump_free(d);
}

/* ------------------------------------------------------------- pprof */

/* The profile in gz (n bytes), inflated and unpacked; NULL if invalid. */
static Perftools__Profiles__Profile *unpack_gz(const void *gz, size_t n)
{
	Perftools__Profiles__Profile *p = NULL;
	z_stream z;
	size_t cap = 1 << 20;
	uint8_t *buf = malloc(cap);

	memset(&z, 0, sizeof(z));
	if (!buf || inflateInit2(&z, 16 + 15) != Z_OK) {
		free(buf);
		return NULL;
	}
	z.next_in = (Bytef *)gz;
	z.avail_in = (uInt)n;
	z.next_out = buf;
	z.avail_out = (uInt)cap;
	if (inflate(&z, Z_FINISH) == Z_STREAM_END)
		p = perftools__profiles__profile__unpack(NULL, z.total_out,
							 buf);
	inflateEnd(&z);
	free(buf);
	return p;
}

static bool valid_utf8(const char *s)
{
	uint32_t cp;

	for (size_t k; *s; s += k)
		if (!(k = utf8_seq((const unsigned char *)s, &cp)))
			return false;
	return true;
}

static const char *pstr(const Perftools__Profiles__Profile *p, int64_t i)
{
	return i >= 0 && (size_t)i < p->n_string_table ? p->string_table[i]
						       : NULL;
}

static const char *plabel(const Perftools__Profiles__Profile *p,
			  const Perftools__Profiles__Sample *s, const char *key)
{
	for (size_t i = 0; i < s->n_label; i++) {
		const char *k = pstr(p, s->label[i]->key);

		if (k && strcmp(k, key) == 0)
			return pstr(p, s->label[i]->str);
	}
	return NULL;
}

static const Perftools__Profiles__Location *ploc(
	const Perftools__Profiles__Profile *p, uint64_t id)
{
	for (size_t i = 0; i < p->n_location; i++)
		if (p->location[i]->id == id)
			return p->location[i];
	return NULL;
}

static const char *pfunc(const Perftools__Profiles__Profile *p, uint64_t id)
{
	for (size_t i = 0; i < p->n_function; i++)
		if (p->function[i]->id == id)
			return pstr(p, p->function[i]->name);
	return NULL;
}

static const Perftools__Profiles__Mapping *pmap(
	const Perftools__Profiles__Profile *p, uint64_t id)
{
	for (size_t i = 0; i < p->n_mapping; i++)
		if (p->mapping[i]->id == id)
			return p->mapping[i];
	return NULL;
}

/* Every id referenced is defined and nonzero; every string valid. */
static bool pprof_consistent(const Perftools__Profiles__Profile *p)
{
	bool ok = p->n_string_table > 0 && strcmp(p->string_table[0], "") == 0;

	for (size_t i = 0; ok && i < p->n_string_table; i++)
		ok = valid_utf8(p->string_table[i]);
	for (size_t i = 0; ok && i < p->n_sample; i++) {
		const Perftools__Profiles__Sample *s = p->sample[i];

		ok = s->n_value == p->n_sample_type;
		for (size_t k = 0; ok && k < s->n_location_id; k++)
			ok = s->location_id[k] && ploc(p, s->location_id[k]);
		for (size_t k = 0; ok && k < s->n_label; k++)
			ok = pstr(p, s->label[k]->key) &&
			     pstr(p, s->label[k]->str);
	}
	for (size_t i = 0; ok && i < p->n_location; i++) {
		const Perftools__Profiles__Location *l = p->location[i];

		ok = l->id && pmap(p, l->mapping_id);
		for (size_t k = 0; ok && k < l->n_line; k++)
			ok = pfunc(p, l->line[k]->function_id) != NULL;
	}
	for (size_t i = 0; ok && i < p->n_mapping; i++)
		ok = p->mapping[i]->id && pstr(p, p->mapping[i]->filename) &&
		     *pstr(p, p->mapping[i]->filename);
	return ok;
}

/* The sample whose labels say thread name (and state). */
static const Perftools__Profiles__Sample *sample_of(
	const Perftools__Profiles__Profile *p, const char *name)
{
	for (size_t i = 0; i < p->n_sample; i++) {
		const char *n = plabel(p, p->sample[i], "thread");

		if (n && strcmp(n, name) == 0)
			return p->sample[i];
	}
	return NULL;
}

static void test_pprof(void)
{
	struct sw_dump *d = make_dump();
	const struct sw_dump *ds[1] = { d };
	Perftools__Profiles__Profile *p = NULL;
	const Perftools__Profiles__Sample *s;
	const Perftools__Profiles__Location *l;
	const Perftools__Profiles__Mapping *m;
	struct pprof *b;
	void *gz = NULL;
	size_t n = 0;
	int64_t total = 0;

	/* A name that is not UTF-8, as a target may set it. */
	snprintf(d->threads[1].name, sizeof(d->threads[1].name),
		 "w\xff"
		 "3");
	d->modules[0].build_id_len = 4;
	memcpy(d->modules[0].build_id, "\x01\xab\xcd\xef", 4);
	TAP_OK(group_dump(d) == 0, "pprof: grouped");
	TAP_OK(render_pprof_count(ds, 1, "goroutine", &gz, &n) == 0 && n > 20,
	       "pprof: a count profile is made");
	TAP_OK(gz && ((uint8_t *)gz)[0] == 0x1f && ((uint8_t *)gz)[1] == 0x8b,
	       "pprof: gzip");
	p = gz ? unpack_gz(gz, n) : NULL;
	TAP_OK(p != NULL, "pprof: inflates and unpacks with the schema");
	if (!p) {
		free(gz);
		sw_dump_free(d);
		return;
	}
	TAP_OK(pprof_consistent(p),
	       "pprof: \"\" first, ids nonzero and defined, strings UTF-8");
	TAP_OK(p->n_sample_type == 1 &&
		       !strcmp(pstr(p, p->sample_type[0]->type), "goroutine") &&
		       !strcmp(pstr(p, p->sample_type[0]->unit), "count") &&
		       p->period_type && p->period == 1 &&
		       !strcmp(pstr(p, p->period_type->type), "goroutine"),
	       "pprof: sample and period type goroutine/count, period 1");
	TAP_OK(p->time_nanos == 1796005800123456789LL,
	       "pprof: the time is the dump's");
	for (size_t i = 0; i < p->n_sample; i++)
		total += p->sample[i]->value[0];
	TAP_OK(total == 7, "pprof: 7 ok threads counted (got %lld)",
	       (long long)total);
	/* worker-1 and worker-2 share a stack but not a name: two samples. */
	TAP_OK(p->n_sample == 7,
	       "pprof: a group splits where names differ (%zu samples)",
	       p->n_sample);
	s = sample_of(p, "w?3");
	TAP_OK(s && s->value[0] == 1 && !strcmp(plabel(p, s, "pid"), "4242") &&
		       !strcmp(plabel(p, s, "comm"), "myserver") &&
		       !strcmp(plabel(p, s, "state"), "S") && s->n_label == 4,
	       "pprof: labels pid, comm, thread (bad byte as ?), state");
	l = s && s->n_location_id == 4 ? ploc(p, s->location_id[1]) : NULL;
	TAP_OK(l && l->address == 0x55d0c0c6a6dbULL && l->n_line == 1 &&
		       !strcmp(pfunc(p, l->line[0]->function_id),
			       "worker_wait") &&
		       l->line[0]->line == 40,
	       "pprof: a location has its address, function and line");
	m = l ? pmap(p, l->mapping_id) : NULL;
	TAP_OK(m && !strcmp(pstr(p, m->filename), exe) &&
		       !strcmp(pstr(p, m->build_id), "01abcdef") &&
		       m->memory_start == EXE_BIAS && m->has_functions,
	       "pprof: its mapping has the module's path and build-id");
	s = sample_of(p, "spinner-1");
	l = s && s->n_location_id == 1 ? ploc(p, s->location_id[0]) : NULL;
	TAP_OK(l && l->n_line == 2 &&
		       !strcmp(pfunc(p, l->line[0]->function_id),
			       "spin_once") &&
		       !strcmp(pfunc(p, l->line[1]->function_id), "spin_loop"),
	       "pprof: an inlined frame is a line of its caller's location, "
	       "innermost first");
	s = sample_of(p, "raw");
	l = s && s->n_location_id == 2 ? ploc(p, s->location_id[0]) : NULL;
	m = l ? pmap(p, l->mapping_id) : NULL;
	TAP_OK(l && l->n_line == 0 && m &&
		       !strcmp(pstr(p, m->filename), "[unknown]") &&
		       m->memory_start <= 0x1234 && m->memory_limit > 0x1234,
	       "pprof: a frame outside every module has an [unknown] mapping");
	perftools__profiles__profile__free_unpacked(p, NULL);
	free(gz);

	/* The builder merges equal stacks and labels, summing values. */
	{
		const char *const types[2][2] = { { "samples", "count" },
						  { "wall", "nanoseconds" } };
		const char *const period[2] = { "wall", "nanoseconds" };
		const int64_t v[2] = { 1, 50000000 };
		struct pprof_label lab = { "thread", "x" };
		struct pprof_label many[PPROF_MAX_LABELS + 1];

		b = pprof_new(types, 2, period, 50000000);
		if (b)
			pprof_set_default_type(b, 1);
		TAP_OK(b && pprof_add(b, d, &d->threads[1], v, &lab, 1) == 0 &&
			       pprof_add(b, d, &d->threads[1], v, &lab, 1) ==
				       0 &&
			       pprof_nsamples(b) == 1,
		       "pprof: the same stack and labels are one sample");
		for (size_t i = 0; i < PPROF_MAX_LABELS + 1; i++)
			many[i] = lab;
		TAP_OK(b && pprof_add(b, d, &d->threads[1], v, many,
				      PPROF_MAX_LABELS + 1) == -EINVAL,
		       "pprof: too many labels are refused");
		gz = NULL;
		p = b && pprof_finish(b, &gz, &n) == 0 ? unpack_gz(gz, n)
						       : NULL;
		TAP_OK(p && p->n_sample == 1 && p->sample[0]->n_value == 2 &&
			       p->sample[0]->value[0] == 2 &&
			       p->sample[0]->value[1] == 100000000 &&
			       !strcmp(pstr(p, p->default_sample_type), "wall"),
		       "pprof: values summed, two sample types");
		if (p)
			perftools__profiles__profile__free_unpacked(p, NULL);
		free(gz);
		pprof_free(b);
	}
	/* No dump at all: a valid, empty profile. */
	gz = NULL;
	TAP_OK(render_pprof_count(NULL, 0, "threads", &gz, &n) == 0 &&
		       (p = unpack_gz(gz, n)) && p->n_sample == 0 &&
		       pprof_consistent(p),
	       "pprof: no dumps, an empty profile");
	if (p)
		perftools__profiles__profile__free_unpacked(p, NULL);
	free(gz);
	sw_dump_free(d);
}

int main(void)
{
	struct sw_dump *d = make_dump();

	test_grouping(d);
	test_json(d);
	test_text(d);
	TAP_OK(group_dump(d) == 0 && d->ngroups == 5,
	       "grouping again gives the same groups");
	sw_dump_free(d);
	test_across_dumps();
	test_many();
	test_json_numbers();
	test_json_strings();
	test_dump_memory();
	test_text_edges();
	test_text_disguise();
	test_empty();
	test_pprof();
	return tap_done();
}
