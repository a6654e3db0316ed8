/*
 * settle.h - when a new process starts the agent's thread (settle.c).
 *
 * A program the agent is loaded into, and a child of fork(), start no
 * thread at once: most of them (a shell's commands, $(...), fork and
 * exec) exit or exec within milliseconds, and a thread, a connection and
 * a registration would be most of what they cost. The thread starts at
 * the process's first settled point: a call of a wait that may block
 * longer than what is left of the delay (poll, epoll_wait, select,
 * sleeps, waitpid, accept, pthread_join, sem_wait, the signal waits...),
 * or any of those calls, thread creation and mask changes, once the
 * process has lived the delay. Never in a vfork() child, in a signal
 * handler of the program's, or after the program entered a seccomp mode.
 */
#ifndef SW_AGENT_SETTLE_H
#define SW_AGENT_SETTLE_H

#include <stdbool.h>
#include <stdint.h>

/* STACKWATCH_START_DELAY_MS's default. */
#define SETTLE_DELAY_MS_DEFAULT 100

/*
 * Reads STACKWATCH_START_DELAY_MS (0: start at once) and resolves libc's
 * functions; start is what starts the thread once the process settled
 * (not from a signal handler, checked before). Returns the delay in ms.
 * Called once, from the constructor.
 */
long settle_init(void (*start)(void));

/* From now on, start the thread at the first settled point. */
void settle_arm(void);

/*
 * Before the calling thread enters a seccomp mode of its own (exec.c):
 * the thread starts now, where no filter of the program's is inherited.
 */
void settle_now(void);

/* Waits for a check another thread may be making (after a disarm). */
void settle_quiesce(void);

/* Whether armed (and the thread not started since). */
bool settle_armed(void);

/* Leaves the thread unstarted for good, or started by someone else. */
void settle_disarm(void);

/*
 * What our pthread_create() tells of the threads it makes, for the
 * agent's count of the program's threads (agent.c: its own thread never
 * keeps a process alive): made() before a thread of the program's is
 * made, unmade() when that failed, enters() first thing in the thread;
 * own(fn) says whether fn starts the agent's own thread, which is not
 * counted. Until they are set, threads are made uncounted.
 */
struct settle_thread_hooks {
	void (*made)(void);
	void (*unmade)(void);
	void (*enters)(void);
	int (*own)(void *(*fn)(void *));
};

void settle_set_thread_hooks(const struct settle_thread_hooks *h);

#endif /* SW_AGENT_SETTLE_H */
