/*
 * test_it_crash.c - the vDSO's frames and the cores of crashes, end to
 * end. A thread of plain_target calls clock_gettime() in a tight loop, so
 * that it is caught inside the vDSO: its frame there must be named
 * (clock_gettime) when the real daemon dumps the process with the agent
 * and without it (its snapshot), when the CLI takes its own snapshot
 * (--local), and in a core of a crash. The crash is a real SIGSEGV at
 * address 0x10 in a thread of its own, dumped by the kernel: the core's
 * text must open with the signal, its code, the address and that thread,
 * the JSON must have "signal" and "crashed_tid"; a core taken by gcore of
 * a running process has neither. A copy cut after 5 MB must be said to be
 * cut short and exit 6; one cut inside its notes, exit 1. Needs root (the
 * daemon's snapshot of a process of another session).
 */
#define _GNU_SOURCE
#include <limits.h>
#include <sys/resource.h>

#include "itest.h"
#include "tap.h"

/* Built with AddressSanitizer: the fixtures are too. */
#if defined(__SANITIZE_ADDRESS__)
static const bool sanitized = true;
#else
static const bool sanitized = false;
#endif

static char fixture[PATH_MAX], cli[PATH_MAX], dir[64];

/* Tries at most this many dumps for a thread caught in the vDSO. */
#define VDSO_TRIES 40

/* Whether a module's name is the vDSO's, as each way of reading has it. */
static bool vdso_name(const char *m)
{
	return m && (strncmp(m, "[vdso", 5) == 0 ||
		     strcmp(m, "linux-vdso.so.1") == 0);
}

/* The frames of thread t: those of its group. */
static cJSON *frames_of(cJSON *doc, cJSON *t)
{
	cJSON *g, *id = cJSON_GetObjectItem(t, "group");

	if (!cJSON_IsNumber(id))
		return NULL;
	cJSON_ArrayForEach(g, cJSON_GetObjectItem(doc, "groups"))
	{
		cJSON *gid = cJSON_GetObjectItem(g, "id");

		if (cJSON_IsNumber(gid) && gid->valueint == id->valueint)
			return cJSON_GetObjectItem(g, "frames");
	}
	return NULL;
}

/*
 * The function of the first frame of thread tid (any thread when tid is
 * 0) that lies in the vDSO, into fn ("" when unnamed); false when no
 * thread of doc is in the vDSO.
 */
static bool vdso_frame(cJSON *doc, pid_t tid, char *fn, size_t size)
{
	cJSON *t, *f;

	cJSON_ArrayForEach(t, cJSON_GetObjectItem(doc, "threads"))
	{
		cJSON *id = cJSON_GetObjectItem(t, "tid");

		if (tid && (!cJSON_IsNumber(id) || id->valueint != tid))
			continue;
		cJSON_ArrayForEach(f, frames_of(doc, t))
		{
			cJSON *m = cJSON_GetObjectItem(f, "module");
			cJSON *name = cJSON_GetObjectItem(f, "function");

			if (!cJSON_IsString(m) || !vdso_name(m->valuestring))
				continue;
			snprintf(fn, size, "%s",
				 cJSON_IsString(name) ? name->valuestring : "");
			return true;
		}
	}
	return false;
}

/* The tid of the thread named name in /proc/pid/task; 0: none. */
static pid_t tid_named(pid_t pid, const char *name)
{
	pid_t tids[64];
	int n = itest_tids(pid, tids, 64);

	for (int i = 0; i < n; i++) {
		char path[96], comm[64] = "";
		FILE *f;

		snprintf(path, sizeof(path), "/proc/%d/task/%d/comm", (int)pid,
			 (int)tids[i]);
		f = fopen(path, "re");
		if (!f)
			continue;
		if (fgets(comm, sizeof(comm), f))
			comm[strcspn(comm, "\n")] = '\0';
		fclose(f);
		if (strcmp(comm, name) == 0)
			return tids[i];
	}
	return 0;
}

