/*
 * guard.h - what protects each process of the daemon, whether it is in
 * force, and what keeps the daemon from doing its job now: the
 * "processes" and "degraded" of /api/v1/status, and /healthz.
 *
 * Each process of stackwatchd is promised its protections
 * (docs/security.md): the service (this process: HTTP, agents, the
 * history) a seccomp filter, no_new_privs and no capability to take
 * other credentials; the snapshot helper (the privileged core) its own
 * filter and no_new_privs. What is reported is what the kernel says of
 * each process now (/proc/PID/status: CapEff, NoNewPrivs, Seccomp), not
 * what was meant; why one is missing comes from where installing it
 * failed.
 */
#ifndef SWD_GUARD_H
#define SWD_GUARD_H

#include <stdbool.h>

#include <cjson/cJSON.h>

/*
 * The service's own filter: installed (ok), or why not. Called once at
 * start, before any thread.
 */
void guard_service_locked(bool ok, const char *why);

/* Whether the service gave up root and its capabilities, else why not. */
void guard_service_dropped(bool ok, const char *why);

/*
 * [{"role", "pid", "capabilities": ["CAP_..."], "no_new_privs",
 * "seccomp", "missing": [{"protection", "why"}]}] of every process of
 * the daemon; NULL on no memory. Reads /proc.
 */
cJSON *guard_processes(void);

/*
 * What keeps the daemon from its job now, one sentence each (an empty
 * array when nothing does); NULL on no memory.
 */
cJSON *guard_degraded(void);

#endif /* SWD_GUARD_H */
