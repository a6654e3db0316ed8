/*
 * test_loader_race.c - no deadlock against the dynamic loader's lock.
 *
 * Runs $BUILD/fixtures/loader_race (BUILD defaults to "build"), which dumps
 * itself 10,000 times while its threads loop dlopen/dlclose,
 * dl_iterate_phdr and C++ throw/catch, and checks every dump (its TAP lines
 * are passed through). A deadlock cannot report itself, so this program is
 * the watchdog: if the fixture has not finished by the deadline, its
 * threads' stacks are printed (eu-stack, when installed) and it is killed,
 * and the test fails.
 *
 * SW_LOADER_RACE_DUMPS and SW_LOADER_RACE_DEADLINE_S override the number of
 * dumps (10000) and the deadline (240 s).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tap.h"
#include "testutil.h"

static const char *build_dir(void)
{
	const char *b = getenv("BUILD");

	return b && *b ? b : "build";
}

static long env_long(const char *name, long def)
{
	const char *v = getenv(name);
	char *end;
	long n;

	if (!v || !*v)
		return def;
	n = strtol(v, &end, 10);
	return *end || n <= 0 ? def : n;
}

/* Prints every thread's stack of a hung process, as comments. */
static void show_stacks(pid_t pid)
{
	char cmd[128], line[512];
	FILE *p;

	snprintf(cmd, sizeof(cmd), "timeout 30 eu-stack -p %d 2>&1", (int)pid);
	p = popen(cmd, "r");
	if (!p)
		return;
	while (fgets(line, sizeof(line), p))
		printf("#   %s", line);
	pclose(p);
	fflush(stdout);
}

/*
 * Copies complete lines from fd to stdout; keeps a partial one in buf.
 * Returns false at end of file.
 */
static bool pass_through(int fd, char *buf, size_t size, size_t *len, int *oks,
			 int *fails)
{
	ssize_t n = read(fd, buf + *len, size - *len - 1);
	char *start, *nl;

	if (n < 0 && (errno == EINTR || errno == EAGAIN))
		return true;
	if (n <= 0) {
		if (*len) {
			buf[*len] = '\0';
			printf("%s\n", buf);
			*len = 0;
		}
		return false;
	}
	*len += (size_t)n;
	buf[*len] = '\0';
	start = buf;
	while ((nl = strchr(start, '\n')) != NULL) {
		*nl = '\0';
		if (!strncmp(start, "ok", 2))
			(*oks)++;
		else if (!strncmp(start, "not ok", 6))
			(*fails)++;
		printf("%s\n", start);
		start = nl + 1;
	}
	*len = strlen(start);
	memmove(buf, start, *len + 1);
	if (*len == size - 1) { /* an overlong line: flush it as is */
		printf("%s\n", buf);
		*len = 0;
	}
	fflush(stdout);
	return true;
}

int main(void)
{
	long dumps = env_long("SW_LOADER_RACE_DUMPS", 10000);
	long deadline_s = env_long("SW_LOADER_RACE_DEADLINE_S", 240);
	char path[4096], dumps_arg[32], buf[4096];
	int fds[2], status = 0, oks = 0, fails = 0;
	uint64_t deadline;
	size_t len = 0;
	bool hung = false;
	pid_t pid;

	snprintf(path, sizeof(path), "%s/fixtures/loader_race", build_dir());
	snprintf(dumps_arg, sizeof(dumps_arg), "%ld", dumps);
	if (!TAP_OK(access(path, X_OK) == 0, "the fixture %s is built", path))
		return tap_done();
	if (pipe2(fds, O_CLOEXEC) < 0) {
		TAP_OK(0, "pipe: %s", strerror(errno));
		return tap_done();
	}
	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		dup2(fds[1], 1);
		dup2(fds[1], 2);
		execl(path, path, "--dumps", dumps_arg, (char *)NULL);
		_exit(127);
	}
	close(fds[1]);
	if (!TAP_OK(pid > 0, "started the fixture"))
		return tap_done();

	deadline = tu_now_ns() + (uint64_t)deadline_s * 1000000000ull;
	for (;;) {
		struct pollfd pfd = { .fd = fds[0], .events = POLLIN };
		uint64_t now = tu_now_ns();
		int ms;

		if (now >= deadline) {
			hung = true;
			break;
		}
		ms = (int)((deadline - now) / 1000000u) + 1;
		if (poll(&pfd, 1, ms) < 0 && errno != EINTR)
			break;
		if (pfd.revents &&
		    !pass_through(fds[0], buf, sizeof(buf), &len, &oks, &fails))
			break;
	}
	if (hung) {
		printf("# loader_race did not finish in %ld s; its threads:\n",
		       deadline_s);
		show_stacks(pid);
		kill(pid, SIGKILL);
	}
	close(fds[0]);
	waitpid(pid, &status, 0);

	TAP_OK(!hung,
	       "the fixture finished: no deadlock in %ld dumps "
	       "(deadline %ld s)",
	       dumps, deadline_s);
	if (!hung) {
		if (WIFSIGNALED(status))
			TAP_OK(0, "the fixture was killed by signal %d (%s)",
			       WTERMSIG(status), strsignal(WTERMSIG(status)));
		else
			TAP_OK(WIFEXITED(status) &&
				       (WEXITSTATUS(status) == 0 || fails > 0),
			       "the fixture exited normally (status %d)",
			       WEXITSTATUS(status));
	}
	TAP_OK(hung || oks >= 8,
	       "the fixture reported its checks (%d passed, %d failed)", oks,
	       fails);
	/* The fixture's own failures were passed through: they count. */
	return tap_done() || fails ? 1 : 0;
}
