/*
 * processes.h - every process a requester may see (access.h), with the
 * agent or without, for /api/v1/processes and the page's process list.
 */
#ifndef SWD_PROCESSES_H
#define SWD_PROCESSES_H

#include <cjson/cJSON.h>

#include "access.h"
#include "registry.h"

#define PROCESSES_MAX 65536	   /* processes listed at most */
#define PROCESSES_STATES_MAX 65536 /* thread stat files read per answer */

struct stacks;

/*
 * {"processes": [{"pid", "comm", "cmdline", "uid", "user", "state",
 * "threads", "agent", "cpu_pct", "thread_states", "stuck", "deadlock",
 * "method"}]}, in /proc's order, kernel threads left out; st gives the
 * watchdog's view of the targets (NULL: none). Returns 0 or -ENOMEM.
 * Reads /proc: a few ms per thousand processes, plus one stat file per
 * thread, at most PROCESSES_STATES_MAX of them. Updates the CPU readings
 * the next answer measures from.
 */
int processes_json(struct registry *reg, struct stacks *st,
		   const struct access *a, cJSON **out);

#endif /* SWD_PROCESSES_H */
