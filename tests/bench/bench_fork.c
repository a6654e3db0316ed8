/*
 * bench_fork.c - fork(), _exit() in the child, waitpid() in the parent, in
 * a loop: what a process pays per child (tests/bench/forkexec.sh runs it
 * with the agent preloaded and without).
 *
 *	bench_fork ROUNDS [idle]
 *
 * Prints "fork_us_per_round X": the wall time of the loop over ROUNDS.
 * With "idle", one thread of its own that only sleeps is started first:
 * what any program with a second thread pays (glibc's fork() takes and
 * resets every malloc arena's lock and more once a process has had two
 * threads), with or without us. A plain program: nothing of ours is
 * linked in.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static void *idle(void *arg)
{
	(void)arg;
	for (;;)
		pause();
	return NULL;
}

int main(int argc, char **argv)
{
	int rounds = argc > 1 ? atoi(argv[1]) : 0;
	double start;

	if (rounds <= 0) {
		fprintf(stderr, "usage: bench_fork ROUNDS\n");
		return 2;
	}
	if (argc > 2 && strcmp(argv[2], "idle") == 0) {
		pthread_t t;

		if (pthread_create(&t, NULL, idle, NULL) != 0) {
			perror("pthread_create");
			return 1;
		}
	}
	start = now_us();
	for (int i = 0; i < rounds; i++) {
		int st;
		pid_t pid = fork();

		if (pid < 0) {
			perror("fork");
			return 1;
		}
		if (pid == 0)
			_exit(0);
		if (waitpid(pid, &st, 0) != pid) {
			perror("waitpid");
			return 1;
		}
	}
	printf("fork_us_per_round %.1f\n", (now_us() - start) / rounds);
	return 0;
}
