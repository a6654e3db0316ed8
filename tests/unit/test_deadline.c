/*
 * test_deadline.c - a thread that cannot answer, and the late answer that
 * comes after the dump gave up on it.
 *
 * A thread that calls vfork() is suspended in the kernel until its child
 * exits: our signal stays pending and its handler cannot run. A dump with a
 * 200 ms timeout must return within 200 + 50 ms and report that thread as
 * "timeout" while every other thread is ok. When the child exits, the
 * pending signals of the abandoned dumps are delivered at last: their
 * handlers must find a newer generation and leave no trace, so the dumps
 * after that are complete and correct, with the thread's real stack.
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
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "model/dump.h"
#include "stackwatch.h"
#include "tap.h"
#include "testutil.h"

#define TIMEOUT_MS 200
#define SLACK_MS 50
#define CHILD_SLEEP_MS 2500
#define SLEEPERS 2
#define AFTER_DUMPS 200

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static bool stop;
static int ready;
static pid_t sleeper_tids[SLEEPERS];
static _Atomic pid_t vfork_tid;
static atomic_bool vfork_returned;
static pid_t vfork_child;

__attribute__((noinline)) static void sleeper_wait(void)
{
	while (!stop)
		pthread_cond_wait(&cv, &mu);
}

static void *sleeper_main(void *arg)
{
	pthread_mutex_lock(&mu);
	sleeper_tids[(intptr_t)arg] = tu_gettid();
	ready++;
	pthread_cond_broadcast(&cv);
	sleeper_wait();
	pthread_mutex_unlock(&mu);
	return NULL;
}

/*
 * Suspends this thread in vfork() while the child sleeps, then stays here,
 * blocked, so that later dumps see this function on the stack.
 */
__attribute__((noinline)) static void vfork_caller(void)
{
	pid_t pid;

	atomic_store(&vfork_tid, tu_gettid());
	pid = vfork();
	if (pid == 0) {
		struct timespec ts = { CHILD_SLEEP_MS / 1000,
				       (CHILD_SLEEP_MS % 1000) * 1000000L };
		/* The vfork child may only make system calls. */
		syscall(SYS_nanosleep, &ts, NULL);
		_exit(0);
	}
	vfork_child = pid;
	atomic_store(&vfork_returned, true);
	pthread_mutex_lock(&mu);
	while (!stop)
		pthread_cond_wait(&cv, &mu);
	pthread_mutex_unlock(&mu);
}

static void *vfork_main(void *arg)
{
	(void)arg;
	pthread_setname_np(pthread_self(), "vforker");
	vfork_caller();
	return NULL;
}

/* The caller of sw_dump_self(): the main thread's stack starts here. */
__attribute__((noinline)) static int deadline_dump(int symbolize,
						   struct sw_dump **d,
						   uint64_t *elapsed_ns)
{
	struct sw_dump_opts o;
	uint64_t t0;
	int rc;

	sw_dump_opts_init(&o);
	o.timeout_ms = TIMEOUT_MS;
	o.symbolize = symbolize;
	t0 = tu_now_ns();
	rc = sw_dump_self(&o, d);
	*elapsed_ns = tu_now_ns() - t0;
	return rc;
}

/* Threads other than the vfork caller that are not ok. */
static int others_not_ok(const struct sw_dump *d, pid_t vtid)
{
	int n = 0;

	for (size_t i = 0; i < d->nthreads; i++) {
		const struct sw_thread *t = &d->threads[i];
		if (t->tid != vtid && t->status != SW_ST_OK) {
			TAP_NOTE("thread %d (%s) is %s: %s", (int)t->tid,
				 t->name, dump_status_name(t->status),
				 t->error ? t->error : "");
			n++;
		}
	}
	return n;
}

/* A frame of libc's vfork itself: the stack of a stale handler. */
static bool has_vfork_frame(const struct sw_thread *t)
{
	return tu_count_fn(t, "vfork") || tu_count_fn(t, "__vfork") ||
	       tu_count_fn(t, "__libc_vfork");
}

