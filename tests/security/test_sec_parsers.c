/*
 * test_sec_parsers.c - what a target controls is parsed by processes
 * that can do nothing else (the parser workers, src/privsep/worker.c),
 * and a file that crashes or hangs one costs one request.
 *
 * - Each worker runs as another user than root with no capability,
 *   no_new_privs and a seccomp filter, and nothing it is denied is
 *   missing from /api/v1/status.
 * - A probe preloaded into the daemon (tests/fixtures/parser_probe.so.c)
 *   acts in the workers once they are sandboxed: open, ptrace,
 *   process_vm_readv, /proc/PID/mem, pidfd_getfd, bpf, perf_event_open,
 *   sockets, execve, kill, writes to stderr, executable memory and fork
 *   are all refused (EPERM).
 * - Programs with hostile DWARF, built by the test (tests/fixtures/
 *   mkbomb.sh) and run by nobody, dumped by nobody: 100,000 nested
 *   blocks, 1,500 nested inlined calls, a line table of 8 million rows,
 *   a string section with no end. Each answer comes back with function
 *   names and the reason the rest of its symbols are missing; the daemon
 *   stays up and no process of it holds more memory than its bound.
 * - A file that kills the worker reading it (SIGSEGV), and one that
 *   never lets it return, made so by the test hook
 *   $STACKWATCH_TEST_PARSER_FAULT: the request is answered partial with
 *   the reason, the file is refused from then on (no other worker dies
 *   on it), and root's dump of another process answers in its usual
 *   time while the hung one waits.
 * - The CLI run as root (dump --local) reads the crasher and two bombs in
 *   workers of its own: exit 0, the reason, the other frames named; and
 *   a core of the crasher (dump --core) the same.
 * - A perf map that kills its parser: the reads are answered, one worker
 *   died, the map is refused after.
 * - kill -9 of a worker: the next read works; another worker runs.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sectest.h"
#include "tap.h"

#define PARSER_RSS_MAX_KB (512 * 1024) /* PARSERS_RSS_MAX */
#define SERVICE_RSS_MAX_KB (256 * 1024)

static char dir[] = "/tmp/sw-parsers-XXXXXX";

/* A line "Key: value" of /proc/PID/status, as a number (-1: none). */
static long long status_num(pid_t pid, const char *key, int base)
{
	char path[64], line[256];
	size_t n = strlen(key);
	long long v = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	f = fopen(path, "r");
	while (f && fgets(line, sizeof(line), f))
		if (strncmp(line, key, n) == 0 && line[n] == ':')
			v = strtoll(line + n + 1, NULL, base);
	if (f)
		fclose(f);
	return v;
}

/* The pids of the parser workers /api/v1/status lists, at most max. */
static int parsers(const struct itest_daemon *d, pid_t *out, int max,
		   cJSON **doc)
{
	int status = 0, n = 0;
	cJSON *st = itest_get_json(d, "/api/v1/status", &status), *p;

	cJSON_ArrayForEach(p, cJSON_GetObjectItem(st, "processes"))
	{
		cJSON *r = cJSON_GetObjectItem(p, "role");
		cJSON *pid = cJSON_GetObjectItem(p, "pid");

		if (n < max && cJSON_IsString(r) &&
		    strcmp(r->valuestring, "parser") == 0 &&
		    cJSON_IsNumber(pid))
			out[n++] = (pid_t)pid->valuedouble;
	}
	if (doc)
		*doc = st;
	else
		cJSON_Delete(st);
	return n;
}

/* Builds the program with hostile DWARF of kind (size n) as dir/name. */
static bool build_bomb(const char *kind, long n, const char *name)
{
	char cmd[1024], out[512];

	snprintf(
		cmd, sizeof(cmd),
		"DWARF_BOMB=%s/fixtures/dwarf_bomb sh tests/fixtures/mkbomb.sh "
		"%s %ld %s/%s 2>&1",
		itest_target_build(), kind, n, dir, name);
	return itest_run_capture(cmd, out, sizeof(out)) == 0;
}

/* Starts dir/name as nobody, in a process group of its own. */
static pid_t run_nobody(const char *name)
{
	char path[256];
	pid_t pid;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	pid = fork();
	if (pid == 0) {
		setpgid(0, 0);
		if (sec_become(SEC_NOBODY, SEC_NOBODY, NULL, 0) < 0)
			_exit(126);
		execl(path, name, (char *)NULL);
		_exit(127);
	}
	if (pid > 0)
		setpgid(pid, pid);
	return pid;
}

