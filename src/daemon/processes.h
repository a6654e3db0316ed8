/*
 * processes.h - every process a requester may see (access.h), with the
 * agent or without, for /api/v1/processes and the page's process list.
 */
#ifndef SWD_PROCESSES_H
#define SWD_PROCESSES_H

#include <cjson/cJSON.h>

#include "access.h"
#include "registry.h"

#define PROCESSES_MAX 65536 /* processes listed at most */

/*
 * {"processes": [{"pid", "comm", "cmdline", "uid", "user", "state",
 * "threads", "agent"}]}, in /proc's order, kernel threads left out.
 * Returns 0 or -ENOMEM. Reads /proc: a few ms per thousand processes.
 */
int processes_json(struct registry *reg, const struct access *a, cJSON **out);

#endif /* SWD_PROCESSES_H */
