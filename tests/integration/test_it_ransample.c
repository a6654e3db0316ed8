/*
 * test_it_ransample.c - periodic samples without the kernel path signal
 * only the threads that ran since the sample before.
 *
 * A daemon with --no-kernel-reads samples fixtures/ran_target every
 * 100 ms. Its sleeper thread waits in poll() and nanosleep() of 60 s and
 * counts the calls a signal cut short (EINTR); its busy thread spins.
 * Once sampling has settled (the sleeper's first sample reads it fresh),
 * over about 2.5 s of samples:
 *
 *  - the sleeper's calls never return early, while samples keep coming
 *    (last_sample_at in /api/v1/targets advances);
 *  - a periodic sample (served to a request that meets it in flight or
 *    just published) has the sleeper with "reused": true, its stack the
 *    same, unchanged_s rising, and the busy thread read fresh by signal;
 *  - the rolling profile of the samples has the sleeper's stack in every
 *    sample, and stackwatch_threads_reused_total rises;
 *  - an on-demand dump that is not served from a sample reads the sleeper
 *    fresh (no "reused"), and so cuts its call short: the documented
 *    behaviour of the signal path.
 */
#include <poll.h>

#include "itest.h"
#include "tap.h"

#define WAIT_MS 15000
#define SETTLE_SAMPLES 6
#define WINDOW_MS 2500

struct prog {
	pid_t pid;
	int out, in;
	pid_t sleeper, busy;
};

/* A line of p's into buf within ms: true, false at EOF or timeout. */
static bool read_line_within(struct prog *p, char *buf, size_t size, long ms)
{
	long end = itest_now_ms() + ms;
	size_t n = 0;

	for (;;) {
		struct pollfd pf = { .fd = p->out, .events = POLLIN };
		long left = end - itest_now_ms();
		char c;

		if (left <= 0 || poll(&pf, 1, (int)left) <= 0 ||
		    read(p->out, &c, 1) != 1)
			return false;
		if (c == '\n') {
			buf[n] = '\0';
			return true;
		}
		if (n + 1 < size)
			buf[n++] = c;
	}
}

/* The sleeper's early returns so far, or -1. */
static long early_returns(struct prog *p)
{
	char line[64];
	long n;

	if (write(p->in, "?\n", 2) != 2 ||
	    !read_line_within(p, line, sizeof(line), WAIT_MS) ||
	    sscanf(line, "eintr %ld", &n) != 1)
		return -1;
	return n;
}

/* p's last_sample_at in /api/v1/targets into buf ("" when none). */
static void last_sample(const struct itest_daemon *d, pid_t pid, char *buf,
			size_t size)
{
	int status;
	cJSON *j = itest_get_json(d, "/api/v1/targets", &status), *t;

	buf[0] = '\0';
	cJSON_ArrayForEach(t, cJSON_GetObjectItem(j, "targets"))
	{
		cJSON *p = cJSON_GetObjectItem(t, "pid");
		cJSON *at = cJSON_GetObjectItem(t, "last_sample_at");

		if (cJSON_IsNumber(p) && (pid_t)p->valuedouble == pid &&
		    cJSON_IsString(at))
			snprintf(buf, size, "%s", at->valuestring);
	}
	cJSON_Delete(j);
}

/* Waits for n more samples of pid; the number seen before the deadline. */
static int wait_samples(const struct itest_daemon *d, pid_t pid, int n, long ms)
{
	char last[64], now[64];
	int seen = 0;

	last_sample(d, pid, last, sizeof(last));
	for (long end = itest_now_ms() + ms;
	     seen < n && itest_now_ms() < end;) {
		itest_sleep_ms(5);
		last_sample(d, pid, now, sizeof(now));
		if (strcmp(now, last) != 0) {
			seen++;
			snprintf(last, sizeof(last), "%s", now);
		}
	}
	return seen;
}

