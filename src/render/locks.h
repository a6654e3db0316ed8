/*
 * locks.h - who holds the lock: for each thread caught sleeping on a lock
 * that records its owner, the lock and its owner; the waits-for chains
 * they make, and the cycles among them (deadlocks).
 *
 * The futex word comes from the kernel (the thread's system call: the
 * handler's context, the tracee's registers, the core's notes), never
 * from guessing on the stack; a copy of the memory around it comes with
 * the dump (model/waitmem.h). What kind of lock holds the word is told by
 * the functions the thread sleeps in (pthread_mutex_lock, rwlocks): a
 * condition variable, a semaphore or one of libc's internal locks has no
 * owner and is not reported. The layouts are glibc's on x86-64, 2.25 and
 * later (its rwlock of 2.25; the mutex is older): any other libc or
 * release is refused with a reason, never guessed at.
 */
#ifndef SW_LOCKS_H
#define SW_LOCKS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "model/dump.h"

#define LOCKS_GLIBC_MIN 25 /* glibc 2.25: the rwlock layout we read */

enum lock_kind { LOCK_NONE = 0, LOCK_MUTEX, LOCK_RWLOCK };

struct lock_wait {
	enum lock_kind kind;
	bool write;	 /* rwlock: waits to write */
	uint64_t addr;	 /* the lock (the mutex, the rwlock) */
	pid_t owner;	 /* its recorded owner (the process's tid); 0: none */
	int owner_index; /* the owner among the dump's threads; -1: not one */
	unsigned held;	 /* recursive mutex: times its owner holds it */
	bool owner_died; /* robust mutex: a previous owner died holding it */
	int cycle;	 /* the deadlock it is part of; -1: none */
	/* Threads that wait for a lock this thread holds (as owner). */
	unsigned waiters;
};

/* A lock a thread holds that others wait for (locks_held()). */
struct lock_held {
	enum lock_kind kind;
	uint64_t addr;
	unsigned waiters; /* threads of the dump waiting for it */
};

/* A cycle of the waits-for graph: each thread waits for the next. */
struct lock_cycle {
	size_t n;
	size_t *threads; /* indexes into the dump's threads */
};

struct locks {
	struct lock_wait *w; /* per thread of the dump; NULL: none waits */
	size_t nthreads;
	size_t nwaiting; /* threads with a kind */
	struct lock_cycle *cycles;
	size_t ncycles;
	/* Why owners cannot be told in this process; NULL when they can. */
	const char *unsupported;
};

/*
 * Fills *out for d (symbolized). Returns 0 (out holds nothing when no
 * thread waits on a lock) or -ENOMEM (out then holds nothing either).
 */
int locks_analyze(const struct sw_dump *d, struct locks *out);

void locks_release(struct locks *l);

/*
 * The distinct locks thread owner (an index into the dump's threads)
 * holds that some thread of the dump waits for, in the order of their
 * first waiter, at most max of them into out. Returns how many.
 */
#define LOCKS_HELD_MAX 16
size_t locks_held(const struct locks *l, size_t owner, struct lock_held *out,
		  size_t max);

/* "mutex", "rwlock". */
const char *locks_kind_name(enum lock_kind k);

/* The thread i waits for, when its owner is one of the dump's; -1. */
int locks_next(const struct locks *l, size_t i);

#endif /* SW_LOCKS_H */
