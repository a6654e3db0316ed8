/*
 * test_sec_privsep.c - the daemon's processes each hold what they need
 * and nothing else, and say so.
 *
 * The daemon is started from a root shell (every capability there is):
 * /api/v1/status lists each of its processes with what the kernel says
 * of it (/proc/PID/status); the test reads that file itself too. The
 * service and the core each run under a seccomp filter of their own with
 * no_new_privs, the core keeps only the capabilities it reads processes
 * and checks requesters with, the service none of those it has no use
 * for (no CAP_SETUID, CAP_SETGID, CAP_SYS_NICE, CAP_BPF, CAP_PERFMON,
 * CAP_SYS_MODULE...), nothing is listed as missing, and /healthz says ok.
 * (An AddressSanitizer build has no filters, by design: its leak checker
 * ptraces the process at exit; then each says why.)
 */
#define _GNU_SOURCE

#include "sectest.h"
#include "tap.h"

/* The capabilities a process must never hold (bits of CapEff). */
#define CAP_BIT(n) (1ull << (n))
#define NEVER_CAPS                                                     \
	(CAP_BIT(0) /* CHOWN */ | CAP_BIT(1) /* DAC_OVERRIDE */ |      \
	 CAP_BIT(3) /* FOWNER */ | CAP_BIT(5) /* KILL */ |             \
	 CAP_BIT(12) /* NET_ADMIN */ | CAP_BIT(13) /* NET_RAW */ |     \
	 CAP_BIT(16) /* SYS_MODULE */ | CAP_BIT(17) /* SYS_RAWIO */ |  \
	 CAP_BIT(22) /* SYS_BOOT */ | CAP_BIT(24) /* SYS_RESOURCE */ | \
	 CAP_BIT(27) /* MKNOD */ | CAP_BIT(31) /* SETFCAP */)
/* And those only the core may hold. */
#define CORE_ONLY                                                 \
	(CAP_BIT(6) /* SETGID */ | CAP_BIT(7) /* SETUID */ |      \
	 CAP_BIT(23) /* SYS_NICE */ | CAP_BIT(38) /* PERFMON */ | \
	 CAP_BIT(39) /* BPF */)

/* CapEff, NoNewPrivs and Seccomp of pid from its status file. */
static bool held(pid_t pid, unsigned long long *caps, int *nnp, int *sec)
{
	char path[48], line[256];
	FILE *f;
	int got = 0;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	f = fopen(path, "r");
	while (f && fgets(line, sizeof(line), f)) {
		got += sscanf(line, "CapEff: %llx", caps) == 1;
		got += sscanf(line, "NoNewPrivs: %d", nnp) == 1;
		got += sscanf(line, "Seccomp: %d", sec) == 1;
	}
	if (f)
		fclose(f);
	return got == 3;
}

static void check_process(cJSON *p, bool sanitized)
{
	cJSON *role = cJSON_GetObjectItem(p, "role");
	cJSON *pid = cJSON_GetObjectItem(p, "pid");
	cJSON *missing = cJSON_GetObjectItem(p, "missing");
	const char *r = cJSON_IsString(role) ? role->valuestring : "?";
	unsigned long long caps = 0;
	int nnp = -1, sec = -1;
	bool core = strcmp(r, "core") == 0;

	TAP_OK(cJSON_IsNumber(pid) &&
		       held((pid_t)pid->valuedouble, &caps, &nnp, &sec),
	       "%s: its status file is read", r);
	TAP_OK((caps & NEVER_CAPS) == 0 && (core || !(caps & CORE_ONLY)),
	       "%s: holds no capability it has no use for (CapEff %llx)", r,
	       caps);
	if (sanitized) {
		TAP_OK(cJSON_GetArraySize(missing) > 0,
		       "%s: an AddressSanitizer build says its filter is "
		       "missing, and why",
		       r);
		return;
	}
	TAP_OK(sec == 2 && nnp == 1,
	       "%s: under a seccomp filter with no_new_privs (Seccomp %d, "
	       "NoNewPrivs %d)",
	       r, sec, nnp);
	TAP_OK(cJSON_IsArray(missing) && cJSON_GetArraySize(missing) == 0,
	       "%s: nothing is missing", r);
}

int main(void)
{
	static const char *const args[] = { "--sample-interval", "0", NULL };
	struct itest_daemon d;
	struct http_response r;
	cJSON *st, *p;
	int roles = 0, status = 0;

	if (geteuid() != 0) {
		TAP_SKIP("needs root: the daemon as a root shell starts it");
		return tap_done();
	}
	if (itest_daemon_start_args(&d, args) < 0) {
		TAP_OK(0, "the daemon starts");
		return tap_done();
	}
	st = itest_get_json(&d, "/api/v1/status", &status);
	TAP_OK(cJSON_IsArray(cJSON_GetObjectItem(st, "processes")),
	       "/api/v1/status lists the daemon's processes");
	cJSON_ArrayForEach(p, cJSON_GetObjectItem(st, "processes"))
	{
		check_process(p, SEC_SANITIZED);
		roles++;
	}
	TAP_OK(roles >= 2, "the service and the core at least (%d)", roles);
	TAP_OK(cJSON_IsArray(cJSON_GetObjectItem(st, "degraded")) &&
		       cJSON_GetArraySize(
			       cJSON_GetObjectItem(st, "degraded")) == 0,
	       "nothing is degraded");
	cJSON_Delete(st);
	memset(&r, 0, sizeof(r));
	TAP_OK(itest_get(&d, "/healthz", &r) == 0 && r.status == 200 &&
		       strcmp(r.body, "ok\n") == 0,
	       "/healthz: ok");
	http_response_release(&r);
	TAP_OK(itest_daemon_stop(&d) == 0, "the daemon stops cleanly");
	itest_daemon_cleanup(&d);
	return tap_done();
}
