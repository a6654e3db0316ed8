/*
 * processes.c - /api/v1/processes: every process the requester may see,
 * with the agent or without (processes.h).
 */
#define _GNU_SOURCE
#include "processes.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "model/procfs.h"

static void user_name(uid_t uid, char *buf, size_t size)
{
	struct passwd pw, *res = NULL;
	char tmp[1024];

	if (getpwuid_r(uid, &pw, tmp, sizeof(tmp), &res) == 0 && res)
		snprintf(buf, size, "%s", res->pw_name);
	else
		snprintf(buf, size, "%u", (unsigned)uid);
}

static cJSON *one(struct registry *reg, pid_t pid, const struct procfs_proc *pp)
{
	cJSON *o = cJSON_CreateObject();
	struct target *t = registry_get(reg, pid);
	char comm[SW_COMM_MAX] = "", path[64], user[64],
	     st[2] = { pp->state, 0 };
	char *cmdline = NULL;
	uid_t uid = 0;
	bool agent = t && !t->ptrace;

	if (t)
		target_put(t);
	if (!o)
		return NULL;
	snprintf(path, sizeof(path), "/proc/%d/comm", (int)pid);
	if (procfs_read_at(AT_FDCWD, path, comm, sizeof(comm)) > 0)
		comm[strcspn(comm, "\n")] = '\0';
	if (procfs_read_uid(pid, &uid) != 0) {
		cJSON_Delete(o);
		return NULL; /* gone meanwhile */
	}
	procfs_read_cmdline(pid, &cmdline);
	user_name(uid, user, sizeof(user));
	cJSON_AddNumberToObject(o, "pid", pid);
	cJSON_AddStringToObject(o, "comm", comm);
	cJSON_AddStringToObject(o, "cmdline", cmdline ? cmdline : "");
	cJSON_AddNumberToObject(o, "uid", uid);
	cJSON_AddStringToObject(o, "user", user);
	cJSON_AddStringToObject(o, "state", st);
	cJSON_AddNumberToObject(o, "threads", (double)pp->threads);
	cJSON_AddBoolToObject(o, "agent", agent);
	free(cmdline);
	return o;
}

/*
 * The user processes under /proc (kernel threads have no user stack:
 * nothing to show), at most PROCESSES_SCAN_MAX: *pids and *pps malloc'd.
 */
#define PROCESSES_SCAN_MAX 65536
static int list_processes(pid_t **pids, struct procfs_proc **pps, size_t *n)
{
	DIR *d = opendir("/proc");
	struct dirent *e;
	size_t cap = 0;

	*pids = NULL;
	*pps = NULL;
	*n = 0;
	if (!d)
		return -errno;
	while ((e = readdir(d)) && *n < PROCESSES_SCAN_MAX) {
		struct procfs_proc pp;
		pid_t pid;

		if (!isdigit((unsigned char)e->d_name[0]))
			continue;
		pid = (pid_t)atoi(e->d_name);
		if (procfs_read_proc(pid, &pp) != 0 ||
		    (pp.flags & PROCFS_PF_KTHREAD))
			continue;
		if (*n == cap) {
			size_t c = cap ? 2 * cap : 256;
			pid_t *p = realloc(*pids, c * sizeof(*p));
			struct procfs_proc *q =
				p ? realloc(*pps, c * sizeof(*q)) : NULL;

			if (p)
				*pids = p;
			if (!q) {
				closedir(d);
				return -ENOMEM;
			}
			*pps = q;
			cap = c;
		}
		(*pids)[*n] = pid;
		(*pps)[(*n)++] = pp;
	}
	closedir(d);
	return 0;
}

int processes_json(struct registry *reg, const struct access *a, cJSON **out)
{
	cJSON *doc = cJSON_CreateObject(), *arr;
	struct procfs_proc *pps = NULL;
	pid_t *pids = NULL;
	bool *ok = NULL;
	size_t n = 0, shown = 0;
	int rc;

	*out = NULL;
	arr = doc ? cJSON_AddArrayToObject(doc, "processes") : NULL;
	rc = arr ? list_processes(&pids, &pps, &n) : -ENOMEM;
	if (rc == 0) {
		ok = calloc(n ? n : 1, sizeof(*ok));
		rc = ok ? 0 : -ENOMEM;
	}
	if (rc != 0 || !ok) {
		free(ok);
		free(pids);
		free(pps);
		cJSON_Delete(doc);
		return -ENOMEM;
	}
	/* One question to the kernel for them all (access.h). */
	access_sees_pids(a, pids, n, ok);
	for (size_t i = 0; i < n && shown < PROCESSES_MAX; i++) {
		cJSON *o = ok[i] ? one(reg, pids[i], &pps[i]) : NULL;

		if (o) {
			cJSON_AddItemToArray(arr, o);
			shown++;
		}
	}
	free(ok);
	free(pids);
	free(pps);
	*out = doc;
	return 0;
}
