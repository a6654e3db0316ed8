/*
 * test_stack_room.c - a thread that waits in a system call with too
 * little stack left for the kernel's signal frame is never signalled: it
 * is "low-stack", and the process survives.
 *
 * A child process runs four threads, each blocked in read() on a pipe of
 * its own, and dumps itself DUMPS times:
 *
 *  - low: a PTHREAD_STACK_MIN stack, LOW_ROOM bytes left below it (less
 *    than the kernel's signal frame, AT_MINSIGSTKSZ): a signal would push
 *    its frame into the guard page and kill the process;
 *  - edge: a PTHREAD_STACK_MIN stack with a little more than the signal
 *    needs (the need the low thread's reason states), the rest below it
 *    patterned: it is signalled, and what the dumps wrote below its stack
 *    pointer stays within that need;
 *  - roomy: a PTHREAD_STACK_MIN stack with its room, unwound;
 *  - normal: a default stack, unwound.
 *
 * The parent checks that the child lived; the child, the statuses and
 * the low thread's reason (the bytes it had, as /proc says, and the bytes
 * needed). Dumps are paced: each waits until every thread is back in its
 * read(), so no handler is still on a stack.
 */
#define _GNU_SOURCE
#include <alloca.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "model/dump.h"
#include "stackwatch.h"
#include "tap.h"
#include "testutil.h"

#define DUMPS 50
#define LOW_ROOM 2900 /* below AT_MINSIGSTKSZ (3376 with AVX-512) */
#define PAT 0x5a

enum { T_LOW, T_EDGE, T_ROOMY, T_NORMAL, NT };

static const char *const role_name[NT] = { "low", "edge", "roomy", "normal" };

struct role {
	int pipe[2];
	size_t room; /* wanted below the parked frame; 0: as it is */
	_Atomic pid_t tid;
	uintptr_t lo;	   /* the low end of its stack */
	uintptr_t park_sp; /* where it parked, for the pattern */
	uintptr_t lowest;  /* the lowest byte the dumps wrote */
};

static struct role roles[NT];

#define SP_HERE() ((uintptr_t)__builtin_frame_address(0))

/* Fills [lo, hi) with the pattern (below sp: no ASan shadow there). */
__attribute__((no_sanitize_address)) static void fill(uintptr_t lo,
						      uintptr_t hi)
{
	for (volatile unsigned char *p = (unsigned char *)lo; (uintptr_t)p < hi;
	     p++)
		*p = PAT;
}

/* The lowest byte of [lo, hi) that no longer holds the pattern, or hi. */
__attribute__((no_sanitize_address)) static uintptr_t lowest_written(
	uintptr_t lo, uintptr_t hi)
{
	volatile unsigned char *p = (unsigned char *)lo;

	while ((uintptr_t)p < hi && *p == PAT)
		p++;
	return (uintptr_t)p;
}

/* Blocks in read() on its pipe until released. */
__attribute__((noinline)) static void park(struct role *ro)
{
	char c;

	ro->park_sp = SP_HERE();
	if (ro == &roles[T_EDGE])
		fill(ro->lo + 64, ro->park_sp - 512);
	atomic_store(&ro->tid, tu_gettid());
	while (read(ro->pipe[0], &c, 1) < 0)
		;
	if (ro == &roles[T_EDGE])
		ro->lowest = lowest_written(ro->lo + 64, ro->park_sp - 512);
}

static void *role_main(void *arg)
{
	struct role *ro = arg;
	pthread_attr_t a;
	void *addr = NULL;
	size_t size = 0;

	if (pthread_getattr_np(pthread_self(), &a) == 0) {
		pthread_attr_getstack(&a, &addr, &size);
		pthread_attr_destroy(&a);
	}
	ro->lo = (uintptr_t)addr;
	if (ro->room && SP_HERE() - ro->lo > ro->room + 256) {
		/* down to room bytes above the end, in one step */
		volatile char *p = alloca(SP_HERE() - ro->lo - ro->room);

		p[0] = 1;
		park(ro);
		p[0]++;
	} else {
		park(ro);
	}
	return NULL;
}

/*
 * The stack pointer of thread tid while it waits in read(), from
 * /proc/self/task/TID/syscall. false while it is anywhere else.
 */