/*
 * Dumps pid (through d, or with --local when d is NULL) until its
 * "clocker" thread is caught inside the vDSO, and checks that frame is
 * named clock_gettime.
 */
static void check_live(const struct itest_daemon *d, pid_t pid,
		       const char *what)
{
	static char out[1 << 20];
	char fn[256] = "", cmd[PATH_MAX + 64], target[96];
	pid_t tid = tid_named(pid, "clocker");
	bool caught = false;
	int i, status;

	for (i = 0; i < VDSO_TRIES && !caught && tid; i++) {
		cJSON *doc;

		if (d) {
			snprintf(target, sizeof(target),
				 "/api/v1/stacks?pid=%d&timeout_ms=5000",
				 (int)pid);
			doc = itest_get_json(d, target, &status);
		} else {
			snprintf(cmd, sizeof(cmd),
				 "%s dump --local %d --format json", cli,
				 (int)pid);
			itest_run_capture(cmd, out, sizeof(out));
			doc = cJSON_Parse(out);
		}
		caught = doc && vdso_frame(doc, tid, fn, sizeof(fn));
		cJSON_Delete(doc);
	}
	TAP_OK(caught, "%s: the clocker (%d) caught in the vDSO (%d dumps)",
	       what, (int)tid, i);
	TAP_OK(caught && strstr(fn, "clock_gettime"),
	       "%s: its frame in the vDSO is named: '%s'", what, fn);
}

/*
 * Starts plain_target clock (with the agent when d), its stdin held open
 * in *in (it runs until that closes), and waits for "ready".
 */
static pid_t start_clock(const struct itest_daemon *d, int *out, int *in)
{
	char *argv[] = { fixture, (char *)"clock", NULL };
	pid_t pid;
	int p[2], q[2];

	if (d) {
		pid = itest_spawn_io(d, argv, out, in);
		if (pid > 0)
			itest_wait_line(*out, "ready");
		return pid;
	}
	if (pipe(p) < 0 || pipe(q) < 0)
		return -1;
	pid = fork();
	if (pid == 0) {
		dup2(q[0], 0);
		dup2(p[1], 1);
		close(p[0]);
		close(p[1]);
		close(q[0]);
		close(q[1]);
		execv(fixture, argv);
		_exit(127);
	}
	close(p[1]);
	close(q[0]);
	*out = p[0];
	*in = q[1];
	if (pid > 0)
		itest_wait_line(*out, "ready");
	return pid;
}

static void stop(pid_t pid, int out, int in)
{
	close(in);
	close(out);
	itest_kill(pid);
	TAP_OK(!itest_alive(pid), "the fixture %d is gone", (int)pid);
}

static void test_live(const struct itest_daemon *d)
{
	char cmd[PATH_MAX + 128], out[4096];
	pid_t pid;
	int fd = -1, in = -1, st;

	/* With the agent: its handler's unwind, its module list. */
	pid = start_clock(d, &fd, &in);
	TAP_OK(pid > 0 && itest_wait_registered(d, pid, 10000),
	       "plain_target clock runs under the agent");
	check_live(d, pid, "agent");
	stop(pid, fd, in);

	/* Without: the daemon's snapshot, the CLI's, and gcore's core. */
	pid = start_clock(NULL, &fd, &in);
	TAP_OK(pid > 0, "plain_target clock runs without the agent");
	check_live(d, pid, "the daemon's snapshot");
	check_live(NULL, pid, "dump --local");
	if (system("command -v gcore >/dev/null 2>&1") != 0) {
		TAP_SKIP("gcore is not installed");
	} else if (sanitized) {
		/* gcore writes no whole core of a process with ASan's
		 * terabytes of shadow mappings (integration-core_files
		 * skips it too). */
		TAP_SKIP("gcore of a program built with AddressSanitizer");
	} else {
		cJSON *doc;
		static char json[1 << 20];

		snprintf(cmd, sizeof(cmd),
			 "gcore -o %s/gcore %d >/dev/null 2>&1", dir, (int)pid);
		st = system(cmd);
		TAP_OK(st == 0, "gcore made a core of the running fixture");
		snprintf(cmd, sizeof(cmd),
			 "%s dump --core %s/gcore.%d --format json", cli, dir,
			 (int)pid);
		st = itest_run_capture(cmd, json, sizeof(json));
		doc = cJSON_Parse(json);
		TAP_OK(st == 0 && doc &&
			       cJSON_IsNull(
				       cJSON_GetObjectItem(doc, "signal")) &&
			       cJSON_IsNull(
				       cJSON_GetObjectItem(doc, "crashed_tid")),
		       "a core of a running process: \"signal\" and "
		       "\"crashed_tid\" are null (status %d)",
		       st);
		cJSON_Delete(doc);
		snprintf(cmd, sizeof(cmd), "%s dump --core %s/gcore.%d", cli,
			 dir, (int)pid);
		itest_run_capture(cmd, out, sizeof(out));
		TAP_OK(strncmp(out, "Process ", 8) == 0 &&
			       !strstr(out, "Program terminated"),
		       "a core of a running process: no signal line");
	}
	stop(pid, fd, in);
}

