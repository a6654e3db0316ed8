/*
 * nspid.h - thread ids of a target that lives in another pid namespace
 * (a container), turned into the ids the daemon sees.
 *
 * The agent lists its threads in its own /proc/self/task, so inside a pid
 * namespace of its own every tid it reports is the namespace's: 1 for its
 * main thread, small numbers that name other processes (or nothing) in
 * the daemon's namespace. The pid of the target itself is right already
 * (SO_PEERCRED, translated by the kernel). The kernel also tells every
 * task's id at each level: the "NSpid:" line of /proc/PID/task/TID/status
 * lists it from the namespace of the reader's /proc down to the task's
 * own. The daemon reads those lines and rewrites the tids of the dump.
 */
#ifndef SWD_NSPID_H
#define SWD_NSPID_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "model/dump.h"

/*
 * True when process pid (as the daemon sees it) is in a pid namespace
 * other than the daemon's: the inodes of /proc/self/ns/pid and
 * /proc/PID/ns/pid differ. False when that cannot be read (the caller has
 * other clues: the pid the agent says it has). Blocks briefly (stat).
 */
bool nspid_foreign(pid_t pid);

/*
 * Rewrites the tid of every thread of d, a raw dump of process pid taken
 * in the process's own pid namespace, to the tid the daemon sees, from
 * the NSpid lines of /proc/PID/task/TID/status. A thread whose id cannot
 * be translated (it exited since the dump, so its task is gone) gets tid
 * 0, which names no thread, and status exited, and loses its stack: a tid
 * of the namespace, which may name another process here, is never shown.
 * Returns 0, or a negative errno when the task list cannot be read (-ESRCH:
 * the process is gone; d is left as it was). Blocks (reads /proc once per
 * thread).
 */
int nspid_translate(pid_t pid, struct sw_dump *d);

/*
 * The other way: tids[0..n), threads of process pid as the daemon sees
 * them, as the process's own pid namespace has them, from the NSpid line
 * of each one's /proc/PID/task/TID/status. A tid that names no thread of
 * pid now is left out. On success *out (malloc'd, NULL when nothing is
 * left) holds *nout ids, ascending, without repeats. Returns 0, or a
 * negative errno (-ESRCH: the process is gone). Blocks (reads /proc once
 * per tid).
 */
int nspid_to_inner(pid_t pid, const pid_t *tids, size_t n, pid_t **out,
		   size_t *nout);

#endif /* SWD_NSPID_H */
