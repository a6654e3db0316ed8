/*
 * test_it_whole.c - whole stacks, or a word that they are not.
 *
 * A thread whose signal handler sleeps on an alternate signal stack
 * (plain_target altstack) is unwound past the handler into the frames it
 * interrupted, by every way of reading it: from the kernel and by ptrace
 * through the real daemon, by the CLI's own snapshot (--local), from a
 * core (gcore), and, under the agent, whatever method reads it; each as
 * eu-stack has it. So is one whose handler spins there (read from the
 * kernel between its time slices, or by a perf sample). A thread 300 calls deep
 * with 4 KiB frames (plain_target deep) says where it was cut: "truncated":
 * "stack" at the usual copy, "frames" at --max-frames N / ?max_frames=N, and
 * nothing with 0 (all of them, as eu-stack -n 0 has them); threads that were
 * not cut say nothing. Needs root (the daemon and the CLI read processes of
 * their own session, but the kernel reads need the privilege).
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <dirent.h>
#include <limits.h>

#include "itest.h"
#include "tap.h"

#define FNS_SIZE 16384	   /* 300 frames of "plain_deep;" and more */
#define SW_DEEP_ALL 300	   /* the deep thread's calls of plain_deep, less 1 */
#define SW_SLOT_FRAMES 256 /* what the agent's handler keeps (limits.h) */

static char fixture[PATH_MAX], cli[PATH_MAX];
static bool have_eu;

/* plain_target MODE, under the agent of d when d is not NULL. */
static bool fix_start(struct itest_fix *f, const char *mode,
		      const struct itest_daemon *d)
{
	return itest_fix_start(f, fixture, mode, d ? d->sock : NULL);
}

/*
 * The non-inlined functions of thread t of doc, ";"-joined ("" without a
 * stack); *nframes gets how many.
 */
static void functions(cJSON *doc, cJSON *t, char *buf, size_t size,
		      int *nframes)
{
	cJSON *g = NULL, *frames, *f;
	cJSON *id = t ? cJSON_GetObjectItem(t, "group") : NULL;
	size_t len = 0;

	buf[0] = '\0';
	*nframes = 0;
	if (cJSON_IsNumber(id))
		g = cJSON_GetArrayItem(cJSON_GetObjectItem(doc, "groups"),
				       id->valueint);
	frames = g ? cJSON_GetObjectItem(g, "frames") : NULL;
	cJSON_ArrayForEach(f, frames)
	{
		cJSON *fn = cJSON_GetObjectItem(f, "function");

		if (cJSON_IsTrue(cJSON_GetObjectItem(f, "inlined")))
			continue;
		(*nframes)++;
		if (len < size)
			len += (size_t)snprintf(
				buf + len, size - len, "%s;",
				cJSON_IsString(fn) ? fn->valuestring : "??");
	}
}

/* The "truncated" of thread t, or "none". */
static const char *truncated(cJSON *t)
{
	cJSON *tr = t ? cJSON_GetObjectItem(t, "truncated") : NULL;

	return cJSON_IsString(tr) ? tr->valuestring : "none";
}

/* The "method" of thread t, or "?". */
static const char *method(cJSON *t)
{
	cJSON *m = t ? cJSON_GetObjectItem(t, "method") : NULL;

	return cJSON_IsString(m) ? m->valuestring : "?";
}

/*
 * eu-stack's functions for thread tid of pid (its "TID n:" block, each
 * "#k 0x... name - module" line), ";"-joined as functions() has them,
 * less the agent's interposers (pause() and the like in
 * libstackwatch-agent.so, which stackwatch leaves out as its own: a
 * build that makes them tail calls has no frame of theirs anyway).
 * args: more options ("-n 0"). False when eu-stack gave nothing for it.
 */