/* Thread tid of a /api/v1/stacks?pid= answer, or NULL. */
static cJSON *thread_of(cJSON *doc, pid_t tid)
{
	cJSON *t;

	cJSON_ArrayForEach(t, cJSON_GetObjectItem(doc, "threads"))
	{
		cJSON *id = cJSON_GetObjectItem(t, "tid");

		if (cJSON_IsNumber(id) && (pid_t)id->valuedouble == tid)
			return t;
	}
	return NULL;
}

static bool is_reused(const cJSON *th)
{
	return cJSON_IsTrue(cJSON_GetObjectItem(th, "reused"));
}

static bool method_is(const cJSON *th, const char *m)
{
	const cJSON *v = cJSON_GetObjectItem(th, "method");

	return cJSON_IsString(v) && strcmp(v->valuestring, m) == 0;
}

/*
 * Dumps of p until one whose sleeper is reused (want true: a periodic
 * sample) or not (false: a fresh read), within ms. The answer, or NULL.
 */
static cJSON *dump_where(const struct itest_daemon *d, struct prog *p,
			 bool want, long ms)
{
	char url[64];

	snprintf(url, sizeof(url), "/api/v1/stacks?pid=%d", (int)p->pid);
	for (long end = itest_now_ms() + ms; itest_now_ms() < end;) {
		int status;
		cJSON *doc;
		const cJSON *th;

		/* Right after a sample is published, or while it is taken:
		 * the request is served that sample. */
		if (want)
			wait_samples(d, p->pid, 1, 2000);
		doc = itest_get_json(d, url, &status);
		th = doc ? thread_of(doc, p->sleeper) : NULL;
		if (th && status == 200 && is_reused(th) == want)
			return doc;
		cJSON_Delete(doc);
		if (!want)
			itest_sleep_ms(20);
	}
	return NULL;
}

/* Whether some frame of th's stack is in function fn. */
static bool stack_has(const cJSON *frames, const char *fn)
{
	const cJSON *f;

	cJSON_ArrayForEach(f, frames)
	{
		const cJSON *name = cJSON_GetObjectItem(f, "function");

		if (cJSON_IsString(name) && strcmp(name->valuestring, fn) == 0)
			return true;
	}
	return false;
}

static void check_sample(const struct itest_daemon *d, struct prog *p)
{
	cJSON *doc = dump_where(d, p, true, WAIT_MS);
	const cJSON *s = thread_of(doc, p->sleeper);
	const cJSON *b = thread_of(doc, p->busy);
	const cJSON *u = cJSON_GetObjectItem(s, "unchanged_s");

	TAP_OK(doc != NULL,
	       "a periodic sample has the sleeper marked \"reused\": true");
	TAP_OK(s && method_is(s, "signal") &&
		       stack_has(cJSON_GetObjectItem(s, "frames"),
				 "sleeper_wait"),
	       "its reused stack is its own (method signal, in sleeper_wait)");
	TAP_OK(cJSON_IsNumber(u) && u->valuedouble >= 1.0,
	       "its stack counts as unchanged across reused samples "
	       "(unchanged_s %.3f)",
	       cJSON_IsNumber(u) ? u->valuedouble : -1.0);
	TAP_OK(b && method_is(b, "signal") && !is_reused(b),
	       "the busy thread, which ran, is read fresh by signal");
	cJSON_Delete(doc);
}

static void check_profile(const struct itest_daemon *d, struct prog *p)
{
	char url[96];
	int status;
	cJSON *doc, *g;
	double samples, count = 0;

	snprintf(url, sizeof(url), "/api/v1/profile?pid=%d&since=2",
		 (int)p->pid);
	doc = itest_get_json(d, url, &status);
	samples = cJSON_GetNumberValue(cJSON_GetObjectItem(doc, "samples"));
	cJSON_ArrayForEach(g, cJSON_GetObjectItem(doc, "groups"))
	{
		if (stack_has(cJSON_GetObjectItem(g, "frames"), "sleeper_wait"))
			count += cJSON_GetNumberValue(
				cJSON_GetObjectItem(g, "count"));
	}
	TAP_OK(samples >= 5 && count == samples,
	       "the sleeper's stack is in each of the last 2 s's samples "
	       "(%.0f of %.0f)",
	       count, samples);
	cJSON_Delete(doc);
}