/* The JSON of pid, dumped by nobody over d's TCP port. */
static cJSON *nobody_dump(const struct itest_daemon *d, pid_t pid, int *status)
{
	static struct sec_answer a;
	char target[96];

	snprintf(target, sizeof(target), "/api/v1/stacks?pid=%d", (int)pid);
	sec_get_as(SEC_NOBODY, SEC_NOBODY, NULL, 0, d->url, NULL, NULL, target,
		   &a);
	*status = a.status;
	return a.status == 200 ? cJSON_Parse(a.body) : NULL;
}

/* Whether some frame of doc's groups is function. */
static bool has_function(cJSON *doc, const char *function)
{
	cJSON *g, *f;

	cJSON_ArrayForEach(g, cJSON_GetObjectItem(doc, "groups"))
	{
		cJSON_ArrayForEach(f, cJSON_GetObjectItem(g, "frames"))
		{
			cJSON *fn = cJSON_GetObjectItem(f, "function");

			if (cJSON_IsString(fn) &&
			    strcmp(fn->valuestring, function) == 0)
				return true;
		}
	}
	return false;
}

/* The error doc's "symbols_errors" gives for module (by its name). */
static const char *symbols_error(cJSON *doc, const char *name)
{
	cJSON *e;

	cJSON_ArrayForEach(e, cJSON_GetObjectItem(doc, "symbols_errors"))
	{
		cJSON *m = cJSON_GetObjectItem(e, "module");
		cJSON *why = cJSON_GetObjectItem(e, "symbols_error");
		const char *base;

		if (!cJSON_IsString(m) || !cJSON_IsString(why))
			continue;
		base = strrchr(m->valuestring, '/');
		if (base && strcmp(base + 1, name) == 0)
			return why->valuestring;
	}
	return NULL;
}

/* Whether /healthz says ok. */
static bool get_ok(const struct itest_daemon *d)
{
	struct http_response r;
	bool ok;

	memset(&r, 0, sizeof(r));
	ok = itest_get(d, "/healthz", &r) == 0 && r.status == 200;
	http_response_release(&r);
	return ok;
}

/* Every parser and the service within their memory bounds. */
static void check_memory(const struct itest_daemon *d, const char *after)
{
	pid_t w[8];
	int n = parsers(d, w, 8, NULL);
	long long most = 0, svc = status_num(d->pid, "VmRSS", 10);

	for (int i = 0; i < n; i++) {
		long long kb = status_num(w[i], "VmRSS", 10);

		if (kb > most)
			most = kb;
	}
	TAP_OK(svc > 0 && svc < SERVICE_RSS_MAX_KB && most < PARSER_RSS_MAX_KB,
	       "after %s: the service holds %lld KB, the largest of %d "
	       "parsers %lld KB",
	       after, svc, n, most);
}

static void check_workers(const struct itest_daemon *d)
{
	pid_t w[8];
	cJSON *st = NULL, *p;
	int n = parsers(d, w, 8, &st);

	TAP_OK(n >= 1, "/api/v1/status lists the parser workers (%d)", n);
	for (int i = 0; i < n; i++) {
		long long caps = status_num(w[i], "CapEff", 16);
		long long nnp = status_num(w[i], "NoNewPrivs", 10);
		long long sec = status_num(w[i], "Seccomp", 10);
		long long uid = status_num(w[i], "Uid", 10);

		TAP_OK(caps == 0 && uid > 0,
		       "parser %d: no capability, not root (CapEff %llx, "
		       "uid %lld)",
		       (int)w[i], caps, uid);
		if (SEC_SANITIZED)
			continue;
		TAP_OK(nnp == 1 && sec == 2,
		       "parser %d: no_new_privs and a seccomp filter "
		       "(NoNewPrivs %lld, Seccomp %lld)",
		       (int)w[i], nnp, sec);
	}
	cJSON_ArrayForEach(p, cJSON_GetObjectItem(st, "processes"))
	{
		cJSON *r = cJSON_GetObjectItem(p, "role");

		if (cJSON_IsString(r) &&
		    strcmp(r->valuestring, "parser") == 0 && !SEC_SANITIZED)
			TAP_OK(cJSON_GetArraySize(
				       cJSON_GetObjectItem(p, "missing")) == 0,
			       "parser: nothing is missing in the status");
	}
	cJSON_Delete(st);
}

