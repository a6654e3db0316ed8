/*
 * test_it_lastthread.c - the agent's thread never keeps a process alive:
 * a program whose last thread ends by pthread_exit() or by returning
 * ends as glibc ends it without us (exit(0), atexit handlers run), and a
 * signal that would end it still does. tests/fixtures/last_thread, each
 * mode plainly first (what it does without us), then under the agent
 * (started at once, also in a forked child) with the real daemon sampling
 * every 100 ms and a dump of the process every 100 ms meanwhile:
 *
 * - main_exit: main calls pthread_exit(), its worker returns 300 ms later;
 * - many: main calls pthread_exit(), 10 workers end at random times;
 * - fork_thread: a thread forks, and in the child that thread returns;
 * - sigterm: main calls pthread_exit(), workers sleep on; SIGTERM.
 *
 * Each must end with the status it has plainly, within 1 s of its last
 * thread (the bound checked is 5 s, for a busy machine; the time taken
 * is printed).
 */
#include <pthread.h>
#include <stdatomic.h>

#include "itest.h"
#include "tap.h"

#define WAIT_MS 5000

static char fixture[512];

struct dumper {
	const struct itest_daemon *d;
	_Atomic pid_t pid, child;
	_Atomic int stop;
	_Atomic int ok; /* answers 200 */
	pthread_t t;
};

/* Dumps the process (and its child, once known) every 100 ms. */
static void *dump_loop(void *arg)
{
	struct dumper *u = arg;

	while (!atomic_load(&u->stop)) {
		pid_t ps[2] = { atomic_load(&u->pid), atomic_load(&u->child) };

		for (int i = 0; i < 2; i++) {
			struct http_response r;
			char target[64];

			if (ps[i] <= 0)
				continue;
			snprintf(target, sizeof(target),
				 "/api/v1/stacks?pid=%d&timeout_ms=300",
				 (int)ps[i]);
			memset(&r, 0, sizeof(r));
			if (itest_get(u->d, target, &r) == 0) {
				if (r.status == 200)
					atomic_fetch_add(&u->ok, 1);
				http_response_release(&r);
			}
		}
		itest_sleep_ms(100);
	}
	return NULL;
}

/* Waits for pid to end within ms; its wait status, or -1 (then killed). */
static int wait_end(pid_t pid, long ms, long *took)
{
	long t0 = itest_now_ms();
	int st;

	while (itest_now_ms() - t0 < ms) {
		if (waitpid(pid, &st, WNOHANG) == pid) {
			*took = itest_now_ms() - t0;
			return st;
		}
		itest_sleep_ms(5);
	}
	*took = itest_now_ms() - t0;
	itest_kill(pid);
	return -1;
}

struct outcome {
	int status; /* wait status, -1: did not end */
	long ms;    /* from "ready" to the end */
	bool atexit;
	char child[128]; /* fork_thread: the parent's line about its child */
	int dumps;	 /* answered */
};

static void run(const struct itest_daemon *d, const char *mode, bool agent,
		struct outcome *o)
{
	char ten[] = "10";
	char *argv[] = { fixture, (char *)mode, ten, NULL };
	struct dumper u = { .d = d };
	char line[128];
	int out;
	pid_t pid;
	FILE *f;

