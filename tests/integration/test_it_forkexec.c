/*
 * test_it_forkexec.c - children of fork() that exec or exit at once never
 * start the agent's thread nor connect; a child that lives on registers
 * under its own pid. Runs tests/fixtures/forker under the agent with the
 * real daemon (its log at info level, where every agent connection it
 * accepts shows by pid).
 *
 * The quick children run with STACKWATCH_START_DELAY_MS at 10 minutes, so
 * that no wait on a busy machine can make them look slow: what is tested
 * is that nothing starts before the delay, not how long it is.
 */
#include <errno.h>

#include "itest.h"
#include "tap.h"

#define QUICK 20

static char forker[256];

/* forker MODE [N] under the agent, its start delay delay_ms (NULL: default). */
static pid_t spawn_delay(const struct itest_daemon *d, const char *mode,
			 const char *n, const char *delay_ms, int *out)
{
	char *argv[] = { forker, (char *)mode, (char *)n, NULL };
	pid_t pid;

	if (delay_ms)
		setenv("STACKWATCH_START_DELAY_MS", delay_ms, 1);
	pid = itest_spawn(d, argv, out);
	unsetenv("STACKWATCH_START_DELAY_MS");
	return pid;
}

static pid_t spawn(const struct itest_daemon *d, const char *mode,
		   const char *n, bool quick, int *out)
{
	return spawn_delay(d, mode, n, quick ? "600000" : NULL, out);
}

static void test_threads(const struct itest_daemon *d)
{
	char line[64], n[16];
	int out, one = 0, got = 0, other = -1;
	pid_t pid;

	snprintf(n, sizeof(n), "%d", QUICK);
	pid = spawn(d, "threads", n, true, &out);
	while (itest_read_line(out, line, sizeof(line)) &&
	       strcmp(line, "ready") != 0) {
		int c;

		if (sscanf(line, "threads %d", &c) != 1)
			continue;
		got++;
		if (c == 1)
			one++;
		else
			other = c;
	}
	TAP_OK(got == QUICK && one == QUICK,
	       "children of fork() that count their threads at once find "
	       "only their own: %d of %d saw 1 (another saw %d)",
	       one, got, other);
	itest_kill(pid);
	close(out);
}

/* Whether the daemon's log names pid as an agent that connected. */
static bool connected(const struct itest_daemon *d, pid_t pid)
{
	char a[64], b[64], line[512];
	FILE *f = fopen(d->log, "r");
	bool seen = false;

	if (!f)
		return true;
	snprintf(a, sizeof(a), "registered pid %d ", (int)pid);
	snprintf(b, sizeof(b), "connection from pid %d:", (int)pid);
	while (fgets(line, sizeof(line), f))
		if (strstr(line, a) || strstr(line, b))
			seen = true;
	fclose(f);
	return seen;
}

static void test_exec(const struct itest_daemon *d)
{
	pid_t kids[QUICK], pid, live, child = 0;
	char line[64], n[16];
	int out, lout, nkids = 0, ok = 0, seen = 0;
	bool reg;
	long t0;

	snprintf(n, sizeof(n), "%d", QUICK);
	pid = spawn(d, "exec", n, true, &out);
	while (itest_read_line(out, line, sizeof(line)) &&
	       strcmp(line, "ready") != 0) {
		int k, st;

		if (sscanf(line, "child %d %d", &k, &st) != 2 || nkids >= QUICK)
			continue;
		kids[nkids++] = k;
		ok += st == 0;
	}
	TAP_OK(nkids == QUICK && ok == QUICK,
	       "children of fork() exec /bin/true under the agent: %d of %d "
	       "exited 0",
	       ok, nkids);

	/* One that lives on, at the default delay: both register. Once
	 * they have, every connection made before theirs was accepted. */
	t0 = itest_now_ms();
	live = spawn(d, "live", NULL, false, &lout);
	while (itest_read_line(lout, line, sizeof(line)) &&
	       strcmp(line, "ready") != 0)
		sscanf(line, "child %d", &child);
	reg = live > 0 && itest_wait_registered(d, live, 10000);
	TAP_OK(reg,
	       "a program that lives on registers (%ld ms after it "
	       "started)",
	       itest_now_ms() - t0);
	reg = child > 0 && itest_wait_registered(d, child, 10000);
	TAP_OK(reg,
	       "its child of fork() that lives on registers under its own "
	       "pid %d (%ld ms after the program started)",
	       (int)child, itest_now_ms() - t0);
	TAP_OK(child > 0 && connected(d, child),
	       "the daemon's log names the connections it accepts");
	for (int i = 0; i < nkids; i++)
		seen += connected(d, kids[i]);
	TAP_OK(nkids > 0 && seen == 0,
	       "none of the %d children that exec'd /bin/true connected to "
	       "the daemon (%d did)",
	       nkids, seen);

	if (child > 0)
		kill(child, SIGKILL);
	itest_kill(live);
	itest_kill(pid);
	close(out);
	close(lout);
	for (long end = itest_now_ms() + 5000;
	     child > 0 && kill(child, 0) == 0 && itest_now_ms() < end;)
		itest_sleep_ms(10);
	TAP_OK(child <= 0 || (kill(child, 0) < 0 && errno == ESRCH),
	       "every process the test started is gone");
}