/*
 * What the probe found in a worker: the page of its memfd "sw-probe",
 * read through /proc/PID/fd (root may). "" when there is none.
 */
static void probe_report(pid_t pid, char *buf, size_t size)
{
	char path[64], link[128];

	buf[0] = '\0';
	for (int fd = 0; fd < 64; fd++) {
		ssize_t n;
		int f;

		snprintf(path, sizeof(path), "/proc/%d/fd/%d", (int)pid, fd);
		n = readlink(path, link, sizeof(link) - 1);
		if (n <= 0)
			continue;
		link[n] = '\0';
		if (!strstr(link, "sw-probe"))
			continue;
		f = open(path, O_RDONLY | O_CLOEXEC);
		n = f >= 0 ? read(f, buf, size - 1) : -1;
		if (f >= 0)
			close(f);
		buf[n > 0 ? n : 0] = '\0';
		return;
	}
}

static void check_probe(const struct itest_daemon *d)
{
	static const char *const tried[] = {
		"open",
		"openat",
		"open_proc_mem",
		"ptrace",
		"process_vm_readv",
		"pidfd_open",
		"pidfd_getfd",
		"bpf",
		"perf_event_open",
		"socket_inet",
		"socket_unix",
		"execve",
		"kill",
		"write_stderr",
		"mprotect_exec",
		"fork",
	};
	char report[4096];
	pid_t w[8];
	int n = parsers(d, w, 8, NULL);

	report[0] = '\0';
	for (long end = itest_now_ms() + 5000;
	     n > 0 && !strstr(report, "done ") && itest_now_ms() < end;) {
		probe_report(w[0], report, sizeof(report));
		itest_sleep_ms(20);
	}
	TAP_OK(strstr(report, "done 0") != NULL,
	       "the probe ran in parser %d once it was sandboxed",
	       n ? (int)w[0] : 0);
	for (size_t i = 0; i < sizeof(tried) / sizeof(tried[0]); i++) {
		char want[64];
		const char *at;
		int err = -1;

		snprintf(want, sizeof(want), "\n%s ", tried[i]);
		at = strncmp(report, want + 1, strlen(want + 1)) == 0
			     ? report - 1
			     : strstr(report, want);
		if (at)
			err = atoi(at + strlen(want));
		TAP_OK(err == EPERM, "a parser may not %s (errno %d)", tried[i],
		       err);
	}
}

/* One program with hostile DWARF, run and dumped by nobody. */
static void check_bomb(const struct itest_daemon *d, const char *kind, long n,
		       const char *reason)
{
	int status = 0;
	pid_t pid;
	cJSON *doc;
	const char *why;
	char what[64];

	snprintf(what, sizeof(what), "%s %ld", kind, n);
	if (!build_bomb(kind, n, kind)) {
		TAP_OK(0, "%s: the program builds", what);
		return;
	}
	pid = run_nobody(kind);
	TAP_OK(pid > 0 && sec_wait_comm(pid, kind), "%s: runs as nobody", what);
	itest_sleep_ms(100); /* in pause() */
	doc = nobody_dump(d, pid, &status);
	why = symbols_error(doc, kind);
	TAP_OK(status == 200 && has_function(doc, "bomb_wait") &&
		       has_function(doc, "main"),
	       "%s: nobody's dump answers 200 with its functions (%d)", what,
	       status);
	TAP_OK(why && strstr(why, reason) &&
		       cJSON_IsTrue(
			       cJSON_GetObjectItem(doc, "symbols_partial")),
	       "%s: partial, and says why (%s)", what, why ? why : "nothing");
	cJSON_Delete(doc);
	TAP_OK(get_ok(d), "%s: the daemon is up", what);
	check_memory(d, what);
	itest_kill(pid);
}

/*
 * A file that kills its parser: the first request is answered (the
 * unwinder or the symbolizer met it; the other works on without it)
 * partial with the reason, and the file is refused after: no parser
 * dies on it again.
 */