static bool eu_functions(pid_t pid, pid_t tid, const char *args, char *buf,
			 size_t size)
{
	static char out[1 << 20];
	char cmd[256], head[32];
	const char *p;
	size_t len = 0;

	buf[0] = '\0';
	snprintf(cmd, sizeof(cmd), "eu-stack -m %s -p %d 2>/dev/null", args,
		 (int)pid);
	itest_run_capture(cmd, out, sizeof(out));
	snprintf(head, sizeof(head), "TID %d:\n", (int)tid);
	p = strstr(out, head);
	if (!p)
		return false;
	p += strlen(head);
	while (*p == '#') {
		const char *e = strchr(p, '\n'), *fn, *mod = NULL;
		size_t fl;

		if (!e)
			break;
		fn = p + 1 + strspn(p + 1, "0123456789");
		fn += strspn(fn, " ");
		fn += strcspn(fn, " \n"); /* the address */
		fn += strspn(fn, " ");
		/* The module follows the last " - ". */
		for (const char *q = fn; q + 3 <= e; q++)
			if (memcmp(q, " - ", 3) == 0)
				mod = q;
		fl = strcspn(fn, "@\n"); /* less a version (@@GLIBC_2.3.2) */
		if (mod && (size_t)(mod - fn) < fl)
			fl = (size_t)(mod - fn);
		while (fl && isspace((unsigned char)fn[fl - 1]))
			fl--;
		if (mod && (size_t)(e - mod) > 22 &&
		    memcmp(e - 22, "libstackwatch-agent.so", 22) == 0) {
			p = e + 1;
			continue;
		}
		if (len < size)
			len += (size_t)snprintf(buf + len, size - len, "%.*s;",
						(int)(fl ? fl : 2),
						fl ? fn : "??");
		p = e + 1;
	}
	return len > 0;
}

/* The tid of the thread called name in doc, or 0. */
static pid_t tid_of(cJSON *doc, const char *name)
{
	cJSON *t = itest_thread_named(doc, name);
	cJSON *tid = t ? cJSON_GetObjectItem(t, "tid") : NULL;

	return cJSON_IsNumber(tid) ? (pid_t)tid->valueint : 0;
}

/* What the altstack threads must show, past their handler's frames. */
#define ALT_HANDLER "pause;plain_on_altstack;"
#define SPIN_HANDLER "plain_spin_on_altstack;"
#define ALT_REST "pause;plain_interrupted;plain_alt_main;start_thread;"

/* Whether fns runs from the handler on into the frames it interrupted. */
static bool alt_whole(const char *fns, const char *handler)
{
	const char *h = strstr(fns, handler);

	return h && strstr(h, ALT_REST) != NULL;
}

/*
 * One read of the altstack threads (doc, by how): their stacks go on
 * past the alternate stack, are not said to be cut, and the sleeper's
 * is eu-stack's (the spinner's moves: it is not compared).
 */
static void check_alt(cJSON *doc, pid_t pid, const char *how)
{
	char fns[FNS_SIZE], eu[FNS_SIZE];
	cJSON *t = doc ? itest_thread_named(doc, "altspin") : NULL;
	int n;

	functions(doc, t, fns, sizeof(fns), &n);
	TAP_OK(alt_whole(fns, SPIN_HANDLER) &&
		       strcmp(truncated(t), "none") == 0,
	       "%s (%s): a handler spinning on the alternate stack, then "
	       "the frames it interrupted (%d: %s; truncated %s)",
	       how, method(t), n, fns, truncated(t));
	t = doc ? itest_thread_named(doc, "altstack") : NULL;
	functions(doc, t, fns, sizeof(fns), &n);
	TAP_OK(alt_whole(fns, ALT_HANDLER) && strcmp(truncated(t), "none") == 0,
	       "%s (%s): the handler asleep on the alternate stack, then the "
	       "frames it interrupted (%d: %s; truncated %s)",
	       how, method(t), n, fns, truncated(t));
	if (!have_eu)
		return;
	if (eu_functions(pid, tid_of(doc, "altstack"), "", eu, sizeof(eu)))
		TAP_OK(strcmp(eu, fns) == 0, "%s: as eu-stack has it (%s)", how,
		       eu);
	else
		TAP_OK(0, "%s: eu-stack shows the thread", how);
}

/*
 * The daemon's dump of pid. A first dump on a busy machine may stop
 * symbolizing at its time budget (symbols_partial: frames without
 * names); the symbols are cached by the next, so it is asked again.
 */
static cJSON *daemon_stacks(const struct itest_daemon *d, pid_t pid,
			    const char *more, int *status)
{
	char target[160];
	cJSON *doc = NULL;

	snprintf(target, sizeof(target),
		 "/api/v1/stacks?pid=%d&timeout_ms=5000%s", (int)pid, more);
	for (int i = 0; i < 10; i++) {
		cJSON_Delete(doc);
		doc = itest_get_json(d, target, status);
		if (!doc ||
		    !cJSON_IsTrue(cJSON_GetObjectItem(doc, "symbols_partial")))
			break;
		itest_sleep_ms(100);
	}
	return doc;
}

