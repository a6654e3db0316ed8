/*
 * test_handler_replaced.c - never signal a thread unless our handler is
 * installed right now.
 *
 * After a first good dump, the application takes our signal for itself: its
 * own handler, SIG_IGN, or SIG_DFL (whose action for a real-time signal is
 * to terminate the process). Then sw_dump_self() must fail with
 * SW_EHANDLER, say so in sw_strerror(), and send nothing: the process lives
 * and the application's handler sees no signal but the ones it sends
 * itself.
 *
 * How "sends nothing" is checked without a timing guess: afterwards we
 * queue a marker (the same signal, our own si_value) to every thread.
 * Real-time signals of one number are delivered in the order they were
 * queued, so once each thread's marker has arrived, anything the dump had
 * sent would have arrived before it.
 *
 * Each case runs in a child process of its own, so a case that kills its
 * process cannot take the others down; the child prints its own TAP lines
 * and its exit status says whether they all passed.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "model/dump.h"
#include "stackwatch.h"
#include "tap.h"
#include "testutil.h"

#define WORKERS 3
#define MARKER 0x5157

enum replace_case { CASE_HANDLER, CASE_IGNORE, CASE_DEFAULT };

static const char *const case_names[] = {
	[CASE_HANDLER] = "own handler",
	[CASE_IGNORE] = "SIG_IGN",
	[CASE_DEFAULT] = "SIG_DFL",
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int ready;
static pid_t worker_tids[WORKERS];
static atomic_int markers;
static atomic_int foreign;

static void app_handler(int signo, siginfo_t *si, void *ctx)
{
	(void)signo;
	(void)ctx;
	if (si->si_code == SI_QUEUE && si->si_value.sival_int == MARKER)
		atomic_fetch_add(&markers, 1);
	else
		atomic_fetch_add(&foreign, 1);
}

static void *worker_main(void *arg)
{
	pthread_mutex_lock(&mu);
	worker_tids[(intptr_t)arg] = tu_gettid();
	ready++;
	pthread_cond_broadcast(&cv);
	for (;;)
		pthread_cond_wait(&cv, &mu);
	return NULL;
}

static void install_app_handler(int sig)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = app_handler;
	sa.sa_flags = SA_SIGINFO | SA_RESTART;
	sigemptyset(&sa.sa_mask);
	sigaction(sig, &sa, NULL);
}

/* Queues a marker to every worker and waits until all have arrived. */
static bool markers_arrive(int sig, const pthread_t *th)
{
	union sigval v = { .sival_int = MARKER };

	for (int i = 0; i < WORKERS; i++)
		if (pthread_sigqueue(th[i], sig, v) != 0)
			return false;
	for (int i = 0; i < 30000 && atomic_load(&markers) < WORKERS; i++)
		tu_sleep_ms(1);
	return atomic_load(&markers) == WORKERS;
}

/* One case, in a child process. Returns the child's exit status. */
static int run_case(enum replace_case c)
{
	const char *name = case_names[c];
	struct sw_dump *d = NULL;
	struct sigaction sa;
	pthread_t th[WORKERS];
	const char *msg;
	int rc, sig, ok = 0;

	for (int i = 0; i < WORKERS; i++)
		pthread_create(&th[i], NULL, worker_main, (void *)(intptr_t)i);
	pthread_mutex_lock(&mu);
	while (ready < WORKERS)
		pthread_cond_wait(&cv, &mu);
	pthread_mutex_unlock(&mu);
	for (int i = 0; i < WORKERS; i++)
		tu_wait_state(worker_tids[i], 'S');

	rc = sw_dump_self(NULL, &d);
	for (size_t i = 0; d && i < d->nthreads; i++)
		ok += d->threads[i].status == SW_ST_OK;
	TAP_OK(rc == 0 && d && ok == WORKERS + 1,
	       "%s: the first dump works, %d threads ok (%s)", name, ok,
	       sw_strerror(rc));
	sw_dump_free(d);
	d = NULL;
	sig = sw_signal();
	if (!TAP_OK(sig >= SIGRTMIN && sig <= SIGRTMAX,
		    "%s: the collector uses real-time signal %d", name, sig))
		return tap_done();

	memset(&sa, 0, sizeof(sa));
	sigemptyset(&sa.sa_mask);
	switch (c) {
	case CASE_HANDLER:
		install_app_handler(sig);
		break;
	case CASE_IGNORE:
		sa.sa_handler = SIG_IGN;
		sigaction(sig, &sa, NULL);
		break;
	case CASE_DEFAULT:
		sa.sa_handler = SIG_DFL;
		sigaction(sig, &sa, NULL);
		break;
	}

	d = (struct sw_dump *)(void *)&ok; /* must be overwritten */
	rc = sw_dump_self(NULL, &d);
	TAP_OK(rc == SW_EHANDLER && d == NULL,
	       "%s: sw_dump_self fails with SW_EHANDLER (%d: %s)", name, rc,
	       sw_strerror(rc));
	msg = sw_strerror(rc);
	TAP_OK(msg && strstr(msg, "signal handler replaced"),
	       "%s: the error says \"signal handler replaced\"", name);
	d = NULL;
	rc = sw_dump_self(NULL, &d);
	TAP_OK(rc == SW_EHANDLER && d == NULL,
	       "%s: and keeps failing on the next call (%s)", name,
	       sw_strerror(rc));

	if (c != CASE_IGNORE) {
		/*
		 * With SIG_DFL a signal from the dump would already have
		 * killed us; any still pending is counted from here on.
		 */
		if (c == CASE_DEFAULT)
			install_app_handler(sig);
		TAP_OK(markers_arrive(sig, th),
		       "%s: the markers reach every thread", name);
		TAP_OK(atomic_load(&foreign) == 0,
		       "%s: no signal from the dump reached any thread (%d)",
		       name, atomic_load(&foreign));
	}
	return tap_done();
}

int main(void)
{
	const enum replace_case cases[] = { CASE_HANDLER, CASE_IGNORE,
					    CASE_DEFAULT };

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const char *name = case_names[cases[i]];
		int status = 0;
		pid_t pid;

		fflush(stdout);
		pid = fork();
		if (pid < 0) {
			TAP_OK(0, "%s: fork: %s", name, strerror(errno));
			continue;
		}
		if (pid == 0)
			_exit(run_case(cases[i]));
		if (waitpid(pid, &status, 0) != pid) {
			TAP_OK(0, "%s: waitpid: %s", name, strerror(errno));
			continue;
		}
		if (WIFSIGNALED(status))
			TAP_OK(0,
			       "%s: the process was killed by signal %d (%s)",
			       name, WTERMSIG(status),
			       strsignal(WTERMSIG(status)));
		else
			TAP_OK(WIFEXITED(status) && WEXITSTATUS(status) == 0,
			       "%s: the process lived and every check passed "
			       "(exit %d)",
			       name, WEXITSTATUS(status));
	}
	return tap_done();
}
