/*
 * test_nspid.c - the daemon's translation of thread ids from a target's
 * pid namespace into its own (src/daemon/nspid.c): the NSpid parser on
 * real and crafted status text (one level, nested levels, every kind of
 * malformed line, lines cut at the buffer's end), and the translation of
 * a dump's tids for a process of ours and, as root, for a real process in
 * a new pid namespace (skipped where unshare(CLONE_NEWPID) is refused),
 * and the other way, for the skip set of a dump request.
 *
 * The translation is daemon code (not part of libstackwatch), hence the
 * #include of its source.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../../src/daemon/nspid.c"
#include "tap.h"

/* nspid_parse over a C string. */
static int parse(const char *s, pid_t *outer, pid_t *inner)
{
	*outer = *inner = -99;
	return procfs_parse_nspid(s, strlen(s), outer, inner);
}

static void test_parse(void)
{
	char buf[4096], many[512];
	pid_t o, i;
	ssize_t n;
	int rc, len;

	n = procfs_read_at(AT_FDCWD, "/proc/self/status", buf, sizeof(buf));
	rc = n > 0 ? procfs_parse_nspid(buf, (size_t)n, &o, &i) : (int)n;
	TAP_OK(rc == 0 && o == getpid() && i == getpid(),
	       "our own status: NSpid is our pid at one level (%d %d)", (int)o,
	       (int)i);

	rc = parse("Name:\tx\nNSpid:\t4242\t17\t1\nNSpgid:\t1\n", &o, &i);
	TAP_OK(rc == 0 && o == 4242 && i == 1,
	       "three levels: the first and the last id (%d %d)", (int)o,
	       (int)i);
	rc = parse("NSpid:\t7\n", &o, &i);
	TAP_OK(rc == 0 && o == 7 && i == 7, "one level: both the same");
	rc = parse("NSpid: 300  2 \n", &o, &i);
	TAP_OK(rc == 0 && o == 300 && i == 2, "blanks as separators");
	rc = parse("NSpid:\t2147483647\t5", &o, &i);
	TAP_OK(rc == 0 && o == 2147483647 && i == 5,
	       "INT32_MAX, and a line cut at the end of the buffer");
	rc = procfs_parse_nspid("NSpid:\t12345\t9\n", 9, &o, &i);
	TAP_OK(rc == 0 && o == 12 && i == 12,
	       "the length bounds the parse, not the NUL");

	TAP_OK(parse("Name:\tx\nTgid:\t3\n", &o, &i) == -ENOENT,
	       "no NSpid line: -ENOENT");
	TAP_OK(parse("", &o, &i) == -ENOENT, "empty text: -ENOENT");
	TAP_OK(parse("XNSpid:\t5\n", &o, &i) == -ENOENT &&
		       parse("NSpidx:\t5\n", &o, &i) == -ENOENT,
	       "only a line that starts with the key counts");
	TAP_OK(parse("NSpid:\n", &o, &i) == SW_EFORMAT &&
		       parse("NSpid:", &o, &i) == SW_EFORMAT &&
		       parse("NSpid:\t\t\n", &o, &i) == SW_EFORMAT,
	       "no id: SW_EFORMAT");
	TAP_OK(parse("NSpid:\t0\n", &o, &i) == SW_EFORMAT &&
		       parse("NSpid:\t5\t0\n", &o, &i) == SW_EFORMAT,
	       "id 0: SW_EFORMAT");
	TAP_OK(parse("NSpid:\t-5\n", &o, &i) == SW_EFORMAT &&
		       parse("NSpid:\t5\t+3\n", &o, &i) == SW_EFORMAT,
	       "signs: SW_EFORMAT");
	TAP_OK(parse("NSpid:\t12x\n", &o, &i) == SW_EFORMAT &&
		       parse("NSpid:\t12\r\n", &o, &i) == SW_EFORMAT &&
		       parse("NSpid:\t0x10\n", &o, &i) == SW_EFORMAT,
	       "garbage after an id: SW_EFORMAT");
	TAP_OK(parse("NSpid:\t2147483648\n", &o, &i) == SW_EFORMAT &&
		       parse("NSpid:\t99999999999999999999999\n", &o, &i) ==
			       SW_EFORMAT &&
		       parse("NSpid:\t00000000001\n", &o, &i) == SW_EFORMAT,
	       "ids beyond INT32_MAX or 10 digits: SW_EFORMAT");

	len = 0;
	for (int k = 0; k < PROCFS_NSPID_MAX_LEVELS; k++)
		len += snprintf(many + len, sizeof(many) - (size_t)len, "%s%d",
				k ? "\t" : "NSpid:\t", 1000 - k);
	rc = parse(many, &o, &i);
	TAP_OK(rc == 0 && o == 1000 && i == 1000 - PROCFS_NSPID_MAX_LEVELS + 1,
	       "%d levels (the kernel's most) parse", PROCFS_NSPID_MAX_LEVELS);
	snprintf(many + len, sizeof(many) - (size_t)len, "\t5");
	TAP_OK(parse(many, &o, &i) == SW_EFORMAT, "%d levels: SW_EFORMAT",
	       PROCFS_NSPID_MAX_LEVELS + 1);
}

