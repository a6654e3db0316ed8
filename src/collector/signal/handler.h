/*
 * handler.h - the signal handler and the slots it writes.
 *
 * The handler is the only code of ours that runs on the target's threads.
 * It is async-signal-safe and nothing else: no malloc, no stdio, no locks
 * of ours, errno saved and restored. It claims its slot by CAS on the
 * slot's (generation, state) word, unwinds with libunwind into the slot's
 * preallocated ips (or takes only the interrupted pc, flagged, inside the
 * dynamic loader or too near the end of its stack), publishes with release
 * ordering and wakes the dumper through the done futex.
 */
#ifndef SW_HANDLER_H
#define SW_HANDLER_H

#include <stdatomic.h>
#include <stdint.h>
#include <sys/types.h>

#include "model/dump.h"

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
	char walk;     /* 'r' by learnt rules, 'u' by libunwind, else 0 */
	uint64_t ips[SW_MAX_FRAMES];
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
 * Benchmarks only: when nonzero the handler claims, publishes and wakes but
 * neither unwinds nor reads CPU times: the floor the collector is measured
 * against.
 */
extern volatile int handler_empty;

/* Nonzero: handlers read their thread's name into the slot. */
extern _Atomic int handler_want_name;

/*
 * Installs the handler once per process: STACKWATCH_SIGNAL when set and
 * valid, else the first real-time signal from SIGRTMIN+4 up without a
 * handler; a signal that already has one is never taken over. Primes
 * libunwind before returning. Returns the signal number or a negative
 * error (SW_ENOSIGNAL, -EINVAL for a bad STACKWATCH_SIGNAL). Thread-safe.
 */
int handler_install(void);

/* The installed signal, or 0. */
int handler_signal(void);

/* 0 when our handler is still the one installed, else SW_EHANDLER. */
int handler_check(void);

/*
 * Unwinds the calling thread into ips (at most max), skipping skip frames
 * above the caller. Not for signal context. Returns the number of ips.
 */
size_t handler_unwind_self(uint64_t *ips, size_t max, unsigned skip);

/* CLOCK_MONOTONIC in nanoseconds. Async-signal-safe (vDSO). */
uint64_t handler_now_ns(void);

#endif /* SW_HANDLER_H */
