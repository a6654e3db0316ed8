/*
 * bench_time.c - wall time of one command, for tests/bench/daemon.sh
 * (a shell cannot read a clock finer than a second without running one
 * more program, whose start-up would be counted).
 *
 *	bench_time OUT CAP_S CMD [ARG...]
 *
 * Runs CMD (stdin from /dev/null, stdout and stderr inherited) and writes
 * "WALL_MS STATUS" to OUT: the wall time from just before fork to the
 * reaping of CMD, in milliseconds, and CMD's exit status, or "timeout"
 * when it ran past CAP_S seconds (0: no cap) and was killed (SIGKILL to
 * its process group, after SIGTERM and a second's grace), or "signal"
 * when a signal ended it. Exits 0 when OUT was written.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

int main(int argc, char **argv)
{
	uint64_t start, end, cap_ns;
	const char *status = NULL;
	char code[16];
	double cap;
	pid_t pid;
	FILE *f;
	int st = 0;

	if (argc < 4) {
		fprintf(stderr, "usage: bench_time OUT CAP_S CMD [ARG...]\n");
		return 2;
	}
	cap = atof(argv[2]);
	cap_ns = cap > 0 ? (uint64_t)(cap * 1e9) : 0;
	start = now_ns();
	pid = fork();
	if (pid < 0) {
		perror("bench_time: fork");
		return 1;
	}
	if (pid == 0) {
		int fd = open("/dev/null", O_RDONLY);

		setpgid(0, 0);
		if (fd >= 0)
			dup2(fd, 0);
		execvp(argv[3], argv + 3);
		_exit(127);
	}
	setpgid(pid, pid);
	for (;;) {
		pid_t r = waitpid(pid, &st, cap_ns ? WNOHANG : 0);

		if (r == pid)
			break;
		if (r < 0 && errno != EINTR) {
			perror("bench_time: waitpid");
			return 1;
		}
		if (cap_ns && now_ns() - start > cap_ns) {
			kill(-pid, SIGTERM);
			sleep_ms(1000);
			kill(-pid, SIGKILL);
			waitpid(pid, &st, 0);
			status = "timeout";
			break;
		}
		if (r == 0)
			sleep_ms(1);
	}
	end = now_ns();
	if (!status && WIFSIGNALED(st))
		status = "signal";
	if (!status) {
		snprintf(code, sizeof(code), "%d", WEXITSTATUS(st));
		status = code;
	}
	f = fopen(argv[1], "w");
	if (!f) {
		perror("bench_time: OUT");
		return 1;
	}
	fprintf(f, "%.3f %s\n", (double)(end - start) / 1e6, status);
	return fclose(f) == 0 ? 0 : 1;
}