/*
 * Crashes plain_target segv in sub (a directory of dir), with the
 * kernel's core there. Returns the crash's pid, 0 on failure.
 */
static pid_t crash(const char *sub, char *core, size_t size)
{
	char path[128];
	pid_t c;
	int st;

	snprintf(path, sizeof(path), "%s/%s", dir, sub);
	if (mkdir(path, 0700) != 0)
		return 0;
	c = fork();
	if (c == 0) {
		struct rlimit rl = { RLIM_INFINITY, RLIM_INFINITY };
		int null = open("/dev/null", O_RDWR);

		dup2(null, 0);
		dup2(null, 1);
		dup2(null, 2);
		/* Ours alone: the limit is the child's, core_pattern kept. */
		setrlimit(RLIMIT_CORE, &rl);
		if (chdir(path) != 0)
			_exit(126);
		execl(fixture, fixture, "segv", (char *)NULL);
		_exit(127);
	}
	waitpid(c, &st, 0);
	if (!WIFSIGNALED(st) || WTERMSIG(st) != SIGSEGV || !WCOREDUMP(st))
		return 0;
	{
		DIR *dd = opendir(path);
		struct dirent *e;

		core[0] = '\0';
		while (dd && (e = readdir(dd)))
			if (e->d_name[0] != '.')
				snprintf(core, size, "%s/%s", path, e->d_name);
		if (dd)
			closedir(dd);
	}
	return core[0] ? c : 0;
}

/* The tid of the thread whose frames hold function fn; 0: none. */
static pid_t thread_in(cJSON *doc, const char *fn)
{
	cJSON *t, *f;

	cJSON_ArrayForEach(t, cJSON_GetObjectItem(doc, "threads"))
	{
		cJSON_ArrayForEach(f, frames_of(doc, t))
		{
			cJSON *name = cJSON_GetObjectItem(f, "function");

			if (cJSON_IsString(name) &&
			    strcmp(name->valuestring, fn) == 0)
				return cJSON_GetObjectItem(t, "tid")->valueint;
		}
	}
	return 0;
}

