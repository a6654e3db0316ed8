/*
 * stackroom.h - whether a thread has room below its stack pointer for our
 * signal: the kernel's signal frame plus what our handler uses before it
 * decides how far to unwind (stackroom.c). The dumper's side only.
 *
 * Our handler is installed without SA_ONSTACK (handler.c), so the kernel
 * pushes its frame below the interrupted stack pointer, whichever stack
 * that is: the thread's own, or the sigaltstack of a handler of the
 * program it is running. A thread without that room would die of SIGSEGV
 * before our handler runs, and no check inside the handler can help; so
 * the dumper looks first, from /proc/self/task/TID/syscall.
 */
#ifndef SW_COLLECTOR_STACKROOM_H
#define SW_COLLECTOR_STACKROOM_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "model/dump.h"

/*
 * Bytes our handler's own frames and calls may take below the kernel's
 * frame when it only takes the pc (too little room to unwind): measured
 * ~560 (test_low_stack, test_stack_room), with room to spare; the
 * sanitizers' frames are far larger.
 */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define STACKROOM_HANDLER 3072
#else
#define STACKROOM_HANDLER 768
#endif

/*
 * A thread whose handler had at least this much stack below it when it
 * answered the last dump is signalled again without this check (the
 * collector's fast path reads nothing of a thread that answered before):
 * to be short of room now, it must have gone this far deeper since and
 * then stopped in a system call within a few kB of its end.
 */
#define STACKROOM_AMPLE (32 * 1024)

/*
 * The bytes a thread needs below its stack pointer to take our signal:
 * the kernel's largest signal frame (AT_MINSIGSTKSZ; without it, the
 * XSAVE area's size from CPUID leaf 0xD plus the frame's other parts),
 * the 128-byte red zone the kernel skips first, and STACKROOM_HANDLER.
 * Computed once; thread-safe.
 */
size_t stackroom_need(void);

/*
 * Reads thread tid's stack pointer from "TID/syscall" under taskfd (open
 * on /proc/self/task): there whenever the thread is off its CPU, in a
 * system call or preempted in its own code. Returns 0 with *sp set;
 * -EAGAIN when the thread is running (the kernel says "running"); -ESRCH
 * when it is gone; another negative errno when the file cannot be read
 * (a process that is not dumpable has it owned by root) or makes no
 * sense. Not async-signal-safe (it opens a file).
 */
int stackroom_sp(int taskfd, pid_t tid, uint64_t *sp);

/*
 * Whether t must not be signalled for want of stack: its stack pointer
 * (stackroom_sp()) lies in a mapping of the stack table (stackmap.h,
 * refreshed for this dump) less than stackroom_need() bytes above the
 * mapping's low end. Then t gets SW_ST_LOWSTACK with a reason saying how
 * many bytes were left and how many are needed, and true is returned.
 * false, t untouched, when the thread has the room or when it cannot be
 * told: running (its stack pointer moves too fast to judge), /proc
 * unreadable, or a stack pointer in no mapping of the table. Not
 * async-signal-safe.
 */
bool stackroom_refuse(int taskfd, struct sw_thread *t);

#endif /* SW_COLLECTOR_STACKROOM_H */
