/*
 * test_registry_skip.c - the daemon's side of dumps that leave threads
 * out (target_dump_raw_skip(), src/daemon/registry.c), with the real
 * registry on a socket of its own and real agents:
 * - a program under the real agent: its HELLO's feature bits are kept in
 *   its target; a skip set in any order, with repeats, reaches the agent
 *   as it must, and the dump holds every thread but those; bad tids are
 *   refused before anything is sent; target_dump_raw() still dumps all;
 * - a program in a pid namespace of its own: the daemon's tids are
 *   translated to the namespace's for its agent, and back in the dump;
 * - the daemon itself: a thread of ours left out is not in the dump, and
 *   its poll() is not cut short (no signal reached it);
 * - an agent that said no features (the first form's HELLO): -EOPNOTSUPP,
 *   and a whole dump still works, for the caller to fall back on;
 * - an agent that says it takes skip sets but reports the threads anyway:
 *   they are not in the dump the daemon returns.
 *
 * The registry is daemon code: this test links the daemon's objects.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "daemon/log.h"
#include "daemon/registry.h"
#include "daemon/stacks.h"
#include "model/wire.h"
#include "tap.h"
#include "testutil.h"

#define DUMP_MS 3000
#define WAIT_MS 10000

static const struct asker root = { .uid = 0, .priority = true };

static const char *build(void)
{
	const char *b = getenv("BUILD");

	return b && *b ? b : "build";
}

static long now_ms(void)
{
	return (long)(tu_now_ns() / 1000000u);
}

/*
 * Starts argv (argv[0] under $BUILD unless absolute) in a process group
 * of its own, with the agent preloaded when agent is set, its stdout into
 * *out.
 */
static pid_t start(char *const argv[], bool agent, const char *sock, int *out)
{
	char path[256], lib[256];
	int p[2];
	pid_t pid;

	if (argv[0][0] == '/')
		snprintf(path, sizeof(path), "%s", argv[0]);
	else
		snprintf(path, sizeof(path), "%s/%s", build(), argv[0]);
	snprintf(lib, sizeof(lib), "%s/libstackwatch-agent.so", build());
	if (pipe2(p, O_CLOEXEC) < 0)
		return -1;
	pid = fork();
	if (pid == 0) {
		setpgid(0, 0);
		dup2(p[1], 1);
		if (agent) {
			setenv("LD_PRELOAD", lib, 1);
			setenv("STACKWATCH_SOCKET", sock, 1);
		}
		execv(path, argv);
		_exit(127);
	}
	if (pid > 0)
		setpgid(pid, pid); /* either call comes first */
	close(p[1]);
	*out = p[0];
	return pid;
}

/* Reads fd's lines until one equals want, for at most WAIT_MS. */
static bool wait_line(int fd, const char *want)
{
	long deadline = now_ms() + WAIT_MS;
	char line[128];
	size_t n = 0;

	for (;;) {
		struct pollfd pf = { .fd = fd, .events = POLLIN };
		long left = deadline - now_ms();
		char c;

		if (left <= 0 || poll(&pf, 1, (int)left) <= 0 ||
		    read(fd, &c, 1) != 1)
			return false;
		if (c != '\n') {
			if (n < sizeof(line) - 1)
				line[n++] = c;
			continue;
		}
		line[n] = '\0';
		n = 0;
		if (strcmp(line, want) == 0)
			return true;
	}
}

/*
 * The registry's target for pid, once the HELLO of comm is in (WAIT_MS):
 * a program started through unshare registers once before its exec.
 */
static struct target *wait_target(struct registry *r, pid_t pid,
				  const char *comm)
{
	for (long end = now_ms() + WAIT_MS; now_ms() < end;) {
		struct target *t = registry_get(r, pid);

		if (t && strcmp(t->comm, comm) == 0)
			return t;
		target_put(t);
		tu_sleep_ms(10);
	}
	return NULL;
}

/* Kills process group pg; true when none of it is left (WAIT_MS). */
static bool kill_group(pid_t pg)
{
	if (pg <= 0)
		return true;
	kill(-pg, SIGKILL);
	waitpid(pg, NULL, 0);
	for (long end = now_ms() + WAIT_MS; now_ms() < end;) {
		if (kill(-pg, 0) < 0 && errno == ESRCH)
			return true;
		tu_sleep_ms(10);
	}
	return false;
}