static cJSON *local_stacks(pid_t pid, const char *more, int *status)
{
	static char out[1 << 21];
	char cmd[PATH_MAX + 160];

	snprintf(cmd, sizeof(cmd), "%s dump --local --format json %s %d", cli,
		 more, (int)pid);
	*status = itest_run_capture(cmd, out, sizeof(out));
	return cJSON_Parse(out);
}

/* No thread of pid is stopped or traced. */
static bool untouched(pid_t pid)
{
	char path[64], buf[2048];
	struct dirent *e;
	DIR *dir;
	int held = 0;

	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	dir = opendir(path);
	if (!dir)
		return false;
	while ((e = readdir(dir))) {
		char p[384];
		const char *s, *tr;
		FILE *f;
		size_t n;

		if (!isdigit((unsigned char)e->d_name[0]))
			continue;
		snprintf(p, sizeof(p), "%s/%s/status", path, e->d_name);
		f = fopen(p, "re");
		if (!f)
			continue;
		n = fread(buf, 1, sizeof(buf) - 1, f);
		fclose(f);
		buf[n] = '\0';
		s = strstr(buf, "\nState:\t");
		tr = strstr(buf, "\nTracerPid:\t");
		if ((s && (s[8] == 't' || s[8] == 'T')) ||
		    (tr && atol(tr + 12)))
			held++;
	}
	closedir(dir);
	return held == 0;
}

static void check_core(pid_t pid);

/*
 * The altstack thread through the daemon (d: with kernel reads where the
 * host has them; d_ptrace: without), by --local and from a core.
 */
static void test_altstack(const struct itest_daemon *d,
			  const struct itest_daemon *d_ptrace)
{
	struct itest_fix f;
	cJSON *doc;
	int status;

	if (!fix_start(&f, "altstack", NULL)) {
		TAP_OK(0, "plain_target altstack starts");
		itest_fix_stop(&f);
		return;
	}
	doc = daemon_stacks(d, f.pid, "", &status);
	TAP_OK(status == 200 && doc, "the daemon dumps it (%d)", status);
	check_alt(doc, f.pid, "the daemon");
	cJSON_Delete(doc);
	doc = daemon_stacks(d_ptrace, f.pid, "", &status);
	TAP_OK(status == 200 && doc &&
		       strcmp(method(itest_thread_named(doc, "altstack")),
			      "ptrace") == 0,
	       "a daemon without kernel reads ptraces it (%d)", status);
	check_alt(doc, f.pid, "the daemon, by ptrace");
	cJSON_Delete(doc);
	doc = local_stacks(f.pid, "", &status);
	TAP_OK(status == 0 && doc, "dump --local dumps it (%d)", status);
	check_alt(doc, f.pid, "dump --local");
	cJSON_Delete(doc);
	TAP_OK(untouched(f.pid), "afterwards no thread is stopped or traced");
	check_core(f.pid);
	TAP_OK(itest_fix_stop(&f), "the fixture's process group is gone");
}

