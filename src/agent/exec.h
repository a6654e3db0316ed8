/*
 * exec.h - the agent's exec family (exec.c).
 */
#ifndef SW_AGENT_EXEC_H
#define SW_AGENT_EXEC_H

/* Resolves libc's functions and notes our pid. Call from the constructor. */
void exec_init(void);

/* After fork(): the child is a process of its own. */
void exec_atfork_child(void);

#endif /* SW_AGENT_EXEC_H */
