/*
 * sandbox.c - parser workers for a CLI run with privilege (cli.h).
 *
 * "sudo stackwatch dump --local PID" reads another user's process as
 * root; what that process controls (its programs' ELF and DWARF, its
 * stacks) is then parsed by workers of the daemon's kind (privsep/
 * worker.h): this program again, run with --parser-worker, as the user
 * stackwatchd (else nobody), with no capability and a seccomp allow-list,
 * handed each file it asks for. A crafted program can crash or stall a
 * worker, never take over the root process that started it.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "cli.h"
#include "privsep/parsers.h"
#include "privsep/worker.h"

extern char **environ;

static int exe_fd = -1; /* our own program, O_PATH */

/*
 * Starts a worker on sock as uid and gid (when we are root): our own
 * program again, by the descriptor opened before anything could replace
 * the file. 0 with its pid and pidfd, or a negative errno.
 */
static int spawn(uid_t uid, gid_t gid, int sock, pid_t *pid, int *pidfd)
{
	static char name[] = "stackwatch", opt[] = "--parser-worker",
		    empty[] = "";
	char *argv[] = { name, opt, NULL };
	pid_t p;

	*pid = 0;
	*pidfd = -1;
	p = fork();
	if (p < 0)
		return -errno;
	if (p == 0) {
		if (getuid() == 0 && uid != 0 &&
		    (setgroups(1, &gid) < 0 || setresgid(gid, gid, gid) < 0 ||
		     setresuid(uid, uid, uid) < 0))
			_exit(126);
		/* dup2() onto itself would keep its close-on-exec. */
		if (sock == WORKER_FD ? fcntl(sock, F_SETFD, 0) < 0
				      : dup2(sock, WORKER_FD) < 0)
			_exit(127);
		close_range(WORKER_FD + 1, ~0u, CLOSE_RANGE_CLOEXEC);
		syscall(SYS_execveat, exe_fd, empty, argv, environ,
			AT_EMPTY_PATH);
		_exit(127);
	}
	*pidfd = (int)syscall(SYS_pidfd_open, p, 0);
	if (*pidfd < 0) {
		int rc = -errno;

		kill(p, SIGKILL);
		return rc;
	}
	*pid = p;
	return 0;
}

/* A worker's trouble, said on stderr. */
static void say(bool warn, const char *line)
{
	if (warn)
		cli_error("%s", line);
}

bool cli_sandboxed(void)
{
	return geteuid() == 0;
}

int cli_sandbox_start(void)
{
	const struct passwd *pw = getpwnam("stackwatchd");
	uid_t uid;
	gid_t gid;
	int fd;

	if (!pw)
		pw = getpwnam("nobody");
	uid = pw ? pw->pw_uid : 65534;
	gid = pw ? pw->pw_gid : 65534;
	/* Above the worker's own descriptors, which its start takes. */
	fd = open("/proc/self/exe", O_PATH | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	exe_fd = fcntl(fd, F_DUPFD_CLOEXEC, WORKER_NOTE_FD + 1);
	close(fd);
	if (exe_fd < 0)
		return -errno;
	parsers_set_log(say);
	return parsers_init(uid, gid, spawn);
}

void cli_sandbox_stop(void)
{
	parsers_stop();
	if (exe_fd >= 0)
		close(exe_fd);
	exe_fd = -1;
}

int cli_parser_worker(int argc, char **argv)
{
	return worker_main(argc, argv);
}
