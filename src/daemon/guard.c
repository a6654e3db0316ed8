/*
 * guard.c - what protects each process of the daemon (guard.h).
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cores.h"
#include "guard.h"
#include "model/procfs.h"
#include "privsep/parsers.h"
#include "ptracer.h"

static bool service_locked;
static char service_why[200] = "not installed yet";
static char drop_why[200] = "it has not given up root yet";

void guard_service_locked(bool ok, const char *why)
{
	service_locked = ok;
	snprintf(service_why, sizeof(service_why), "%s", ok ? "" : why);
}

void guard_service_dropped(bool ok, const char *why)
{
	snprintf(drop_why, sizeof(drop_why), "%s", ok ? "" : why);
}

/* The capabilities' names, by number (linux/capability.h). */
static const char *const cap_names[] = {
	"CAP_CHOWN",
	"CAP_DAC_OVERRIDE",
	"CAP_DAC_READ_SEARCH",
	"CAP_FOWNER",
	"CAP_FSETID",
	"CAP_KILL",
	"CAP_SETGID",
	"CAP_SETUID",
	"CAP_SETPCAP",
	"CAP_LINUX_IMMUTABLE",
	"CAP_NET_BIND_SERVICE",
	"CAP_NET_BROADCAST",
	"CAP_NET_ADMIN",
	"CAP_NET_RAW",
	"CAP_IPC_LOCK",
	"CAP_IPC_OWNER",
	"CAP_SYS_MODULE",
	"CAP_SYS_RAWIO",
	"CAP_SYS_CHROOT",
	"CAP_SYS_PTRACE",
	"CAP_SYS_PACCT",
	"CAP_SYS_ADMIN",
	"CAP_SYS_BOOT",
	"CAP_SYS_NICE",
	"CAP_SYS_RESOURCE",
	"CAP_SYS_TIME",
	"CAP_SYS_TTY_CONFIG",
	"CAP_MKNOD",
	"CAP_LEASE",
	"CAP_AUDIT_WRITE",
	"CAP_AUDIT_CONTROL",
	"CAP_SETFCAP",
	"CAP_MAC_OVERRIDE",
	"CAP_MAC_ADMIN",
	"CAP_SYSLOG",
	"CAP_WAKE_ALARM",
	"CAP_BLOCK_SUSPEND",
	"CAP_AUDIT_READ",
	"CAP_PERFMON",
	"CAP_BPF",
	"CAP_CHECKPOINT_RESTORE",
};

#define NCAPS (sizeof(cap_names) / sizeof(cap_names[0]))
#define CAP(n) (1ull << (n))

/* What /proc/PID/status says of a process's protections. */
struct held {
	uint64_t caps;	  /* CapEff */
	int64_t uid;	  /* effective; -1: not said */
	int no_new_privs; /* -1: not said */
	int seccomp;	  /* 0 none, 1 strict, 2 filter; -1: not said */
};

static int read_held(pid_t pid, struct held *h)
{
	char path[48], buf[4096];
	int64_t v;
	ssize_t n;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	n = procfs_read_at(AT_FDCWD, path, buf, sizeof(buf));
	if (n < 0)
		return (int)n;
	uint32_t ids[4];

	h->caps = 0;
	procfs_parse_status_hex(buf, (size_t)n, "CapEff", &h->caps);
	h->uid = procfs_parse_status_ids(buf, (size_t)n, "Uid", ids, 4) >= 2
			 ? (int64_t)ids[1]
			 : -1;
	h->no_new_privs =
		procfs_parse_status_dec(buf, (size_t)n, "NoNewPrivs", &v) == 0
			? (int)v
			: -1;
	h->seccomp = procfs_parse_status_dec(buf, (size_t)n, "Seccomp", &v) == 0
			     ? (int)v
			     : -1;
	return 0;
}

static void add_missing(cJSON *missing, const char *what, const char *why);

/*
 * A parser worker's limits (privsep/worker.c), as /proc/PID/limits says:
 * no core file, no file written, its address space bounded. Each one not
 * in force is added to missing.
 */
static void check_limits(pid_t pid, cJSON *missing)
{
	static const struct {
		const char *name;
		bool bounded; /* false: must be 0 */
	} want[] = {
		{ "Max core file size", false },
		{ "Max file size", false },
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
		{ "Max address space", true },
#endif
	};
	char path[48], buf[4096], why[160];
	ssize_t n;

	snprintf(path, sizeof(path), "/proc/%d/limits", (int)pid);
	n = procfs_read_at(AT_FDCWD, path, buf, sizeof(buf));
	if (n <= 0)
		return;
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		const char *line = strstr(buf, want[i].name), *v;
		bool ok;

		if (!line)
			continue;
		v = line + strlen(want[i].name);
		while (*v == ' ')
			v++;
		ok = want[i].bounded ? strncmp(v, "unlimited", 9) != 0
				     : *v == '0' && v[1] == ' ';
		if (ok)
			continue;
		snprintf(why, sizeof(why), "%s is %s", want[i].name,
			 want[i].bounded ? "unlimited" : "not 0");
		add_missing(missing, "limits", why);
	}
}

