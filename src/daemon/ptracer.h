/*
 * ptracer.h - the daemon's snapshot helper: the one process of stackwatchd
 * that may ptrace.
 *
 * A daemon that can stop and read any process is a prize, so that power
 * is kept away from the code that parses HTTP and agent messages, after
 * OpenBSD's privilege separation. At start-up, before any thread exists,
 * the daemon starts a helper (itself, re-executed with
 * --snapshot-helper) and then forbids itself ptrace(2),
 * process_vm_readv(2) and process_vm_writev(2) with a seccomp filter.
 * The helper reads fixed-size requests (a pid the daemon has already
 * authorized, a deadline, and a fresh socket for the answer), takes each
 * snapshot in a short-lived child of its own, so that every tracee is
 * released when that child exits whatever happened, and answers raw
 * copies only (snapshot.h's bytes). It parses nothing else, and it dies
 * with the daemon.
 */
#ifndef SWD_PTRACER_H
#define SWD_PTRACER_H

#include <stdbool.h>
#include <sys/types.h>

#include "model/dump.h"
#include "snapshot/snapshot.h"

/* The helper is gone (killed): no snapshot can be taken until restart. */
#define PTRACER_EGONE (-21201)

/*
 * Starts the helper from the daemon's own executable. Call it before any
 * thread is started. Returns 0 or a negative errno (the daemon then runs
 * without snapshots and says so).
 */
int ptracer_start(void);

/*
 * Forbids the calling process ptrace and the process_vm_* calls from now
 * on (every thread, present and future). Returns 0 or a negative errno.
 * Builds with AddressSanitizer skip it: its leak checker ptraces the
 * process at exit.
 */
int ptracer_lockdown(void);

/* Ends the helper (closes its socket and reaps it). */
void ptracer_stop(void);

/*
 * A snapshot of pid through the helper within timeout_ms, unwound here
 * (unwind.h) into a raw dump with method "ptrace" (*out). pidfd pins the
 * process: module files are opened from its own mappings. Returns 0, a
 * snapshot error (SNAP_E*, -ESRCH, -EPERM), -ETIMEDOUT, or
 * PTRACER_EGONE; *tracer gets the tracer's pid with SNAP_ETRACED.
 */
int ptracer_dump(pid_t pid, int pidfd, int timeout_ms, struct sw_dump **out,
		 pid_t *tracer);

/* The helper's side: serves requests on fd until it closes. Exits. */
int ptracer_main(int fd);

/* Snapshots answered by the helper since start, and the helper's pid. */
unsigned long ptracer_snapshots(void);
pid_t ptracer_pid(void);

#endif /* SWD_PTRACER_H */
