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

/* Nonzero once a seccomp mode went in through libc (prctl, syscall). */
extern _Atomic int exec_seccomp_entered;
extern void (*exec_quiesce_start)(void);

#endif /* SW_COLLECTOR_EXEC_H */