static void check_crasher(const struct itest_daemon *d)
{
	double died, refused;
	int status = 0;
	const char *why;
	cJSON *doc;
	pid_t pid;

	if (!build_bomb("plain", 0, "crasher")) {
		TAP_OK(0, "the crasher builds");
		return;
	}
	pid = run_nobody("crasher");
	TAP_OK(pid > 0 && sec_wait_comm(pid, "crasher"),
	       "crasher: runs as nobody");
	itest_sleep_ms(100);
	doc = nobody_dump(d, pid, &status);
	why = symbols_error(doc, "crasher");
	TAP_OK(status == 200 && why &&
		       strcmp(why, "the parser was killed (SIGSEGV)") == 0 &&
		       cJSON_IsTrue(
			       cJSON_GetObjectItem(doc, "symbols_partial")),
	       "crasher: answered partial, \"the parser was killed (SIGSEGV)\" "
	       "(%d, %s)",
	       status, why ? why : "no reason");
	TAP_OK(has_function(doc, "pause"),
	       "crasher: the frames of other files have their functions");
	cJSON_Delete(doc);
	died = itest_metric(d, "stackwatch_parser_failures_total{reason="
			       "\"crashed\"}");
	refused = itest_metric(d, "stackwatch_parser_refusals_total");
	doc = nobody_dump(d, pid, &status);
	why = symbols_error(doc, "crasher");
	TAP_OK(status == 200 && why && strstr(why, "SIGSEGV"),
	       "crasher: asked again, the same reason (%d)", status);
	cJSON_Delete(doc);
	TAP_OK(died >= 1 &&
		       itest_metric(d, "stackwatch_parser_failures_total{"
				       "reason=\"crashed\"}") == died &&
		       itest_metric(d, "stackwatch_parser_refusals_total") >
			       refused,
	       "crasher: refused, not parsed again (%.0f crashed, refusals "
	       "%.0f then %.0f)",
	       died, refused,
	       itest_metric(d, "stackwatch_parser_refusals_total"));
	itest_kill(pid);
}

/*
 * The same for a core file of pid (gcore): dump --core as root reads it
 * in a worker, whose death on the program's file costs that file's
 * symbols only.
 */
static void check_cli_core(pid_t pid, const char *kind, const char *reason)
{
	static char out[4 << 20];
	char cmd[512], core[256];
	const char *why;
	cJSON *doc;
	int rc;

	snprintf(core, sizeof(core), "%s/core", dir);
	snprintf(cmd, sizeof(cmd), "gcore -o %s %d >/dev/null 2>&1", core,
		 (int)pid);
	if (itest_run_capture(cmd, out, sizeof(out)) != 0) {
		TAP_SKIP("gcore cannot dump %s here", kind);
		return;
	}
	snprintf(cmd, sizeof(cmd),
		 "STACKWATCH_TEST_PARSER_FAULT=segv=%s %s/stackwatch dump "
		 "--core %s.%d --format json 2>/dev/null",
		 kind, itest_build(), core, (int)pid);
	rc = itest_run_capture(cmd, out, sizeof(out));
	doc = cJSON_Parse(out);
	why = symbols_error(doc, kind);
	TAP_OK(rc == 0 && why && strstr(why, reason) &&
		       has_function(doc, "pause"),
	       "the CLI as root reads a core of %s in a worker: the other "
	       "frames named, and why its own are not (exit %d, %s)",
	       kind, rc, why ? why : "no reason");
	cJSON_Delete(doc);
	snprintf(cmd, sizeof(cmd), "%s.%d", core, (int)pid);
	unlink(cmd);
}

/*
 * The CLI run as root (stackwatch dump --local) parses in workers of the
 * same kind: a file that kills one, and hostile DWARF, cost the symbols
 * of that file, never the run, and the other frames keep their names.
 * (Before, the lexical bomb killed the CLI with SIGSEGV.)
 */
static void check_cli(void)
{
	static const char *const kinds[] = { "crasher", "lexical", "inline" };
	static const char *const reasons[] = {
		"the parser was killed (SIGSEGV)",
		"nests deeper than 256",
		"nests deeper than 256",
	};
	static char out[4 << 20];

	for (size_t i = 0; i < 3; i++) {
		const char *why;
		char cmd[512];
		cJSON *doc;
		pid_t pid;
		int rc;

		pid = run_nobody(kinds[i]);
		if (pid <= 0 || !sec_wait_comm(pid, kinds[i])) {
			TAP_OK(0, "the CLI: %s runs", kinds[i]);
			itest_kill(pid);
			continue;
		}
		itest_sleep_ms(100);
		snprintf(cmd, sizeof(cmd),
			 "STACKWATCH_TEST_PARSER_FAULT=segv=crasher "
			 "%s/stackwatch dump --local --format json %d "
			 "2>/dev/null",
			 itest_build(), (int)pid);
		rc = itest_run_capture(cmd, out, sizeof(out));
		doc = cJSON_Parse(out);
		why = symbols_error(doc, kinds[i]);
		TAP_OK(rc == 0 && why && strstr(why, reasons[i]) &&
			       has_function(doc, "pause"),
		       "the CLI as root reads %s: the other frames named, and "
		       "why its own are not (exit %d, %s)",
		       kinds[i], rc, why ? why : "no reason");
		cJSON_Delete(doc);
		if (i == 0)
			check_cli_core(pid, kinds[i], reasons[i]);
		itest_kill(pid);
	}
}

