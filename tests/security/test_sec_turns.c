/*
 * test_sec_turns.c - no user can starve root's snapshots, or another
 * user's: snapshots of processes without the agent take turns.
 *
 * nobody (65534) asks for three of its own processes at once and holds
 * the first snapshot at the daemon's test gate (gate.h), as a process of
 * thousands of threads would; the other two wait, then more requests of
 * nobody's for those two (more than a pool of eight HTTP threads). Then
 * uid 65533 asks for one of its own, and root for one of root's.
 * Expected:
 * - nobody has two requests at work at once (turns.h): its second waits
 *   for the helper, its third and the ones after wait for a turn;
 * - 65533's snapshot is taken at once, while nobody's holds the helper
 *   and nobody's second waits (one snapshot of a uid at a time, and
 *   another uid's never waits behind it);
 * - root's snapshot is taken at once too (root and the admin group never
 *   wait behind anyone's queue, nor behind requests that wait for a turn);
 * - once nobody's first snapshot is done, its second, then its third;
 * - every request is answered 200.
 * The queues are watched through stackwatch_ptrace_waiting and
 * stackwatch_http_requests_waiting_turn, so the order in which requests
 * arrive is known, not guessed.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>

#include "sectest.h"
#include "tap.h"

#define OTHER 65533
#define NMORE 10 /* waiting requests of nobody's: more than 8 */

/* A request of uid for pid, under way. */
struct ask {
	struct sec_pending pg;
	struct sec_answer a;
};

static void ask(struct ask *k, const struct itest_daemon *d, uid_t uid,
		pid_t pid)
{
	char target[128];

	snprintf(target, sizeof(target),
		 "/api/v1/stacks?pid=%d&format=json&timeout_ms=9000", (int)pid);
	sec_get_start(uid, uid, NULL, 0, d->url, NULL, NULL, target, &k->pg);
}

static void answered(struct ask *k)
{
	sec_get_finish(&k->pg, &k->a);
}

/* The daemon's log as notes, for a failure. */
static void show_log(const struct itest_daemon *d)
{
	char line[512];
	FILE *f = fopen(d->log, "r");

	while (f && fgets(line, sizeof(line), f))
		if (strncmp(line, "http: MHD_OPTION", 16) != 0)
			tap_note("%s", strtok(line, "\n"));
	if (f)
		fclose(f);
}

/* Waits until gauge name says n. */
static bool wait_gauge(const struct itest_daemon *d, const char *name, int n)
{
	double v = -1;

	for (long end = itest_now_ms() + 10000; itest_now_ms() < end;) {
		v = itest_metric(d, name);
		if (v == n)
			return true;
		itest_sleep_ms(5);
	}
	tap_note("%s is %g, not %d; the daemon's log:", name, v, n);
	show_log(d);
	return false;
}

/* Waits until n snapshot requests wait for their turn at the helper. */
static bool wait_waiting(const struct itest_daemon *d, int n)
{
	return wait_gauge(d, "stackwatch_ptrace_waiting", n);
}

/* Waits until n requests wait for their requester's turn (turns.h). */
static bool wait_turns(const struct itest_daemon *d, int n)
{
	return wait_gauge(d, "stackwatch_http_requests_waiting_turn", n);
}

/* Lets every read that comes to the gate go, until stop is set. */
struct opener {
	struct sec_gate *g;
	atomic_bool stop;
};

static void *opener_main(void *arg)
{
	struct opener *o = arg;
	char line[128];

	while (!atomic_load(&o->stop))
		sec_gate_release(sec_gate_next(o->g, 100, line, sizeof(line)));
	return NULL;
}

/* The pid of a gate line "read PID ptrace UID"; 0 if it is none. */
static pid_t gate_pid(const char *line)
{
	int pid = 0;

	return sscanf(line, "read %d ptrace", &pid) == 1 ? (pid_t)pid : 0;
}

