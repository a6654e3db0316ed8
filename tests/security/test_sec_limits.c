/*
 * test_sec_limits.c - what one user's agents may cost the daemon (root)
 * is bounded, and the bounds come back as clear errors. Hostile agents
 * run as nobody (tests/fixtures/hostile_agent.c):
 *
 * - a fourth registration past --max-targets-per-user 3 is refused;
 * - a dump of 31,000 threads x 256 addresses, three times over, is a 502
 *   naming --max-dump-addresses, and the daemon's memory stays small;
 * - a dump whose samples would take more than --max-history-mib is a 503
 *   naming it, while the same user's small target still dumps;
 * - a message announcing 64 MiB, sent half and then stalled, is a 504,
 *   and its 32 MiB are freed;
 * - a dump of a million distinct addresses is symbolized for the budget
 *   (--symbolize-budget 200) and then says symbols_partial, and root's
 *   dump taken meanwhile waits for no more than that;
 * - an all-target dump with eight silent agents comes back within one
 *   deadline, not eight.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>

#include "sectest.h"
#include "tap.h"

static char fixture[256];
static char work[] = "/tmp/sw-seclimits-XXXXXX";

/* The daemon's resident memory in KiB, or -1. */
static long rss_kib(pid_t pid)
{
	char path[64], line[256];
	long kib = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	f = fopen(path, "r");
	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "VmRSS: %ld kB", &kib) == 1)
			break;
	if (f)
		fclose(f);
	return kib;
}

/* GET as root; the status and, when body is not NULL, the body. */
static int get_body(const struct itest_daemon *d, const char *target,
		    int timeout_ms, char *body, size_t size)
{
	struct http_opts o;
	struct http_response r;
	int status = 0;

	http_opts_init(&o);
	o.timeout_ms = timeout_ms;
	memset(&r, 0, sizeof(r));
	if (http_get(d->url, target, &o, &r) == 0)
		status = r.status;
	if (body)
		snprintf(body, size, "%s", r.body ? r.body : "");
	http_response_release(&r);
	return status;
}

static pid_t start_roots(const struct itest_daemon *d)
{
	char sigwait[] = "sigwait", four[] = "4";
	char *argv[] = { fixture, sigwait, four, NULL };
	int out;
	pid_t pid = itest_spawn(d, argv, &out);

	if (pid > 0 && (!itest_wait_line(out, "ready") ||
			!itest_wait_registered(d, pid, 10000))) {
		itest_kill(pid);
		return -1;
	}
	if (pid > 0)
		close(out);
	return pid;
}

static int start_daemon(struct itest_daemon *d, const char *const *args)
{
	if (itest_daemon_start_args(d, args) < 0)
		return -1;
	chmod(d->dir, 0711); /* nobody may reach the agent socket */
	return 0;
}

static void stop_daemon(struct itest_daemon *d)
{
	TAP_OK(itest_alive(d->pid), "the daemon is alive after it all");
	TAP_OK(itest_daemon_stop(d) == 0, "the daemon stops cleanly");
	itest_daemon_cleanup(d);
}

/* ------------------------------------------- --max-targets-per-user 3 */

static void test_targets(const struct itest_daemon *d)
{
	pid_t h[4];
	int out;
	bool listed;

	for (int i = 0; i < 3; i++)
		h[i] = sec_start_hostile(d, "silent", NULL, NULL, NULL);
	TAP_OK(h[0] > 0 && h[1] > 0 && h[2] > 0,
	       "three agents of nobody register");
	h[3] = sec_hostile(d, "silent", NULL, NULL, NULL, &out);
	TAP_OK(h[3] > 0 && itest_wait_line(out, "ready"),
	       "a fourth says HELLO");
	itest_sleep_ms(500);
	listed = itest_registered(d, h[3]);
	TAP_OK(!listed, "the fourth is refused (--max-targets-per-user 3)");
	TAP_OK(sec_log_has(d, "--max-targets-per-user", h[3]),
	       "and the log says why, naming pid %d", (int)h[3]);
	close(out);
	for (int i = 0; i < 4; i++)
		itest_kill(h[i]);
}

/* ------------------------------------------------ --max-history-mib 4 */

static void test_history(const struct itest_daemon *d, pid_t roots)
{
	char path[96], body[4096];
	pid_t big, small;
	int st, small_ok = 0;

	big = sec_start_hostile(d, "big", "2000", "64", NULL);
	small = sec_start_hostile(d, "name", "small", NULL, NULL);
	TAP_OK(big > 0 && small > 0, "a big and a small target of nobody");
	snprintf(path, sizeof(path), "/api/v1/stacks?pid=%d", (int)big);
	st = get_body(d, path, 10000, body, sizeof(body));
	TAP_OK(st == 503 && strstr(body, "--max-history-mib"),
	       "a dump of 128 Ki addresses is more than 4 MiB of samples: "
	       "%d %s",
	       st, body);
	for (int i = 0; i < 3; i++) {
		snprintf(path, sizeof(path), "/api/v1/stacks?pid=%d",
			 (int)small);
		small_ok += get_body(d, path, 5000, NULL, 0) == 200;
		itest_sleep_ms(50);
	}
	TAP_OK(small_ok == 3, "the same user's small target dumps (%d/3)",
	       small_ok);
	snprintf(path, sizeof(path), "/api/v1/stacks?pid=%d", (int)roots);
	TAP_OK(get_body(d, path, 5000, NULL, 0) == 200, "root's target dumps");
	itest_kill(big);
	itest_kill(small);
}