/*
 * A perf map that kills the worker parsing it (the test hook): the read
 * is answered all the same, the map is refused from then on (no second
 * death), and the daemon is up. The map is parsed by a worker, not by
 * the daemon: it would have died with it.
 */
static void check_perfmap(const struct itest_daemon *d)
{
	char map[64];
	double died;
	int status = 0, status2 = 0, fd;
	cJSON *doc;
	pid_t pid;

	pid = run_nobody("crasher");
	if (pid <= 0 || !sec_wait_comm(pid, "crasher")) {
		TAP_OK(0, "perf map: its program runs");
		itest_kill(pid);
		return;
	}
	snprintf(map, sizeof(map), "/tmp/perf-%d.map", (int)pid);
	fd = open(map, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd >= 0) {
		(void)!write(fd, "1000 10 jitted\n", 15);
		(void)!fchown(fd, SEC_NOBODY, SEC_NOBODY);
		close(fd);
	}
	itest_sleep_ms(100);
	died = itest_metric(d, "stackwatch_parser_failures_total{reason="
			       "\"crashed\"}");
	doc = nobody_dump(d, pid, &status);
	cJSON_Delete(doc);
	doc = nobody_dump(d, pid, &status2);
	cJSON_Delete(doc);
	TAP_OK(status == 200 && status2 == 200 &&
		       itest_metric(d, "stackwatch_parser_failures_total{"
				       "reason=\"crashed\"}") == died + 1 &&
		       get_ok(d),
	       "perf map: a map that kills its parser costs one worker, once; "
	       "both reads answered (%d, %d; %.0f crashed before, %.0f after)",
	       status, status2, died,
	       itest_metric(d, "stackwatch_parser_failures_total{reason="
			       "\"crashed\"}"));
	unlink(map);
	itest_kill(pid);
}

/*
 * A file its parser never returns from: while nobody's request for it
 * waits, root's dump of another process answers in its usual time; the
 * hung parser is ended past its deadline, and the file refused.
 */
static void check_hanger(const struct itest_daemon *d, pid_t other)
{
	struct sec_pending pg;
	struct sec_answer a;
	char target[96];
	long t0, took;
	int status;
	pid_t pid;
	cJSON *doc;

	if (!build_bomb("plain", 0, "hanger")) {
		TAP_OK(0, "the hanger builds");
		return;
	}
	pid = run_nobody("hanger");
	TAP_OK(pid > 0 && sec_wait_comm(pid, "hanger"),
	       "hanger: runs as nobody");
	itest_sleep_ms(100);
	snprintf(target, sizeof(target), "/api/v1/stacks?pid=%d&timeout=5000",
		 (int)pid);
	sec_get_start(SEC_NOBODY, SEC_NOBODY, NULL, 0, d->url, NULL, NULL,
		      target, &pg);
	itest_sleep_ms(300); /* its parser is stuck by now */
	snprintf(target, sizeof(target), "/api/v1/stacks?pid=%d&timeout=1000",
		 (int)other);
	t0 = itest_now_ms();
	status = sec_root_get(d, target, 3000, &doc);
	took = itest_now_ms() - t0;
	TAP_OK(status == 200 && has_function(doc, "main") && took < 1500,
	       "root's dump of another process meanwhile: %d in %ld ms "
	       "(its timeout 1000 ms)",
	       status, took);
	cJSON_Delete(doc);
	sec_get_finish(&pg, &a);
	doc = a.status == 200 ? cJSON_Parse(a.body) : NULL;
	TAP_OK(a.status == 503 ||
		       (a.status == 200 && symbols_error(doc, "hanger")),
	       "hanger: the request that hung its parser ends: %d (%.120s)",
	       a.status, a.body);
	cJSON_Delete(doc);
	doc = nobody_dump(d, pid, &status);
	TAP_OK(status == 200 && symbols_error(doc, "hanger") &&
		       strstr(symbols_error(doc, "hanger"), "took longer"),
	       "hanger: asked again, answered partial at once, with why "
	       "(%s)",
	       symbols_error(doc, "hanger") ? symbols_error(doc, "hanger")
					    : "nothing");
	cJSON_Delete(doc);
	itest_kill(pid);
}

