/*
 * test_it_history.c - the sample history, against the real daemon and the
 * real demo (tests/fixtures/demo.c) under the agent:
 *
 *  - a burst of dumps asked for (as the page and the CLI ask) does not
 *    push periodic samples out: with --history 20 at 200 ms the history
 *    still reaches 4 s back after 60 dumps, and a diff 3 s back answers;
 *  - the history is kept by time (--history-seconds): what is older goes,
 *    /api/v1/targets says what is kept ("history_from",
 *    "history_samples"), and a diff answers 404 until the target is older
 *    than the time asked, then 200 within one interval and a little;
 *  - at the default settings a sample a second is kept, and 15 minutes
 *    of the demo's samples fit the default memory budget (the arithmetic
 *    behind "diff (60 s) answers from 65 s on");
 *  - a process without the agent that is not sampled: diff and profile
 *    say so and name --sample-ptrace, not "not a process you may see".
 *
 * SW_HISTORY_LONG=1 adds the real thing at the defaults (about 70 s, by
 * hand): a diff 60 s back answers 200 65 s after the demo registered,
 * with a dump asked for every second meanwhile.
 */
#include <pthread.h>

#include "itest.h"
#include "tap.h"

static char demo_bin[256];

/* Starts the demo (its spinner asleep throughout); waits for it. */
static pid_t start_demo(const struct itest_daemon *d)
{
	char *argv[] = { demo_bin, (char *)"100000", (char *)"1", NULL };
	pid_t pid = itest_spawn(d, argv, NULL);

	TAP_OK(itest_wait_registered(d, pid, 20000), "the demo registered");
	return pid;
}

