/*
 * kread.h - reads the threads of a process that are blocked (not on a
 * CPU) straight from the kernel, with no signal and no stop: for each,
 * the user registers the kernel saved and a copy of its live stack, to
 * be unwound afterwards like a ptrace snapshot's copies.
 *
 * The work is done by a BPF task iterator (kread.bpf.c), which needs
 * CAP_BPF and CAP_PERFMON (or CAP_SYS_ADMIN), the kernel's BTF and a
 * kernel with sleepable task iterators scoped to one process (6.1 or
 * later). kread_open() says in words why it cannot be used; callers fall
 * back to the signal or ptrace paths then.
 *
 * A thread that is on a CPU when met, or runs while it is copied, is
 * returned without a stack (KREAD_F_ONCPU, KREAD_F_TORN), never with a
 * copy that mixes two moments; the caller reads it another way.
 */
#ifndef SW_KREAD_H
#define SW_KREAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define KREAD_NREGS_USER 17

/* kread_thread.flags, as kread_abi.h's KREAD_F_*. */
#define KREAD_OK 0x1
#define KREAD_ONCPU 0x2
#define KREAD_TORN 0x4
#define KREAD_NOVMA 0x8
#define KREAD_NOMM 0x10
#define KREAD_FAULT 0x20
#define KREAD_SAME 0x40
#define KREAD_CUT 0x100 /* the copy stops before its mapping ends */

struct kread;

/* A thread read before, with its switch counts then (kread_thread()). */
struct kread_expect {
	pid_t tid;
	uint64_t nvcsw;
	uint64_t nivcsw;
	uint64_t wait_addr; /* not ours: passed through (ksnap.h) */
	uint32_t wait_op;
};

struct kread_thread {
	pid_t tid;
	uint32_t flags;
	char state; /* R, S, D, T, t, I, Z, X as /proc says */
	char comm[16];
	uint64_t utime_ns;
	uint64_t stime_ns;
	uint64_t nvcsw; /* switch counts when read */
	uint64_t nivcsw;
	uint64_t captured_ns;		 /* CLOCK_MONOTONIC */
	uint64_t regs[KREAD_NREGS_USER]; /* DWARF order, valid with OK */
	int64_t syscall;   /* the system call it sleeps in, or -1 */
	uint64_t sp;	   /* stack[0]'s address: sp less the red zone */
	uint64_t vm_start; /* the mapping that holds sp, 0 unknown */
	uint64_t vm_end;
	uint32_t stack_len;
	uint8_t *stack; /* a copy of [sp, sp + stack_len); owned */
};

/* What a read did, for metrics. */
struct kread_stats {
	uint64_t runs;	  /* iterator runs */
	uint64_t threads; /* threads read whole */
	uint64_t retried; /* threads read again (ran meanwhile) */
	uint64_t same;	  /* threads not copied: they did not run */
	uint64_t bytes;	  /* stack bytes copied */
};

/*
 * Loads the program. Returns 0 with *out, or a negative errno with a
 * sentence in why (no privilege, no BTF, the kernel too old).
 */
int kread_open(struct kread **out, char *why, size_t size);

void kread_close(struct kread *k);

/*
 * Reads every thread of pid; the caller's buffer slot is slot (0 ..
 * kread_slots() - 1, one per process that reads at once from the same
 * kread). Stacks are copied up to max_stack bytes each (the rest of
 * the mapping is left, KREAD_CUT). Returns 0 with *out (sorted by tid,
 * free with kread_free()), -ESRCH when the process is gone, or another
 * negative errno. Threads that ran are read once more before they are
 * returned without a stack.
 */
int kread_process(struct kread *k, int slot, pid_t pid, size_t max_stack,
		  struct kread_thread **out, size_t *n,
		  struct kread_stats *stats);

/* kread_process() of thread tid of pid alone (tid 0: every thread). */
int kread_thread(struct kread *k, int slot, pid_t pid, pid_t tid,
		 size_t max_stack, struct kread_thread **out, size_t *n,
		 struct kread_stats *stats);

/*
 * kread_process() that copies nothing of the threads in same (n of them,
 * at most kread_same_max()) that have not run since (the same switch
 * counts, not on a CPU): those come back with KREAD_SAME, no registers
 * and no stack, for the caller to reuse what it unwound before.
 */
int kread_process_same(struct kread *k, int slot, pid_t pid, size_t max_stack,
		       const struct kread_expect *same, size_t nsame,
		       struct kread_thread **out, size_t *n,
		       struct kread_stats *stats);

/* Entries a kread_process_same() may pass at most. */
size_t kread_same_max(void);

void kread_free(struct kread_thread *v, size_t n);

/* Slots a kread has. */
int kread_slots(void);

/*
 * Forgets the control entry of a reader that died in the middle of a
 * read (a child killed at its deadline): reader is its pid.
 */
void kread_forget(struct kread *k, pid_t reader);

#endif /* SW_KREAD_H */
