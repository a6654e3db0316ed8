/*
 * test_sec_pidreuse.c - a pid taken by another process between the
 * access check and the read: the read is of the process checked, or of
 * none.
 *
 * nobody asks for its own `sleep` P. The daemon's test gate (gate.h)
 * holds the read after the access check; meanwhile P is killed and a
 * root process is started under the very same pid (ns_last_pid). Then
 * the read goes on. It must not read the root process: nobody's answer
 * is no 200, and that process is never stopped (its switch counts are
 * unchanged; a ptrace snapshot would stop it). Once with the daemon's
 * kernel reads and once without (--no-kernel-reads: ptrace).
 */
#define _GNU_SOURCE

#include "sectest.h"
#include "tap.h"

/*
 * A root `sleep` under the pid that was P's (free now): ns_last_pid set
 * to one below it, then a fork, as checkpoint/restore tools take a pid.
 * Another process of the host may take it first: tried 50 times. Its
 * pid (P), or -1.
 */
static pid_t take_pid(pid_t want)
{
	for (int i = 0; i < 50; i++) {
		char last[32];
		pid_t pid;
		int fd;

		snprintf(last, sizeof(last), "%d", (int)want - 1);
		fd = open("/proc/sys/kernel/ns_last_pid", O_WRONLY | O_CLOEXEC);
		if (fd < 0)
			return -1;
		if (write(fd, last, strlen(last)) < 0) {
			close(fd);
			return -1;
		}
		pid = fork();
		if (pid == 0) {
			if (getpid() != want)
				_exit(0);
			execlp("sleep", "sleep", "601", (char *)NULL);
			_exit(127);
		}
		close(fd);
		if (pid == want)
			return pid;
		if (pid > 0)
			waitpid(pid, NULL, 0);
	}
	return -1;
}

static void race(const char *how, const char *const *args)
{
	struct itest_daemon d;
	struct sec_gate g = { .fd = -1 };
	struct sec_pending pg;
	struct sec_answer *a = calloc(1, sizeof(*a));
	char dir[] = "/tmp/sw-pidreuse-XXXXXX", line[128], path[64];
	pid_t victim, root = -1;
	long before = -1, after = -1;
	int c = -1;

	if (!a || !mkdtemp(dir) || chmod(dir, 0755) < 0 ||
	    sec_gate_open(&g, dir) < 0) {
		TAP_OK(0, "%s: the gate is set up", how);
		free(a);
		return;
	}
	if (itest_daemon_start_args(&d, args) < 0) {
		TAP_OK(0, "%s: the daemon starts", how);
		goto out;
	}
	unsetenv("STACKWATCH_TEST_GATE");
	chmod(d.dir, 0711);
	victim = sec_sleeper(SEC_NOBODY, SEC_NOBODY);
	TAP_OK(victim > 0 && sec_wait_comm(victim, "sleep"),
	       "%s: nobody's sleep runs", how);
	snprintf(path, sizeof(path), "/api/v1/stacks?pid=%d&format=text",
		 (int)victim);
	sec_get_start(SEC_NOBODY, SEC_NOBODY, NULL, 0, d.url, d.http_sock, NULL,
		      path, &pg);
	c = sec_gate_next(&g, 15000, line, sizeof(line));
	TAP_OK(c >= 0 && strncmp(line, "read ", 5) == 0,
	       "%s: nobody's read of it is held at the gate (%s)", how, line);
	itest_kill(victim);
	root = take_pid(victim);
	if (root < 0) {
		TAP_SKIP("%s: pid %d could not be taken again (ns_last_pid)",
			 how, (int)victim);
	} else {
		TAP_OK(sec_wait_comm(root, "sleep"),
		       "%s: a root sleep runs under pid %d now", how,
		       (int)root);
		itest_sleep_ms(50); /* asleep, its counts settled */
		before = itest_task_switches(root, root);
	}
	sec_gate_release(c);
	sec_get_finish(&pg, a);
	a->body[strcspn(a->body, "\n")] = '\0';
	if (root > 0) {
		after = itest_task_switches(root, root);
		TAP_OK(a->status != 200 && a->status != 0,
		       "%s: nobody gets no stacks of it (%d: %s)", how,
		       a->status, a->body);
		TAP_OK(before >= 0 && after == before,
		       "%s: the root process was never stopped (switches %ld, "
		       "then %ld)",
		       how, before, after);
		itest_kill(root);
	}
	TAP_OK(itest_daemon_stop(&d) == 0, "%s: the daemon stops cleanly", how);
	itest_daemon_cleanup(&d);
out:
	sec_gate_close(&g);
	rmdir(dir);
	free(a);
}

int main(void)
{
	static const char *const kernel[] = { "--sample-interval", "0", NULL };
	static const char *const ptrace[] = { "--sample-interval", "0",
					      "--no-kernel-reads", NULL };

	if (geteuid() != 0) {
		TAP_SKIP("needs root: the daemon, and a pid taken again");
		return tap_done();
	}
	race("kernel reads", kernel);
	race("ptrace", ptrace);
	return tap_done();
}