/* The same thread from a core of the process (gcore), --core. */
static void check_core(pid_t pid)
{
	static char out[1 << 20];
	char dir[] = "/tmp/sw-whole-XXXXXX", cmd[PATH_MAX + 128], core[96];
	char fns[FNS_SIZE];
	cJSON *doc, *t, *threads;
	int status, n;
	bool found = false;

	if (system("command -v gcore >/dev/null 2>&1") != 0) {
		TAP_SKIP("gcore is not installed");
		return;
	}
#if defined(__SANITIZE_ADDRESS__)
	/* The fixtures are built so too: gcore writes no whole core of a
	 * process with ASan's terabytes of shadow (test_it_crash skips it
	 * too). */
	TAP_SKIP("gcore of a program built with AddressSanitizer");
	return;
#endif
	if (!mkdtemp(dir)) {
		TAP_OK(0, "a directory for the core");
		return;
	}
	snprintf(core, sizeof(core), "%s/core.%d", dir, (int)pid);
	snprintf(cmd, sizeof(cmd), "gcore -o %s/core %d >/dev/null 2>&1", dir,
		 (int)pid);
	(void)!system(cmd);
	snprintf(cmd, sizeof(cmd), "%s dump --core %s --format json", cli,
		 core);
	status = itest_run_capture(cmd, out, sizeof(out));
	doc = cJSON_Parse(out);
	/* A core names every thread after the process: found by its stack. */
	threads = doc ? cJSON_GetObjectItem(doc, "threads") : NULL;
	cJSON_ArrayForEach(t, threads)
	{
		functions(doc, t, fns, sizeof(fns), &n);
		if (strstr(fns, "plain_on_altstack")) {
			found = true;
			break;
		}
	}
	TAP_OK(status == 0 && found && alt_whole(fns, ALT_HANDLER),
	       "dump --core: the handler, then the frames it interrupted "
	       "(%d, %s)",
	       status, found ? fns : "no such thread");
	cJSON_Delete(doc);
	unlink(core);
	rmdir(dir);
}

/* The thread called name: its frames, those of the plain_deep. */
static int deep_frames(cJSON *doc, const char *name, int *ndeep, char *fns,
		       size_t size)
{
	int n;
	const char *p = fns;

	functions(doc, itest_thread_named(doc, name), fns, size, &n);
	*ndeep = 0;
	while ((p = strstr(p, "plain_deep;"))) {
		(*ndeep)++;
		p++;
	}
	return n;
}

/*
 * One dump of the deep fixture (doc, by how, asked for max frames: -1
 * the default): the deep thread cut where it must be and said so, the
 * parked ones whole and silent.
 */
static void check_deep(cJSON *doc, pid_t pid, const char *how, int max)
{
	static char fns[FNS_SIZE], eu[FNS_SIZE];
	cJSON *t = doc ? itest_thread_named(doc, "deep") : NULL;
	int ndeep, n = deep_frames(doc, "deep", &ndeep, fns, sizeof(fns));
	const char *tr = truncated(t);

	TAP_OK(strcmp(truncated(itest_thread_named(doc, "parked")), "none") ==
		       0,
	       "%s: a parked thread, whole, is not said to be cut", how);
	if (max < 0) {
		TAP_OK(strcmp(tr, "stack") == 0 && n < SW_DEEP_ALL,
		       "%s: the deep thread (%s) says its copy was cut: "
		       "\"stack\" (%s, %d frames)",
		       how, method(t), tr, n);
		return;
	}
	if (max > 0) {
		TAP_OK(strcmp(tr, "frames") == 0 && n == max,
		       "%s, %d frames asked: \"frames\" (%s, %d frames)", how,
		       max, tr, n);
		return;
	}
	TAP_OK(strcmp(tr, "none") == 0 && ndeep == 301 &&
		       strstr(fns, "plain_deep;deep_main;start_thread;"),
	       "%s, all frames asked (%s): every one of them, down to "
	       "start_thread, not cut (%s, %d frames, %d plain_deep)",
	       how, method(t), tr, n, ndeep);
	if (!have_eu)
		return;
	TAP_OK(eu_functions(pid, tid_of(doc, "deep"), "-n 0", eu, sizeof(eu)) &&
		       strcmp(eu, fns) == 0,
	       "%s: the deep thread as eu-stack -n 0 has it", how);
}

