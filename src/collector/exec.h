/*
 * exec.h - the exec family, seccomp and syscall(), held off while a dump
 * signals (exec.c). The interposers themselves are libc's names.
 */
#ifndef SW_COLLECTOR_EXEC_H
#define SW_COLLECTOR_EXEC_H

#include <stdatomic.h>

/*
 * Resolves libc's functions and notes our pid. Idempotent; runs from a
 * constructor, and from the collector before its first dump.
 */
void exec_guard_init(void);

/*
 * Set by the agent (NULL in the library): stop its thread before a
 * seccomp filter is given to every thread of the process (TSYNC), and
 * start it again should that fail. After one that went in, the thread
 * stays stopped.
 */
extern void (*exec_quiesce_stop)(void);

/*
 * Set by the agent: called before a thread enters a seccomp mode of its
 * own (not TSYNC), so that an agent thread not yet started starts first,
 * outside the program's filter.
 */
extern void (*exec_before_filter)(void);

/* Nonzero once a seccomp mode went in through libc (prctl, syscall). */
extern _Atomic int exec_seccomp_entered;

/*
 * Nonzero on a thread that asked for a seccomp mode through libc (set
 * before the call, whatever came of it), and on threads it created after
 * (agent/settle.c marks them): a thread it starts would inherit the mode.
 */
extern __thread int exec_seccomp_here
	__attribute__((tls_model("initial-exec")));
extern void (*exec_quiesce_start)(void);

#endif /* SW_COLLECTOR_EXEC_H */
