/*
 * futex.h - the completion flag of the dumper (Kudu's CompletionFlag): the
 * handlers bump a counter and wake; the dumper waits for the counter to
 * move, with one absolute CLOCK_MONOTONIC deadline.
 */
#ifndef SW_FUTEX_H
#define SW_FUTEX_H

#include <stdatomic.h>
#include <stdint.h>

/*
 * Wakes every waiter on addr. One raw system call, async-signal-safe (the
 * same call sem_post() makes).
 */
void futex_wake_all(_Atomic uint32_t *addr);

/*
 * Sleeps while *addr == expected, until woken or until the absolute
 * CLOCK_MONOTONIC time deadline_ns. Returns 0 when woken or when *addr had
 * already changed, -ETIMEDOUT at the deadline, -EINTR on a signal. Callers
 * re-check their condition after every return: wakes may be spurious.
 */
int futex_wait_until(_Atomic uint32_t *addr, uint32_t expected,
		     uint64_t deadline_ns);

#endif /* SW_FUTEX_H */