/* The deep fixture through the daemon and --local, at every depth. */
static void test_deep(const struct itest_daemon *d)
{
	static char out[1 << 21];
	char cmd[PATH_MAX + 160], target[96];
	static const char *const bad[] = { "-1", "4097", "x", "", "1e3" };
	struct http_response r;
	struct itest_fix f;
	cJSON *doc;
	int status;

	if (!fix_start(&f, "deep", NULL)) {
		TAP_OK(0, "plain_target deep starts");
		itest_fix_stop(&f);
		return;
	}
	doc = daemon_stacks(d, f.pid, "", &status);
	check_deep(doc, f.pid, "the daemon", -1);
	cJSON_Delete(doc);
	doc = daemon_stacks(d, f.pid, "&max_frames=0", &status);
	check_deep(doc, f.pid, "the daemon", 0);
	cJSON_Delete(doc);
	doc = daemon_stacks(d, f.pid, "&max_frames=10", &status);
	check_deep(doc, f.pid, "the daemon", 10);
	cJSON_Delete(doc);
	doc = local_stacks(f.pid, "", &status);
	check_deep(doc, f.pid, "dump --local", -1);
	cJSON_Delete(doc);
	doc = local_stacks(f.pid, "--max-frames 0", &status);
	check_deep(doc, f.pid, "dump --local", 0);
	cJSON_Delete(doc);
	doc = local_stacks(f.pid, "--max-frames=10", &status);
	check_deep(doc, f.pid, "dump --local", 10);
	cJSON_Delete(doc);
	snprintf(cmd, sizeof(cmd), "%s dump --local --max-frames 10 %d", cli,
		 (int)f.pid);
	TAP_OK(itest_run_capture(cmd, out, sizeof(out)) == 0 &&
		       strstr(out, "\n#9 ") &&
		       strstr(out, "\n... (more frames not captured)\n"),
	       "the text of --max-frames 10: its frames, then a line that "
	       "says more were not captured");
	snprintf(cmd, sizeof(cmd), "%s --url %s dump %d", cli, d->url,
		 (int)f.pid);
	TAP_OK(itest_run_capture(cmd, out, sizeof(out)) == 0 &&
		       strstr(out, "\n... (stack copy cut short"),
	       "the daemon's text says the copy was cut short");
	snprintf(cmd, sizeof(cmd),
		 "%s --url %s dump --max-frames 0 --format json %d", cli,
		 d->url, (int)f.pid);
	status = itest_run_capture(cmd, out, sizeof(out));
	TAP_OK(status == 0 && !strstr(out, "\"truncated\""),
	       "dump --max-frames 0 through the daemon: nothing cut (%d)",
	       status);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(target, sizeof(target),
			 "/api/v1/stacks?pid=%d&max_frames=%s", (int)f.pid,
			 bad[i]);
		memset(&r, 0, sizeof(r));
		status = itest_get(d, target, &r) == 0 ? (int)r.status : -1;
		TAP_OK(status == 400 && strstr(r.body, "max_frames must be"),
		       "max_frames=%s: 400 and why (%d)", bad[i], status);
		http_response_release(&r);
		snprintf(cmd, sizeof(cmd),
			 "%s dump --local --max-frames '%s' %d 2>/dev/null",
			 cli, bad[i], (int)f.pid);
		TAP_OK(itest_run_capture(cmd, out, sizeof(out)) == 2,
		       "dump --max-frames '%s': a usage error", bad[i]);
	}
	TAP_OK(untouched(f.pid), "afterwards no thread is stopped or traced");
	TAP_OK(itest_fix_stop(&f), "the fixture's process group is gone");
}

/*
 * Dumps of another depth are dumps too: at most --max-dump-rate (5 for
 * dp) a second, however fast they are asked for. Four, one after the
 * other, take at least 3/5 s: the promised rate, a lower bound only.
 */
static void test_rate(const struct itest_daemon *d)
{
	struct itest_fix f;
	long start, took;
	int ok = 0, status;

	if (!fix_start(&f, "2", NULL)) {
		TAP_OK(0, "plain_target 2 starts");
		itest_fix_stop(&f);
		return;
	}
	start = itest_now_ms();
	for (int i = 0; i < 4; i++) {
		cJSON *doc = daemon_stacks(d, f.pid, "&max_frames=0", &status);

		ok += status == 200 && doc;
		cJSON_Delete(doc);
	}
	took = itest_now_ms() - start;
	TAP_OK(ok == 4 && took >= 600,
	       "four dumps with max_frames, --max-dump-rate 5: all answered, "
	       "no sooner than the rate allows (%d, %ld ms)",
	       ok, took);
	TAP_OK(itest_fix_stop(&f), "the fixture's process group is gone");
}

/*
 * Under the agent: the threads its handler reads hold what their slot
 * holds (256), cut shorter when asked; the altstack thread is whole
 * whatever read it.
 */
