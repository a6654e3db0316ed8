/*
 * processes.c - /api/v1/processes: every process the requester may see,
 * with the agent or without (processes.h), and what the page's process
 * table shows of each: CPU, thread states, stuck threads, deadlocks.
 */
#define _GNU_SOURCE
#include "processes.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "model/procfs.h"
#include "stacks.h"

/*
 * The daemon's previous CPU reading of each process, for cpu_pct: a
 * direct-mapped table (a pid's slot is pid % CPU_SEEN_SLOTS), so it never
 * grows; a process that lost its slot to another is measured since it
 * started, as one never read before. The start time tells a reused pid.
 */
#define CPU_SEEN_SLOTS 4096
#define CPU_MIN_SPAN_NS 500000000ull /* a shorter span says little */

struct cpu_seen {
	pid_t pid;
	uint64_t start_ticks; /* the process's start, since boot */
	uint64_t cpu_ticks;   /* its user and system time then */
	uint64_t at_ns;	      /* CLOCK_BOOTTIME of the reading */
};

static struct cpu_seen cpu_seen[CPU_SEEN_SLOTS];
static pthread_mutex_t cpu_seen_lock = PTHREAD_MUTEX_INITIALIZER;

static uint64_t boot_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_BOOTTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/*
 * Percent of one core that pid used since the daemon's previous reading
 * of it, when that is at least CPU_MIN_SPAN_NS old (the reading then
 * becomes the previous one); else since it started. -1 when its stat
 * file cannot be read (it is gone). Thread-safe.
 */
static double cpu_pct(pid_t pid)
{
	static long hz;
	struct procfs_task pt;
	struct cpu_seen *e;
	char path[64], buf[1024];
	uint64_t now = boot_ns(), ticks, span_ticks, span_ns;
	ssize_t n;

	if (!hz)
		hz = sysconf(_SC_CLK_TCK) > 0 ? sysconf(_SC_CLK_TCK) : 100;
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	n = procfs_read_at(AT_FDCWD, path, buf, sizeof(buf));
	if (n <= 0 || procfs_parse_stat(buf, (size_t)n, &pt) != 0)
		return -1;
	ticks = pt.utime_ticks + pt.stime_ticks;
	span_ticks = ticks;
	span_ns = now - (pt.start_ticks * 1000000000ull / (uint64_t)hz);
	e = &cpu_seen[(unsigned)pid % CPU_SEEN_SLOTS];
	pthread_mutex_lock(&cpu_seen_lock);
	if (e->pid == pid && e->start_ticks == pt.start_ticks &&
	    now - e->at_ns >= CPU_MIN_SPAN_NS && ticks >= e->cpu_ticks) {
		span_ticks = ticks - e->cpu_ticks;
		span_ns = now - e->at_ns;
	}
	if (e->pid != pid || e->start_ticks != pt.start_ticks ||
	    now - e->at_ns >= CPU_MIN_SPAN_NS)
		*e = (struct cpu_seen){ pid, pt.start_ticks, ticks, now };
	pthread_mutex_unlock(&cpu_seen_lock);
	if (span_ns < 1000000) /* started this very millisecond */
		return 0;
	/* One decimal: the ticks are 10 ms apart anyway. */
	return (double)(long)(1000.0 * (double)span_ticks / (double)hz /
			      ((double)span_ns / 1e9)) /
	       10.0;
}

/*
 * {"S": 3, "R": 1}: pid's threads by the state letter of their stat
 * files, at most STATES_PER_PROCESS of them and *budget in all (each
 * read takes one from it): a host of a million threads must not hold
 * one request for seconds. *partial is set when threads were left out.
 */
