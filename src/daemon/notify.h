/*
 * notify.h - what stackwatchd tells systemd through sd_notify(3): READY=1
 * once the HTTP port and the agent socket are open, STATUS= with the
 * number of targets (kept current by a small thread), WATCHDOG=1 while
 * the daemon is alive, STOPPING=1 on the way out.
 *
 * Everything here is a no-op when NOTIFY_SOCKET is unset (the daemon was
 * not started by systemd with Type=notify), and the watchdog part is a
 * no-op when systemd did not ask for one (WATCHDOG_USEC).
 */
#ifndef SWD_NOTIFY_H
#define SWD_NOTIFY_H

#include <stdbool.h>

#include "registry.h"

/*
 * Reads NOTIFY_SOCKET and WATCHDOG_USEC/WATCHDOG_PID once. Call it from
 * main before any other thread exists. Allocates nothing; cannot fail.
 */
void notify_init(void);

/*
 * Sends READY=1 and a first STATUS=, then starts the status thread: every
 * two seconds it sends STATUS= again when the number of targets in reg
 * changed. url is the address the daemon serves, shown in the status.
 * reg must stay valid until notify_stopping() returns. Returns 0, or a
 * negative errno when the thread cannot start (READY=1 was sent anyway;
 * the daemon can run without the thread). Does not block.
 */
int notify_ready(struct registry *reg, const char *url);

/*
 * Sends STOPPING=1 and stops the status thread (joined: reg is no longer
 * used when this returns). Call it first thing on SIGTERM/SIGINT. Safe
 * when notify_ready() was never called.
 */
void notify_stopping(void);

/*
 * Sends WATCHDOG=1 when systemd asked for a watchdog, at most once every
 * WatchdogUsec/2; otherwise returns at once. Cheap (a relaxed atomic load
 * and, when the watchdog is on, one clock_gettime), thread-safe, never
 * blocks beyond one datagram send; not async-signal-safe.
 *
 * Meant for the scheduler's loop, so a wedged scheduler gets the daemon
 * restarted: call it on every pass, and make sure a pass happens at least
 * every WatchdogUsec/4 even when there is nothing to schedule. Until the
 * first call to this function the status thread keeps the watchdog fed on
 * its own; from the first call on, only callers of this function do.
 */
void notify_watchdog(void);

/*
 * A check every ping must pass first (NULL: none): the daemon's other
 * parts that can wedge (the symbolizer) say whether they make progress,
 * so that a daemon stuck there gets no WATCHDOG=1 and systemd restarts
 * it. Called from the pinging thread; must be cheap and never block.
 * Set it before notify_ready().
 */
void notify_set_health(bool (*healthy)(void *arg), void *arg);

#endif /* SWD_NOTIFY_H */
