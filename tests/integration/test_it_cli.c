/*
 * test_it_cli.c - the CLI against the real daemon: `stackwatch run`
 * registers a program (same pid) without a warning, `targets` lists it,
 * `dump` prints its stacks in every format, a pid that is not a target is
 * exit 1, no daemon is exit 3. The errors and their exit statuses: a pid
 * that does not exist is "no process N" (4) for root and "not a process
 * you may see" (5) for nobody, like another user's process; nothing
 * visible is 7; a process that does not answer makes an all-target dump
 * partial (6). The verbs: `stuck` (7 with none, 0 once a spinner is
 * flagged), `diff` (the mover's change, the stacks before and after) and
 * `ps` (the table, its columns from /api/v1/processes).
 */
#include "itest.h"
#include "tap.h"

#define NOBODY 65534

static char out[1 << 16], err[1 << 14];

/* Reads up to size - 1 bytes of path into buf, NUL-terminated. */
static void slurp(const char *path, char *buf, size_t size)
{
	FILE *f = fopen(path, "r");
	size_t n = f ? fread(buf, 1, size - 1, f) : 0;

	buf[n] = '\0';
	if (f)
		fclose(f);
}

/*
 * Runs the CLI with args (a shell fragment) against d, as prefix says
 * ("" or a setpriv command): stdout in out, stderr in err. Returns the
 * exit status, -1 when it did not exit.
 */