int main(void)
{
	static const char *const args[] = { "--sample-interval", "0", NULL };
	struct itest_daemon d;
	struct sec_gate g = { .fd = -1 };
	struct ask k[5], more[NMORE];
	char dir[] = "/tmp/sw-turns-XXXXXX", line[128];
	pid_t n1, n2, n3, o1, r1, order[2];
	struct opener opener;
	pthread_t th;
	int held, c;

	memset(k, 0, sizeof(k));
	signal(SIGPIPE, SIG_IGN); /* a gate connection the daemon gave up */
	if (geteuid() != 0) {
		TAP_SKIP("needs root: the daemon runs as root, requesters as "
			 "two other users");
		return tap_done();
	}
	if (!mkdtemp(dir) || sec_gate_open(&g, dir) < 0) {
		TAP_OK(0, "the gate is set up in %s", dir);
		return tap_done();
	}
	if (itest_daemon_start_args(&d, args) < 0) {
		TAP_OK(0, "the daemon starts");
		goto out_gate;
	}
	unsetenv("STACKWATCH_TEST_GATE");
	chmod(d.dir, 0711);
	n1 = sec_sleeper(SEC_NOBODY, SEC_NOBODY);
	n2 = sec_sleeper(SEC_NOBODY, SEC_NOBODY);
	n3 = sec_sleeper(SEC_NOBODY, SEC_NOBODY);
	o1 = sec_sleeper(OTHER, OTHER);
	r1 = sec_sleeper(0, 0);
	TAP_OK(sec_wait_comm(n1, "sleep") && sec_wait_comm(n2, "sleep") &&
		       sec_wait_comm(n3, "sleep") &&
		       sec_wait_comm(o1, "sleep") && sec_wait_comm(r1, "sleep"),
	       "processes of nobody, of uid %d and of root run", OTHER);

	ask(&k[0], &d, SEC_NOBODY, n1);
	held = sec_gate_next(&g, 15000, line, sizeof(line));
	TAP_OK(held >= 0 && gate_pid(line) == n1,
	       "nobody's first snapshot is taken and held ('%s')", line);
	ask(&k[1], &d, SEC_NOBODY, n2);
	TAP_OK(wait_waiting(&d, 1),
	       "nobody's second waits for its turn at the helper");
	ask(&k[2], &d, SEC_NOBODY, n3);
	TAP_OK(wait_turns(&d, 1),
	       "nobody's third waits for a turn of nobody's: two are at work");
	for (int i = 0; i < NMORE; i++)
		ask(&more[i], &d, SEC_NOBODY, i % 2 ? n3 : n2);
	TAP_OK(wait_turns(&d, 1 + NMORE),
	       "and %d more requests of nobody's wait for theirs", NMORE);
	ask(&k[3], &d, OTHER, o1);
	c = sec_gate_next(&g, 5000, line, sizeof(line));
	TAP_OK(c >= 0 && gate_pid(line) == o1,
	       "uid %d's snapshot is taken at once, while nobody's holds the "
	       "helper and nobody's second waits ('%s')",
	       OTHER, line);
	sec_gate_release(c);
	answered(&k[3]);
	TAP_OK(k[3].a.status == 200, "uid %d's answer: %d", OTHER,
	       k[3].a.status);

	ask(&k[4], &d, 0, r1);
	c = sec_gate_next(&g, 5000, line, sizeof(line));
	TAP_OK(c >= 0 && gate_pid(line) == r1,
	       "root's snapshot is taken at once, while nobody's holds the "
	       "helper ('%s')",
	       line);
	sec_gate_release(c);
	answered(&k[4]);
	TAP_OK(k[4].a.status == 200, "root's answer: %d", k[4].a.status);

	sec_gate_release(held);
	c = sec_gate_next(&g, 10000, line, sizeof(line));
	order[0] = gate_pid(line);
	/* Its turn free, nobody's third waits behind nobody's second. */
	TAP_OK(wait_waiting(&d, 1),
	       "nobody's third then waits at the helper for its second");
	sec_gate_release(c);
	c = sec_gate_next(&g, 10000, line, sizeof(line));
	order[1] = gate_pid(line);
	sec_gate_release(c);
	TAP_OK(order[0] == n2 && order[1] == n3,
	       "once nobody's first is done, its second, then its third, one "
	       "at a time (order %d %d)",
	       (int)order[0], (int)order[1]);
	/* The later requests of nobody's read anew: let them go by. */
	opener.g = &g;
	atomic_init(&opener.stop, false);
	pthread_create(&th, NULL, opener_main, &opener);
	for (int i = 0; i < 3; i++) /* k[3] and k[4] are read already */
		answered(&k[i]);
	for (int i = 0; i < NMORE; i++)
		answered(&more[i]);
	atomic_store(&opener.stop, true);
	pthread_join(th, NULL);
	TAP_OK(k[0].a.status == 200 && k[1].a.status == 200 &&
		       k[2].a.status == 200 && k[3].a.status == 200,
	       "every request is answered (%d %d %d %d)", k[0].a.status,
	       k[1].a.status, k[2].a.status, k[3].a.status);
	itest_kill(n1);
	itest_kill(n2);
	itest_kill(n3);
	itest_kill(o1);
	itest_kill(r1);
	TAP_OK(itest_daemon_stop(&d) == 0, "the daemon stops cleanly");
	itest_daemon_cleanup(&d);
out_gate:
	sec_gate_close(&g);
	rmdir(dir);
	return tap_done();
}
