/*
 * test_exec_race.c - no dump signal reaches a new program image.
 *
 * A real-time signal pending on the thread that calls execve() survives
 * into the new program, where our handler is gone and the signal's
 * default action kills it. Each round forks a child that links the
 * library (not the agent): it starts a few idle threads and one that
 * dumps the process back to back, then execs /bin/true after a short,
 * varying delay, through the libc wrapper, through syscall(SYS_execve) and
 * through execveat. /bin/true must exit 0 every time, never die of a
 * signal. Two threads dump, so that the dump lock is almost always held:
 * an exec waits for the dump in progress, never for every one after it
 * (a child that has not exited in SLOW_S seconds starved, and is killed).
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "stackwatch.h"
#include "tap.h"
#include "testutil.h"

#define ROUNDS 300
#define SLOW_S 5

extern char **environ;

enum how { VIA_EXECVE, VIA_SYSCALL, VIA_EXECVEAT, HOW_COUNT };
static const char *const how_name[HOW_COUNT] = { "execve()",
						 "syscall(SYS_execve)",
						 "execveat()" };

static void *idle(void *arg)
{
	(void)arg;
	for (;;)
		pause();
	return NULL;
}

static void *dumper(void *arg)
{
	struct sw_dump_opts o;

	(void)arg;
	sw_dump_opts_init(&o);
	o.symbolize = 0;
	o.timeout_ms = 100;
	for (;;) {
		struct sw_dump *d = NULL;

		if (sw_dump_self(&o, &d) == 0)
			sw_dump_free(d);
	}
	return NULL;
}

static void child(enum how how, int round)
{
	char *const argv[] = { (char *)"true", NULL };
	struct timespec ts = { 0, (round % 7) * 300 * 1000 };
	pthread_t th;

	for (int i = 0; i < 4; i++)
		pthread_create(&th, NULL, idle, NULL);
	for (int i = 0; i < 2; i++)
		pthread_create(&th, NULL, dumper, NULL);
	nanosleep(&ts, NULL);
	switch (how) {
	case VIA_EXECVE:
		execve("/bin/true", argv, environ);
		break;
	case VIA_SYSCALL:
		syscall(SYS_execve, "/bin/true", argv, environ);
		break;
	default:
		execveat(AT_FDCWD, "/bin/true", argv, environ, 0);
		break;
	}
	_exit(99);
}

/* The child's status, or -1 if it had not ended within SLOW_S (killed). */
static int reap(pid_t pid)
{
	struct timespec nap = { 0, 1000000L };
	int st;

	for (int i = 0; i < SLOW_S * 1000; i++) {
		if (waitpid(pid, &st, WNOHANG) == pid)
			return st;
		nanosleep(&nap, NULL);
	}
	kill(pid, SIGKILL);
	waitpid(pid, &st, 0);
	return -1;
}

int main(void)
{
	for (int how = 0; how < HOW_COUNT; how++) {
		int killed = 0, other = 0, slow = 0, last_sig = 0;

		for (int r = 0; r < ROUNDS; r++) {
			int st;
			pid_t pid;

			fflush(stdout);
			pid = fork();
			if (pid == 0)
				child((enum how)how, r);
			st = reap(pid);
			if (st == -1) {
				slow++;
			} else if (WIFSIGNALED(st)) {
				killed++;
				last_sig = WTERMSIG(st);
			} else if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
				other++;
			}
		}
		TAP_OK(killed == 0 && other == 0 && slow == 0,
		       "exec through %s while dumped: %d of %d new programs "
		       "killed (last by signal %d), %d failed otherwise, %d "
		       "not done in %d s",
		       how_name[how], killed, ROUNDS, last_sig, other, slow,
		       SLOW_S);
	}
	return tap_done();
}