static struct sw_dump *fake_dump(const pid_t *tids, size_t n)
{
	struct sw_dump *d = dump_new();

	if (!d)
		return NULL;
	d->threads = calloc(n, sizeof(*d->threads));
	if (!d->threads) {
		sw_dump_free(d);
		return NULL;
	}
	d->nthreads = n;
	for (size_t k = 0; k < n; k++) {
		d->threads[k].tid = tids[k];
		d->threads[k].status = SW_ST_OK;
		d->threads[k].group = -1;
		d->threads[k].ips = calloc(2, sizeof(uint64_t));
		d->threads[k].nips = d->threads[k].ips ? 2 : 0;
	}
	return d;
}

static void *idle_main(void *arg)
{
	(void)arg;
	pause();
	return NULL;
}

/*
 * The other way (a skip set), in our own namespace: ids kept, ascending,
 * once each; one with no task dropped. other is a thread of ours.
 */
static void test_to_inner_self(pid_t other)
{
	pid_t host[] = { other, 2147483000, getpid(), other }, *in = NULL;
	size_t n = 0;
	int rc = nspid_to_inner(getpid(), host, 4, &in, &n);

	TAP_OK(rc == 0 && n == 2 && in[0] == getpid() && in[1] == other,
	       "same namespace, the other way: ids kept, ascending, once "
	       "each; one with no task dropped");
	free(in);
	TAP_OK(nspid_to_inner(2147483000, host, 1, &in, &n) == -ESRCH,
	       "the other way, a process that is gone: -ESRCH");
}

/* Our own process: the map is the identity; an unknown tid exits. */
static void test_translate_self(void)
{
	pthread_t th;
	pid_t tids[3] = { getpid(), 0, 2147483000 };
	struct sw_dump *d;
	int rc;

	TAP_OK(!nspid_foreign(getpid()),
	       "our own pid namespace is not foreign");
	TAP_OK(!nspid_foreign(2147483000), "an unknown pid is not foreign");
	pthread_create(&th, NULL, idle_main, NULL);
	/* The new thread's tid: the highest in /proc/self/task. */
	for (int k = 0; k < 100 && !tids[1]; k++) {
		pid_t *all;
		size_t n;
		int fd = open("/proc/self/task", O_RDONLY | O_DIRECTORY);

		if (fd >= 0 && procfs_list_tasks(fd, 64, &all, &n) == 0) {
			if (n == 2)
				tids[1] = all[1];
			free(all);
		}
		if (fd >= 0)
			close(fd);
		if (!tids[1])
			usleep(1000);
	}
	d = fake_dump(tids, 3);
	rc = d ? nspid_translate(getpid(), d) : -ENOMEM;
	TAP_OK(rc == 0 && d->threads[0].tid == getpid() &&
		       d->threads[1].tid == tids[1] &&
		       d->threads[0].status == SW_ST_OK &&
		       d->threads[0].nips == 2,
	       "same namespace: every tid kept, stacks kept");
	TAP_OK(rc == 0 && d->threads[2].tid == 0 &&
		       d->threads[2].status == SW_ST_EXITED &&
		       d->threads[2].nips == 0 && d->threads[2].error,
	       "a tid with no task: tid 0, exited, with a reason (%s)",
	       rc == 0 && d->threads[2].error ? d->threads[2].error : "none");
	sw_dump_free(d);
	d = fake_dump(tids, 1);
	TAP_OK(d && nspid_translate(2147483000, d) == -ESRCH &&
		       d->threads[0].tid == getpid(),
	       "a process that is gone: -ESRCH, the dump untouched");
	sw_dump_free(d);
	test_to_inner_self(tids[1]);
	pthread_cancel(th);
	pthread_join(th, NULL);
}

static _Atomic pid_t ns_thread_tid;

static void *ns_thread_main(void *arg)
{
	(void)arg;
	ns_thread_tid = (pid_t)syscall(SYS_gettid);
	for (;;)
		pause();
	return NULL;
}

/*
 * In a new pid namespace: pid 1 there, with a second thread. Writes its
 * two inner ids to fd and waits to be killed.
 */
static void ns_process(int fd)
{
	pthread_t th;
	pid_t ids[2];

	if (pthread_create(&th, NULL, ns_thread_main, NULL) != 0)
		_exit(1);
	while (!ns_thread_tid)
		usleep(1000);
	ids[0] = getpid();
	ids[1] = ns_thread_tid;
	if (write(fd, ids, sizeof(ids)) != sizeof(ids))
		_exit(1);
	for (;;)
		pause();
}

/* Reads n bytes from fd; false at EOF or error. */
static bool read_all(int fd, void *p, size_t n)
{
	return read(fd, p, n) == (ssize_t)n;
}

