/*
 * test_pending_once.c - a thread that cannot take signals for a while never
 * has more than one dump signal queued, and never takes them nested.
 *
 * A thread with a 64 kB stack calls vfork(); while the child sleeps the
 * parent side cannot take signals. The process is dumped 40 times at 50 ms
 * intervals meanwhile. Each dump must report that thread at once as not
 * answering (its last signal still pending), the queue of real-time signals
 * (SigQ) must never grow by more than one, and when the child exits the
 * thread must take what is queued and go on: the process survives and the
 * thread then answers a dump with its own stack. Runs in a child process,
 * so that a crash is reported rather than ending the test.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "collector/signal/sigctx.h"
#include "model/dump.h"
#include "stackwatch.h"
#include "tap.h"
#include "testutil.h"

#define DUMPS 40
#define CHILD_SLEEP_MS 5000

static _Atomic pid_t vtid;
static atomic_int returned;
static atomic_int taken; /* handler runs on the thread while it waited */

__attribute__((noinline)) static void after_vfork(void)
{
	atomic_store(&returned, 1);
	for (;;)
		pause();
}

static void *vfork_thread(void *arg)
{
	pid_t pid;

	uint32_t runs;

	(void)arg;
	atomic_store(&vtid, tu_gettid());
	runs = handler_tls.runs;
	pid = vfork();
	if (pid == 0) {
		struct timespec ts = { CHILD_SLEEP_MS / 1000, 0 };

		nanosleep(&ts, NULL);
		_exit(0);
	}
	/* Whatever was queued meanwhile has been delivered by now. */
	atomic_store(&taken, (int)(handler_tls.runs - runs));
	waitpid(pid, NULL, 0);
	after_vfork();
	return NULL;
}

/* The process's count of queued signals (SigQ: "queued/limit"). */
static long sigq(void)
{
	char line[256];
	long n = -1;
	FILE *f = fopen("/proc/self/status", "r");

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (strncmp(line, "SigQ:", 5) == 0)
			n = strtol(line + 5, NULL, 10);
	fclose(f);
	return n;
}

/* The scenario; exit status: 0 ok, 1 too many queued, 2 no answer after. */
static int scenario(void)
{
	struct sw_dump_opts o;
	pthread_attr_t attr;
	pthread_t th;
	long base, most = 0;
	int answered = 0;

	sw_dump_opts_init(&o);
	o.symbolize = 0;
	o.timeout_ms = 50;
	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, 64 * 1024);
	base = sigq();
	pthread_create(&th, &attr, vfork_thread, NULL);
	while (!atomic_load(&vtid) ||
	       tu_thread_state(atomic_load(&vtid)) != 'D')
		tu_sleep_ms(1);
	for (int i = 0; i < DUMPS && !atomic_load(&returned); i++) {
		struct sw_dump *d = NULL;
		long q;

		if (sw_dump_self(&o, &d) == 0)
			sw_dump_free(d);
		q = sigq() - base;
		if (q > most)
			most = q;
		tu_sleep_ms(50);
	}
	printf("# most queued for this user meanwhile (SigQ): %ld\n", most);
	fflush(stdout);
	while (!atomic_load(&returned))
		tu_sleep_ms(10);
	printf("# signals taken by the thread once it resumed: %d\n",
	       atomic_load(&taken));
	fflush(stdout);
	o.symbolize = 1;
	for (int i = 0; i < 10 && !answered; i++) {
		struct sw_dump *d = NULL;
		const struct sw_thread *t;

		if (sw_dump_self(&o, &d) != 0)
			continue;
		t = tu_find_thread(d, atomic_load(&vtid));
		answered = t && t->status == SW_ST_OK &&
			   tu_count_fn(t, "after_vfork") == 1;
		sw_dump_free(d);
	}
	/*
	 * SigQ counts every process of the user, so it only shows; what the
	 * thread took when it woke is the count of what was queued for it.
	 */
	return atomic_load(&taken) > 1 ? 1 : answered ? 0 : 2;
}

int main(void)
{
	int status;
	pid_t pid;

	fflush(stdout);
	pid = fork();
	if (pid == 0)
		_exit(scenario());
	waitpid(pid, &status, 0);
	TAP_OK(!WIFSIGNALED(status),
	       "the process survived %d dumps of a "
	       "thread stuck in vfork (%s %d)",
	       DUMPS, WIFSIGNALED(status) ? "killed by signal" : "exit",
	       WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
	TAP_OK(WIFEXITED(status) && WEXITSTATUS(status) != 1,
	       "at most one dump signal was ever queued for it");
	TAP_OK(WIFEXITED(status) && WEXITSTATUS(status) == 0,
	       "once resumed, it answers a dump with its own stack");
	return tap_done();
}
