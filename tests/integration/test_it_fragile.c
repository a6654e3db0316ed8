/*
 * test_it_fragile.c - threads that a signal would hurt, in programs under
 * the real agent (fixtures/fragile_target), dumped through the real
 * daemon again and again while it samples them too. Blocked, they are read
 * from the kernel and never signalled:
 *
 *  - timed sleeps (sleep, nanosleep, poll, epoll_wait, select,
 *    sigtimedwait) under the default sampling and a dump every 200 ms
 *    all run their full time: none returns early or with EINTR;
 *  - a SECCOMP_MODE_STRICT worker and one under a filter of its own that
 *    kills the process on any other call than its few, both blocked in
 *    read(), survive 100 dumps and 100 ms sampling and answer a job
 *    afterwards;
 *  - a thread with about 600 bytes of stack left below its stack pointer
 *    (no room for a signal frame) survives 50 dumps, its stack read;
 *  - threads that block every signal, through libc (whose mask the agent
 *    keeps its own signal out of) or by raw system call, and take a
 *    failed poll() or nanosleep() for a fatal error, survive 50 dumps.
 *
 * Each of them fails on the signal path alone. To see it, run the test by
 * hand with SW_FRAGILE_NO_KREADS=1 in its environment: the daemons are
 * then started with --no-kernel-reads, which signals every thread as the
 * agent did before kernel reads. make check never sets it.
 */
#include <poll.h>

#include "itest.h"
#include "tap.h"

#define WAIT_MS 15000
#define SLEEP_MS 4000 /* each timed call of the sleeps mode */
#define SECCOMP_DUMPS 100
#define SAMPLING_MS 1500 /* 100 ms sampling alone, after the dumps */
#define SMALL_DUMPS 50
#define MASKED_DUMPS 50

static char fixture[256];
static bool no_kreads; /* SW_FRAGILE_NO_KREADS: the old signal path */

/* A fixture under the agent: its pid (and process group), stdout, stdin. */
struct prog {
	pid_t pid;
	int out, in;
};

static bool start_prog(const struct itest_daemon *d, const char *mode,
		       const char *arg, struct prog *p)
{
	char *argv[4] = { fixture, (char *)mode, (char *)arg, NULL };

	p->out = p->in = -1;
	p->pid = itest_spawn_io(d, argv, &p->out, &p->in);
	return p->pid > 0;
}

/*
 * Reads a line of p's into buf before deadline (ms): 1, 0 when the
 * deadline came first, -1 at EOF (the program is gone).
 */
static int read_line_by(struct prog *p, char *buf, size_t size, long deadline)
{
	size_t n = 0;

	for (;;) {
		struct pollfd pf = { .fd = p->out, .events = POLLIN };
		long left = deadline - itest_now_ms();
		int r;
		char c;

		if (left < 0)
			left = 0;
		r = poll(&pf, 1, (int)left);
		if (r == 0)
			return 0;
		if (r < 0 || read(p->out, &c, 1) != 1)
			return -1;
		if (c == '\n') {
			buf[n] = '\0';
			return 1;
		}
		if (n < size - 1)
			buf[n++] = c;
	}
}

/*
 * Reads p's lines up to "ready" (false if none came), copying one that
 * starts with prefix, if any, into got. Then waits for its agent.
 */
static bool wait_ready(const struct itest_daemon *d, struct prog *p,
		       const char *prefix, char *got, size_t size)
{
	long deadline = itest_now_ms() + WAIT_MS;
	char line[128];

	while (read_line_by(p, line, sizeof(line), deadline) == 1) {
		if (prefix && strncmp(line, prefix, strlen(prefix)) == 0)
			snprintf(got, size, "%s", line);
		if (strcmp(line, "ready") == 0)
			return itest_wait_registered(d, p->pid, WAIT_MS);
	}
	return false;
}

/* Whether p is still running; if not, how it ended, into how. */
static bool alive(struct prog *p, char *how, size_t size)
{
	siginfo_t si;

	snprintf(how, size, "running");
	memset(&si, 0, sizeof(si));
	if (waitid(P_PID, (id_t)p->pid, &si, WEXITED | WNOHANG | WNOWAIT) < 0)
		return false;
	if (si.si_pid == 0)
		return true;
	if (si.si_code == CLD_EXITED)
		snprintf(how, size, "exited %d", si.si_status);
	else
		snprintf(how, size, "killed by signal %d (%s)", si.si_status,
			 strsignal(si.si_status));
	return false;
}