/* What /api/v1/targets says of pid's history; false if pid is absent. */
static bool history_of(const struct itest_daemon *d, pid_t pid, double *from,
		       int *samples, double *bytes)
{
	int status;
	cJSON *j = itest_get_json(d, "/api/v1/targets", &status), *t;
	bool found = false;

	*from = -1;
	*samples = -1;
	*bytes = -1;
	cJSON_ArrayForEach(t, cJSON_GetObjectItem(j, "targets"))
	{
		cJSON *p = cJSON_GetObjectItem(t, "pid");
		cJSON *f = cJSON_GetObjectItem(t, "history_from");
		cJSON *n = cJSON_GetObjectItem(t, "history_samples");
		cJSON *b = cJSON_GetObjectItem(t, "history_bytes");

		if (!cJSON_IsNumber(p) || (pid_t)p->valuedouble != pid)
			continue;
		found = true;
		*from = cJSON_IsNumber(f) ? f->valuedouble
			: cJSON_IsNull(f) ? 0
					  : -1;
		*samples = cJSON_IsNumber(n) ? (int)n->valuedouble : -1;
		*bytes = cJSON_IsNumber(b) ? b->valuedouble : -1;
	}
	cJSON_Delete(j);
	return found;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The status of GET path, and its error sentence in why (may be ""). */
static int get_status(const struct itest_daemon *d, const char *path, char *why,
		      size_t size)
{
	int status;
	cJSON *j = itest_get_json(d, path, &status);
	cJSON *e = cJSON_GetObjectItem(j, "error");

	if (why)
		snprintf(why, size, "%s",
			 cJSON_IsString(e) ? e->valuestring : "");
	cJSON_Delete(j);
	return status;
}

static int diff_status(const struct itest_daemon *d, pid_t pid, double since)
{
	char path[96];

	snprintf(path, sizeof(path), "/api/v1/diff?pid=%d&since=%g", (int)pid,
		 since);
	return get_status(d, path, NULL, 0);
}

#define BURST_CLIENTS 4

/* One client of a burst: dumps of pid, one after the other, until end. */
struct burst {
	const struct itest_daemon *d;
	pid_t pid;
	long end_ms;
	int asked, ok;
};

static void *burst_main(void *arg)
{
	struct burst *b = arg;
	char path[64];

	snprintf(path, sizeof(path), "/api/v1/stacks?pid=%d", (int)b->pid);
	while (itest_now_ms() < b->end_ms) {
		struct http_response r;

		memset(&r, 0, sizeof(r));
		b->asked++;
		if (itest_get(b->d, path, &r) == 0 && r.status == 200)
			b->ok++;
		http_response_release(&r);
	}
	return NULL;
}

static void test_burst(void)
{
	const char *args[] = { "--sample-interval", "200", "--history", "20",
			       NULL };
	struct itest_daemon d;
	struct burst cl[BURST_CLIENTS];
	pthread_t th[BURST_CLIENTS];
	int samples, ok = 0, asked = 0, st;
	double from, bytes, dumps;
	pid_t pid;

	if (itest_daemon_start_args(&d, args) < 0) {
		TAP_OK(0, "burst: daemon starts");
		return;
	}
	pid = start_demo(&d);
	itest_sleep_ms(5000); /* 20 samples at 200 ms: 4 s */
	history_of(&d, pid, &from, &samples, &bytes);
	TAP_OK(samples >= 18 && samples <= 20 && from > 0 &&
		       now_s() - from >= 3.2,
	       "burst: 20 samples reach 4 s back (%d, %.1f s)", samples,
	       from > 0 ? now_s() - from : -1);
	dumps = itest_metric(&d, "stackwatch_dumps_total{result=\"ok\"}");
	for (int i = 0; i < BURST_CLIENTS; i++) {
		cl[i].d = &d;
		cl[i].pid = pid;
		cl[i].end_ms = itest_now_ms() + 2000;
		cl[i].ok = cl[i].asked = 0;
		pthread_create(&th[i], NULL, burst_main, &cl[i]);
	}
	for (int i = 0; i < BURST_CLIENTS; i++) {
		pthread_join(th[i], NULL);
		ok += cl[i].ok;
		asked += cl[i].asked;
	}
	dumps = itest_metric(&d, "stackwatch_dumps_total{result=\"ok\"}") -
		dumps;
	TAP_OK(ok == asked && ok > 0,
	       "burst: %d dumps asked for in 2 s by %d clients, all answered "
	       "(%d); %g dumps taken",
	       asked, BURST_CLIENTS, ok, dumps);
	history_of(&d, pid, &from, &samples, &bytes);
	TAP_OK(samples >= 18 && samples <= 20 && from > 0 &&
		       now_s() - from >= 3.2,
	       "burst: after it the history still reaches 4 s back (%d "
	       "samples, %.1f s)",
	       samples, from > 0 ? now_s() - from : -1);
	st = diff_status(&d, pid, 3);
	TAP_OK(st == 200, "burst: a diff 3 s back answers 200 (%d)", st);
	itest_kill(pid);
	TAP_OK(itest_daemon_stop(&d) == 0, "burst: the daemon exits 0");
	itest_daemon_cleanup(&d);
}

static void test_by_time(void)
{
	const char *args[] = { "--sample-interval", "200", "--history-seconds",
			       "3", NULL };
	struct itest_daemon d;
	long t_spawn, t_reg, first_ok = -1;
	int early = 0, samples, st;
	double from, bytes;
	char *argv[] = { demo_bin, (char *)"100000", (char *)"1", NULL };
	pid_t pid;

	if (itest_daemon_start_args(&d, args) < 0) {
		TAP_OK(0, "by time: daemon starts");
		return;
	}
	t_spawn = itest_now_ms();
	pid = itest_spawn(&d, argv, NULL);
	TAP_OK(itest_wait_registered(&d, pid, 20000),
	       "by time: the demo registered");
	t_reg = itest_now_ms();
	history_of(&d, pid, &from, &samples, &bytes);
	TAP_OK(samples >= 0 && samples <= 2,
	       "by time: history_samples of a new target (%d)", samples);
	/* The target is younger than its time since the spawn: no sample
	 * of it can be 2 s old before that. */
	while (itest_now_ms() - t_reg < 5000 && first_ok < 0) {
		long age = itest_now_ms() - t_spawn;

		st = diff_status(&d, pid, 2);
		if (st == 200 && age < 2000)
			early++;
		if (st == 200)
			first_ok = itest_now_ms() - t_reg;
		itest_sleep_ms(100);
	}
	TAP_OK(early == 0,
	       "by time: no diff 2 s back before the target is "
	       "2 s old (%d)",
	       early);
	TAP_OK(first_ok >= 0 && first_ok <= 3000,
	       "by time: a diff 2 s back answers 200 by 3 s after the "
	       "target registered (%ld ms)",
	       first_ok);
	itest_sleep_ms(6000);
	history_of(&d, pid, &from, &samples, &bytes);
	TAP_OK(from > 0 && now_s() - from >= 2.5 && now_s() - from <= 3.8,
	       "by time: history_from is 3 s back, older samples gone "
	       "(%.2f s)",
	       from > 0 ? now_s() - from : -1);
	TAP_OK(samples >= 12 && samples <= 3 / 0.15 + 2,
	       "by time: 3 s of samples at 200 ms (%d)", samples);
	st = diff_status(&d, pid, 5);
	TAP_OK(st == 404, "by time: nothing 5 s old is kept (%d)", st);
	itest_kill(pid);
	TAP_OK(itest_daemon_stop(&d) == 0, "by time: the daemon exits 0");
	itest_daemon_cleanup(&d);
}

static void test_defaults(bool longer)
{
	struct itest_daemon d;
	int samples, st;
	double from, bytes, per, share;
	char path[64];
	pid_t pid;
	static const char *const none[] = { NULL };

	if (itest_daemon_start_args(&d, none) < 0) {
		TAP_OK(0, "defaults: daemon starts");
		return;
	}
	pid = start_demo(&d);
	itest_sleep_ms(4500);
	history_of(&d, pid, &from, &samples, &bytes);
	TAP_OK(samples >= 3 && samples <= 6,
	       "defaults: a sample a second is kept (%d in 4.5 s)", samples);
	per = samples > 0 ? bytes / samples : -1;
	/* 256 MiB for the user's targets: the demo and, when the daemon
	 * runs as the same user, the daemon itself. */
	share = 256.0 * 1024 * 1024 / 2;
	TAP_OK(per > 0 && 900 * per <= share,
	       "defaults: 15 minutes of the demo's samples fit the budget "
	       "(%.0f bytes a sample, %.1f MiB for 900)",
	       per, 900 * per / 1048576);
	TAP_NOTE("defaults: the demo's sample costs %.0f bytes", per);
	if (longer) {
		snprintf(path, sizeof(path), "/api/v1/stacks?pid=%d", (int)pid);
		for (int i = 0; i < 61; i++) { /* the page's refreshes */
			get_status(&d, path, NULL, 0);
			itest_sleep_ms(1000);
		}
		st = diff_status(&d, pid, 60);
		history_of(&d, pid, &from, &samples, &bytes);
		TAP_OK(st == 200,
		       "defaults: a diff 60 s back answers 200 65 s after the "
		       "target registered (%d; %d samples)",
		       st, samples);
	}
	itest_kill(pid);
	TAP_OK(itest_daemon_stop(&d) == 0, "defaults: the daemon exits 0");
	itest_daemon_cleanup(&d);
}

/* A process without the agent (sleep), and a pid of none. */
static void test_not_sampled(void)
{
	const char *args[] = { "--sample-interval", "200", NULL };
	struct itest_daemon d;
	char path[96], why[256],
		*argv[] = { (char *)"/bin/sleep", (char *)"600", NULL };
	pid_t pid, gone;
	int st;

	if (itest_daemon_start_args(&d, args) < 0) {
		TAP_OK(0, "not sampled: daemon starts");
		return;
	}
	pid = fork();
	if (pid == 0) {
		execv(argv[0], argv);
		_exit(127);
	}
	gone = fork();
	if (gone == 0)
		_exit(0);
	waitpid(gone, NULL, 0);
	itest_sleep_ms(200);
	for (int round = 0; round < 2; round++) {
		const char *when = round ? "after a dump" : "never dumped";

		snprintf(path, sizeof(path), "/api/v1/diff?pid=%d&since=1",
			 (int)pid);
		st = get_status(&d, path, why, sizeof(why));
		TAP_OK(st == 404 && strstr(why, "not sampled") &&
			       strstr(why, "no agent") &&
			       strstr(why, "--sample-ptrace"),
		       "not sampled (%s): diff says why (%d: %s)", when, st,
		       why);
		snprintf(path, sizeof(path), "/api/v1/profile?pid=%d",
			 (int)pid);
		st = get_status(&d, path, why, sizeof(why));
		TAP_OK(st == 404 && strstr(why, "not sampled") &&
			       strstr(why, "--sample-ptrace"),
		       "not sampled (%s): profile says why (%d: %s)", when, st,
		       why);
		/* A ptrace snapshot, as the page's dump would take. */
		snprintf(path, sizeof(path), "/api/v1/stacks?pid=%d", (int)pid);
		get_status(&d, path, NULL, 0);
	}
	snprintf(path, sizeof(path), "/api/v1/diff?pid=%d&since=1", (int)gone);
	st = get_status(&d, path, why, sizeof(why));
	/* Root (this test) is told so; others get the one sentence. */
	TAP_OK(st == 404 && !strstr(why, "not sampled") &&
		       (strstr(why, "no process ") ||
			strstr(why, "not a process you may see")),
	       "not sampled: a pid of no process is no process, not one "
	       "without samples (%d: %s)",
	       st, why);
	itest_kill(pid);
	TAP_OK(itest_daemon_stop(&d) == 0, "not sampled: the daemon exits 0");
	itest_daemon_cleanup(&d);
}

int main(void)
{
	const char *longer = getenv("SW_HISTORY_LONG");

	snprintf(demo_bin, sizeof(demo_bin), "%s/fixtures/demo",
		 itest_target_build());
	test_burst();
	test_by_time();
	test_defaults(longer && *longer && strcmp(longer, "0") != 0);
	test_not_sampled();
	return tap_done();
}