/* Phase A: the thread is suspended; dumps time out on it, on time. */
static void while_suspended(pid_t vtid)
{
	struct sw_dump *d = NULL;
	const struct sw_thread *t;
	uint64_t ns;
	int rc;

	rc = deadline_dump(0, &d, &ns);
	TAP_OK(rc == 0 && d, "dump with a suspended thread succeeds (%s)",
	       sw_strerror(rc));
	TAP_OK(ns <= (TIMEOUT_MS + SLACK_MS) * 1000000ull,
	       "it returns within %d + %d ms (%.1f ms)", TIMEOUT_MS, SLACK_MS,
	       ns / 1e6);
	t = d ? tu_find_thread(d, vtid) : NULL;
	TAP_OK(t && t->status == SW_ST_TIMEOUT && t->error && *t->error,
	       "the vfork caller is timeout, with an error (%s: %s)",
	       t ? dump_status_name(t->status) : "missing",
	       t && t->error ? t->error : "");
	TAP_OK(t && t->group == -1 && t->nframes == 0,
	       "the timed-out thread has no group and no frames");
	TAP_OK(d && others_not_ok(d, vtid) == 0, "every other thread is ok");
	TAP_OK(tu_thread_state(vtid) == 'D',
	       "the vfork caller was still suspended after the dump");
	sw_dump_free(d);
	d = NULL;

	/* Symbolized: the same, and the call still ends. */
	rc = deadline_dump(1, &d, &ns);
	t = d ? tu_find_thread(d, vtid) : NULL;
	TAP_OK(rc == 0 && t && t->status == SW_ST_TIMEOUT,
	       "a symbolized dump reports it timeout too (%s, %.1f ms)",
	       sw_strerror(rc), ns / 1e6);
	TAP_OK(d && others_not_ok(d, vtid) == 0,
	       "... and every other thread ok");
	sw_dump_free(d);
}

/* Phase B: dump until the child exits and the thread resumes. */
static void until_resumed(pid_t vtid)
{
	int dumps = 0, late = 0, bad = 0, bad_status = 0, bad_others = 0;
	int timeouts = 0, oks = 0;

	uint64_t give_up = tu_now_ns() + 30 * 1000000000ull;

	/*
	 * Paced: once its signal is queued, a dump reports the thread at
	 * once (its last signal still pending) instead of waiting.
	 */
	while (!atomic_load(&vfork_returned) && tu_now_ns() < give_up) {
		struct sw_dump *d = NULL;
		const struct sw_thread *t;
		uint64_t ns;
		int rc = deadline_dump(0, &d, &ns);

		dumps++;
		tu_sleep_ms(20);
		if (rc != 0 || !d) {
			bad++;
			continue;
		}
		if (ns > (TIMEOUT_MS + SLACK_MS) * 1000000ull) {
			TAP_NOTE("dump %d took %.1f ms", dumps, ns / 1e6);
			late++;
		}
		t = tu_find_thread(d, vtid);
		if (t && t->status == SW_ST_TIMEOUT)
			timeouts++;
		else if (t && t->status == SW_ST_OK)
			oks++;
		else
			bad_status++;
		bad_others += others_not_ok(d, vtid) != 0;
		sw_dump_free(d);
	}
	TAP_OK(atomic_load(&vfork_returned),
	       "the vfork child exited and its parent resumed (%d dumps)",
	       dumps);
	TAP_OK(bad == 0, "every dump while it slept succeeded (%d failed)",
	       bad);
	TAP_OK(late == 0, "every one returned within %d + %d ms (%d late)",
	       TIMEOUT_MS, SLACK_MS, late);
	TAP_OK(bad_status == 0,
	       "the vfork caller was timeout (%d) or ok (%d), nothing else "
	       "(%d)",
	       timeouts, oks, bad_status);
	TAP_OK(bad_others == 0, "every other thread was ok (%d dumps not)",
	       bad_others);
}

/* Phase C: the late handlers ran; every dump must be whole and right. */
/* Whether t answered and its stack has fn exactly once. */
static bool ok_with(const struct sw_thread *t, const char *fn)
{
	return t && t->status == SW_ST_OK && tu_count_fn(t, fn) == 1;
}

/*
 * Phase C: the late handlers ran; every dump must be whole and right, and
 * each thread's stack its own (a stale handler that wrote into a newer
 * slot would show up as a stack from inside vfork, or in another thread).
 * Stacks are checked only where the thread is ok; not ok is counted apart.
 */