/* Kills p's process group, reaps it and checks that nothing is left. */
static void finish(struct prog *p)
{
	if (p->pid <= 0)
		return;
	kill(-p->pid, SIGKILL);
	kill(p->pid, SIGKILL); /* had it no group of its own yet */
	waitpid(p->pid, NULL, 0);
	for (long end = itest_now_ms() + WAIT_MS;
	     kill(-p->pid, 0) == 0 && itest_now_ms() < end;)
		itest_sleep_ms(10);
	TAP_OK(kill(-p->pid, 0) < 0 && errno == ESRCH,
	       "no process of the test is left");
	close(p->out);
	close(p->in);
	p->pid = 0;
}

static cJSON *dump(const struct itest_daemon *d, pid_t pid, int *status)
{
	char path[96];

	snprintf(path, sizeof(path), "/api/v1/stacks?pid=%d", (int)pid);
	return itest_get_json(d, path, status);
}

static const char *str_of(cJSON *o, const char *key)
{
	cJSON *v = cJSON_GetObjectItem(o, key);

	return cJSON_IsString(v) ? v->valuestring : "";
}

/* The thread called name in doc, or NULL. */
static cJSON *thread_named(cJSON *doc, const char *name)
{
	cJSON *t;

	cJSON_ArrayForEach(t, cJSON_GetObjectItem(doc, "threads"))
	{
		if (strcmp(str_of(t, "name"), name) == 0)
			return t;
	}
	return NULL;
}

/* Whether the stack of thread t has a frame of function fn. */
static bool has_frame(cJSON *doc, cJSON *t, const char *fn)
{
	cJSON *gid = cJSON_GetObjectItem(t, "group"), *g, *f;

	cJSON_ArrayForEach(g, cJSON_GetObjectItem(doc, "groups"))
	{
		cJSON *id = cJSON_GetObjectItem(g, "id");

		if (!cJSON_IsNumber(gid) || !cJSON_IsNumber(id) ||
		    id->valuedouble != gid->valuedouble)
			continue;
		cJSON_ArrayForEach(f, cJSON_GetObjectItem(g, "frames"))
		{
			if (strcmp(str_of(f, "function"), fn) == 0)
				return true;
		}
	}
	return false;
}

/*
 * Whether a dump (HTTP status) has every thread ok and each of names[]
 * among them, read from the kernel. If not, why, into why.
 */
static bool dump_good(cJSON *doc, int status, const char *const *names,
		      size_t n, char *why, size_t size)
{
	cJSON *t;

	if (status != 200 || !doc) {
		snprintf(why, size, "HTTP %d", status);
		return false;
	}
	cJSON_ArrayForEach(t, cJSON_GetObjectItem(doc, "threads"))
	{
		if (strcmp(str_of(t, "status"), "ok") != 0) {
			snprintf(why, size, "%s: %s (%s)", str_of(t, "name"),
				 str_of(t, "status"), str_of(t, "error"));
			return false;
		}
	}
	for (size_t i = 0; i < n; i++) {
		t = thread_named(doc, names[i]);
		if (!t || strcmp(str_of(t, "method"), "kernel") != 0) {
			snprintf(why, size, "%s: %s", names[i],
				 t ? str_of(t, "method") : "missing");
			return false;
		}
	}
	return true;
}

/*
 * Dumps p up to n times (fewer if it dies), each dump checked by
 * dump_good(); fn, if not NULL, must be in the stack of names[0]. Returns
 * the good ones, the first failure's reason in why.
 */
static int dump_many(const struct itest_daemon *d, struct prog *p, int n,
		     const char *const *names, size_t nnames, const char *fn,
		     char *why, size_t size)
{
	char how[64], reason[256];
	int good = 0, i;

	snprintf(why, size, "none");
	for (i = 0; i < n && alive(p, how, sizeof(how)); i++) {
		int status;
		cJSON *doc = dump(d, p->pid, &status);
		bool ok = dump_good(doc, status, names, nnames, reason,
				    sizeof(reason));

		if (ok && fn &&
		    !has_frame(doc, thread_named(doc, names[0]), fn)) {
			snprintf(reason, sizeof(reason),
				 "no %s() in %s's stack", fn, names[0]);
			ok = false;
		}
		if (ok)
			good++;
		else if (strcmp(why, "none") == 0)
			snprintf(why, size, "dump %d: %s", i + 1, reason);
		cJSON_Delete(doc);
	}
	if (i < n && strcmp(why, "none") == 0)
		snprintf(why, size, "the program %s before dump %d", how,
			 i + 1);
	return good;
}

/* The sleeps mode: how each call ended, from the program's lines. */
static const char *const sleepers[] = {
	"sl-sleep", "sl-nanosleep", "sl-poll",
	"sl-epoll", "sl-select",    "sl-sigwait"
};
#define NSLEEPERS (sizeof(sleepers) / sizeof(sleepers[0]))

