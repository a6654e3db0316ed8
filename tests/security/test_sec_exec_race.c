/*
 * test_sec_exec_race.c - a process that runs a set-uid program while the
 * daemon reads it is never shown.
 *
 * A user asks for its own process P; between the daemon's access check
 * and its read, P runs a set-uid root program. What the daemon then reads
 * is that program, which only root may read: its stacks, its names and
 * its load addresses (ASLR of a set-uid binary). The daemon must discard
 * such a read (404), for every read method.
 *
 * The race is made deterministic with the daemon's test gate (gate.h):
 * the read is held right before it begins, the test makes P exec and
 * waits until the kernel shows P's new credentials, then lets the read
 * go. The set-uid program is plain_target, copied here as root:root 4755.
 */
#define _GNU_SOURCE
#include <sys/prctl.h>

#include "sectest.h"
#include "tap.h"

static char setuid_copy[256];

/* Copies the fixture to dir as a set-uid root program. 0 or -1. */
static int install_setuid(const char *dir)
{
	char cmd[768];

	snprintf(setuid_copy, sizeof(setuid_copy), "%s/suid_target", dir);
	snprintf(cmd, sizeof(cmd), "cp %s/fixtures/plain_target %s",
		 itest_target_build(), setuid_copy);
	if (system(cmd) != 0 || chown(setuid_copy, 0, 0) < 0 ||
	    chmod(setuid_copy, 04755) < 0)
		return -1;
	return 0;
}

/*
 * Starts P as nobody: a shell that runs the set-uid program when a line
 * arrives on its stdin, under the agent when agent is true. *cmd gets the
 * pipe to its stdin.
 */
static pid_t start_p(const struct itest_daemon *d, bool agent, int *cmd)
{
	char agent_so[256];
	int in[2];
	pid_t pid;

	if (pipe(in) < 0)
		return -1;
	snprintf(agent_so, sizeof(agent_so), "%s/libstackwatch-agent.so",
		 itest_target_build());
	pid = fork();
	if (pid == 0) {
		int null = open("/dev/null", O_WRONLY);

		dup2(in[0], 0);
		close(in[0]);
		close(in[1]);
		dup2(null, 1);
		if (sec_become(SEC_NOBODY, SEC_NOBODY, NULL, 0) < 0)
			_exit(126);
		if (agent) {
			setenv("LD_PRELOAD", agent_so, 1);
			setenv("STACKWATCH_SOCKET", d->sock, 1);
		}
		/* A program of nobody's own (dumpable, unlike a process that
		 * just left root), that runs the set-uid one when told. */
		execl("/bin/sh", "sh", "-c", "read x; exec \"$0\" 2",
		      setuid_copy, (char *)NULL);
		_exit(127);
	}
	close(in[0]);
	*cmd = in[1];
	return pid;
}

/* The effective uid of pid (its status file); -1 when unreadable. */
static long euid_of(pid_t pid)
{
	char path[64], buf[4096];
	const char *v;
	unsigned long r, e;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	fd = open(path, O_RDONLY);
	if (fd < 0)
		return -1;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = '\0';
	v = strstr(buf, "\nUid:");
	if (!v || sscanf(v + 5, "%lu %lu", &r, &e) != 2)
		return -1;
	return (long)e;
}

/* Waits until pid runs as root (its exec of the set-uid program done). */
static bool wait_root(pid_t pid)
{
	for (long end = itest_now_ms() + 10000; itest_now_ms() < end;) {
		if (euid_of(pid) == 0)
			return true;
		itest_sleep_ms(2);
	}
	return false;
}

/*
 * One race, by method ("ptrace": P without the agent, "agent": under the
 * agent): nobody asks for P, the read is held, P runs the set-uid
 * program, the read goes on.
 */
