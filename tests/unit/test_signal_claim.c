/*
 * test_signal_claim.c - a program's own signal is never taken or lost.
 *
 * A real-time signal at SIG_DFL looks free, and is exactly how programs
 * that read their signals through signalfd() or sigwaitinfo() leave
 * theirs. Here the collector installs itself first (on SIGRTMIN+4, the
 * first it tries), then the program claims that very signal:
 *
 * - one round blocks it by name in every thread (sigprocmask of a set
 *   holding it and SIGUSR2), opens a signalfd on it and sends itself 20
 *   sigqueue()s with values, from the main thread and from a thread, while
 *   the process is dumped;
 * - one waits for it in sigwaitinfo() in a thread of its own.
 *
 * Every signal must reach the program with its value, the collector must
 * have moved to another signal (sw_signal()), and every thread must still
 * be dumped, but for the one that blocks everything: its mask is its own,
 * it is never signalled ("blocked-signal"). Runs in a child, so that a signal
 * taken by its default action shows as a death.
 */
#define _GNU_SOURCE
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include "model/dump.h"
#include "stackwatch.h"
#include "tap.h"
#include "testutil.h"

#define SENDS 20

static int claimed; /* the program's signal: ours at first */
static atomic_int waited_got, waited_bad;
static atomic_bool stop;

static _Atomic pid_t early_tid;

static void *everything_blocked(void *arg)
{
	sigset_t all;

	(void)arg;
	atomic_store(&early_tid, tu_gettid());
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL);
	while (!atomic_load(&stop))
		pause();
	return NULL;
}

static void *waiter(void *arg)
{
	sigset_t set;

	(void)arg;
	sigemptyset(&set);
	sigaddset(&set, claimed);
	for (int i = 0; i < SENDS; i++) {
		siginfo_t si;

		if (sigwaitinfo(&set, &si) != claimed) {
			atomic_fetch_add(&waited_bad, 1);
			continue;
		}
		if (si.si_value.sival_int == 1000 + i)
			atomic_fetch_add(&waited_got, 1);
		else
			atomic_fetch_add(&waited_bad, 1);
	}
	return NULL;
}

static void *dumper(void *arg)
{
	int *bad = arg;
	struct sw_dump_opts o;

	sw_dump_opts_init(&o);
	o.symbolize = 0;
	o.timeout_ms = 500;
	while (!atomic_load(&stop)) {
		struct sw_dump *d = NULL;

		if (sw_dump_self(&o, &d) != 0) {
			(*bad)++;
			continue;
		}
		sw_dump_free(d);
		tu_sleep_ms(2);
	}
	return NULL;
}

/*
 * Dumps once; how many threads were not ok, the one that blocks every
 * signal being blocked-signal (never signalled: its mask is its own).
 */
static int not_ok(void)
{
	struct sw_dump_opts o;
	struct sw_dump *d = NULL;
	int n = 0;

	sw_dump_opts_init(&o);
	o.symbolize = 0;
	if (sw_dump_self(&o, &d) != 0)
		return -1;
	for (size_t i = 0; i < d->nthreads; i++) {
		const struct sw_thread *t = &d->threads[i];

		if (t->tid == atomic_load(&early_tid))
			n += t->status != SW_ST_BLOCKED;
		else
			n += t->status != SW_ST_OK;
	}
	sw_dump_free(d);
	return n;
}

/*
 * Exit status bits: 1 signals lost through the signalfd, 2 through
 * sigwaitinfo, 4 no move, 8 threads not dumped after, 16 failed dumps.
 */
static int scenario(void)
{
	pthread_t early, dump_th, wait_th;
	sigset_t set;
	int fd, got = 0, bad = 0, failed = 0, rc = 0;
	union sigval v;

	if (not_ok() != 0) /* installed: our signal is chosen */
		return 32;
	claimed = sw_signal();
	/* A thread that blocked everything before the move. */
	pthread_create(&early, NULL, everything_blocked, NULL);
	tu_sleep_ms(20);
	pthread_create(&dump_th, NULL, dumper, &failed);

	sigemptyset(&set);
	sigaddset(&set, claimed);
	sigaddset(&set, SIGUSR2);
	sigprocmask(SIG_BLOCK, &set, NULL);
	fd = signalfd(-1, &set, SFD_CLOEXEC);
	if (fd < 0)
		return 64;
	for (int i = 0; i < SENDS; i++) {
		struct signalfd_siginfo ssi;
		struct pollfd p = { .fd = fd, .events = POLLIN };

		v.sival_int = i;
		sigqueue(getpid(), claimed, v);
		if (poll(&p, 1, 2000) != 1 ||
		    read(fd, &ssi, sizeof(ssi)) != sizeof(ssi)) {
			bad++;
			continue;
		}
		if ((int)ssi.ssi_signo == claimed && ssi.ssi_int == i)
			got++;
		else
			bad++;
	}
	if (got != SENDS || bad)
		rc |= 1;
	printf("# signalfd: %d of %d received, %d wrong\n", got, SENDS, bad);
	fflush(stdout);
	close(fd);

	/* sigwaitinfo in a thread; the main thread keeps it blocked. */
	pthread_create(&wait_th, NULL, waiter, NULL);
	tu_sleep_ms(20);
	for (int i = 0; i < SENDS; i++) {
		v.sival_int = 1000 + i;
		sigqueue(getpid(), claimed, v);
		tu_sleep_ms(2);
	}
	pthread_join(wait_th, NULL);
	if (atomic_load(&waited_got) != SENDS)
		rc |= 2;
	printf("# sigwaitinfo: %d of %d received, %d wrong\n",
	       atomic_load(&waited_got), SENDS, atomic_load(&waited_bad));
	fflush(stdout);
	if (sw_signal() == claimed || sw_signal() <= 0)
		rc |= 4;
	printf("# signal %d claimed by the program, ours now %d\n", claimed,
	       sw_signal());
	atomic_store(&stop, 1);
	pthread_join(dump_th, NULL);
	atomic_store(&stop, 0);
	for (int i = 0; i < 5 && not_ok() != 0; i++)
		tu_sleep_ms(10);
	if (not_ok() != 0)
		rc |= 8;
	if (failed)
		rc |= 16;
	fflush(stdout);
	return rc;
}

int main(void)
{
	int st, rc;
	pid_t pid;

	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		alarm(60); /* lost signals must not hang the test */
		_exit(scenario());
	}
	waitpid(pid, &st, 0);
	rc = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
	TAP_OK(rc >= 0 && rc < 32,
	       "the program lives, its set-up works (%s %d)",
	       WIFSIGNALED(st) ? "killed by signal" : "exit",
	       WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
	TAP_OK(rc >= 0 && rc < 32 && !(rc & 1),
	       "every signal it queued to its own signalfd arrived, value "
	       "and all");
	TAP_OK(rc >= 0 && rc < 32 && !(rc & 2),
	       "every signal reached its sigwaitinfo() thread");
	TAP_OK(rc >= 0 && rc < 32 && !(rc & 4),
	       "the collector moved to another signal");
	TAP_OK(rc >= 0 && rc < 32 && !(rc & 8),
	       "every thread is dumped afterwards; the one that blocks "
	       "everything is blocked-signal, never signalled");
	TAP_OK(rc >= 0 && rc < 32 && !(rc & 16),
	       "dumps kept working throughout");
	return tap_done();
}
