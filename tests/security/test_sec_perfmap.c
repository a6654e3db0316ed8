/*
 * test_sec_perfmap.c - what a target puts where its perf map goes is
 * never opened unless it is a regular file of the target's user.
 *
 * The daemon (root) and `stackwatch dump --local` look for
 * /tmp/perf-PID.map in the target's own root to name its JIT frames. The
 * target controls that name: nobody, in user and mount namespaces of its
 * own (unshare -Urm), can bind a device node over it, and a device's
 * driver acts on open (a watchdog is armed by it). tests/fixtures/
 * jit_target runs as nobody with a character device node of the test's
 * (1:3, as /dev/null) bound over its map's name, and another with a FIFO
 * there; inotify on both nodes says whether anyone opened them. Each is
 * dumped by the daemon and by the CLI: the dumps answer, the JIT frame
 * stays unnamed, and neither node is opened.
 */
#define _GNU_SOURCE
#include <sys/inotify.h>
#include <sys/mount.h>
#include <sys/sysmacros.h>

#include "sectest.h"
#include "tap.h"

static char work[] = "/tmp/sw-secmap-XXXXXX";
static char fixture[256];

/*
 * Starts jit_target as nobody with node bound over its perf map's name
 * (in a user and mount namespace of its own), or with a FIFO made there
 * (bind false). Its pid, the process group's leader; -1 on failure.
 */
static pid_t start(const char *node, bool bind)
{
	char line[128], map[64];
	int p[2];
	pid_t pid;
	bool ready;

	if (pipe(p) < 0)
		return -1;
	pid = fork();
	if (pid == 0) {
		int fd;

		setpgid(0, 0);
		dup2(p[1], 1);
		close(p[0]);
		close(p[1]);
		snprintf(map, sizeof(map), "/tmp/perf-%d.map", (int)getpid());
		if (sec_become(SEC_NOBODY, SEC_NOBODY, NULL, 0) < 0)
			_exit(126);
		if (!bind) {
			if (mkfifo(map, 0600) < 0)
				_exit(125);
		} else {
			fd = open(map, O_WRONLY | O_CREAT | O_EXCL, 0600);
			if (fd < 0 || sec_enter_userns(CLONE_NEWNS) < 0 ||
			    mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) <
				    0 ||
			    mount(node, map, NULL, MS_BIND, NULL) < 0)
				_exit(125);
			close(fd);
		}
		execl(fixture, fixture, (char *)NULL);
		_exit(127);
	}
	close(p[1]);
	if (pid < 0) {
		close(p[0]);
		return -1;
	}
	setpgid(pid, pid);
	ready = itest_read_line(p[0], line, sizeof(line)) &&
		strncmp(line, "ready ", 6) == 0;
	close(p[0]);
	if (!ready) {
		kill(-pid, SIGKILL);
		waitpid(pid, NULL, 0);
		return -1;
	}
	return pid;
}

/* The events inotify has for fd now: opens seen (non-blocking read). */
static int opens(int fd)
{
	char buf[4096]
		__attribute__((aligned(__alignof__(struct inotify_event))));
	int n = 0;
	ssize_t len;

	while ((len = read(fd, buf, sizeof(buf))) > 0)
		for (char *p = buf; p < buf + len;) {
			const struct inotify_event *e = (const void *)p;

			n += (e->mask & IN_OPEN) != 0;
			p += sizeof(*e) + e->len;
		}
	return n;
}

/* The function of the first [jit] frame of a process's JSON, or NULL. */
static bool jit_named(cJSON *j)
{
	cJSON *g, *f;

	cJSON_ArrayForEach(g, cJSON_GetObjectItem(j, "groups"))
		cJSON_ArrayForEach(f, cJSON_GetObjectItem(g, "frames"))
	{
		cJSON *m = cJSON_GetObjectItem(f, "module");

		if (cJSON_IsString(m) && !strcmp(m->valuestring, "[jit]"))
			return true;
	}
	return false;
}

static void check(const struct itest_daemon *d, const char *what,
		  const char *node, pid_t pid, int in)
{
	char path[96], cmd[512];
	cJSON *j = NULL;
	int st, rc;

	TAP_OK(pid > 0, "%s: jit_target runs as nobody", what);
	if (pid <= 0)
		return;
	opens(in);
	snprintf(path, sizeof(path), "/api/v1/stacks?pid=%d", (int)pid);
	st = sec_root_get(d, path, 10000, &j);
	TAP_OK(st == 200 && j && !jit_named(j),
	       "%s: the daemon dumps it, its JIT frame unnamed (%d)", what, st);
	cJSON_Delete(j);
	TAP_OK(opens(in) == 0, "%s: the daemon did not open %s", what, node);
	snprintf(cmd, sizeof(cmd),
		 "%s/stackwatch dump --local %d >/dev/null 2>&1", itest_build(),
		 (int)pid);
	rc = system(cmd);
	TAP_OK(WIFEXITED(rc) && WEXITSTATUS(rc) == 0,
	       "%s: stackwatch dump --local dumps it (%d)", what,
	       WIFEXITED(rc) ? WEXITSTATUS(rc) : -1);
	TAP_OK(opens(in) == 0, "%s: the CLI did not open %s", what, node);
}

static void stop(pid_t pid)
{
	char map[64];

	if (pid <= 0)
		return;
	kill(-pid, SIGKILL);
	waitpid(pid, NULL, 0);
	snprintf(map, sizeof(map), "/tmp/perf-%d.map", (int)pid);
	unlink(map);
}

int main(void)
{
	static const char *const args[] = { "--sample-interval", "0", NULL };
	char node[128], fifo[64];
	struct itest_daemon d;
	pid_t dev_pid, fifo_pid;
	int in;

	if (geteuid() != 0) {
		TAP_SKIP("needs root: the daemon and the device node");
		return tap_done();
	}
	snprintf(fixture, sizeof(fixture), "%s/fixtures/jit_target",
		 itest_target_build());
	if (!mkdtemp(work)) {
		TAP_OK(0, "a work directory");
		return tap_done();
	}
	chmod(work, 0755);
	snprintf(node, sizeof(node), "%s/dev", work);
	in = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	TAP_OK(mknod(node, S_IFCHR | 0666, makedev(1, 3)) == 0 && in >= 0 &&
		       inotify_add_watch(in, node, IN_OPEN) >= 0,
	       "a character device node of the test's, watched");
	if (itest_daemon_start_args(&d, args) < 0) {
		TAP_OK(0, "the daemon starts");
		return tap_done();
	}
	dev_pid = start(node, true);
	if (dev_pid < 0)
		TAP_SKIP("nobody cannot make user and mount namespaces here: "
			 "no device over its perf map");
	else
		check(&d, "a device over the perf map", node, dev_pid, in);
	stop(dev_pid);

	fifo_pid = start(NULL, false);
	snprintf(fifo, sizeof(fifo), "/tmp/perf-%d.map", (int)fifo_pid);
	TAP_OK(fifo_pid > 0 && inotify_add_watch(in, fifo, IN_OPEN) >= 0,
	       "a FIFO as the perf map, watched");
	check(&d, "a FIFO as the perf map", fifo, fifo_pid, in);
	stop(fifo_pid);

	close(in);
	TAP_OK(itest_daemon_stop(&d) == 0, "the daemon stops cleanly");
	itest_daemon_cleanup(&d);
	unlink(node);
	rmdir(work);
	return tap_done();
}