/* The tids of pid's threads named name, ascending; how many. */
static size_t tids_named(pid_t pid, const char *name, pid_t *tids, size_t max)
{
	char path[320], comm[64];
	struct dirent *e;
	size_t n = 0;
	DIR *dir;

	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	dir = opendir(path);
	while (dir && (e = readdir(dir)) && n < max) {
		FILE *f;
		bool match;

		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/%d/task/%s/comm", (int)pid,
			 e->d_name);
		f = fopen(path, "r");
		if (!f)
			continue;
		match = fgets(comm, sizeof(comm), f) &&
			(!name || strncmp(comm, name, strlen(name)) == 0);
		fclose(f);
		if (match)
			tids[n++] = (pid_t)atoi(e->d_name);
	}
	if (dir)
		closedir(dir);
	return n;
}

/*
 * The voluntary context switches of thread tid of pid, -1 when unknown.
 * A thread blocked for good that takes a signal wakes for its handler
 * and sleeps again: one more. One left alone keeps its count.
 */
static long switches(pid_t pid, pid_t tid)
{
	char path[96], line[128];
	long n = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/task/%d/status", (int)pid,
		 (int)tid);
	f = fopen(path, "r");
	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "voluntary_ctxt_switches: %ld", &n) == 1)
			break;
	if (f)
		fclose(f);
	return n;
}

static bool has(const struct sw_dump *d, pid_t tid)
{
	for (size_t i = 0; d && i < d->nthreads; i++)
		if (d->threads[i].tid == tid)
			return true;
	return false;
}

/* Every thread of d has a stack. */
static bool all_stacks(const struct sw_dump *d)
{
	for (size_t i = 0; d && i < d->nthreads; i++)
		if (d->threads[i].status != SW_ST_OK || !d->threads[i].nips)
			return false;
	return d != NULL;
}

static void test_agent(struct registry *r, const char *sock)
{
	char *argv[] = { (char *)"fixtures/agent_target",
			 (char *)"sigwait-open", (char *)"4", NULL };
	pid_t w[8], all[16], skip[4], bad[2];
	long before[3];
	struct sw_dump *d = NULL;
	struct target *t = NULL;
	size_t nw = 0, nall = 0;
	int out = -1, rc;
	pid_t pid = start(argv, true, sock, &out);

	if (pid > 0 && wait_line(out, "ready"))
		t = wait_target(r, pid, "agent_target");
	TAP_OK(t, "a program under the agent registered");
	if (!t)
		goto out;
	TAP_OK(t->features & WIRE_FEAT_SKIP,
	       "its target keeps the HELLO's features (0x%x)", t->features);
	nw = tids_named(pid, "worker", w, 8);
	nall = tids_named(pid, NULL, all, 16);
	TAP_OK(nw == 4 && nall == 6, "4 workers, 6 threads (%zu, %zu)", nw,
	       nall);
	if (nw < 2)
		goto out;

	/* Out of order, repeated: the daemon sorts it for the wire. */
	skip[0] = w[1];
	skip[1] = pid;
	skip[2] = w[0];
	skip[3] = w[1];
	for (int i = 0; i < 3; i++)
		before[i] = switches(pid, i < 2 ? w[i] : w[2]);
	rc = target_dump_raw_skip(t, &root, DUMP_MS, skip, 4, &d);
	TAP_OK(rc == 0 && d,
	       "a dump leaving out 3 threads, named in "
	       "disorder and twice (rc %d)",
	       rc);
	TAP_OK(d && !has(d, pid) && !has(d, w[0]) && !has(d, w[1]),
	       "none of them is in it");
	TAP_OK(before[0] >= 0 && switches(pid, w[0]) == before[0] &&
		       switches(pid, w[1]) == before[1],
	       "the agent left the two workers alone: they never woke");
	TAP_OK(before[2] >= 0 && switches(pid, w[2]) > before[2],
	       "a worker not left out woke for the signal");
	TAP_OK(d && d->nthreads + 3 == nall && all_stacks(d) && has(d, w[2]) &&
		       has(d, w[3]),
	       "every other thread is, with its stack (%zu of %zu)",
	       d ? d->nthreads : 0, nall);
	sw_dump_free(d);

	bad[0] = w[0];
	bad[1] = 0;
	TAP_OK(target_dump_raw_skip(t, &root, DUMP_MS, bad, 2, &d) == -EINVAL &&
		       !d,
	       "a tid 0 is refused: -EINVAL");
	bad[1] = -7;
	TAP_OK(target_dump_raw_skip(t, &root, DUMP_MS, bad, 2, &d) == -EINVAL &&
		       !d,
	       "a negative tid is refused: -EINVAL");

	rc = target_dump_raw(t, &root, DUMP_MS, &d);
	TAP_OK(rc == 0 && d && d->nthreads == nall && all_stacks(d),
	       "target_dump_raw() still dumps every thread (%zu of %zu)",
	       d ? d->nthreads : 0, nall);
	sw_dump_free(d);
	rc = target_dump_raw_skip(t, &root, DUMP_MS, NULL, 0, &d);
	TAP_OK(rc == 0 && d && d->nthreads == nall,
	       "so does an empty skip set");
	sw_dump_free(d);
out:
	target_put(t);
	TAP_OK(kill_group(pid), "the program's process group is gone");
	if (out >= 0)
		close(out);
}

