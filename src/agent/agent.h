/*
 * agent.h - stopping the agent's thread for a moment (agent.c).
 */
#ifndef SW_AGENT_AGENT_H
#define SW_AGENT_AGENT_H

/*
 * Stops the agent thread and waits until the kernel has let go of it, so
 * that the process has only the program's own threads; a dump in progress
 * finishes first (within its deadline). agent_resume() starts a new
 * thread, with the calling thread's credentials, once every pause has
 * been resumed. Nested and concurrent calls are counted. Both do nothing
 * in a vfork() child or before the agent started. Not async-signal-safe.
 */
void agent_pause(void);
void agent_resume(void);

#endif /* SW_AGENT_AGENT_H */