/* The value of "KEY N" lines in out up to "ready" or its end, by key. */
static void read_counts(int out, const char *const *keys, int *vals, int n)
{
	char line[64];

	for (int i = 0; i < n; i++)
		vals[i] = -1;
	while (itest_read_line(out, line, sizeof(line)) &&
	       strcmp(line, "ready") != 0)
		for (int i = 0; i < n; i++) {
			size_t k = strlen(keys[i]);

			if (strncmp(line, keys[i], k) == 0 && line[k] == ' ')
				vals[i] = atoi(line + k + 1);
		}
}

/*
 * A process that has lived its delay starts the thread at its next call
 * of a wait or a mask change, but never from a signal handler of its own
 * (on its stack or an alternate one) nor from a vfork() child: those may
 * hold what pthread_create() takes, or share the parent's memory.
 */
static void test_settle(const struct itest_daemon *d, bool nopvr)
{
	static const char *const keys[] = { "handler", "altstack", "vfork",
					    "after" };
	const char *how = nopvr ? " (process_vm_readv() filtered)" : "";
	int v[4], out;
	pid_t pid = nopvr ? spawn_delay(d, "nopvr", "settle", "10", &out)
			  : spawn_delay(d, "settle", NULL, "10", &out);

	read_counts(out, keys, v, 4);
	TAP_OK(v[0] == 1 && v[1] == 1,
	       "settle points in a signal handler start no thread%s (%d "
	       "threads after it, %d after one on an alternate stack)",
	       how, v[0], v[1]);
	TAP_OK(v[2] == 1, "nor in a vfork() child%s (%d threads)", how, v[2]);
	TAP_OK(v[3] == 2,
	       "the same calls outside them start the agent's thread%s (%d "
	       "threads)",
	       how, v[3]);
	TAP_OK(pid > 0 && itest_wait_registered(d, pid, 10000),
	       "and it registers");
	itest_kill(pid);
	close(out);
}

/*
 * Runs argv (forker young, maybe through stackwatch run) with a start
 * delay of 10 minutes: its "young" count of threads, -1 if none came;
 * *st its status.
 */
static int young_threads(const struct itest_daemon *d, char *const argv[],
			 pid_t *pid, int *st)
{
	static const char *const keys[] = { "young" };
	int v[1], out;

	*st = -1;
	setenv("STACKWATCH_START_DELAY_MS", "600000", 1);
	*pid = itest_spawn(d, argv, &out);
	unsetenv("STACKWATCH_START_DELAY_MS");
	read_counts(out, keys, v, 1);
	if (*pid > 0)
		waitpid(*pid, st, 0);
	close(out);
	return v[0];
}

/* Short waits within the delay start nothing. */
static void test_young(const struct itest_daemon *d)
{
	char *argv[] = { forker, (char *)"young", NULL };
	pid_t pid;
	int st, n = young_threads(d, argv, &pid, &st);

	TAP_OK(n == 1 && WIFEXITED(st) && WEXITSTATUS(st) == 0,
	       "waits shorter than what is left of the delay, polls and mask "
	       "reads for 50 ms start no thread (%d threads)",
	       n);
	TAP_OK(pid > 0 && !connected(d, pid), "and the process never connects");
}

/*
 * "stackwatch run" names the command it execs (its own pid): that one
 * starts the thread at load, whatever the delay.
 */
static void test_run(const struct itest_daemon *d)
{
	char cli[256];
	char *argv[] = { cli,
			 (char *)"run",
			 (char *)"--socket",
			 (char *)d->sock,
			 (char *)"--",
			 forker,
			 (char *)"young",
			 NULL };
	pid_t pid;
	int st, n;

	snprintf(cli, sizeof(cli), "%s/stackwatch", itest_build());
	n = young_threads(d, argv, &pid, &st);
	TAP_OK(n == 2 && WIFEXITED(st) && WEXITSTATUS(st) == 0,
	       "under stackwatch run, the same program has the agent's "
	       "thread from its start (%d threads)",
	       n);
	TAP_OK(pid > 0 && connected(d, pid), "and it connected");
}

int main(void)
{
	static const char *const args[] = { "--sample-interval", "0",
					    "--log-level", "info", NULL };
	struct itest_daemon d;

	snprintf(forker, sizeof(forker), "%s/fixtures/forker",
		 itest_target_build());
	if (itest_daemon_start_args(&d, args) < 0) {
		TAP_OK(0, "the daemon starts");
		return tap_done();
	}
	test_threads(&d);
	test_exec(&d);
	test_settle(&d, false);
	test_settle(&d, true);
	test_young(&d);
	test_run(&d);
	TAP_OK(itest_daemon_stop(&d) == 0, "the daemon stops cleanly");
	itest_daemon_cleanup(&d);
	return tap_done();
}
