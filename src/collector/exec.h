/*
 * exec.h - the exec family and syscall(), held off while a dump signals
 * (exec.c). The interposers themselves are libc's names.
 */
#ifndef SW_COLLECTOR_EXEC_H
#define SW_COLLECTOR_EXEC_H

/*
 * Resolves libc's functions and notes our pid. Idempotent; runs from a
 * constructor, and from the collector before its first dump.
 */
void exec_guard_init(void);

#endif /* SW_COLLECTOR_EXEC_H */