static bool in_read(pid_t tid, uintptr_t *sp)
{
	char path[64], buf[256];
	unsigned long long a[8];
	long nr = -1;
	FILE *f;
	bool ok = false;

	snprintf(path, sizeof(path), "/proc/self/task/%d/syscall", (int)tid);
	f = fopen(path, "re");
	if (!f)
		return false;
	if (fgets(buf, sizeof(buf), f) &&
	    sscanf(buf, "%ld %llx %llx %llx %llx %llx %llx %llx", &nr, &a[0],
		   &a[1], &a[2], &a[3], &a[4], &a[5], &a[6]) == 8 &&
	    nr == SYS_read) {
		*sp = (uintptr_t)a[6];
		ok = true;
	}
	fclose(f);
	return ok;
}

/* Waits (30 s at most) until every thread waits in its read(). */
static bool all_in_read(uintptr_t *sps)
{
	for (int i = 0; i < 30000; i++) {
		int n = 0;

		for (int r = 0; r < NT; r++)
			n += atomic_load(&roles[r].tid) > 0 &&
			     in_read(roles[r].tid, &sps[r]);
		if (n == NT)
			return true;
		tu_sleep_ms(1);
	}
	return false;
}

/* "N bytes of stack left below its stack pointer, the signal needs M" */
static bool parse_reason(const char *why, size_t *left, size_t *need)
{
	return why && sscanf(why,
			     "%zu bytes of stack left below its stack "
			     "pointer, the signal needs %zu",
			     left, need) == 2;
}