/*
 * The other way, for a skip set: the host's ids of the process's threads
 * become the namespace's, ascending, once each; an id of another process
 * (ours) or of none is dropped.
 */
static void test_to_inner_namespace(pid_t outer, pid_t host_thread,
				    pid_t inner_thread)
{
	pid_t host[] = { host_thread, getpid(), outer, 999999, outer };
	pid_t *in = NULL;
	size_t n = 0;
	int rc;

	rc = nspid_to_inner(outer, host, 5, &in, &n);
	TAP_OK(rc == 0 && n == 2 && in[0] == 1 && in[1] == inner_thread,
	       "a skip set of %d, %d, ours, none and %d again becomes 1, %d "
	       "(got %zu ids)",
	       (int)host_thread, (int)outer, (int)outer, (int)inner_thread, n);
	free(in);
}

/*
 * A real process in a new pid namespace: its inner ids (1 and a small
 * one) become the ids the host sees, which /proc/OUTER/task lists.
 */
static void test_translate_namespace(void)
{
	int outer_pipe[2], inner_pipe[2];
	pid_t helper, outer = 0, inner[2] = { 0, 0 }, host_thread = 0;
	pid_t tids[3], *all = NULL, o = 0, i = 0;
	struct sw_dump *d = NULL;
	char path[64], buf[4096];
	size_t n = 0;
	ssize_t len;
	int fd, rc;

	if (pipe(outer_pipe) < 0 || pipe(inner_pipe) < 0) {
		TAP_OK(0, "pipes: %s", strerror(errno));
		return;
	}
	helper = fork();
	if (helper == 0) {
		pid_t child;
		int err = 0;

		if (unshare(CLONE_NEWPID) < 0) {
			err = -errno;
			(void)!write(outer_pipe[1], &err, sizeof(err));
			_exit(0);
		}
		child = fork();
		if (child == 0)
			ns_process(inner_pipe[1]);
		(void)!write(outer_pipe[1], &child, sizeof(child));
		waitpid(child, NULL, 0);
		_exit(0);
	}
	close(outer_pipe[1]);
	close(inner_pipe[1]);
	if (!read_all(outer_pipe[0], &outer, sizeof(outer)) || outer < 0) {
		TAP_SKIP("namespace translation: no new pid namespace here "
			 "(unshare: %s)",
			 strerror(-outer));
		goto out_reap;
	}
	if (!TAP_OK(read_all(inner_pipe[0], inner, sizeof(inner)),
		    "the process in the new namespace reports its ids"))
		goto out_kill;
	TAP_OK(inner[0] == 1 && outer != 1,
	       "it is pid 1 inside and pid %d outside", (int)outer);
	snprintf(path, sizeof(path), "/proc/%d/status", (int)outer);
	len = procfs_read_at(AT_FDCWD, path, buf, sizeof(buf));
	rc = len > 0 ? procfs_parse_nspid(buf, (size_t)len, &o, &i) : (int)len;
	TAP_OK(rc == 0 && o == outer && i == 1,
	       "its NSpid line: %d outside, %d inside", (int)o, (int)i);
	TAP_OK(nspid_foreign(outer), "its pid namespace is foreign");

	snprintf(path, sizeof(path), "/proc/%d/task", (int)outer);
	fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd >= 0 && procfs_list_tasks(fd, 64, &all, &n) == 0 && n == 2)
		host_thread = all[0] == outer ? all[1] : all[0];
	free(all);
	if (fd >= 0)
		close(fd);
	tids[0] = inner[1];
	tids[1] = 1;
	tids[2] = 999999; /* no such task in the namespace */
	d = fake_dump(tids, 3);
	rc = d ? nspid_translate(outer, d) : -ENOMEM;
	TAP_OK(rc == 0 && d->threads[1].tid == outer &&
		       d->threads[1].status == SW_ST_OK,
	       "the main thread: 1 becomes %d (got %d)", (int)outer,
	       rc == 0 ? (int)d->threads[1].tid : rc);
	TAP_OK(rc == 0 && host_thread > 0 && d->threads[0].tid == host_thread &&
		       d->threads[0].nips == 2,
	       "the other thread: %d becomes %d (got %d)", (int)inner[1],
	       (int)host_thread, rc == 0 ? (int)d->threads[0].tid : rc);
	TAP_OK(rc == 0 && d->threads[2].tid == 0 &&
		       d->threads[2].status == SW_ST_EXITED,
	       "an id with no task there: tid 0, exited");
	sw_dump_free(d);
	test_to_inner_namespace(outer, host_thread, inner[1]);
out_kill:
	kill(outer, SIGKILL);
out_reap:
	waitpid(helper, NULL, 0);
	close(outer_pipe[0]);
	close(inner_pipe[0]);
}

int main(void)
{
	test_parse();
	test_translate_self();
	test_translate_namespace();
	return tap_done();
}