	memset(o, 0, sizeof(*o));
	o->status = -1;
	if (agent) {
		setenv("STACKWATCH_START_DELAY_MS", "0", 1);
		pid = itest_spawn(d, argv, &out);
		unsetenv("STACKWATCH_START_DELAY_MS");
	} else {
		int p[2];

		if (pipe(p) < 0)
			return;
		pid = fork();
		if (pid == 0) {
			dup2(p[1], 1);
			close(p[0]);
			close(p[1]);
			execv(argv[0], argv);
			_exit(127);
		}
		close(p[1]);
		out = p[0];
	}
	if (pid < 0)
		return;
	f = fdopen(out, "r");
	if (!f || !fgets(line, sizeof(line), f) || strncmp(line, "ready", 5)) {
		itest_kill(pid);
		if (f)
			fclose(f);
		return;
	}
	if (agent) {
		atomic_store(&u.pid, pid);
		pthread_create(&u.t, NULL, dump_loop, &u);
	}
	if (strcmp(mode, "sigterm") == 0) {
		itest_sleep_ms(700); /* sampled and dumped meanwhile */
		kill(pid, SIGTERM);
	}
	o->status = wait_end(pid, WAIT_MS, &o->ms);
	if (agent) {
		atomic_store(&u.stop, 1);
		pthread_join(u.t, NULL);
		o->dumps = atomic_load(&u.ok);
	}
	while (fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\n")] = '\0';
		if (strcmp(line, "atexit") == 0)
			o->atexit = true;
		if (strncmp(line, "child ", 6) == 0 &&
		    strncmp(line, "child exited", 12) != 0 &&
		    strncmp(line, "child killed", 12) != 0 &&
		    strncmp(line, "child hung", 10) != 0)
			continue; /* the child's own pid */
		if (strncmp(line, "child ", 6) == 0)
			snprintf(o->child, sizeof(o->child), "%s", line);
	}
	fclose(f);
}

static const char *says(int st, char *buf, size_t size)
{
	if (st < 0)
		snprintf(buf, size, "did not end within %d ms", WAIT_MS);
	else if (WIFEXITED(st))
		snprintf(buf, size, "exit %d", WEXITSTATUS(st));
	else
		snprintf(buf, size, "signal %d", WTERMSIG(st));
	return buf;
}

static void test_mode(const struct itest_daemon *d, const char *mode)
{
	struct outcome plain, watched;
	char a[64], b[64];

	run(d, mode, false, &plain);
	run(d, mode, true, &watched);
	TAP_OK(plain.status >= 0,
	       "%s: plainly the program ends (%s, %ld ms, atexit %s)", mode,
	       says(plain.status, a, sizeof(a)), plain.ms,
	       plain.atexit ? "ran" : "did not run");
	TAP_OK(watched.status == plain.status && watched.atexit == plain.atexit,
	       "%s: under the agent, sampled and dumped (%d dumps), it ends "
	       "the same way: %s, atexit %s (plainly %s)",
	       mode, watched.dumps, says(watched.status, b, sizeof(b)),
	       watched.atexit ? "ran" : "did not run",
	       says(plain.status, a, sizeof(a)));
	TAP_OK(watched.status >= 0 && watched.ms <= plain.ms + 1000,
	       "%s: within 1 s of when it ends plainly (%ld ms; plainly "
	       "%ld ms)",
	       mode, watched.ms, plain.ms);
	if (strcmp(mode, "fork_thread") == 0)
		TAP_OK(strncmp(plain.child, "child exited 0 ", 15) == 0 &&
			       strncmp(watched.child, "child exited 0 ", 15) ==
				       0,
		       "fork_thread: the child whose only thread returned "
		       "exited 0 (plainly '%s', watched '%s')",
		       plain.child, watched.child);
	if (strcmp(mode, "sigterm") != 0)
		TAP_OK(watched.dumps > 0, "%s: the process was dumped (%d)",
		       mode, watched.dumps);
}

int main(int argc, char **argv)
{
	static const char *const args[] = { "--sample-interval", "100",
					    "--max-dump-rate=1000", NULL };
	static const char *const modes[] = { "main_exit", "many", "fork_thread",
					     "sigterm" };
	struct itest_daemon d;

	snprintf(fixture, sizeof(fixture), "%s/fixtures/last_thread",
		 itest_target_build());
	if (itest_daemon_start_args(&d, args) < 0) {
		TAP_OK(0, "the daemon starts");
		return tap_done();
	}
	for (size_t i = 0; i < sizeof(modes) / sizeof(*modes); i++)
		if (argc < 2 || strcmp(argv[1], modes[i]) == 0)
			test_mode(&d, modes[i]);
	TAP_OK(itest_daemon_stop(&d) == 0, "the daemon stops cleanly");
	itest_daemon_cleanup(&d);
	return tap_done();
}