/* --------------------------------------------- a half message, stalled */

static void test_half(const struct itest_daemon *d)
{
	char path[96];
	long before, after;
	pid_t h = sec_start_hostile(d, "half", "32", NULL, NULL);
	int st;

	TAP_OK(h > 0, "an agent that sends half of 64 MiB and stalls");
	before = rss_kib(d->pid);
	snprintf(path, sizeof(path), "/api/v1/stacks?pid=%d&timeout_ms=300",
		 (int)h);
	st = get_body(d, path, 10000, NULL, 0);
	TAP_OK(st == 504, "its dump times out (%d)", st);
	itest_sleep_ms(200);
	after = rss_kib(d->pid);
	if (SEC_SANITIZED)
		TAP_SKIP("the RSS of a sanitized daemon is its allocator's");
	else
		TAP_OK(before > 0 && after - before < 16 * 1024,
		       "the 32 MiB received are freed (RSS %ld -> %ld KiB)",
		       before, after);
	st = get_body(d, path, 10000, NULL, 0);
	after = rss_kib(d->pid);
	TAP_OK(st == 504 && (SEC_SANITIZED || after - before < 16 * 1024),
	       "and again: %d, RSS %ld KiB", st, after);
	itest_kill(h);
}

/* ------------------------------------------------- daemon A's checks */

static void with_small_limits(void)
{
	static const char *const args[] = {
		"--sample-interval",
		"0",
		"--max-targets-per-user",
		"3",
		"--max-history-mib",
		"4",
		NULL,
	};
	struct itest_daemon d;
	pid_t roots;

	if (start_daemon(&d, args) < 0) {
		TAP_OK(false, "daemon starts with small limits");
		return;
	}
	roots = start_roots(&d);
	TAP_OK(roots > 0, "a target of root's");
	test_targets(&d);
	test_history(&d, roots);
	test_half(&d);
	itest_kill(roots);
	stop_daemon(&d);
}

/* ------------------------------------------ --max-dump-addresses 1 Mi */

static void test_addresses(const struct itest_daemon *d)
{
	char path[96], body[4096];
	long rss;
	int bad = 0, named = 0, sts[3] = { 0, 0, 0 };
	pid_t h = sec_start_hostile(d, "big", "31000", "256", NULL);

	TAP_OK(h > 0, "an agent of nobody with 31,000 threads x 256 "
		      "addresses");
	/* The longest deadline: a sanitized agent encodes its first answer
	 * slowly. */
	snprintf(path, sizeof(path), "/api/v1/stacks?pid=%d&timeout_ms=10000",
		 (int)h);
	for (int i = 0; i < 3; i++) {
		int st = get_body(d, path, 30000, body, sizeof(body));

		sts[i] = st;
		bad += st == 502;
		named += strstr(body, "--max-dump-addresses") != NULL;
		itest_sleep_ms(50);
	}
	rss = rss_kib(d->pid);
	TAP_OK(bad == 3 && named == 3,
	       "three dumps refused with a 502 naming the limit (%d %d %d)",
	       sts[0], sts[1], sts[2]);
	if (SEC_SANITIZED)
		TAP_SKIP("the RSS of a sanitized daemon is its allocator's");
	else
		TAP_OK(rss > 0 && rss < 100 * 1024,
		       "the daemon's memory after them: %ld MiB", rss / 1024);
	itest_kill(h);
}

static _Atomic bool big_done;

struct timed_get {
	const struct itest_daemon *d;
	bool last; /* sets big_done when it returns */
	char path[96];
	int status;
	long ms;
	char body[1 << 16];
};

static void *timed_get_main(void *arg)
{
	struct timed_get *g = arg;
	long t0 = itest_now_ms();

	g->status = get_body(g->d, g->path, 30000, g->body, sizeof(g->body));
	g->ms = itest_now_ms() - t0;
	if (g->last)
		atomic_store(&big_done, true);
	return NULL;
}

/*
 * A million addresses in a module with DWARF (the daemon's own binary):
 * each distinct one a lookup of tens of microseconds, seconds in all;
 * the budget cuts them off.
 */