static void test_sampling(const struct itest_daemon *d, struct prog *p)
{
	double reused0, reused1;
	long before, after;
	int seen;

	/* The first samples read the sleeper fresh: one early return. */
	TAP_OK(wait_samples(d, p->pid, SETTLE_SAMPLES, WAIT_MS) ==
		       SETTLE_SAMPLES,
	       "the target is sampled");
	reused0 = itest_metric(d, "stackwatch_threads_reused_total");
	before = early_returns(p);
	{
		long end = itest_now_ms() + WINDOW_MS;

		seen = 0;
		while (itest_now_ms() < end)
			seen += wait_samples(d, p->pid, 1,
					     end - itest_now_ms());
	}
	after = early_returns(p);
	reused1 = itest_metric(d, "stackwatch_threads_reused_total");
	TAP_OK(seen >= 10, "samples keep coming: %d in %d ms", seen, WINDOW_MS);
	TAP_OK(before >= 0 && after == before,
	       "no early return of the sleeper's calls over %d samples "
	       "(%ld, %ld before)",
	       seen, after - before, before);
	TAP_OK(reused1 - reused0 >= seen,
	       "stackwatch_threads_reused_total rose by %.0f",
	       reused1 - reused0);
	check_profile(d, p);
	check_sample(d, p);
}

static void test_on_demand(const struct itest_daemon *d, struct prog *p)
{
	long before, after;
	cJSON *doc;
	const cJSON *s;

	wait_samples(d, p->pid, 3, WAIT_MS);
	before = early_returns(p);
	doc = dump_where(d, p, false, WAIT_MS);
	s = thread_of(doc, p->sleeper);
	after = early_returns(p);
	TAP_OK(s && method_is(s, "signal") && !is_reused(s),
	       "an on-demand dump reads the sleeper fresh, by signal");
	TAP_OK(before >= 0 && after > before,
	       "and so cuts its call short (%ld early returns)",
	       after - before);
	cJSON_Delete(doc);
}

/* Kills p's process group, reaps it and checks that nothing is left. */
static void finish(struct prog *p)
{
	if (p->pid <= 0)
		return;
	kill(-p->pid, SIGKILL);
	kill(p->pid, SIGKILL);
	waitpid(p->pid, NULL, 0);
	for (long end = itest_now_ms() + WAIT_MS;
	     kill(-p->pid, 0) == 0 && itest_now_ms() < end;)
		itest_sleep_ms(10);
	TAP_OK(kill(-p->pid, 0) < 0 && errno == ESRCH,
	       "no process of the test is left");
	close(p->out);
	close(p->in);
}

int main(void)
{
	static const char *const args[] = { "--sample-interval", "100",
					    "--no-kernel-reads", NULL };
	char fixture[256], line[64];
	char *argv[2] = { fixture, NULL };
	struct itest_daemon d;
	struct prog p = { 0 };

	signal(SIGPIPE, SIG_IGN);
	snprintf(fixture, sizeof(fixture), "%s/fixtures/ran_target",
		 itest_target_build());
	if (itest_daemon_start_args(&d, args) < 0) {
		TAP_OK(0, "the daemon starts");
		return tap_done();
	}
	p.pid = itest_spawn_io(&d, argv, &p.out, &p.in);
	if (p.pid > 0 && read_line_within(&p, line, sizeof(line), WAIT_MS) &&
	    sscanf(line, "ready %d %d", &p.sleeper, &p.busy) == 2 &&
	    itest_wait_registered(&d, p.pid, WAIT_MS)) {
		test_sampling(&d, &p);
		test_on_demand(&d, &p);
	} else {
		TAP_OK(0, "the fixture starts under the agent");
	}
	finish(&p);
	TAP_OK(itest_daemon_stop(&d) == 0, "the daemon stops cleanly");
	itest_daemon_cleanup(&d);
	return tap_done();
}
