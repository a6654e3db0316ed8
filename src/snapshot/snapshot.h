/*
 * snapshot.h - a short-freeze ptrace snapshot of a process that has no
 * agent: freeze one thread, copy its registers and the live part of its
 * stack, let it run again, and go on to the next. Unwinding happens
 * afterwards, from the copies (symbols/unwind.h), so each thread is
 * stopped only for its own copy (tens of microseconds), never the whole
 * process at once.
 *
 * A thread is traced only while it is being copied: PTRACE_SEIZE, then
 * PTRACE_INTERRUPT, wait for its stop (with a deadline), PTRACE_GETREGSET,
 * process_vm_readv of [sp, end of its stack mapping) capped, PTRACE_DETACH.
 * A signal that arrives meanwhile is given back on detach; a thread that
 * was in a group stop (state T) stays stopped. A thread that does not stop
 * in time is reported as a timeout and is released when it does stop or,
 * at the latest, when the tracer exits: the kernel detaches every tracee
 * of a tracer that exits, even by SIGKILL, so callers that cannot wait
 * run snapshots in a short-lived process (the daemon's helper does).
 */
#ifndef SW_SNAPSHOT_H
#define SW_SNAPSHOT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "model/dump.h"

#define SNAP_NREGS 17		      /* x86-64 DWARF registers 0..16 */
#define SNAP_STACK_MAX (512u * 1024u) /* bytes copied per thread */
#define SNAP_STACK_HARD (8u << 20)    /* with SNAP_DEEP: a whole 8 MiB stack */
#define SNAP_REDZONE 128u	      /* and below sp: the ABI's red zone */
#define SNAP_MORE_MAX 2		      /* further stack regions per thread */

/* Errors of their own (negative, beside -errno). */
#define SNAP_ETRACED (-21101)  /* another tracer holds the process */
#define SNAP_EZOMBIE (-21102)  /* the process is a zombie */
#define SNAP_EKTHREAD (-21103) /* a kernel thread: no user stack */
#define SNAP_EARCH (-21104)    /* not supported on this architecture */

/* How a thread was read (JSON "method" of a thread). */
enum snap_method {
	SNAP_M_PTRACE = 0, /* stopped for its copy (this file) */
	SNAP_M_KERNEL,	   /* blocked: read from the kernel (kread/) */
	SNAP_M_PERF,	   /* running: one perf sample of it */
	SNAP_M_COUNT
};

/*
 * A further piece of a thread's stack, in another mapping than the one
 * holding sp: the frames that a signal handler running on an alternate
 * signal stack (sigaltstack, SA_ONSTACK) interrupted (snap_more_next()).
 */
struct snap_region {
	uint64_t at;
	uint32_t len;
	uint8_t *bytes; /* a copy of [at, at + len); owned */
};

struct snap_thread {
	pid_t tid;
	uint8_t method;	       /* enum snap_method, with status ok */
	enum sw_status status; /* ok, timeout, exited or error */
	int err;	       /* -errno or SNAP_E* when status is error */
	char name[SW_COMM_MAX];
	char state; /* before it was stopped */
	uint64_t utime_ms;
	uint64_t stime_ms;
	uint64_t captured_ns; /* CLOCK_MONOTONIC */
	uint32_t paused_ns;   /* interrupt to detach */
	uint64_t regs[SNAP_NREGS];
	uint64_t sp; /* stack[0]'s address: sp, or less its red zone */
	uint32_t stack_len;
	uint8_t *stack; /* a copy of [sp, sp + stack_len); owned */
	bool waits;	/* stopped in a futex wait: wait holds the word */
	/* Read from the kernel: its switch counts then (0 otherwise). */
	uint64_t nvcsw, nivcsw;
	/* It has not run since the read whose counts the caller gave: no
	 * registers or stack here, the caller's earlier unwind stands. */
	bool reused;
	/* The copy stops before the end of the stack (a cap), or a further
	 * region could not be copied: the frames beyond it are not there to
	 * unwind (the unwinder says so only when it wanted them). */
	bool cut;
	struct sw_wait wait;
	/* The stack's further regions, in the order the unwind meets them;
	 * together with stack, at most the snapshot's copy limit. */
	uint32_t nmore;
	struct snap_region more[SNAP_MORE_MAX];
};

struct snap {
	pid_t pid;
	pid_t tracer; /* with SNAP_ETRACED: who traces it, 0 unknown */
	char comm[SW_COMM_MAX];
	bool stopped;	     /* the process was in a group stop (state T) */
	bool realtime;	     /* the freeze ran at SCHED_FIFO (snap_take) */
	uint64_t started_ns; /* CLOCK_MONOTONIC */
	uint64_t elapsed_ns;
	uint64_t paused_max_ns;
	uint64_t paused_total_ns;
	size_t nthreads; /* sorted by tid */
	struct snap_thread *threads;
	/* Frames the unwinder keeps per thread (1..SW_MAX_FRAMES_HARD; 0:
	 * SW_MAX_FRAMES). Set by the caller before unwind_snapshot(); not
	 * part of the snapshot's bytes. */
	uint32_t max_frames;
};

