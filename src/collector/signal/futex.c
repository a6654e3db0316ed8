/*
 * futex.c - wake and deadline wait on a 32-bit futex word (futex.h).
 *
 * The wait uses FUTEX_WAIT_BITSET, whose timeout is an absolute
 * CLOCK_MONOTONIC time: a loop of waits never drifts past the deadline the
 * way repeated relative timeouts do. Private futexes: the waker and the
 * waiter are always threads of one process.
 */
#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "futex.h"
#include "sys.h"

void futex_wake_all(_Atomic uint32_t *addr)
{
	sys_call6(SYS_futex, (long)addr, FUTEX_WAKE | FUTEX_PRIVATE_FLAG,
		  INT_MAX, 0, 0, 0);
}

int futex_wait_until(_Atomic uint32_t *addr, uint32_t expected,
		     uint64_t deadline_ns)
{
	struct timespec ts = {
		.tv_sec = (time_t)(deadline_ns / 1000000000ull),
		.tv_nsec = (long)(deadline_ns % 1000000000ull),
	};
	long rc;

	rc = sys_call6(SYS_futex, (long)addr,
		       FUTEX_WAIT_BITSET | FUTEX_PRIVATE_FLAG, expected,
		       (long)&ts, 0, FUTEX_BITSET_MATCH_ANY);
	if (rc == 0 || rc == -EAGAIN)
		return 0; /* woken, or the word had already moved */
	return (int)rc;
}