/* The first child of pid (unshare -f forks the program), or 0. */
static pid_t child_of(pid_t pid)
{
	char path[64], buf[64];

	snprintf(path, sizeof(path), "/proc/%d/task/%d/children", (int)pid,
		 (int)pid);
	for (long end = now_ms() + WAIT_MS; now_ms() < end;) {
		FILE *f = fopen(path, "r");
		int child = 0;

		if (f && fgets(buf, sizeof(buf), f))
			child = atoi(buf);
		if (f)
			fclose(f);
		if (child > 0)
			return (pid_t)child;
		tu_sleep_ms(10);
	}
	return 0;
}

/* Whether `unshare -pf --mount-proc true` works here (root, unshare). */
static bool can_unshare(const char *unshare)
{
	int st = -1;
	pid_t p;

	if (geteuid() != 0 || access(unshare, X_OK) != 0)
		return false;
	p = fork();
	if (p == 0) {
		int null = open("/dev/null", O_WRONLY);

		dup2(null, 1);
		dup2(null, 2);
		execl(unshare, unshare, "-pf", "--mount-proc", "true",
		      (char *)NULL);
		_exit(127);
	}
	return p > 0 && waitpid(p, &st, 0) == p && WIFEXITED(st) &&
	       WEXITSTATUS(st) == 0;
}

/*
 * A program in a pid namespace of its own, as in a container: the skip
 * set, in the daemon's tids, reaches its agent in the namespace's.
 */
static void test_foreign(struct registry *r, const char *sock)
{
	char fixture[256];
	char *argv[] = { (char *)"/usr/bin/unshare",
			 (char *)"-pf",
			 (char *)"--mount-proc",
			 fixture,
			 (char *)"sigwait-open",
			 (char *)"4",
			 NULL };
	pid_t w[8], all[16], skip[2];
	long before[2];
	struct sw_dump *d = NULL;
	struct target *t = NULL;
	size_t nw = 0, nall = 0;
	int out = -1, rc;
	pid_t group, pid = 0;

	if (!can_unshare(argv[0])) {
		TAP_SKIP("no pid namespace here (root and unshare -pf needed)");
		return;
	}
	snprintf(fixture, sizeof(fixture), "%s/fixtures/agent_target", build());
	group = start(argv, true, sock, &out);
	if (group > 0 && wait_line(out, "ready"))
		pid = child_of(group);
	if (pid > 0)
		t = wait_target(r, pid, "agent_target");
	if (!TAP_OK(t && t->foreign_ns,
		    "a program in a pid namespace of its own registered"))
		goto out;
	nw = tids_named(pid, "worker", w, 8);
	nall = tids_named(pid, NULL, all, 16);
	if (!TAP_OK(nw == 4, "it has 4 workers (%zu)", nw))
		goto out;
	skip[0] = w[2];
	skip[1] = pid;
	before[0] = switches(pid, w[2]);
	before[1] = switches(pid, w[0]);
	rc = target_dump_raw_skip(t, &root, DUMP_MS, skip, 2, &d);
	TAP_OK(before[0] >= 0 && switches(pid, w[2]) == before[0] &&
		       switches(pid, w[0]) > before[1],
	       "its agent left the worker alone, not another one: the set "
	       "reached it in the namespace's tids");
	TAP_OK(rc == 0 && d && !has(d, pid) && !has(d, w[2]) &&
		       d->nthreads + 2 == nall && has(d, w[0]) &&
		       has(d, w[3]) && all_stacks(d),
	       "leaving out its main thread and a worker by the daemon's "
	       "tids: both are out, the rest in, by the daemon's tids (rc "
	       "%d, %zu of %zu)",
	       rc, d ? d->nthreads : 0, nall);
	sw_dump_free(d);
out:
	target_put(t);
	TAP_OK(kill_group(group), "the namespace's process group is gone");
	if (out >= 0)
		close(out);
}

/* A thread of the daemon's (ours) in poll() on a pipe. */
static int self_pipe[2];
static _Atomic pid_t self_tid;
static char self_how[16];

static void *self_sleeper(void *arg)
{
	struct pollfd pf = { .fd = 0, .events = POLLIN };
	int n;

	(void)arg;
	pf.fd = self_pipe[0];
	self_tid = tu_gettid();
	n = poll(&pf, 1, 60000);
	snprintf(self_how, sizeof(self_how), "%s",
		 n > 0		  ? "woken"
		 : n == 0	  ? "timeout"
		 : errno == EINTR ? "eintr"
				  : "error");
	return NULL;
}

