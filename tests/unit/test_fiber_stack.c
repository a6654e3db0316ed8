/*
 * test_fiber_stack.c - a fiber on a small stack inside a large malloc'd
 * block is dumped safely: the handler never unwinds on a stack whose end
 * it does not know.
 *
 * Coroutine libraries carve stacks out of larger blocks (boost.context's
 * pooled stacks, fibers in malloc'd memory), with no guard page between
 * them. The mapping that holds such a stack says nothing of its size;
 * unwinding there (some 3 kB below the kernel's signal frame) would write
 * past the fiber's stack into whatever lies below, unseen. Here a thread
 * runs a fiber on a 16 kB stack in the middle of a 1 MiB malloc'd block
 * (makecontext/swapcontext), the rest of the block filled with a pattern;
 * the fiber recurses until 6 kB are left and waits. After 100 dumps the
 * process lives, the fiber's thread was reported with its pc alone and
 * the flag that says why, and no byte below the fiber's stack pointer
 * farther than the kernel's frame and the handler's own small one has
 * changed. A thread on its ordinary (guarded) stack is still unwound.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/wait.h>
#include <ucontext.h>
#include <unistd.h>

#include "model/dump.h"
#include "stackwatch.h"
#include "tap.h"
#include "testutil.h"

#define BLOCK (1024 * 1024)
#define FIBER_STACK (16 * 1024)
/*
 * Under the fiber's sp when it waits, and what the handler's own frames
 * may take below the kernel's before deciding (far larger under ASan).
 */
#if defined(__SANITIZE_ADDRESS__)
#define LEFT (12 * 1024)
#define OWN (6 * 1024)
#else
#define LEFT (6 * 1024)
#define OWN 2048
#endif
#define PAT 0x5a
#define DUMPS 100

static ucontext_t main_ctx, fiber_ctx;
static unsigned char *block, *fiber_lo;
static _Atomic uintptr_t fiber_sp;
static _Atomic pid_t fiber_tid, plain_tid;
static atomic_bool waiting;

__attribute__((noinline)) static void wait_here(void)
{
	unsigned char here;

	atomic_store(&fiber_sp, (uintptr_t)&here);
	atomic_store(&waiting, 1);
	for (;;)
		pause();
}

/* Eats the fiber's stack down to about LEFT bytes, then waits. */
__attribute__((noinline)) static void descend(void)
{
	volatile unsigned char pad[512];

	pad[0] = 1;
	if ((uintptr_t)pad - (uintptr_t)fiber_lo > LEFT + 1024)
		descend();
	else
		wait_here();
	pad[1] = pad[0]; /* not a tail call */
}

static void fiber_main(void)
{
	descend();
}

static void *fiber_thread(void *arg)
{
	(void)arg;
	atomic_store(&fiber_tid, tu_gettid());
	getcontext(&fiber_ctx);
	fiber_ctx.uc_stack.ss_sp = fiber_lo;
	fiber_ctx.uc_stack.ss_size = FIBER_STACK;
	fiber_ctx.uc_link = &main_ctx;
	makecontext(&fiber_ctx, fiber_main, 0);
	swapcontext(&main_ctx, &fiber_ctx);
	return NULL;
}

__attribute__((noinline)) static void plain_wait(void)
{
	for (;;)
		pause();
}

static void *plain_thread(void *arg)
{
	(void)arg;
	atomic_store(&plain_tid, tu_gettid());
	plain_wait();
	return NULL;
}

/*
 * Exit status bits: 1 the fiber was unwound (or not pc-only and flagged),
 * 2 memory below it was written, 4 the plain thread was not unwound, 8 a
 * dump failed.
 */
static int scenario(void)
{
	/* What the kernel and our pc-only handler may use below sp. */
	size_t allowed = getauxval(AT_MINSIGSTKSZ) + OWN;
	struct sw_dump_opts o;
	pthread_t th;
	int rc = 0;
	uintptr_t sp;

	block = malloc(BLOCK);
	if (!block)
		return 16;
	memset(block, PAT, BLOCK);
	fiber_lo = block + BLOCK / 2;
	pthread_create(&th, NULL, fiber_thread, NULL);
	pthread_create(&th, NULL, plain_thread, NULL);
	while (!atomic_load(&waiting) || !atomic_load(&plain_tid))
		tu_sleep_ms(1);
	tu_sleep_ms(20);
	sp = atomic_load(&fiber_sp);
	sw_dump_opts_init(&o);
	o.symbolize = 1;
	for (int i = 0; i < DUMPS; i++) {
		struct sw_dump *d = NULL;
		const struct sw_thread *t, *p;

		if (sw_dump_self(&o, &d) != 0) {
			rc |= 8;
			continue;
		}
		t = tu_find_thread(d, atomic_load(&fiber_tid));
		p = tu_find_thread(d, atomic_load(&plain_tid));
		if (!t || t->status != SW_ST_OK || t->nips != 1 ||
		    !(t->flags & SW_TF_NO_ROOM))
			rc |= 1;
		if (!p || p->status != SW_ST_OK ||
		    tu_count_fn(p, "plain_wait") != 1)
			rc |= 4;
		sw_dump_free(d);
	}
	/* Everything below the fiber's sp but the frames allowed there. */
	for (unsigned char *q = block; q < (unsigned char *)(sp - allowed); q++)
		if (*q != PAT) {
			printf("# written %zu bytes below the fiber's sp\n",
			       (size_t)(sp - (uintptr_t)q));
			rc |= 2;
			break;
		}
	fflush(stdout);
	return rc;
}

int main(void)
{
	int st, rc;
	pid_t pid;

	fflush(stdout);
	pid = fork();
	if (pid == 0)
		_exit(scenario());
	waitpid(pid, &st, 0);
	rc = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
	TAP_OK(rc >= 0 && rc < 16,
	       "a fiber on 16 kB in a malloc'd block, dumped %d times: the "
	       "process lives (%s %d)",
	       DUMPS, WIFSIGNALED(st) ? "signal" : "exit",
	       WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
	TAP_OK(rc >= 0 && rc < 16 && !(rc & 1),
	       "its thread is reported by its pc alone, flagged: a stack of "
	       "unknown size");
	TAP_OK(rc >= 0 && rc < 16 && !(rc & 2),
	       "nothing below the fiber's stack pointer was written but the "
	       "kernel's frame and the handler's own");
	TAP_OK(rc >= 0 && rc < 16 && !(rc & 4),
	       "a thread on its own guarded stack is unwound as ever");
	TAP_OK(rc >= 0 && rc < 16 && !(rc & 8), "every dump succeeded");
	return tap_done();
}
