/*
 * test_it_ransample.c - periodic samples without the kernel path signal
 * only the threads that ran since the sample before.
 *
 * A daemon with --no-kernel-reads samples fixtures/ran_target every
 * 100 ms. Its sleeper thread waits in poll() of 60 s, its napper thread
 * in nanosleep() of 60 s, and both count the calls a signal cut short
 * (EINTR); its busy thread spins. The first sample reads every thread
 * fresh; then:
 *
 *  - a periodic sample (served to a request that meets it in flight or
 *    just published) has both with "reused": true, their stacks their
 *    own, unchanged_s rising, and the busy thread read fresh by signal;
 *  - over the next 2.5 s of samples no call of the sleeper or the napper
 *    returns early, while samples keep coming (last_sample_at in
 *    /api/v1/targets advances) and stackwatch_threads_reused_total rises;
 *  - the rolling profile of the samples has both stacks in every sample;
 *  - an on-demand dump taken afterwards reads them fresh (no "reused"),
 *    and so cuts their calls short: the documented behaviour of the
 *    signal path.
 */
#include <poll.h>

#include "itest.h"
#include "render/render.h"
#include "tap.h"

#define WAIT_MS 15000
#define SETTLE_SAMPLES 6
#define WINDOW_MS 2500

struct prog {
	pid_t pid;
	int out, in;
	pid_t sleeper, napper, busy;
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

/* The early returns of poll and of nanosleep so far: true, or false. */
static bool early_returns(struct prog *p, long n[2])
{
	char line[64];

	n[0] = n[1] = -1;
	return write(p->in, "?\n", 2) == 2 &&
	       read_line_within(p, line, sizeof(line), WAIT_MS) &&
	       sscanf(line, "eintr %ld %ld", &n[0], &n[1]) == 2;
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
 * sample) or not (false: a fresh read), within ms, and taken after
 * `after` (render_iso_time(); NULL: any). The answer, or NULL.
 */
static cJSON *dump_where(const struct itest_daemon *d, struct prog *p,
			 bool want, const char *after, long ms)
{
	char url[64];

	snprintf(url, sizeof(url), "/api/v1/stacks?pid=%d", (int)p->pid);
	for (long end = itest_now_ms() + ms; itest_now_ms() < end;) {
		int status;
		cJSON *doc;
		const cJSON *th, *at;

		/* Right after a sample is published, or while it is taken:
		 * the request is served that sample. */
		if (want)
			wait_samples(d, p->pid, 1, 2000);
		doc = itest_get_json(d, url, &status);
		th = doc ? thread_of(doc, p->sleeper) : NULL;
		at = cJSON_GetObjectItem(doc, "collected_at");
		if (th && status == 200 && is_reused(th) == want &&
		    (!after || (cJSON_IsString(at) &&
				strcmp(at->valuestring, after) > 0)))
			return doc;
		cJSON_Delete(doc);
		if (!want)
			itest_sleep_ms(20);
	}
	return NULL;
}

/* The frames of thread th of doc: its group's. */
static const cJSON *frames_of(const cJSON *doc, const cJSON *th)
{
	const cJSON *g = cJSON_GetObjectItem(th, "group");

	if (!cJSON_IsNumber(g))
		return NULL;
	return cJSON_GetObjectItem(
		cJSON_GetArrayItem(cJSON_GetObjectItem(doc, "groups"),
				   (int)g->valuedouble),
		"frames");
}

/* Whether some frame of frames is in function fn. */
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

/*
 * Checks a periodic sample of p: both sleepers reused, the sleeper's
 * stack unchanged for at least min_s, the busy thread read fresh.
 */
static void check_sample(const struct itest_daemon *d, struct prog *p,
			 double min_s)
{
	cJSON *doc = dump_where(d, p, true, NULL, WAIT_MS);
	const cJSON *s = thread_of(doc, p->sleeper);
	const cJSON *n = thread_of(doc, p->napper);
	const cJSON *b = thread_of(doc, p->busy);
	const cJSON *u = cJSON_GetObjectItem(s, "unchanged_s");

	TAP_OK(doc != NULL,
	       "a periodic sample has the sleeper marked \"reused\": true");
	TAP_OK(n && is_reused(n), "and the napper too");
	TAP_OK(s && n && method_is(s, "signal") && method_is(n, "signal") &&
		       stack_has(frames_of(doc, s), "sleeper_wait") &&
		       stack_has(frames_of(doc, n), "sleeper_wait"),
	       "their reused stacks are their own (method signal, in "
	       "sleeper_wait)");
	TAP_OK(cJSON_IsNumber(u) && u->valuedouble >= min_s,
	       "a reused stack counts as unchanged across samples "
	       "(unchanged_s %.3f, at least %.1f)",
	       cJSON_IsNumber(u) ? u->valuedouble : -1.0, min_s);
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
	TAP_OK(samples >= 5 && count == 2 * samples,
	       "both sleeping stacks are in each of the last 2 s's samples "
	       "(%.0f thread-samples of %.0f samples)",
	       count, samples);
	cJSON_Delete(doc);
}

static void test_sampling(const struct itest_daemon *d, struct prog *p)
{
	double reused0, reused1;
	long before[2], after[2];
	int seen;

	/* The first samples read the sleepers fresh: one early return. */
	TAP_OK(wait_samples(d, p->pid, SETTLE_SAMPLES, WAIT_MS) ==
		       SETTLE_SAMPLES,
	       "the target is sampled");
	/* From a sample that reused them on, nothing signals them. */
	check_sample(d, p, 0.1);
	reused0 = itest_metric(d, "stackwatch_threads_reused_total");
	early_returns(p, before);
	{
		long end = itest_now_ms() + WINDOW_MS;

		seen = 0;
		while (itest_now_ms() < end)
			seen += wait_samples(d, p->pid, 1,
					     end - itest_now_ms());
	}
	early_returns(p, after);
	reused1 = itest_metric(d, "stackwatch_threads_reused_total");
	TAP_OK(seen >= 10, "samples keep coming: %d in %d ms", seen, WINDOW_MS);
	TAP_OK(before[0] >= 0 && after[0] == before[0],
	       "no early return of poll() over %d samples (%ld, %ld before)",
	       seen, after[0] - before[0], before[0]);
	TAP_OK(before[1] >= 0 && after[1] == before[1],
	       "no early return of nanosleep() over %d samples (%ld, %ld "
	       "before)",
	       seen, after[1] - before[1], before[1]);
	TAP_OK(reused1 - reused0 >= 2 * seen,
	       "stackwatch_threads_reused_total rose by %.0f",
	       reused1 - reused0);
	check_profile(d, p);
	/* The watchdog's measure: the same stack for the whole window. */
	check_sample(d, p, WINDOW_MS / 1000.0);
}

static void test_on_demand(const struct itest_daemon *d, struct prog *p)
{
	long before[2], after[2];
	struct timespec now;
	char at[48];
	cJSON *doc;
	const cJSON *s, *n;

	early_returns(p, before);
	clock_gettime(CLOCK_REALTIME, &now);
	render_iso_time(&now, at, sizeof(at));
	doc = dump_where(d, p, false, at, WAIT_MS);
	s = thread_of(doc, p->sleeper);
	n = thread_of(doc, p->napper);
	early_returns(p, after);
	TAP_OK(s && n && method_is(s, "signal") && !is_reused(s) &&
		       method_is(n, "signal") && !is_reused(n),
	       "an on-demand dump reads the sleepers fresh, by signal");
	TAP_OK(before[0] >= 0 && after[0] > before[0] && after[1] > before[1],
	       "and so cuts their calls short (%ld, %ld early returns)",
	       after[0] - before[0], after[1] - before[1]);
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
	    sscanf(line, "ready %d %d %d", &p.sleeper, &p.napper, &p.busy) ==
		    3 &&
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
