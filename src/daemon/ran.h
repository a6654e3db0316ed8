/*
 * ran.h - what a target's last periodic samples read by signal, for the
 * next one to signal only the threads that ran since.
 *
 * Without the kernel path every thread of an agent's process is read by
 * the agent's signal, and a signal cuts a sleeping call short (EINTR).
 * A thread that has not run since it was last read has the same stack
 * and registers, so the next sample need not signal it. A thread read by
 * signal runs again, though: back into its call when the kernel restarts
 * it, on past it when the call returns EINTR. So a thread is reused only
 * once two reads in a row caught it at the same stack (where EINTR led it
 * back there) and, after the second, it is asleep at the pc its handler
 * saw (/proc's syscall file); then its schedstat (on-CPU time, time
 * waiting for a CPU, times switched in) is kept. Before each sample, a
 * thread whose schedstat is unchanged has not been on a CPU since: it
 * goes in the request's skip set, and its kept stack fills its place,
 * marked SW_TF_REUSED.
 */
#ifndef SWD_RAN_H
#define SWD_RAN_H

#include <stddef.h>
#include <sys/types.h>

#include "model/dump.h"

/*
 * The most addresses kept for one target (512 KiB of them), as kept.h's
 * for kernel reads: a process with more is signalled whole each time.
 */
#define RAN_MAX_ADDRS 65536

struct ran;

/*
 * The threads of r ready for reuse that have not run since (their
 * schedstat, read now under /proc/pid, is unchanged): *skip (malloc'd,
 * ascending, *nskip of them; NULL and 0 when none). One small read per
 * such thread; a thread gone or unreadable is left out (read fresh). 0 or
 * -ENOMEM. May block on /proc only.
 */
int ran_skip(const struct ran *r, pid_t pid, pid_t **skip, size_t *nskip);

/*
 * Adds to d, the agent's answer without skip[0..nskip) (ran_skip()'s),
 * each of those threads as r kept it, marked SW_TF_REUSED, then sorts d's
 * threads by tid. A thread r no longer has becomes an error. Returns the
 * number put back, or -ENOMEM (d is then unchanged).
 */
int ran_fill(const struct ran *r, const pid_t *skip, size_t nskip,
	     struct sw_dump *d);

/*
 * Replaces *r with d's threads read by signal (their stacks, to compare
 * with the next read), those caught twice at the same stack and asleep
 * there now (two small reads each) made ready for reuse, and those
 * reused from *r. A thread in a futex wait is not kept: its lock word may
 * change without it. On out of memory, or past RAN_MAX_ADDRS, *r is
 * emptied: the next sample signals every thread.
 */
void ran_update(struct ran **r, pid_t pid, const struct sw_dump *d);

void ran_free(struct ran *r);

#endif /* SWD_RAN_H */