static void race(const struct itest_daemon *d, struct sec_gate *g,
		 const char *method)
{
	bool agent = strcmp(method, "agent") == 0;
	struct sec_pending pg = { .pid = -1, .fd = -1 };
	struct sec_answer *a = calloc(1, sizeof(*a));
	char line[128], want[64], target[128];
	int cmd = -1, c;
	pid_t p = start_p(d, agent, &cmd);

	/* Until it runs sh, P is the child that just left root: not
	 * dumpable, so not nobody's to see. */
	if (p > 0 && !sec_wait_comm(p, "sh")) {
		TAP_OK(0, "%s: P runs sh", method);
		goto out;
	}
	if (p > 0 && agent && !itest_wait_registered(d, p, 10000)) {
		TAP_OK(0, "%s: P registered", method);
		goto out;
	}
	snprintf(target, sizeof(target),
		 "/api/v1/stacks?pid=%d&format=text&timeout_ms=8000", (int)p);
	if (p > 0)
		sec_get_start(SEC_NOBODY, SEC_NOBODY, NULL, 0, d->url, NULL,
			      NULL, target, &pg);
	if (p <= 0 || !a || pg.pid <= 0) {
		TAP_OK(0, "%s: P and its requester start", method);
		goto out;
	}
	c = sec_gate_next(g, 15000, line, sizeof(line));
	snprintf(want, sizeof(want), "read %d %s %d", (int)p, method,
		 SEC_NOBODY);
	TAP_OK(c >= 0 && strcmp(line, want) == 0,
	       "%s: nobody's read of its own process is held at the gate "
	       "('%s')",
	       method, line);
	(void)!write(cmd, "go\n", 3);
	TAP_OK(wait_root(p),
	       "%s: meanwhile P ran the set-uid program "
	       "(euid 0)",
	       method);
	sec_gate_release(c);
	sec_get_finish(&pg, a);
	TAP_OK(a->status != 200 && !strstr(a->body, "suid_target") &&
		       !strstr(a->body, "plain_park"),
	       "%s: the read of the set-uid program is not shown (%d: %.120s)",
	       method, a->status, a->body);
	if (!agent)
		TAP_OK(a->status == 404, "%s: it is a 404 (%d)", method,
		       a->status);
	/* And P stays hidden now that it is root's. */
	{
		char path[96];

		snprintf(path, sizeof(path), "/api/v1/stacks?pid=%d", (int)p);
		sec_get_as(SEC_NOBODY, SEC_NOBODY, NULL, 0, d->url, NULL, NULL,
			   path, a);
		TAP_OK(a->status == 404,
		       "%s: asked again, P is 404 for nobody (%d)", method,
		       a->status);
	}
out:
	if (pg.fd >= 0)
		sec_get_finish(&pg, a);
	if (cmd >= 0)
		close(cmd);
	itest_kill(p);
	free(a);
}

int main(void)
{
	static const char *const args[] = { "--sample-interval", "0", NULL };
	struct itest_daemon d;
	struct sec_gate g = { .fd = -1 };
	char dir[] = "/tmp/sw-exec-race-XXXXXX";

	if (geteuid() != 0) {
		TAP_SKIP("needs root: the daemon runs as root, requesters as "
			 "nobody, the set-uid program as root");
		return tap_done();
	}
	if (prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) == 1) {
		TAP_SKIP("no_new_privs is set here: a set-uid program would "
			 "not gain root");
		return tap_done();
	}
	if (!mkdtemp(dir) || chmod(dir, 0755) < 0 || install_setuid(dir) < 0 ||
	    sec_gate_open(&g, dir) < 0) {
		TAP_OK(0, "the set-uid copy and the gate are set up in %s",
		       dir);
		return tap_done();
	}
	if (itest_daemon_start_args(&d, args) < 0) {
		TAP_OK(0, "the daemon starts");
		goto out;
	}
	unsetenv("STACKWATCH_TEST_GATE");
	chmod(d.dir, 0711);
	race(&d, &g, "ptrace");
	race(&d, &g, "agent");
	TAP_OK(itest_daemon_stop(&d) == 0, "the daemon stops cleanly");
	itest_daemon_cleanup(&d);
out:
	sec_gate_close(&g);
	unlink(setuid_copy);
	rmdir(dir);
	return tap_done();
}
