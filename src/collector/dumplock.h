/*
 * dumplock.h - one dump at a time (dumplock.c).
 *
 * The collector takes this lock for the whole of a dump; the exec family
 * (exec.c) takes it around an exec, so that no signal of ours is sent to
 * a thread about to become a new program (a pending real-time signal
 * survives exec, and there its default action kills).
 */
#ifndef SW_DUMPLOCK_H
#define SW_DUMPLOCK_H

#include <stdbool.h>

void dumplock_take(void);
void dumplock_give(void);

/*
 * Takes the lock, waiting at most a dump's longest timeout (plus its
 * learning and some room). False, and nothing held, if that passed. It
 * goes before any dump not yet started: it waits for one dump at most.
 */
bool dumplock_take_bounded(void);

/* In a child of fork(): a dump another thread had in progress is gone. */
void dumplock_atfork_child(void);

#endif /* SW_DUMPLOCK_H */