static int cli(const struct itest_daemon *d, const char *prefix,
	       const char *args)
{
	char cmd[1024], errpath[192];
	size_t n = 0;
	FILE *p;
	int st;

	snprintf(errpath, sizeof(errpath), "%s/cli.err", d->dir);
	snprintf(cmd, sizeof(cmd), "%s %s/stackwatch --url %s %s 2>%s", prefix,
		 *prefix ? itest_target_build() : itest_build(), d->url, args,
		 errpath);
	out[0] = '\0';
	p = popen(cmd, "r");
	if (!p)
		return -1;
	while (n < sizeof(out) - 1) {
		size_t r = fread(out + n, 1, sizeof(out) - 1 - n, p);

		if (r == 0)
			break;
		n += r;
	}
	out[n] = '\0';
	st = pclose(p);
	slurp(errpath, err, sizeof(err));
	unlink(errpath);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* Prints s (out, err) as "# " lines, which tests/run.sh does not count. */
static void note(const char *s)
{
	while (*s) {
		size_t n = strcspn(s, "\n");

		printf("# %.*s\n", (int)n, s);
		s += n + (s[n] == '\n');
	}
}

/* The number of lines of s. */
static int lines(const char *s)
{
	int n = 0;

	for (; *s; s++)
		n += *s == '\n';
	return n;
}

/* A pid no process can have: past the kernel's pid_max. */
static long no_such_pid(void)
{
	char buf[32] = "";
	FILE *f = fopen("/proc/sys/kernel/pid_max", "r");
	long max = 4194304;

	if (f && fgets(buf, sizeof(buf), f))
		max = strtol(buf, NULL, 10);
	if (f)
		fclose(f);
	return max + 1;
}

/* Whether nobody can run the CLI here: root, setpriv, a reachable build. */
static bool as_nobody_possible(void)
{
	char cmd[512];

	if (geteuid() != 0 || system("command -v setpriv >/dev/null 2>&1"))
		return false;
	snprintf(cmd, sizeof(cmd),
		 "setpriv --reuid=%d --regid=%d --clear-groups test -x "
		 "%s/stackwatch",
		 NOBODY, NOBODY, itest_target_build());
	return system(cmd) == 0;
}

#define AS_NOBODY "setpriv --reuid=65534 --regid=65534 --clear-groups"

/* The errors of a pid that is not there, and of nothing visible. */
static void check_errors(const struct itest_daemon *d, pid_t mine)
{
	long none = no_such_pid();
	char args[128], want[64];
	int rc;

	snprintf(want, sizeof(want), "stackwatch: no process %ld\n", none);
	snprintf(args, sizeof(args), "dump %ld", none);
	rc = cli(d, "", args);
	if (geteuid() == 0)
		TAP_OK(rc == 4 && strncmp(err, want, strlen(want)) == 0 &&
			       strstr(err, "stackwatch ps") && !out[0],
		       "root: dump of a pid that does not exist: 'no process "
		       "%ld', what to do, exit 4 (exit %d: %s)",
		       none, rc, err);
	snprintf(args, sizeof(args), "dump --format json %ld", none);
	rc = cli(d, "", args);
	if (geteuid() == 0)
		TAP_OK(rc == 4 && strncmp(err, want, strlen(want)) == 0,
		       "root: the same in JSON (exit %d)", rc);
	snprintf(args, sizeof(args), "diff %ld", none);
	rc = cli(d, "", args);
	if (geteuid() == 0)
		TAP_OK(rc == 4 && strncmp(err, want, strlen(want)) == 0,
		       "root: diff of a pid that does not exist: exit 4 (exit "
		       "%d: %s)",
		       rc, err);
	if (!as_nobody_possible()) {
		TAP_SKIP("as nobody: needs root, setpriv and a build nobody "
			 "can run");
		return;
	}
	snprintf(want, sizeof(want), "pid %ld is not a process you may see",
		 none);
	snprintf(args, sizeof(args), "dump %ld", none);
	rc = cli(d, AS_NOBODY, args);
	TAP_OK(rc == 5 && strstr(err, want) && strstr(err, "ps"),
	       "nobody: a pid that does not exist is 'not a process you may "
	       "see', exit 5 (exit %d: %s)",
	       rc, err);
	snprintf(want, sizeof(want), "pid %d is not a process you may see",
		 (int)mine);
	snprintf(args, sizeof(args), "dump %d", (int)mine);
	rc = cli(d, AS_NOBODY, args);
	TAP_OK(rc == 5 && strstr(err, want),
	       "nobody: root's target reads the same, exit 5 (exit %d)", rc);
	rc = cli(d, AS_NOBODY, "dump");
	TAP_OK(rc == 7 && !out[0] && lines(err) == 1 &&
		       strstr(err, "no process with the agent that you may "
				   "see") &&
		       strstr(err, "stackwatch run"),
	       "nobody: dump with nothing visible says so, exit 7 (exit %d: "
	       "%s)",
	       rc, err);
	rc = cli(d, AS_NOBODY, "dump --format json");
	TAP_OK(rc == 7 && strstr(out, "\"processes\":[]"),
	       "nobody: the same in JSON, the empty list printed (exit %d)",
	       rc);
}

/*
 * A target stopped by SIGSTOP cannot answer (on a daemon of its own that
 * reads nothing from the kernel): dump of every target prints the other
 * (the daemon's own entry) and exits 6, in every format.
 */
static void check_partial(const char *fix)
{
	static const char *const args[] = { "--sample-interval", "0",
					    "--timeout",	 "300",
					    "--no-kernel-reads", NULL };
	char *argv[] = { (char *)fix, (char *)"sigwait-open", NULL };
	struct itest_daemon d;
	char want[32];
	int fd = -1, rc;
	pid_t stopped;

	if (itest_daemon_start_args(&d, args) < 0) {
		TAP_OK(0, "a daemon without kernel reads starts");
		return;
	}
	stopped = itest_spawn(&d, argv, &fd);
	TAP_OK(itest_wait_line(fd, "ready") &&
		       itest_wait_registered(&d, stopped, 10000),
	       "a program registers with it");
	snprintf(want, sizeof(want), "Process %d ", (int)d.pid);
	kill(stopped, SIGSTOP);
	rc = cli(&d, "", "dump");
	TAP_OK(rc == 6 && strstr(out, want) && strstr(out, "error: ") &&
		       strstr(err, "could not be read"),
	       "dump of every target with one stopped: the other printed, "
	       "exit 6 (exit %d: %s)",
	       rc, err);
	if (rc != 6) {
		note(out);
		note(err);
	}
	rc = cli(&d, "", "dump --format folded");
	TAP_OK(rc == 6,
	       "the same in the folded format, which names no error "
	       "(exit %d)",
	       rc);
	kill(stopped, SIGCONT);
	itest_kill(stopped);
	close(fd);
	itest_daemon_stop(&d);
	itest_daemon_cleanup(&d);
}

/* stuck: none flagged yet (7), then the spinner (0), in both formats. */
static void check_stuck(const struct itest_daemon *d, pid_t spin, bool none)
{
	char want[64];
	long end;
	int rc = -1;

	if (none) {
		rc = cli(d, "", "stuck");
		TAP_OK(rc == 7 && !out[0] && strstr(err, "no thread is stuck"),
		       "stuck with no stuck thread: nothing printed, exit 7 "
		       "(exit %d: %s)",
		       rc, err);
		rc = cli(d, "", "stuck --format json");
		TAP_OK(rc == 7 && strstr(out, "\"threads\":[]"),
		       "stuck --format json with none: the empty list, exit 7 "
		       "(exit %d)",
		       rc);
		return;
	}
	snprintf(want, sizeof(want), "pid %d, thread spinner (", (int)spin);
	/* stuck-after 1 s, 200 ms samples: well within this. */
	for (end = itest_now_ms() + 20000; itest_now_ms() < end;) {
		rc = cli(d, "", "stuck");
		if (rc == 0 && strstr(out, want))
			break;
		itest_sleep_ms(200);
	}
	TAP_OK(rc == 0 && strstr(out, want) &&
		       strstr(out, "): spinning for ") &&
		       strstr(out, "\n    #0  0x") &&
		       strstr(out, " in spinner"),
	       "stuck lists the spinner: pid, tid, reason, for how long, its "
	       "frames, exit 0 (exit %d)",
	       rc);
	if (rc != 0) {
		note(out);
		note(err);
	}
	rc = cli(d, "", "stuck --format json");
	{
		cJSON *j = cJSON_Parse(out);

		TAP_OK(rc == 0 && j &&
			       cJSON_GetArraySize(
				       cJSON_GetObjectItem(j, "threads")) > 0,
		       "stuck --format json: the daemon's JSON, exit 0");
		cJSON_Delete(j);
	}
}

/* diff: the mover moved since a sample 1 s old. */
static void check_diff(const struct itest_daemon *d, pid_t watch, int in,
		       int outfd)
{
	char args[128], want[64];
	int rc;

	/* A sample at least 1 s old, then the move. */
	itest_sleep_ms(1500);
	TAP_OK(write(in, "\n", 1) == 1 && itest_wait_line(outfd, "moved"),
	       "the mover moved");
	itest_sleep_ms(300);
	snprintf(args, sizeof(args), "diff --since 1s %d", (int)watch);
	rc = cli(d, "", args);
	snprintf(want, sizeof(want), "Process %d: from ", (int)watch);
	TAP_OK(rc == 0 && strncmp(out, want, strlen(want)) == 0 &&
		       strstr(out, "1 thread changed: mover (") &&
		       strstr(out, "  before:\n    #0  0x") &&
		       strstr(out, "  after:\n") && strstr(out, "mover_a") &&
		       strstr(out, "mover_b"),
	       "diff --since 1s: the mover changed, before and after (exit "
	       "%d)",
	       rc);
	if (rc != 0 || !strstr(out, "mover (")) {
		note(out);
		note(err);
	}
	snprintf(args, sizeof(args), "diff --format=json --since=1 %d",
		 (int)watch);
	rc = cli(d, "", args);
	{
		cJSON *j = cJSON_Parse(out);

		TAP_OK(rc == 0 && j && cJSON_GetObjectItem(j, "changed"),
		       "diff --format json: the daemon's JSON (exit %d)", rc);
		cJSON_Delete(j);
	}
	snprintf(args, sizeof(args), "diff --since 1h %d", (int)watch);
	rc = cli(d, "", args);
	TAP_OK(rc == 1 && strstr(err, "no sample of pid") && !out[0],
	       "diff further back than the history: the daemon's reason, "
	       "exit 1 (exit %d: %s)",
	       rc, err);
	TAP_OK(cli(d, "", "diff") == 2 && strstr(err, "usage: stackwatch"),
	       "diff without a PID is a usage error");
	TAP_OK(cli(d, "", "diff --since 2d 1") == 2 &&
		       cli(d, "", "diff --since 86401 1") == 2 &&
		       cli(d, "", "diff --since -1 1") == 2,
	       "diff: a bad or too long --since is a usage error");
}

/* The row of pid in ps's table, into row; false when absent. */
static bool ps_row(pid_t pid, char *row, size_t size)
{
	char want[32];
	const char *p = out, *eol;

	snprintf(want, sizeof(want), "%7d ", (int)pid);
	for (; *p; p = eol + 1) {
		eol = strchr(p, '\n');
		if (!eol)
			break;
		if (strncmp(p, want, strlen(want)) == 0) {
			snprintf(row, size, "%.*s", (int)(eol - p), p);
			return true;
		}
	}
	return false;
}

static void check_ps(const struct itest_daemon *d, pid_t mine, pid_t watch)
{
	char row[512], user[64], name[64], states[64], dl[16], method[16];
	int rc = cli(d, "", "ps"), threads = 0, stuck = -1;
	double cpu = -1;
	bool found;

	found = ps_row(mine, row, sizeof(row)) &&
		sscanf(row, "%*d %63s %63s %d %lf %63s %d %15s %15s", user,
		       name, &threads, &cpu, states, &stuck, dl, method) == 8;
	TAP_OK(rc == 0 &&
		       strncmp(out, "    PID USER", strlen("    PID USER")) ==
			       0 &&
		       strstr(out, " NAME ") &&
		       strstr(out, " THREADS   CPU% STATES") &&
		       strstr(out, " STUCK DEADLOCK METHOD\n") && found &&
		       strcmp(name, "agent_target") == 0 && threads == 6 &&
		       cpu >= 0 && strchr(states, 'S') && stuck == 0 &&
		       strcmp(dl, "no") == 0 && strcmp(method, "agent") == 0,
	       "ps: the header and the sigwait program's row (%s)",
	       found ? row : "absent");
	if (!found) {
		note(out);
		note(err);
	}
	rc = cli(d, "", "ps --sort threads");
	found = ps_row(watch, row, sizeof(row)) &&
		sscanf(row, "%*d %63s %63s %d %lf %63s %d %15s %15s", user,
		       name, &threads, &cpu, states, &stuck, dl, method) == 8;
	TAP_OK(rc == 0 && found && threads >= 67 && stuck >= 1 &&
		       strchr(states, 'S'),
	       "ps --sort threads: the watch program with its stuck spinner "
	       "(%s)",
	       found ? row : "absent");
	{
		const char *first = strchr(out, '\n');
		int n = 0;
		bool read =
			first && sscanf(first + 1, "%*d %*s %*s %d", &n) == 1;

		TAP_OK(read && n >= threads,
		       "ps --sort threads: the most threads first (%d)", n);
	}
	rc = cli(d, "", "ps --format json");
	{
		cJSON *j = cJSON_Parse(out);

		TAP_OK(rc == 0 && j &&
			       cJSON_GetArraySize(
				       cJSON_GetObjectItem(j, "processes")) > 0,
		       "ps --format json: the daemon's JSON, exit 0");
		cJSON_Delete(j);
	}
	TAP_OK(cli(d, "", "ps --sort size") == 2 && strstr(err, "size") &&
		       cli(d, "", "ps 1") == 2 && cli(d, "", "stuck 1") == 2 &&
		       cli(d, "", "stuck --format folded") == 2,
	       "ps and stuck: bad arguments are usage errors");
}

/* stackwatch run under the agent, its stderr into errpath. */
static pid_t run_sigwait(const struct itest_daemon *d, const char *fix,
			 const char *errpath, int *fd)
{
	char cli_path[256];
	int p[2];
	pid_t pid;

	snprintf(cli_path, sizeof(cli_path), "%s/stackwatch", itest_build());
	if (pipe(p) < 0)
		return -1;
	pid = fork();
	if (pid == 0) {
		int e = open(errpath, O_WRONLY | O_CREAT | O_TRUNC, 0600);

		dup2(p[1], 1);
		if (e >= 0)
			dup2(e, 2);
		close(p[0]);
		close(p[1]);
		unsetenv("LD_PRELOAD");
		execl(cli_path, cli_path, "run", "--socket", d->sock, "--", fix,
		      "sigwait", (char *)NULL);
		_exit(127);
	}
	close(p[1]);
	*fd = p[0];
	return pid;
}

int main(void)
{
	static const char *const args[] = { "--sample-interval", "200",
					    "--stuck-after", "1", NULL };
	struct itest_daemon d;
	char fix[256], line[64], errpath[192];
	int fd, in = -1, wout = -1, rc;
	pid_t pid, watch = -1, shown = 0;

	snprintf(fix, sizeof(fix), "%s/fixtures/agent_target", itest_build());
	if (itest_daemon_start_args(&d, args) < 0) {
		TAP_OK(0, "the daemon starts");
		return tap_done();
	}
	/* stackwatch run: the shell's pid is the program's pid. */
	snprintf(errpath, sizeof(errpath), "%s/run.err", d.dir);
	pid = run_sigwait(&d, fix, errpath, &fd);
	TAP_OK(itest_read_line(fd, line, sizeof(line)) &&
		       strcmp(line, "ready") == 0,
	       "stackwatch run started the program");
	TAP_OK(itest_wait_registered(&d, pid, 10000),
	       "it registered under the same pid (%d)", (int)pid);
	slurp(errpath, err, sizeof(err));
	TAP_OK(!err[0], "stackwatch run: no warning with a daemon listening");
	rc = cli(&d, "", "targets");
	{
		char want[32];

		snprintf(want, sizeof(want), "%d ", (int)pid);
		TAP_OK(rc == 0 && strstr(out, want) &&
			       strstr(out, "agent_target sigwait"),
		       "stackwatch targets lists it (exit %d)", rc);
	}
	{
		char a[64];

		snprintf(a, sizeof(a), "dump %d", (int)pid);
		rc = cli(&d, "", a);
		sscanf(out, "Process %d", &shown);
		TAP_OK(rc == 0 && shown == pid &&
			       strstr(out, "4 threads: worker") &&
			       strstr(out, "in worker () at agent_target.c:"),
		       "stackwatch dump prints its stacks as text");
		snprintf(a, sizeof(a), "dump --format json %d", (int)pid);
		rc = cli(&d, "", a);
	}
	{
		cJSON *j = cJSON_Parse(out);

		TAP_OK(rc == 0 && j &&
			       cJSON_GetObjectItem(j, "threads_ok")
					       ->valuedouble == 6,
		       "stackwatch dump --format json: 6 threads ok");
		cJSON_Delete(j);
	}
	{
		char a[64];

		snprintf(a, sizeof(a), "dump --format folded %d", (int)pid);
		rc = cli(&d, "", a);
	}
	TAP_OK(rc == 0 && strstr(out, ";worker;pthread_cond_wait") &&
		       strstr(out, " 4\n"),
	       "stackwatch dump --format folded");
	if (geteuid() != 0)
		TAP_OK(cli(&d, "", "dump 1") == 5,
		       "dump of a pid that is not a target exits 5");
	check_errors(&d, pid);
	check_stuck(&d, 0, true);

	/* 64 waiters, a mover (moved by a line on stdin), a spinner. */
	{
		char *argv[] = { fix, (char *)"watch", (char *)"spin", NULL };

		watch = itest_spawn_io(&d, argv, &wout, &in);
	}
	TAP_OK(itest_wait_line(wout, "ready") &&
		       itest_wait_registered(&d, watch, 10000),
	       "the watch program (64 waiters, a mover, a spinner) is "
	       "registered");
	check_diff(&d, watch, in, wout);
	check_stuck(&d, watch, false);
	check_ps(&d, pid, watch);
	check_partial(fix);

	itest_kill(watch);
	if (in >= 0)
		close(in);
	if (wout >= 0)
		close(wout);
	itest_kill(pid);
	close(fd);
	unlink(errpath);
	itest_daemon_stop(&d);
	rc = cli(&d, "", "targets");
	TAP_OK(rc == 3 && strstr(err, "cannot reach the daemon") &&
		       strstr(err, "systemctl start stackwatchd") &&
		       strstr(err, "dump --local PID"),
	       "with the daemon gone the CLI exits 3 and says what to do");
	itest_daemon_cleanup(&d);
	return tap_done();
}