static void test_agent(const struct itest_daemon *d)
{
	char fns[FNS_SIZE];
	struct itest_fix f;
	cJSON *doc, *t, *threads;
	int status, n;
	bool cut = true, some = false;

	if (!fix_start(&f, "altstack", d) ||
	    !itest_wait_registered(d, f.pid, 10000)) {
		TAP_OK(0, "plain_target altstack starts under the agent");
		itest_fix_stop(&f);
		return;
	}
	doc = daemon_stacks(d, f.pid, "", &status);
	TAP_OK(status == 200 && doc &&
		       strcmp(cJSON_GetObjectItem(doc, "method")->valuestring,
			      "agent") == 0,
	       "an agent's process is dumped (%d)", status);
	check_alt(doc, f.pid, "under the agent");
	cJSON_Delete(doc);
	doc = daemon_stacks(d, f.pid, "&max_frames=2", &status);
	threads = doc ? cJSON_GetObjectItem(doc, "threads") : NULL;
	cJSON_ArrayForEach(t, threads)
	{
		if (!cJSON_IsNumber(cJSON_GetObjectItem(t, "group")))
			continue;
		functions(doc, t, fns, sizeof(fns), &n);
		some = true;
		if (n > 2 || strcmp(truncated(t), "frames") != 0) {
			TAP_NOTE("%s (%s): %d frames, truncated %s",
				 cJSON_GetObjectItem(t, "name")->valuestring,
				 method(t), n, truncated(t));
			cut = false;
		}
	}
	TAP_OK(status == 200 && some && cut,
	       "max_frames=2: every thread, whatever read it, has 2 frames "
	       "and says \"frames\"");
	cJSON_Delete(doc);
	TAP_OK(itest_fix_stop(&f), "the fixture's process group is gone");
}

/*
 * The deep thread under the agent, with no kernel reads (dp): its
 * handler's slot holds 256 frames, so all of them asked gives those and
 * says "frames".
 */
static void test_agent_deep(const struct itest_daemon *d)
{
	char fns[FNS_SIZE];
	struct itest_fix f;
	cJSON *doc, *t;
	int status, n;

	if (!fix_start(&f, "deep", d) ||
	    !itest_wait_registered(d, f.pid, 10000)) {
		TAP_OK(0, "plain_target deep starts under the agent");
		itest_fix_stop(&f);
		return;
	}
	doc = daemon_stacks(d, f.pid, "&max_frames=0", &status);
	t = doc ? itest_thread_named(doc, "deep") : NULL;
	functions(doc, t, fns, sizeof(fns), &n);
	TAP_OK(status == 200 && strcmp(method(t), "signal") == 0 &&
		       n == SW_SLOT_FRAMES &&
		       strcmp(truncated(t), "frames") == 0,
	       "by the agent's handler, all frames asked: the %d its slot "
	       "holds, \"frames\" (%d, %s, %d frames, %s)",
	       SW_SLOT_FRAMES, status, method(t), n, truncated(t));
	cJSON_Delete(doc);
	TAP_OK(itest_fix_stop(&f), "the fixture's process group is gone");
}

int main(void)
{
	static const char *const no_kernel[] = {
		"--sample-interval", "0", "--no-kernel-reads",
		"--max-dump-rate",   "5", NULL
	};
	struct itest_daemon d, dp;

	if (geteuid() != 0) {
		TAP_SKIP("needs root");
		return tap_done();
	}
	snprintf(fixture, sizeof(fixture), "%s/fixtures/plain_target",
		 itest_target_build());
	snprintf(cli, sizeof(cli), "%s/stackwatch", itest_build());
	have_eu = system("command -v eu-stack >/dev/null 2>&1") == 0;
	if (!have_eu)
		TAP_NOTE("eu-stack is not installed: no comparison with it");
	if (itest_daemon_start(&d) != 0) {
		TAP_OK(0, "daemon starts");
		return tap_done();
	}
	if (itest_daemon_start_args(&dp, no_kernel) != 0) {
		TAP_OK(0, "daemon without kernel reads starts");
		itest_daemon_stop(&d);
		itest_daemon_cleanup(&d);
		return tap_done();
	}
	test_altstack(&d, &dp);
	test_deep(&d);
	test_rate(&dp);
	test_agent_deep(&dp);
	test_agent(&d);
	TAP_OK(itest_daemon_stop(&dp) == 0, "the daemon without kernel reads "
					    "stops cleanly");
	itest_daemon_cleanup(&dp);
	TAP_OK(itest_daemon_stop(&d) == 0, "the daemon stops cleanly");
	itest_daemon_cleanup(&d);
	return tap_done();
}
