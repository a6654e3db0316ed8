/*
 * sigctx.h - what the handler shares with the rest of the process: the
 * slots it writes, the counter it bumps when done, the per-thread depth
 * that says a thread is inside it, and the signal it is installed on.
 *
 * These are leaf facts: the dumper (collect.c), the mask interposers
 * (sigmask.c) and tests read them without importing the handler itself.
 * Defined in sigctx.c; the handler (handler.c) is their only writer on
 * signal context.
 */
#ifndef SW_SIGCTX_H
#define SW_SIGCTX_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "model/limits.h"

#define HANDLER_SLOTS 64 /* the largest window */

/*
 * Bytes of stack the handler needs below its own frame to unwind (cursor,
 * libunwind's DWARF state, getrusage): at most 3148 measured across the
 * whole test suite, C++ and loader threads included (test_low_stack.c
 * checks one case against this), more than doubled for paths no test
 * reaches. With less left the handler takes only the interrupted pc
 * (SW_TF_LOW_STACK). The kernel's signal frame comes on top of it.
 */
#define HANDLER_STACK_NEED (8 * 1024)

/*
 * A slot holds a few more pcs than a stack keeps (SW_MAX_FRAMES): the
 * frames of our own interposers, where a build gave them frames, are
 * dropped once the dump is in (collect.c), and a stack as deep as a slot
 * must still keep SW_MAX_FRAMES of the program's.
 */
#define SLOT_IPS (SW_MAX_FRAMES + 8)

/* Slot states, the low two bits of a slot word; the rest is generation. */
enum {
	SLOT_FREE = 0,	  /* usable by the dumper */
	SLOT_ARMED = 1,	  /* signal sent, waiting for the handler */
	SLOT_WRITING = 2, /* a handler claimed it and is writing */
	SLOT_DONE = 3,	  /* the handler published; the dumper may read */
};
#define SLOT_WORD(gen, state) (((uint64_t)(gen) << 2) | (state))
#define SLOT_STATE(w) ((unsigned)((w)&3))
#define SLOT_GEN(w) ((w) >> 2)

struct slot {
	_Atomic uint64_t word;
	uint32_t nips;
	uint32_t flags; /* SW_TF_* */
	uint64_t captured_ns;
	uint64_t utime_us; /* the thread's CPU time, from getrusage */
	uint64_t stime_us;
	char name[16]; /* its name (PR_GET_NAME) if asked, else "" */
	char state;    /* 'S' interrupted in a system call, else 'R' */
	/*
	 * The system call being restarted, when the thread was caught in
	 * one that the kernel restarts (SA_RESTART: the pc is back on the
	 * syscall instruction and the number in rax): its number and first
	 * two arguments; -2 with the arguments when it was caught just
	 * after a call that returned EINTR (its number is gone: a timed
	 * futex wait is not restarted); -1 otherwise.
	 */
	int64_t sysno;
	uint64_t sysarg[2];
	char walk; /* 'r' by learnt rules, 'u' by libunwind, else 0 */
	/*
	 * Bytes of stack below the handler's frame (stackmap_room()), or
	 * STACKMAP_UNKNOWN: how deep the thread may go before the next dump
	 * must look before it signals (collector/stackroom.h).
	 */
	uint64_t room;
	uint64_t ips[SLOT_IPS];
};

extern struct slot handler_slots[HANDLER_SLOTS];
/* Incremented by every handler that publishes; the dumper futex-waits on
 * it. */
extern _Atomic uint32_t handler_done_seq;
/*
 * Nonzero while this thread runs our handler. Initial-exec TLS: reading it
 * never allocates, so a malloc interposer may test it (the safety trap).
 */
extern __thread volatile int handler_depth
	__attribute__((tls_model("initial-exec")));

/*
 * What this thread's running handler holds, so that one that never
 * returned (cancelled, or long-jumped out of a fault handler stacked on
 * ours) can be told from one that is running, and its holdings given
 * back: the address of its frame (0: none), its loader-gate ticket and
 * its slot (-1: none) with the words they had.
 */
struct handler_tls {
	uintptr_t frame;
	int ticket;
	int slot;
	uint64_t ticket_word;
	uint64_t slot_word;
	uint32_t runs; /* times our handler ran here: who caused an EINTR */
	bool priming;  /* prime_handler() calls the handler on this thread */
};
extern __thread struct handler_tls handler_tls
	__attribute__((tls_model("initial-exec")));

/*
 * How far below a running handler's frame a nested one can be on the
 * same stack: a kernel signal frame, the handler's own need and whatever
 * fault handler of the program runs in between. Farther, or above it, the
 * frame is from a handler that never returned.
 */
#define HANDLER_NEST_SPAN (256 * 1024)

/*
 * Whether our handler is running on this thread now, below the caller:
 * true in code it calls, false after a handler of ours was left by
 * siglongjmp or cancellation. Async-signal-safe.
 */
static inline int handler_on_stack(void)
{
	uintptr_t f = handler_tls.frame;
	uintptr_t here = (uintptr_t)__builtin_frame_address(0);

	return f && here < f && f - here < HANDLER_NEST_SPAN;
}

/*
 * Benchmarks only: when nonzero the handler claims, publishes and wakes but
 * neither unwinds nor reads CPU times: the floor the collector is measured
 * against.
 */
extern volatile int handler_empty;

/* Nonzero: handlers read their thread's name into the slot. */
extern _Atomic int handler_want_name;

/*
 * The generations the dumper has issued so far, [gen_first, gen_next):
 * what tells a signal of ours from one the program queued itself on a
 * signal we gave up (signo.c). Written by the dumper before it signals.
 */
extern _Atomic uint64_t handler_gen_first, handler_gen_next;

/*
 * The cookie of a signal that asks a thread to move its mask along with
 * us: our old signal blocked, the new one deliverable (collect.c). No
 * slot has this index.
 */
#define HANDLER_COOKIE_MIGRATE 0xffu

/*
 * Counts the events after which a thread that answered the last dump may
 * no longer take our signal safely: a mask that blocks it applied through
 * libc (sigmask.c), a wait that takes it (collector/waits.c), a seccomp
 * mode entered (collector/exec.c). The dumper, seeing it moved, reads
 * every thread's /proc entries again before signalling it (collect.c).
 */
extern _Atomic uint32_t handler_recheck_epoch;

/*
 * Our signal, or 0: set before any signal is sent, changed only when the
 * program claims it and we move to another (signo.c).
 */
extern _Atomic int handler_signo;

/*
 * What a child of fork() writes of ours, side by side in a section of
 * its own: a page the child writes is a page copied, and a child that
 * exits at once should copy one.
 */
#define SW_FORK_STATE __attribute__((section("sw_fork")))

/*
 * Our interposers (libc's names: dlopen, sigprocmask, sigwait, execve...)
 * and what they call while a program's thread is in them go in a section
 * of their own, so that the dumper drops their frames from the program's
 * stacks, as a profiler drops its own (collect.c). The linker gives each
 * object that has the section its bounds.
 */
#define SW_INTERPOSER __attribute__((section("sw_interpose"), noinline))
extern const char __start_sw_interpose[]
	__attribute__((weak, visibility("hidden")));
extern const char __stop_sw_interpose[]
	__attribute__((weak, visibility("hidden")));

#endif /* SW_SIGCTX_H */