static void add_missing(cJSON *missing, const char *what, const char *why)
{
	cJSON *m = cJSON_CreateObject();

	if (!m || !cJSON_AddStringToObject(m, "protection", what) ||
	    !cJSON_AddStringToObject(m, "why", why) ||
	    !cJSON_AddItemToArray(missing, m))
		cJSON_Delete(m);
}

/*
 * One process's entry: role, pid, what it holds, and each protection it
 * is promised (a filter, no_new_privs, no capability but those of
 * allowed) that is not in force, with why (filter_why when its filter
 * failed to install).
 */
static cJSON *process_json(const char *role, pid_t pid, uint64_t allowed,
			   const char *filter_why)
{
	cJSON *o = cJSON_CreateObject(), *caps, *missing;
	struct held h;
	char why[320];

	if (!o)
		return NULL;
	cJSON_AddStringToObject(o, "role", role);
	cJSON_AddNumberToObject(o, "pid", pid);
	caps = cJSON_AddArrayToObject(o, "capabilities");
	if (read_held(pid, &h) < 0) {
		cJSON_Delete(o);
		return NULL;
	}
	for (size_t i = 0; caps && i < 64; i++)
		if (h.caps & CAP(i))
			cJSON_AddItemToArray(
				caps,
				cJSON_CreateString(i < NCAPS ? cap_names[i]
							     : "CAP_?"));
	cJSON_AddNumberToObject(o, "uid", (double)h.uid);
	cJSON_AddBoolToObject(o, "no_new_privs", h.no_new_privs == 1);
	cJSON_AddNumberToObject(o, "seccomp", h.seccomp);
	missing = cJSON_AddArrayToObject(o, "missing");
	if (!missing)
		return o;
	if (h.seccomp != 2)
		add_missing(missing, "seccomp",
			    filter_why && *filter_why
				    ? filter_why
				    : "no seccomp filter is in force");
	if (h.no_new_privs != 1)
		add_missing(missing, "no_new_privs",
			    filter_why && *filter_why ? filter_why
						      : "no_new_privs is off");
	if (h.caps & ~allowed) {
		size_t k = 0;

		k += (size_t)snprintf(why, sizeof(why), "holds");
		for (size_t i = 0; i < 64 && k < sizeof(why); i++)
			if ((h.caps & ~allowed) & CAP(i))
				k += (size_t)snprintf(
					why + k, sizeof(why) - k, " %s",
					i < NCAPS ? cap_names[i] : "CAP_?");
		if (k < sizeof(why))
			snprintf(why + k, sizeof(why) - k, ", not its own%s%s",
				 allowed == 0 && drop_why[0] ? ": " : "",
				 allowed == 0 ? drop_why : "");
		add_missing(missing, "capabilities", why);
	}
	if (strcmp(role, "parser") == 0)
		check_limits(pid, missing);
	return o;
}

cJSON *guard_processes(void)
{
	cJSON *arr = cJSON_CreateArray(), *o;
	pid_t core[CORES];
	size_t ncores = cores_pids(core);
	char why[200];

	if (!arr)
		return NULL;
	/* It holds none once started (ptracer_drop()). */
	o = process_json("service", getpid(), 0,
			 service_locked ? NULL : service_why);
	if (o)
		cJSON_AddItemToArray(arr, o);
	why[0] = '\0';
	if (ncores && ptracer_filter_status(why, sizeof(why)) == 0)
		why[0] = '\0';
	for (size_t i = 0; i < ncores; i++) {
		o = process_json("core", core[i], PTRACER_CORE_CAPS, why);
		if (o)
			cJSON_AddItemToArray(arr, o);
	}
	parsers_processes(arr, process_json);
	return arr;
}

cJSON *guard_degraded(void)
{
	cJSON *arr = cJSON_CreateArray();
	char why[240];

	if (arr && cores_state(why, sizeof(why)) != 0)
		cJSON_AddItemToArray(arr, cJSON_CreateString(why));
	if (arr && parsers_state(why, sizeof(why)) != 0)
		cJSON_AddItemToArray(arr, cJSON_CreateString(why));
	return arr;
}