#define STATES_PER_PROCESS 4096
static cJSON *thread_states(pid_t pid, size_t *budget, bool *partial)
{
	unsigned counts[52] = { 0 };
	char path[300], buf[1024];
	size_t nread = 0;
	struct dirent *e;
	cJSON *o;
	DIR *d;

	*partial = false;
	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	d = opendir(path);
	if (!d)
		return cJSON_CreateObject();
	while ((e = readdir(d))) {
		struct procfs_task pt;
		ssize_t n;
		char c;

		if (!isdigit((unsigned char)e->d_name[0]))
			continue;
		if (nread == STATES_PER_PROCESS || !*budget) {
			*partial = true;
			break;
		}
		nread++;
		(*budget)--;
		snprintf(path, sizeof(path), "%s/stat", e->d_name);
		n = procfs_read_at(dirfd(d), path, buf, sizeof(buf));
		if (n <= 0 || procfs_parse_stat(buf, (size_t)n, &pt) != 0)
			continue; /* exited meanwhile */
		c = pt.state;
		if (c >= 'A' && c <= 'Z')
			counts[c - 'A']++;
		else if (c >= 'a' && c <= 'z')
			counts[26 + c - 'a']++;
	}
	closedir(d);
	o = cJSON_CreateObject();
	for (int i = 0; o && i < 52; i++) {
		char key[2] = { (char)(i < 26 ? 'A' + i : 'a' + i - 26), 0 };

		if (counts[i])
			cJSON_AddNumberToObject(o, key, counts[i]);
	}
	return o;
}

/*
 * The threads the watchdog flags now in t's newest sample, and whether
 * that sample shows a cycle of lock waits. 0 and false for no target (a
 * process nobody watches) or no sample.
 */
static void watched(struct stacks *st, struct target *t, size_t *stuck,
		    bool *deadlock)
{
	struct sdump *sd = NULL;
	struct stuck *list = NULL;
	size_t n = 0;

	*stuck = 0;
	*deadlock = false;
	if (!t || !st || stacks_stuck(st, t, &sd, &list, &n) < 0)
		return;
	*stuck = n;
	for (size_t i = 0; i < n; i++)
		*deadlock =
			*deadlock || strcmp(list[i].reason, "deadlock") == 0;
	free(list);
	sdump_put(sd);
}

static void user_name(uid_t uid, char *buf, size_t size)
{
	struct passwd pw, *res = NULL;
	char tmp[1024];

	if (getpwuid_r(uid, &pw, tmp, sizeof(tmp), &res) == 0 && res)
		snprintf(buf, size, "%s", res->pw_name);
	else
		snprintf(buf, size, "%u", (unsigned)uid);
}

/* The facts a process table shows of pid beyond the kernel's own. */
static void add_table_facts(cJSON *o, struct stacks *st, struct target *t,
			    pid_t pid, size_t *budget)
{
	bool partial, deadlock;
	double pct = cpu_pct(pid);
	size_t stuck;

	watched(st, t, &stuck, &deadlock);
	cJSON_AddNumberToObject(o, "cpu_pct", pct < 0 ? 0 : pct);
	cJSON_AddItemToObject(o, "thread_states",
			      thread_states(pid, budget, &partial));
	if (partial)
		cJSON_AddBoolToObject(o, "thread_states_partial", true);
	cJSON_AddNumberToObject(o, "stuck", (double)stuck);
	cJSON_AddBoolToObject(o, "deadlock", deadlock);
	cJSON_AddStringToObject(o, "method",
				t && !t->ptrace ? "agent" : "ptrace");
}

static cJSON *one(struct registry *reg, struct stacks *sts, pid_t pid,
		  const struct procfs_proc *pp, size_t *budget)
{
	cJSON *o = cJSON_CreateObject();
	struct target *t = registry_get(reg, pid);
	char comm[SW_COMM_MAX] = "", path[64], user[64],
	     st[2] = { pp->state, 0 };
	char *cmdline = NULL;
	uid_t uid = 0;
	bool agent = t && !t->ptrace;

	if (!o) {
		if (t)
			target_put(t);
		return NULL;
	}
	snprintf(path, sizeof(path), "/proc/%d/comm", (int)pid);
	if (procfs_read_at(AT_FDCWD, path, comm, sizeof(comm)) > 0)
		comm[strcspn(comm, "\n")] = '\0';
	if (procfs_read_uid(pid, &uid) != 0) {
		if (t)
			target_put(t);
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
	add_table_facts(o, sts, t, pid, budget);
	if (t)
		target_put(t);
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

int processes_json(struct registry *reg, struct stacks *st,
		   const struct access *a, cJSON **out)
{
	size_t budget = PROCESSES_STATES_MAX;
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
		cJSON *o =
			ok[i] ? one(reg, st, pids[i], &pps[i], &budget) : NULL;

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