static size_t note_outcome(const char *line, char how[][16], long *took)
{
	char name[32], what[16];
	long ms;

	if (sscanf(line, "%31s %15s %ld", name, what, &ms) != 3)
		return 0;
	for (size_t i = 0; i < NSLEEPERS; i++)
		if (strcmp(name, sleepers[i]) == 0 &&
		    strcmp(how[i], "nothing") == 0) {
			snprintf(how[i], 16, "%s", what);
			took[i] = ms;
			return 1;
		}
	return 0;
}

/*
 * Timed calls of SLEEP_MS under the default sampling (1 s) and a dump
 * from here every 200 ms: each runs its full time. The 200 ms is the pace
 * of the dumps, not a wait for anything; the program's lines are read
 * meanwhile.
 */
static void test_sleeps(const struct itest_daemon *d)
{
	char arg[16], line[128], why[256] = "none", how[NSLEEPERS][16];
	long took[NSLEEPERS], spawned = itest_now_ms(), deadline;
	size_t told = 0;
	int dumps = 0, answered = 0, early = 0, early_good = 0;
	struct prog p;

	for (size_t i = 0; i < NSLEEPERS; i++) {
		snprintf(how[i], 16, "nothing");
		took[i] = -1;
	}
	snprintf(arg, sizeof(arg), "%d", SLEEP_MS);
	TAP_OK(start_prog(d, "sleeps", arg, &p) &&
		       wait_ready(d, &p, NULL, NULL, 0),
	       "sleeps: six threads in timed calls of %d ms, registered",
	       SLEEP_MS);
	deadline = itest_now_ms() + SLEEP_MS + WAIT_MS;
	while (p.pid > 0 && told < NSLEEPERS && itest_now_ms() < deadline) {
		long next = itest_now_ms() + 200;
		int status, r;
		cJSON *doc = dump(d, p.pid, &status);

		dumps++;
		answered += status == 200;
		/* No call can end before SLEEP_MS from the spawn: until
		 * then each dump finds all of them blocked. */
		if (itest_now_ms() < spawned + SLEEP_MS) {
			early++;
			if (dump_good(doc, status, sleepers, NSLEEPERS, line,
				      sizeof(line)))
				early_good++;
			else if (strcmp(why, "none") == 0)
				snprintf(why, sizeof(why), "%s", line);
		}
		cJSON_Delete(doc);
		while ((r = read_line_by(&p, line, sizeof(line), next)) == 1)
			told += note_outcome(line, how, took);
		if (r < 0)
			break;
	}
	TAP_OK(dumps >= 5 && answered == dumps,
	       "sleeps: %d dumps meanwhile, %d answered", dumps, answered);
	TAP_OK(early > 0 && early_good == early,
	       "sleeps: in each dump taken while they sleep, every thread is "
	       "ok and the sleepers read from the kernel (%d of %d; first "
	       "bad: %s)",
	       early_good, early, why);
	for (size_t i = 0; i < NSLEEPERS; i++)
		TAP_OK(strcmp(how[i], "ok") == 0 && took[i] >= SLEEP_MS - 100,
		       "sleeps: %s's call ran its full %d ms: %s after %ld ms",
		       sleepers[i], SLEEP_MS, how[i], took[i]);
	finish(&p);
}

/*
 * A strict-mode worker and a filtered one, blocked in read(): 100 dumps,
 * then SAMPLING_MS of the daemon's 100 ms sampling alone, then a job.
 */
static void test_seccomp(const struct itest_daemon *d)
{
	static const char *const workers[] = { "strict", "filtered" };
	char why[256], how[64], line[128];
	bool strict = false, filtered = false;
	double before, after;
	long deadline;
	struct prog p;
	int good;

	TAP_OK(start_prog(d, "seccomp", NULL, &p) &&
		       wait_ready(d, &p, NULL, NULL, 0),
	       "seccomp: strict and filtered workers block in read(), "
	       "registered");
	good = dump_many(d, &p, SECCOMP_DUMPS, workers, 2, NULL, why,
			 sizeof(why));
	TAP_OK(good == SECCOMP_DUMPS,
	       "seccomp: every thread of every dump ok, both workers read "
	       "from the kernel (%d of %d; first bad: %s)",
	       good, SECCOMP_DUMPS, why);
	/* The point of this wait: the sampler's turns, with no dump of ours.
	 * A line or EOF from the program would end it early. */
	before = itest_metric(d, "stackwatch_kernel_reads_total");
	read_line_by(&p, line, sizeof(line), itest_now_ms() + SAMPLING_MS);
	after = itest_metric(d, "stackwatch_kernel_reads_total");
	TAP_OK(alive(&p, how, sizeof(how)) && after - before >= 3,
	       "seccomp: the program lives (%s) after the dumps and %d ms of "
	       "100 ms sampling (%.0f kernel reads then)",
	       how, SAMPLING_MS, after - before);
	if (write(p.in, "job 41\n", 7) == 7) {
		deadline = itest_now_ms() + WAIT_MS;
		while ((!strict || !filtered) &&
		       read_line_by(&p, line, sizeof(line), deadline) == 1) {
			strict = strict || strcmp(line, "strict 42") == 0;
			filtered = filtered || strcmp(line, "filtered 42") == 0;
		}
	}
	TAP_OK(strict, "seccomp: the strict worker still serves a job");
	TAP_OK(filtered, "seccomp: so does the filtered one");
	finish(&p);
}