static void after_resumed(pid_t vtid)
{
	int failed = 0, not_ok = 0, no_caller = 0, stale = 0, wrong = 0;
	int late = 0, bad_self = 0, first_bad = 0;
	char desc[512];

	for (int i = 0; i < AFTER_DUMPS; i++) {
		int symbolize = i % 2;
		struct sw_dump *d = NULL;
		const struct sw_thread *t;
		uint64_t ns;
		int rc = deadline_dump(symbolize, &d, &ns);

		if (rc != 0 || !d) {
			failed++;
			continue;
		}
		if (ns > (TIMEOUT_MS + SLACK_MS) * 1000000ull)
			late++;
		for (size_t j = 0; j < d->nthreads; j++) {
			const struct sw_thread *nt = &d->threads[j];
			if (nt->status != SW_ST_OK && not_ok++ < 5)
				TAP_NOTE("dump %d: %s (%d) is %s: %s", i,
					 nt->name, (int)nt->tid,
					 dump_status_name(nt->status),
					 nt->error ? nt->error : "");
		}
		t = tu_find_thread(d, vtid);
		if (!t) {
			no_caller++;
		} else if (symbolize && t->status == SW_ST_OK) {
			if (!ok_with(t, "vfork_caller") ||
			    !ok_with(t, "vfork_main")) {
				no_caller++;
				if (!first_bad++)
					TAP_NOTE(
						"vfork caller's stack: %s",
						tu_describe_stack(
							t, desc, sizeof(desc)));
			}
			if (has_vfork_frame(t))
				stale++;
		}
		for (int s = 0; symbolize && s < SLEEPERS; s++) {
			const struct sw_thread *st =
				tu_find_thread(d, sleeper_tids[s]);
			if (!st)
				wrong++;
			else if (st->status == SW_ST_OK &&
				 (!ok_with(st, "sleeper_wait") ||
				  tu_count_fn(st, "vfork_caller") != 0))
				wrong++;
		}
		t = tu_find_thread(d, tu_gettid());
		if (symbolize &&
		    (!t || !t->nframes ||
		     !tu_name_is(t->frames[0].function, "deadline_dump"))) {
			if (!bad_self++)
				TAP_NOTE("the caller's stack: %s",
					 t ? tu_describe_stack(t, desc,
							       sizeof(desc))
					   : "missing");
		}
		sw_dump_free(d);
	}
	TAP_OK(failed == 0,
	       "%d dumps after the late handlers: all succeed "
	       "(%d failed)",
	       AFTER_DUMPS, failed);
	TAP_OK(not_ok == 0, "... every thread ok in every one (%d not)",
	       not_ok);
	TAP_OK(late == 0, "... each within %d + %d ms (%d late)", TIMEOUT_MS,
	       SLACK_MS, late);
	TAP_OK(no_caller == 0,
	       "... the former vfork caller shows its real stack, "
	       "vfork_caller < vfork_main (%d not)",
	       no_caller);
	TAP_OK(stale == 0,
	       "... and never a stale stack from inside vfork (%d times)",
	       stale);
	TAP_OK(wrong == 0,
	       "... the other threads show their own stacks (%d wrong)", wrong);
	TAP_OK(bad_self == 0,
	       "... the caller's stack starts at deadline_dump (%d not)",
	       bad_self);
}

int main(void)
{
	pthread_t sleepers[SLEEPERS], vth;
	struct sw_dump *d = NULL;
	uint64_t ns;
	pid_t vtid;
	int rc, status = -1;

	for (int i = 0; i < SLEEPERS; i++)
		pthread_create(&sleepers[i], NULL, sleeper_main,
			       (void *)(intptr_t)i);
	pthread_mutex_lock(&mu);
	while (ready < SLEEPERS)
		pthread_cond_wait(&cv, &mu);
	pthread_mutex_unlock(&mu);
	for (int i = 0; i < SLEEPERS; i++)
		tu_wait_state(sleeper_tids[i], 'S');

	/* Warm up: install the handler, load the symbols. */
	rc = deadline_dump(1, &d, &ns);
	TAP_OK(rc == 0 && d && others_not_ok(d, 0) == 0,
	       "a first dump works, every thread ok (%s)", sw_strerror(rc));
	sw_dump_free(d);

	pthread_create(&vth, NULL, vfork_main, NULL);
	while (!(vtid = atomic_load(&vfork_tid)))
		tu_sleep_ms(1);
	if (!TAP_OK(tu_wait_state(vtid, 'D'),
		    "the vfork caller is suspended in the kernel (state %c)",
		    tu_thread_state(vtid)))
		return tap_done();

	while_suspended(vtid);
	until_resumed(vtid);
	TAP_OK(tu_wait_state(vtid, 'S'),
	       "the former vfork caller is asleep in its own wait");
	after_resumed(vtid);

	pthread_mutex_lock(&mu);
	stop = true;
	pthread_cond_broadcast(&cv);
	pthread_mutex_unlock(&mu);
	pthread_join(vth, NULL);
	for (int i = 0; i < SLEEPERS; i++)
		pthread_join(sleepers[i], NULL);
	TAP_OK(waitpid(vfork_child, &status, 0) == vfork_child &&
		       WIFEXITED(status) && WEXITSTATUS(status) == 0,
	       "the vfork child exited normally");
	return tap_done();
}