/*
 * Takes a snapshot of every thread of pid within timeout_ms. Returns 0
 * with *out (free with snap_free()), or a negative errno or SNAP_E* for
 * the process as a whole: -ESRCH gone, -EPERM not allowed (snap_why()
 * says which rule), SNAP_ETRACED (out->tracer says who), SNAP_EZOMBIE,
 * SNAP_EKTHREAD. Threads that fail alone carry their own status. Blocks
 * SIGCHLD in the calling thread while it runs; call it from a thread
 * that has no other children to wait for.
 */
int snap_take(pid_t pid, int timeout_ms, struct snap **out);

/*
 * snap_take() for a process some of whose threads were read already
 * (given, n of them, sorted by tid, status ok, their method set): those
 * are moved into the snapshot (given[i].stack becomes its) and the
 * others are ptraced as snap_take() does, or, with SNAP_GIVEN_ONLY,
 * left unread (status skipped) for the caller to read another way.
 * With SNAP_LISTED, given lists every thread of the process (as the
 * kernel's task iterator saw them; a thread still to be read is given
 * as its tid alone, method ptrace), and /proc/PID/task is not listed
 * again: a thousand threads listed there cost more than reading them.
 */
#define SNAP_GIVEN_ONLY 0x1
#define SNAP_LISTED 0x2
/* SNAP_DEEP: each thread's copies may reach SNAP_STACK_HARD bytes, not
 * SNAP_STACK_MAX (for more frames than SW_MAX_FRAMES). */
#define SNAP_DEEP 0x4
int snap_take_with(pid_t pid, int timeout_ms, struct snap_thread *given,
		   size_t n, unsigned flags, struct snap **out);

/*
 * Why the kernel may refuse to let this process trace pid, in words
 * (Yama's ptrace_scope, another tracer, a missing capability, another
 * user's process, a process that is not dumpable), into buf. Reads /proc.
 */
void snap_why(pid_t pid, int err, pid_t tracer, char *buf, size_t size);

void snap_free(struct snap *s);

/*
 * Keeps of s only what was read of the process pinned by pidfd (pid's,
 * by pidfd_open(2); -1: none given): the snapshot names pid, so a pid
 * that another process took during the read would have led it there.
 * Threads read by their tid (ptrace, perf) must still be threads of pid
 * (/proc/PID/task/TID): one that is not, its tid taken by another
 * process's thread or gone, is dropped, status exited; the kernel's
 * reads take a process's threads by their group at once and need no
 * such look. Then pidfd's process must still be alive, else -ESRCH and
 * nothing is kept: pid was someone else's. 0 otherwise. Call it after
 * the read; blocks on /proc only.
 */
int snap_keep_pinned(struct snap *s, pid_t pid, int pidfd);

/* The bytes copied per thread under flags (SNAP_DEEP or not). */
uint32_t snap_stack_limit(unsigned flags);

/*
 * Where a stack goes on beyond the copy mem (len bytes of it, from the
 * address at, holding the thread's sp): when a signal handler runs on an
 * alternate signal stack, the kernel's signal frame on that stack holds
 * the interrupted context, whose sp is on the thread's own stack, in
 * another mapping. Returns that sp, with *frame (may be NULL) the
 * address of the signal frame (its SNAP_SIGFRAME_LEN bytes say where
 * the rest is: while they are unchanged, the handler has not returned)
 * and *end (may be NULL) the end of the alternate stack (what lies above
 * it in mem is no part of this stack), or 0 when mem holds no such frame
 * (or the sp it names is inside mem). Pure: reads mem only.
 */
#define SNAP_SIGFRAME_LEN 240u /* return address, ucontext to fpstate */
uint64_t snap_more_next(const uint8_t *mem, uint64_t at, uint32_t len,
			uint64_t sp, uint64_t *frame, uint64_t *end);

/*
 * The snapshot as bytes, for the daemon's helper to answer over a pipe:
 * snap_write() sends s (or just err when s is NULL) on fd; snap_read()
 * reads one, bounded and validated (at most SW_MAX_THREADS threads and
 * SNAP_STACK_HARD bytes of stack each, its regions included), waiting at most
 * until deadline_ns (CLOCK_MONOTONIC). snap_read() returns 0 with *out, the
 * error the helper sent, SW_EFORMAT for malformed bytes, -ETIMEDOUT or -EPIPE.
 */
int snap_write(int fd, int err, const struct snap *s);
int snap_read(int fd, uint64_t deadline_ns, struct snap **out);

#endif /* SW_SNAPSHOT_H */