static void test_budget(const struct itest_daemon *d, pid_t roots,
			const char *bin)
{
	static struct timed_get big, mine;
	pthread_t tb;
	long worst = 0;
	int rounds = 0, bad = 0;
	pid_t h = sec_start_hostile(d, "big", "4000", "250", bin);

	TAP_OK(h > 0, "an agent of nobody with 1 M addresses in a module "
		      "with DWARF");
	big.d = mine.d = d;
	big.last = true;
	snprintf(big.path, sizeof(big.path),
		 "/api/v1/stacks?pid=%d&timeout_ms=5000", (int)h);
	snprintf(mine.path, sizeof(mine.path), "/api/v1/stacks?pid=%d",
		 (int)roots);
	pthread_create(&tb, NULL, timed_get_main, &big);
	/* Root's target, dumped again and again while the big one is. */
	while (!atomic_load(&big_done)) {
		timed_get_main(&mine);
		rounds++;
		if (mine.status != 200)
			bad++;
		if (mine.ms > worst)
			worst = mine.ms;
		itest_sleep_ms(40);
	}
	pthread_join(tb, NULL);
	TAP_OK(big.status == 200 &&
		       strstr(big.body, "\"symbols_partial\":true"),
	       "the big dump comes back after %ld ms, symbols partial (%d)",
	       big.ms, big.status);
	TAP_OK(rounds > 0 && !bad && worst < 2000,
	       "root's %d dumps meanwhile: the slowest %ld ms (budget 200 ms)",
	       rounds, worst);
	itest_kill(h);
}

/* Eight silent agents and root's target, in one all-target dump. */
static void test_silent(const struct itest_daemon *d, pid_t roots)
{
	pid_t h[8];
	char *body = malloc(1 << 20);
	cJSON *j, *p;
	long t0, ms;
	int st, timed_out = 0, good = 0, n = 0;
	struct http_opts o;
	struct http_response r;

	for (int i = 0; i < 8; i++)
		h[i] = sec_start_hostile(d, "silent", NULL, NULL, NULL);
	n = 0;
	for (int i = 0; i < 8; i++)
		n += h[i] > 0;
	TAP_OK(n == 8, "eight silent agents of nobody (%d)", n);
	http_opts_init(&o);
	o.timeout_ms = 30000;
	memset(&r, 0, sizeof(r));
	t0 = itest_now_ms();
	st = http_get(d->url, "/api/v1/stacks?timeout_ms=1000", &o, &r) == 0
		     ? r.status
		     : 0;
	ms = itest_now_ms() - t0;
	j = cJSON_Parse(r.body);
	cJSON_ArrayForEach(p, cJSON_GetObjectItem(j, "processes"))
	{
		cJSON *pid = cJSON_GetObjectItem(p, "pid");
		cJSON *status = cJSON_GetObjectItem(p, "status");

		if (cJSON_IsNumber(status) && status->valuedouble == 504)
			timed_out++;
		if (cJSON_IsNumber(pid) && (pid_t)pid->valuedouble == roots &&
		    cJSON_GetArraySize(cJSON_GetObjectItem(p, "groups")) > 0)
			good++;
	}
	cJSON_Delete(j);
	http_response_release(&r);
	TAP_OK(st == 200 && timed_out == 8 && good == 1,
	       "the eight time out, root's is there (%d; %d timed out, %d)", st,
	       timed_out, good);
	TAP_OK(ms < 4000,
	       "all in %ld ms: one deadline (1000 ms + grace), not eight", ms);
	for (int i = 0; i < 8; i++)
		itest_kill(h[i]);
	free(body);
}

static void with_default_limits(void)
{
	static const char *const args[] = { "--sample-interval", "0",
					    "--symbolize-budget", "200", NULL };
	struct itest_daemon d;
	char from[256], bin[128], cmd[768];
	pid_t roots;

	/* A copy that nobody may read, wherever the build is. */
	snprintf(from, sizeof(from), "%s/stackwatchd", itest_build());
	snprintf(bin, sizeof(bin), "%s/with-dwarf", work);
	snprintf(cmd, sizeof(cmd), "cp '%s' '%s' && chmod 0755 '%s'", from, bin,
		 bin);
	if (system(cmd) != 0)
		TAP_OK(false, "a copy of %s", from);
	if (start_daemon(&d, args) < 0) {
		TAP_OK(false, "daemon starts with the default limits");
		return;
	}
	roots = start_roots(&d);
	TAP_OK(roots > 0, "a target of root's");
	test_addresses(&d);
	test_budget(&d, roots, bin);
	test_silent(&d, roots);
	itest_kill(roots);
	stop_daemon(&d);
}

int main(void)
{
	char cmd[64];

	if (geteuid() != 0) {
		TAP_SKIP("needs root: the daemon runs as root, agents as "
			 "nobody");
		return tap_done();
	}
	snprintf(fixture, sizeof(fixture), "%s/fixtures/agent_target",
		 itest_target_build());
	if (!mkdtemp(work) || chmod(work, 0755) < 0) {
		TAP_OK(false, "a work directory");
		return tap_done();
	}
	with_small_limits();
	with_default_limits();
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", work);
	if (system(cmd) != 0)
		TAP_NOTE("could not remove %s", work);
	return tap_done();
}