static int child(void)
{
	pthread_t th[NT];
	pthread_attr_t small;
	uintptr_t sps[NT];
	size_t low_left = 0, need = 0, edge_room;
	int right[NT] = { 0 }, reason_ok = 0, notes = 0, failed = 0;

	edge_room = getauxval(AT_MINSIGSTKSZ) + 2048;
#if defined(__SANITIZE_ADDRESS__)
	edge_room += 3072; /* the handler's frames are far larger */
#endif
	/*
	 * Binds read() and syscall() now: the lazy binder saves every vector
	 * register on the stack of a first caller, more than the low thread
	 * has.
	 */
	if (pipe2(roles[T_LOW].pipe, O_CLOEXEC | O_NONBLOCK) == 0) {
		char c;

		(void)!read(roles[T_LOW].pipe[0], &c, 1);
		close(roles[T_LOW].pipe[0]);
		close(roles[T_LOW].pipe[1]);
	}
	(void)tu_gettid();
	roles[T_LOW].room = LOW_ROOM;
	roles[T_EDGE].room = edge_room;
	pthread_attr_init(&small);
	pthread_attr_setstacksize(&small, PTHREAD_STACK_MIN);
	for (int r = 0; r < NT; r++) {
		if (pipe2(roles[r].pipe, O_CLOEXEC) != 0 ||
		    pthread_create(&th[r], r == T_NORMAL ? NULL : &small,
				   role_main, &roles[r]) != 0) {
			TAP_OK(0, "set up the %s thread", role_name[r]);
			return tap_done();
		}
	}
	pthread_attr_destroy(&small);
	if (!all_in_read(sps)) {
		TAP_OK(0, "every thread waits in read()");
		return tap_done();
	}
	for (int r = 0; r < T_NORMAL; r++)
		TAP_NOTE("%s thread: %zu bytes below its stack pointer in "
			 "read() (PTHREAD_STACK_MIN %d)",
			 role_name[r], (size_t)(sps[r] - roles[r].lo),
			 (int)PTHREAD_STACK_MIN);
	TAP_OK(sps[T_LOW] - roles[T_LOW].lo < getauxval(AT_MINSIGSTKSZ),
	       "the low thread has less left (%zu) than the kernel's signal "
	       "frame (AT_MINSIGSTKSZ %lu)",
	       (size_t)(sps[T_LOW] - roles[T_LOW].lo),
	       getauxval(AT_MINSIGSTKSZ));

	for (int i = 0; i < DUMPS; i++) {
		struct sw_dump *d;

		if (!all_in_read(sps)) {
			failed++;
			break;
		}
		d = tu_dump_self(0, 5000);
		if (!d) {
			failed++;
			continue;
		}
		for (int r = 0; r < NT; r++) {
			const struct sw_thread *t =
				tu_find_thread(d, roles[r].tid);
			bool ok;

			if (r == T_LOW)
				ok = t && t->status == SW_ST_LOWSTACK;
			else
				ok = t && t->status == SW_ST_OK &&
				     (r == T_EDGE || t->nips > 1);
			right[r] += ok;
			if (r == T_LOW && ok &&
			    parse_reason(t->error, &low_left, &need) &&
			    low_left == sps[T_LOW] - roles[T_LOW].lo &&
			    need > low_left)
				reason_ok++;
			if ((!ok || (r == T_LOW && reason_ok != right[r])) &&
			    notes++ < 5)
				TAP_NOTE("dump %d, %s thread: %s (%s)", i,
					 role_name[r],
					 t ? dump_status_name(t->status)
					   : "missing",
					 t && t->error ? t->error : "");
		}
		sw_dump_free(d);
	}
	TAP_OK(failed == 0, "%d dumps, each taken (%d failed)", DUMPS, failed);
	TAP_OK(right[T_LOW] == DUMPS,
	       "a thread with %zu bytes below its stack pointer is low-stack, "
	       "never signalled (%d of %d)",
	       (size_t)(sps[T_LOW] - roles[T_LOW].lo), right[T_LOW], DUMPS);
	TAP_OK(reason_ok == DUMPS,
	       "its reason gives the bytes left as /proc says (%zu) and the "
	       "bytes needed (%zu) (%d of %d)",
	       low_left, need, reason_ok, DUMPS);
	TAP_OK(right[T_NORMAL] == DUMPS,
	       "a thread with a default stack: ok and unwound (%d of %d)",
	       right[T_NORMAL], DUMPS);
	TAP_OK(right[T_ROOMY] == DUMPS,
	       "a PTHREAD_STACK_MIN thread with its room: ok and unwound (%d "
	       "of %d)",
	       right[T_ROOMY], DUMPS);
	TAP_OK(right[T_EDGE] == DUMPS && need > 0 &&
		       sps[T_EDGE] - roles[T_EDGE].lo >= need,
	       "a PTHREAD_STACK_MIN thread with %zu bytes left, the need "
	       "(%zu) and a little: signalled, ok (%d of %d)",
	       (size_t)(sps[T_EDGE] - roles[T_EDGE].lo), need, right[T_EDGE],
	       DUMPS);

	for (int r = 0; r < NT; r++) {
		if (write(roles[r].pipe[1], "x", 1) != 1)
			TAP_OK(0, "release the %s thread", role_name[r]);
		pthread_join(th[r], NULL);
	}
	TAP_NOTE("the dumps wrote %zu bytes below the edge thread's stack "
		 "pointer in read()",
		 (size_t)(sps[T_EDGE] - roles[T_EDGE].lowest));
	TAP_OK(roles[T_EDGE].lowest > roles[T_EDGE].lo + 64 &&
		       sps[T_EDGE] - roles[T_EDGE].lowest <= need,
	       "what a dump wrote below its stack pointer (%zu bytes) stays "
	       "within the need (%zu)",
	       (size_t)(sps[T_EDGE] - roles[T_EDGE].lowest), need);
	return tap_done();
}

int main(void)
{
	pid_t pid;
	int status = 0;

#if defined(__SANITIZE_THREAD__)
	TAP_SKIP("ThreadSanitizer runs handlers at its own points, on its "
		 "own terms: stack depths mean nothing there");
	return tap_done();
#elif defined(__SANITIZE_ADDRESS__)
	TAP_SKIP("AddressSanitizer's redzones make a thread's own frames and "
		 "allocas several times larger: the rooms this test sets "
		 "cannot be set");
	return tap_done();
#endif
	fflush(stdout);
	pid = fork();
	if (pid < 0) {
		TAP_OK(0, "fork");
		return tap_done();
	}
	if (pid == 0)
		_exit(child());
	while (waitpid(pid, &status, 0) < 0)
		;
	TAP_OK(WIFEXITED(status),
	       "the process survived %d dumps of a thread near the end of its "
	       "stack (%s %d)",
	       DUMPS, WIFEXITED(status) ? "exit status" : "killed by signal",
	       WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
	return tap_done() | (WIFEXITED(status) ? WEXITSTATUS(status) : 1);
}