/* Whether our thread tid waits in poll() now. */
static bool in_poll(pid_t tid)
{
#ifdef SYS_poll
	const long want = SYS_poll;
#else
	const long want = SYS_ppoll;
#endif
	char path[64], buf[64];
	FILE *f;
	bool yes;

	snprintf(path, sizeof(path), "/proc/self/task/%d/syscall", (int)tid);
	f = fopen(path, "r");
	if (!f)
		return false;
	yes = fgets(buf, sizeof(buf), f) && strtol(buf, NULL, 10) == want;
	fclose(f);
	return yes;
}

static void test_self(struct registry *r)
{
	struct target *t = registry_get(r, getpid());
	struct sw_dump *d = NULL;
	pthread_t th;
	pid_t tid;
	int rc;

	if (!TAP_OK(t && t->self, "the daemon's own target") ||
	    pipe2(self_pipe, O_CLOEXEC) < 0 ||
	    pthread_create(&th, NULL, self_sleeper, NULL) != 0) {
		target_put(t);
		return;
	}
	for (long end = now_ms() + WAIT_MS;
	     now_ms() < end && !(self_tid && in_poll(self_tid));)
		tu_sleep_ms(1);
	tid = self_tid;
	rc = target_dump_raw_skip(t, &root, DUMP_MS, &tid, 1, &d);
	TAP_OK(rc == 0 && d && !has(d, tid) && has(d, tu_gettid()),
	       "a dump of ours leaving out a thread of ours: it is not in it, "
	       "we are (rc %d)",
	       rc);
	sw_dump_free(d);
	if (write(self_pipe[1], "x", 1) != 1)
		TAP_OK(0, "waking our sleeper");
	pthread_join(th, NULL);
	TAP_OK(strcmp(self_how, "woken") == 0,
	       "its poll() slept until woken: %s", self_how);
	close(self_pipe[0]);
	close(self_pipe[1]);
	target_put(t);
}

/* A hostile_agent in mode; checks what the skip set does with it. */
static void test_hostile(struct registry *r, const char *sock, const char *mode)
{
	char *argv[] = { (char *)"fixtures/hostile_agent", (char *)sock,
			 (char *)mode, (char *)"old", NULL };
	struct sw_dump *d = NULL;
	struct target *t = NULL;
	int out = -1, rc;
	pid_t pid = start(argv, false, sock, &out);

	if (pid > 0 && wait_line(out, "ready"))
		t = wait_target(r, pid,
				strcmp(mode, "name") == 0 ? "old" : "hostile");
	if (!TAP_OK(t, "hostile_agent %s registered", mode))
		goto out;
	if (strcmp(mode, "name") == 0) {
		TAP_OK(t->features == 0,
		       "an agent of the first form: no features");
		rc = target_dump_raw_skip(t, &root, DUMP_MS, &pid, 1, &d);
		TAP_OK(rc == -EOPNOTSUPP && !d,
		       "a skip set for it: -EOPNOTSUPP (rc %d)", rc);
		rc = target_dump_raw(t, &root, DUMP_MS, &d);
		TAP_OK(rc == 0 && d && d->nthreads == 1,
		       "the whole dump to fall back on still works (rc %d)",
		       rc);
	} else {
		rc = target_dump_raw_skip(t, &root, DUMP_MS, &pid, 1, &d);
		TAP_OK(rc == 0 && d && d->nthreads == 0 && !has(d, pid),
		       "an agent that reports a thread it was told to "
		       "leave out: the daemon drops it (rc %d, %zu threads)",
		       rc, d ? d->nthreads : 0);
	}
	sw_dump_free(d);
out:
	target_put(t);
	TAP_OK(kill_group(pid), "hostile_agent %s is gone", mode);
	if (out >= 0)
		close(out);
}

int main(void)
{
	char dir[] = "/tmp/sw-regskip-XXXXXX", sock[128];
	struct registry *r = NULL;
	int rc;

	signal(SIGPIPE, SIG_IGN);
	log_set_level(LOG_LVL_INFO);
	if (!mkdtemp(dir)) {
		TAP_OK(0, "a temp dir: %s", strerror(errno));
		return tap_done();
	}
	snprintf(sock, sizeof(sock), "%s/agent.sock", dir);
	rc = registry_start(sock, &stacks_hooks, &r);
	if (TAP_OK(rc == 0, "the registry listens on %s (rc %d)", sock, rc)) {
		test_agent(r, sock);
		test_foreign(r, sock);
		test_self(r);
		test_hostile(r, sock, "name");
		test_hostile(r, sock, "skipless");
		registry_stop(r);
	}
	unlink(sock);
	rmdir(dir);
	return tap_done();
}