/* A thread with about 600 bytes of stack left, blocked: 50 dumps. */
static void test_smallstack(const struct itest_daemon *d)
{
	static const char *const small[] = { "smallstack" };
	char left_line[64] = "", why[256], how[64];
	long left = -1;
	struct prog p;
	bool ready;
	int good;

#if defined(__SANITIZE_ADDRESS__)
	/* Its instrumented frames do not fit a 16 KiB stack at all. */
	if (d) {
		TAP_SKIP("smallstack: AddressSanitizer's own frames need more "
			 "than a 16 KiB stack");
		return;
	}
#endif
	ready = start_prog(d, "smallstack", NULL, &p) &&
		wait_ready(d, &p, "left ", left_line, sizeof(left_line)) &&
		sscanf(left_line, "left %ld", &left) == 1;
	TAP_OK(ready && left >= 256 && left <= 1024,
	       "smallstack: a 16 KiB stack with %ld bytes left below the "
	       "stack pointer, blocked in read(), registered",
	       left);
	good = dump_many(d, &p, SMALL_DUMPS, small, 1, "small_block", why,
			 sizeof(why));
	TAP_OK(good == SMALL_DUMPS,
	       "smallstack: every thread of every dump ok, the thread read "
	       "from the kernel with small_block() in its stack (%d of %d; "
	       "first bad: %s)",
	       good, SMALL_DUMPS, why);
	TAP_OK(alive(&p, how, sizeof(how)),
	       "smallstack: the program lives (%s)", how);
	finish(&p);
}

/* Threads blocking every signal, EINTR fatal to them: 50 dumps. */
static void test_masked(const struct itest_daemon *d)
{
	static const char *const masked[] = { "mask-poll", "mask-sleep",
					      "raw-poll", "raw-sleep" };
	char why[256], how[64], line[128] = "";
	struct prog p;
	int good;

	TAP_OK(start_prog(d, "masked", NULL, &p) &&
		       wait_ready(d, &p, NULL, NULL, 0),
	       "masked: four threads blocking every signal sleep, "
	       "registered");
	good = dump_many(d, &p, MASKED_DUMPS, masked, 4, NULL, why,
			 sizeof(why));
	TAP_OK(good == MASKED_DUMPS,
	       "masked: every thread of every dump ok, the four read from "
	       "the kernel (%d of %d; first bad: %s)",
	       good, MASKED_DUMPS, why);
	/* What it said, if it said anything: "NAME eintr" before exit(3). */
	read_line_by(&p, line, sizeof(line), itest_now_ms());
	TAP_OK(alive(&p, how, sizeof(how)) && line[0] == '\0',
	       "masked: the program lives, no call failed (%s; said '%s')", how,
	       line);
	finish(&p);
}

/* Starts a daemon with args, plus --no-kernel-reads when asked. */
static int start_daemon(struct itest_daemon *d, const char *const *args)
{
	const char *all[8];
	size_t n = 0;

	for (; args && *args && n < 6; args++)
		all[n++] = *args;
	if (no_kreads)
		all[n++] = "--no-kernel-reads";
	all[n] = NULL;
	return itest_daemon_start_args(d, all);
}

int main(void)
{
	static const char *const sampled[] = { "--sample-interval", "100",
					       "--max-dump-rate", "1000",
					       NULL };
	struct itest_daemon d;
	const char *old = getenv("SW_FRAGILE_NO_KREADS");

	signal(SIGPIPE, SIG_IGN);
	no_kreads = old && *old && strcmp(old, "0") != 0;
	snprintf(fixture, sizeof(fixture), "%s/fixtures/fragile_target",
		 itest_target_build());

	/* The default sampling: no --sample-interval. */
	if (start_daemon(&d, NULL) < 0) {
		TAP_OK(0, "the daemon starts (default sampling)");
		return tap_done();
	}
	test_sleeps(&d);
	itest_daemon_stop(&d);
	itest_daemon_cleanup(&d);

	/* Every dump asked for is a fresh one, sampling every 100 ms. */
	if (start_daemon(&d, sampled) < 0) {
		TAP_OK(0, "the daemon starts (sampling every 100 ms)");
		return tap_done();
	}
	test_seccomp(&d);
	test_smallstack(&d);
	test_masked(&d);
	TAP_OK(itest_daemon_stop(&d) == 0, "the daemon stops cleanly");
	itest_daemon_cleanup(&d);
	return tap_done();
}