/* kill -9 of a worker: the next read works, and another one runs. */
static void check_killed(const struct itest_daemon *d, pid_t other)
{
	char target[64];
	pid_t w[8], after[8];
	int n = parsers(d, w, 8, NULL), m = 0, status = 0;
	bool gone = true, fresh = false;
	cJSON *doc = NULL;
	long t0;

	TAP_OK(n >= 1, "a parser to kill (%d)", n);
	for (int i = 0; i < n; i++)
		kill(w[i], SIGKILL);
	t0 = itest_now_ms();
	snprintf(target, sizeof(target), "/api/v1/stacks?pid=%d", (int)other);
	status = sec_root_get(d, target, 5000, &doc);
	TAP_OK(status == 200 && has_function(doc, "main"),
	       "every parser killed: the next read works (%d in %ld ms)",
	       status, itest_now_ms() - t0);
	cJSON_Delete(doc);
	for (long end = itest_now_ms() + 2000;
	     itest_now_ms() < end && !fresh;) {
		m = parsers(d, after, 8, NULL);
		for (int i = 0; i < m; i++) {
			fresh = true;
			for (int k = 0; k < n; k++)
				fresh = fresh && after[i] != w[k];
		}
		itest_sleep_ms(20);
	}
	for (int i = 0; i < n; i++)
		gone = gone && kill(w[i], 0) < 0;
	TAP_OK(gone && fresh && get_ok(d),
	       "the killed ones are gone, another runs, /healthz ok");
}

int main(void)
{
	static const char *const args[] = { "--sample-interval", "0", NULL };
	char probe[256];
	struct itest_daemon d;
	pid_t other;

	if (geteuid() != 0) {
		TAP_SKIP("needs root: parsers run as another user");
		return tap_done();
	}
	if (!mkdtemp(dir) || chmod(dir, 0755) < 0) {
		TAP_OK(0, "a temporary directory");
		return tap_done();
	}
	snprintf(probe, sizeof(probe), "%s/fixtures/parser_probe.so",
		 itest_target_build());
	/* The probe's code is no AddressSanitizer's: preloaded, it would
	 * come before the sanitizer's runtime, which refuses to start. */
	if (!SEC_SANITIZED)
		setenv("LD_PRELOAD", probe, 1);
	setenv("STACKWATCH_TEST_PARSER_FAULT",
	       "segv=crasher,hang=hanger,segv=perf-map", 1);
	if (itest_daemon_start_args(&d, args) < 0) {
		TAP_OK(0, "the daemon starts");
		return tap_done();
	}
	unsetenv("LD_PRELOAD");
	unsetenv("STACKWATCH_TEST_PARSER_FAULT");

	if (!build_bomb("plain", 0, "plain")) {
		TAP_OK(0, "a plain program builds");
		goto out;
	}
	other = run_nobody("plain");
	TAP_OK(other > 0 && sec_wait_comm(other, "plain"),
	       "a plain program runs");
	itest_sleep_ms(100);
	TAP_OK(sec_root_get(&d, "/api/v1/stacks", 5000, NULL) == 200,
	       "a first dump");
	check_workers(&d);
	if (SEC_SANITIZED)
		TAP_SKIP("no probe in an AddressSanitizer build");
	else
		check_probe(&d);
	check_bomb(&d, "lexical", 100000, "nests deeper than 256");
	check_bomb(&d, "inline", 1500, "nests deeper than 256");
	check_bomb(&d, "lines", 8000000, "larger than 4 MiB");
	check_bomb(&d, "linestr", 0, "string section with no end");
	check_crasher(&d);
	check_perfmap(&d);
	check_cli();
	check_hanger(&d, other);
	check_killed(&d, other);
	check_memory(&d, "all of it");
	itest_kill(other);
out:
	TAP_OK(itest_daemon_stop(&d) == 0, "the daemon stops cleanly");
	itest_daemon_cleanup(&d);
	snprintf(probe, sizeof(probe), "rm -rf %s", dir);
	itest_run_capture(probe, probe, sizeof(probe));
	return tap_done();
}
