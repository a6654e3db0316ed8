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

/*
 * The program's threads, counted so that ours never keeps a process
 * alive: glibc ends the process when its last thread ends (exit(0), by
 * pthread_exit() or a return from the start routine), and ours would be
 * one more. The main thread counts from the start; pthread_create()
 * (settle.c) counts each thread it makes (agent_thread_made() before,
 * agent_thread_unmade() when it failed) and the thread itself calls
 * agent_thread_enters() first thing. When the last of them ends, the
 * agent's thread is stopped before glibc counts, so glibc ends the
 * process as it would without us; a thread made afterwards (by one we
 * did not count) starts it again.
 */
void agent_thread_made(void);
void agent_thread_unmade(void);
void agent_thread_enters(void);

/* Whether fn is the start routine of the agent's own thread. */
int agent_own_start(void *(*fn)(void *));

#endif /* SW_AGENT_AGENT_H */