static void check_crash_core(const char *core, pid_t pid)
{
	static char json[1 << 20], text[1 << 20];
	char cmd[PATH_MAX + 256], first[256] = "", second[256] = "", want[128];
	cJSON *doc, *sig, *crashed;
	pid_t segv;
	int st;

	snprintf(cmd, sizeof(cmd), "%s dump --core %s --format json", cli,
		 core);
	st = itest_run_capture(cmd, json, sizeof(json));
	doc = cJSON_Parse(json);
	TAP_OK(st == 0 && doc, "dump --core of the crash reads it (%d)", st);
	if (!doc)
		return;
	sig = cJSON_GetObjectItem(doc, "signal");
	crashed = cJSON_GetObjectItem(doc, "crashed_tid");
	segv = thread_in(doc, "plain_segv");
	TAP_OK(cJSON_IsNumber(cJSON_GetObjectItem(sig, "number")) &&
		       cJSON_GetObjectItem(sig, "number")->valueint ==
			       SIGSEGV &&
		       cJSON_IsString(cJSON_GetObjectItem(sig, "name")) &&
		       strcmp(cJSON_GetObjectItem(sig, "name")->valuestring,
			      "SIGSEGV") == 0 &&
		       cJSON_IsNumber(cJSON_GetObjectItem(sig, "code")) &&
		       cJSON_GetObjectItem(sig, "code")->valueint ==
			       SEGV_MAPERR &&
		       cJSON_IsString(cJSON_GetObjectItem(sig, "code_name")) &&
		       strcmp(cJSON_GetObjectItem(sig, "code_name")
				      ->valuestring,
			      "SEGV_MAPERR") == 0 &&
		       cJSON_IsString(cJSON_GetObjectItem(sig, "address")) &&
		       strcmp(cJSON_GetObjectItem(sig, "address")->valuestring,
			      "0x10") == 0,
	       "JSON \"signal\": SIGSEGV (11), SEGV_MAPERR, address 0x10");
	TAP_OK(segv > 0 && segv != pid && cJSON_IsNumber(crashed) &&
		       crashed->valueint == segv,
	       "JSON \"crashed_tid\" %d is the thread in plain_segv (%d)",
	       cJSON_IsNumber(crashed) ? crashed->valueint : -1, (int)segv);
	cJSON_Delete(doc);

	snprintf(cmd, sizeof(cmd), "%s dump --core %s", cli, core);
	st = itest_run_capture(cmd, text, sizeof(text));
	sscanf(text, "%255[^\n]\n%255[^\n]", first, second);
	snprintf(want, sizeof(want),
		 "Program terminated with signal SIGSEGV, Segmentation fault "
		 "(SEGV_MAPERR, address 0x10), in thread %d.",
		 (int)segv);
	TAP_OK(st == 0 && strncmp(first, "Process ", 8) == 0 &&
		       strcmp(second, want) == 0,
	       "the text: 'Process ...' then '%s' (got '%s')", want, second);
}

/* dump --core of the first n bytes of core: its exit status, stderr. */
static int cut_dump(const char *core, long n, const char *format, char *err,
		    size_t size, char *out, size_t osize)
{
	char cut[128], cmd[PATH_MAX + 512];
	int st;

	snprintf(cut, sizeof(cut), "%s/cut-%ld", dir, n);
	snprintf(cmd, sizeof(cmd), "head -c %ld %s > %s", n, core, cut);
	if (system(cmd) != 0)
		return -1;
	snprintf(cmd, sizeof(cmd),
		 "%s dump --core %s --format %s 2>%s/err; echo \"rc=$?\"", cli,
		 cut, format, dir);
	itest_run_capture(cmd, out, osize);
	st = strstr(out, "rc=") ? atoi(strrchr(out, '=') + 1) : -1;
	snprintf(cmd, sizeof(cmd), "cat %s/err", dir);
	itest_run_capture(cmd, err, size);
	return st;
}

