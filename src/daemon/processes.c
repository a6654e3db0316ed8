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

int processes_json(struct registry *reg, const struct access *a, cJSON **out)
{
	cJSON *doc = cJSON_CreateObject(), *arr;
	DIR *d = opendir("/proc");
	struct dirent *e;
	size_t n = 0;

	*out = NULL;
	arr = doc ? cJSON_AddArrayToObject(doc, "processes") : NULL;
	if (!arr || !d) {
		if (d)
			closedir(d);
		cJSON_Delete(doc);
		return -ENOMEM;
	}
	while ((e = readdir(d)) && n < PROCESSES_MAX) {
		struct procfs_proc pp;
		pid_t pid;
		cJSON *o;

		if (!isdigit((unsigned char)e->d_name[0]))
			continue;
		pid = (pid_t)atoi(e->d_name);
		/* Kernel threads have no user stack: nothing to show. */
		if (procfs_read_proc(pid, &pp) != 0 ||
		    (pp.flags & PROCFS_PF_KTHREAD))
			continue;
		if (!access_sees_pid(a, pid))
			continue;
		o = one(reg, pid, &pp);
		if (o) {
			cJSON_AddItemToArray(arr, o);
			n++;
		}
	}
	closedir(d);
	*out = doc;
	return 0;
}
