/*
 * stackroom.c - the check that keeps our signal off a thread with no room
 * for its frame (stackroom.h).
 *
 * The kernel writes the signal frame below the thread's stack pointer: 128
 * bytes of red zone skipped, then the XSAVE area (2.4 kB with AVX-512) and
 * the siginfo and ucontext. On a thread that waits in a system call a few
 * kB above the end of its stack (a PTHREAD_STACK_MIN thread deep in its
 * work) that frame lands in the guard page and the process dies of
 * SIGSEGV at once. The thread's stack pointer is in
 * /proc/self/task/TID/syscall while it is off its CPU, and the stack
 * table (stackmap.c) has the low end of the mapping that holds it.
 */
#define _GNU_SOURCE
#include <cpuid.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>

#include "model/procfs.h"
#include "collector/signal/stackmap.h"
#include "stackroom.h"

#ifndef AT_MINSIGSTKSZ
#define AT_MINSIGSTKSZ 51
#endif

/* The kernel skips this much below the stack pointer first (x86-64). */
#define RED_ZONE 128
/*
 * The frame without its XSAVE area: siginfo, ucontext, the return
 * address and the alignments (AT_MINSIGSTKSZ 3376 is 944 more than the
 * 2432-byte XSAVE area on an AVX-512 machine), rounded up.
 */
#define FRAME_REST 1024
/* The legacy FXSAVE area, for a processor without XSAVE. */
#define FXSAVE_SIZE 512

static size_t need;
static pthread_once_t need_once = PTHREAD_ONCE_INIT;

/*
 * The largest signal frame. AT_MINSIGSTKSZ is the kernel's own figure
 * for exactly that (Linux 5.14 and later on x86); an older kernel gets
 * CPUID's XSAVE size for the features the OS enabled, plus the rest.
 */
static size_t frame_size(void)
{
	unsigned long at = getauxval(AT_MINSIGSTKSZ);
	unsigned a, b, c, d;

	if (at > 0)
		return at;
	if (__get_cpuid_max(0, NULL) >= 0xd) {
		__cpuid_count(0xd, 0, a, b, c, d);
		if (b > 0)
			return b + FRAME_REST;
	}
	return FXSAVE_SIZE + FRAME_REST;
}

static void compute_need(void)
{
	need = frame_size() + RED_ZONE + STACKROOM_HANDLER;
}

size_t stackroom_need(void)
{
	pthread_once(&need_once, compute_need);
	return need;
}

int stackroom_sp(int taskfd, pid_t tid, uint64_t *sp)
{
	return procfs_read_syscall(taskfd, tid, sp, NULL);
}

bool stackroom_refuse(int taskfd, struct sw_thread *t)
{
	uint64_t sp = 0, lo, hi;
	size_t want = stackroom_need();
	char why[128];

	if (stackroom_sp(taskfd, t->tid, &sp) < 0 ||
	    stackmap_bounds((uintptr_t)sp, &lo, &hi) < 0 || sp - lo >= want)
		return false;
	snprintf(why, sizeof(why),
		 "%" PRIu64 " bytes of stack left below its stack pointer, "
		 "the signal needs %zu",
		 sp - lo, want);
	dump_thread_set_error(t, SW_ST_LOWSTACK, why);
	return true;
}