static void check_cut(const char *core)
{
	static char out[1 << 20];
	char err[4096];
	cJSON *doc, *cut;
	char *end;
	int st;

	st = cut_dump(core, 5000000, "json", err, sizeof(err), out,
		      sizeof(out));
	TAP_OK(st == 6 && strstr(err, "cut short"),
	       "a core cut after 5 MB: exit 6, stderr says it is cut short "
	       "(%d: %s)",
	       st, err);
	end = strstr(out, "rc=");
	if (end)
		*end = '\0';
	doc = cJSON_Parse(out);
	cut = cJSON_GetObjectItem(doc, "core_truncated");
	TAP_OK(cJSON_IsNumber(cJSON_GetObjectItem(cut, "file_size")) &&
		       cJSON_GetObjectItem(cut, "file_size")->valuedouble ==
			       5000000 &&
		       cJSON_IsNumber(cJSON_GetObjectItem(cut, "needed")) &&
		       cJSON_GetObjectItem(cut, "needed")->valuedouble >
			       5000000,
	       "its JSON: \"core_truncated\" with file_size 5000000 and more "
	       "needed");
	TAP_OK(cJSON_IsNumber(cJSON_GetObjectItem(
		       cJSON_GetObjectItem(doc, "signal"), "number")),
	       "its JSON still has the signal (the notes are whole)");
	cJSON_Delete(doc);
	st = cut_dump(core, 5000000, "text", err, sizeof(err), out,
		      sizeof(out));
	TAP_OK(st == 6 && strstr(out, "(the core file is cut short: it has "
				      "5000000 bytes of the "),
	       "its text says so too (%d)", st);
	st = cut_dump(core, 3000, "text", err, sizeof(err), out, sizeof(out));
	TAP_OK(st == 1 && strstr(err, "cut short"),
	       "a core cut inside its notes: exit 1, said to be cut short "
	       "(%d: %s)",
	       st, err);
}

static void test_crash(void)
{
	char core[PATH_MAX - 64], out[4096], sub[32], fn[256] = "";
	pid_t pid = 0;
	bool caught = false;
	int i;

#if defined(__SANITIZE_ADDRESS__)
	TAP_SKIP("cores of a program built with AddressSanitizer");
	return;
#endif
	itest_run_capture("cat /proc/sys/kernel/core_pattern", out,
			  sizeof(out));
	if (out[0] == '|') {
		TAP_SKIP("core_pattern pipes cores to %s", out);
		return;
	}
	/* The clocker is mostly, not always, inside the vDSO: a few tries. */
	for (i = 0; i < 6 && !caught; i++) {
		cJSON *doc;
		static char json[1 << 20];
		char cmd[2 * PATH_MAX + 64];

		snprintf(sub, sizeof(sub), "crash%d", i);
		pid = crash(sub, core, sizeof(core));
		if (!pid)
			break;
		snprintf(cmd, sizeof(cmd), "%s dump --core %s --format json",
			 cli, core);
		itest_run_capture(cmd, json, sizeof(json));
		doc = cJSON_Parse(json);
		caught = doc && vdso_frame(doc, 0, fn, sizeof(fn));
		cJSON_Delete(doc);
	}
	TAP_OK(pid > 0, "plain_target segv died of SIGSEGV with a core");
	if (!pid)
		return;
	TAP_OK(caught && strstr(fn, "clock_gettime"),
	       "the crash's core: the clocker's frame in the vDSO is named "
	       "'%s' (%d cores)",
	       fn, i);
	check_crash_core(core, pid);
	check_cut(core);
}

int main(void)
{
	struct itest_daemon d;
	char cmd[128];

	if (geteuid() != 0) {
		TAP_SKIP("needs root");
		return tap_done();
	}
	snprintf(fixture, sizeof(fixture), "%s/fixtures/plain_target",
		 itest_target_build());
	snprintf(cli, sizeof(cli), "%s/stackwatch", itest_build());
	{
		char real[PATH_MAX];

		if (realpath(fixture, real))
			snprintf(fixture, sizeof(fixture), "%s", real);
		if (realpath(cli, real))
			snprintf(cli, sizeof(cli), "%s", real);
	}
	snprintf(dir, sizeof(dir), "/tmp/sw-crash-XXXXXX");
	if (!mkdtemp(dir)) {
		TAP_OK(0, "a temporary directory");
		return tap_done();
	}
	if (itest_daemon_start(&d) != 0) {
		TAP_OK(0, "daemon starts");
	} else {
		test_live(&d);
		itest_daemon_stop(&d);
		itest_daemon_cleanup(&d);
	}
	test_crash();
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	(void)!system(cmd);
	return tap_done();
}
