/*
 * handler.h - the signal handler and the slots it writes.
 *
 * The handler is the only code of ours that runs on the target's threads.
 * It is async-signal-safe and nothing else: no malloc, no stdio, no locks
 * of ours, errno saved and restored. It claims its slot by CAS on the
 * slot's (generation, state) word, unwinds with libunwind into the slot's
 * preallocated ips (or takes only the interrupted pc, flagged, inside the
 * dynamic loader or too near the end of its stack), publishes with release
 * ordering and wakes the dumper through the done futex.
 */
#ifndef SW_HANDLER_H
#define SW_HANDLER_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sigctx.h"

/*
 * Installs the handler once per process: STACKWATCH_SIGNAL when set and
 * valid, else the first real-time signal from SIGRTMIN+4 up without a
 * handler; a signal that already has one is never taken over. Loads and
 * primes libunwind before returning (handler_install_early() first, if
 * it has not run). Returns the signal number or a negative error
 * (SW_ENOSIGNAL, -EINVAL for a bad STACKWATCH_SIGNAL, SW_ENOTINIT without
 * libunwind). Thread-safe; not for signal context.
 */
int handler_install(void);

/*
 * Only the handler on its signal (the same choice), once per process,
 * with none of the cost of handler_install(): no libunwind, no files
 * read, no allocation. A signal arriving meanwhile finds no slot armed
 * and is answered by returning; no dump starts before handler_install()
 * (handler_check() fails until then). Returns as handler_install() does.
 * Thread-safe; not for signal context.
 */
int handler_install_early(void);

/* The installed signal, or 0. */
int handler_signal(void);

/*
 * Whether si is a signal our dumper sent (a cookie it issued), not one
 * of the program's or anyone else's on the same number. Async-signal-safe.
 */
bool handler_sent_by_us(const siginfo_t *si);

/* 0 when handler_install() succeeded and our handler is still the one
 * installed; else its error, SW_ENOTINIT before it, or SW_EHANDLER. */
int handler_check(void);

/*
 * Unwinds the calling thread into ips (at most max), skipping skip frames
 * above the caller. Not for signal context. Returns the number of ips.
 */
size_t handler_unwind_self(uint64_t *ips, size_t max, unsigned skip);

#endif /* SW_HANDLER_H */
