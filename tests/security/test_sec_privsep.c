/*
 * test_sec_privsep.c - the daemon's processes each hold what they need
 * and nothing else, and say so.
 *
 * The daemon is started from a root shell (every capability there is):
 * /api/v1/status lists each of its processes with what the kernel says
 * of it (/proc/PID/status); the test reads that file itself too. The
 * service and the core each run under a seccomp filter of their own with
 * no_new_privs, the core keeps only the capabilities it reads processes
 * and checks requesters with, the service (which parses HTTP and agent
 * messages) holds none at all and no longer runs as root, a parser
 * worker neither; nothing is listed as missing, and /healthz says ok.
 * (An AddressSanitizer build has no filters, by design: its leak checker
 * ptraces the process at exit; then each says why.)
 *
 * Then each child of the daemon is killed (SIGKILL) in turn, with an
 * agent target sampled and a process without the agent: meanwhile the
 * status says what is degraded and /healthz is 503 (the daemon's test
 * hook holds each restart 500 ms, so that the time in between can be
 * seen), reads go on, and within 2 s all is well again, the target still
 * registered and its history still there. Both cores killed at once
 * leave nothing to restart them: /healthz says so, for good.
 */
#define _GNU_SOURCE

#include "sectest.h"
#include "tap.h"

/* The capabilities a process must never hold (bits of CapEff). */
#define CAP_BIT(n) (1ull << (n))
#define NEVER_CAPS                                                  \
	(CAP_BIT(0) /* CHOWN */ | CAP_BIT(1) /* DAC_OVERRIDE */ |   \
	 CAP_BIT(3) /* FOWNER */ | CAP_BIT(12) /* NET_ADMIN */ |    \
	 CAP_BIT(13) /* NET_RAW */ | CAP_BIT(16) /* SYS_MODULE */ | \
	 CAP_BIT(17) /* SYS_RAWIO */ | CAP_BIT(22) /* SYS_BOOT */ | \
	 CAP_BIT(24) /* SYS_RESOURCE */ | CAP_BIT(27) /* MKNOD */ | \
	 CAP_BIT(31) /* SETFCAP */)
/* And those only the core may hold. */
#define CORE_ONLY                                                 \
	(CAP_BIT(6) /* SETGID */ | CAP_BIT(7) /* SETUID */ |      \
	 CAP_BIT(23) /* SYS_NICE */ | CAP_BIT(38) /* PERFMON */ | \
	 CAP_BIT(39) /* BPF */)

/* CapEff, NoNewPrivs, Seccomp and euid of pid from its status file. */
static bool held(pid_t pid, unsigned long long *caps, int *nnp, int *sec,
		 unsigned *euid)
{
	char path[48], line[256];
	FILE *f;
	int got = 0;
	unsigned ruid;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	f = fopen(path, "r");
	while (f && fgets(line, sizeof(line), f)) {
		got += sscanf(line, "CapEff: %llx", caps) == 1;
		got += sscanf(line, "NoNewPrivs: %d", nnp) == 1;
		got += sscanf(line, "Seccomp: %d", sec) == 1;
		got += sscanf(line, "Uid: %u %u", &ruid, euid) == 2;
	}
	if (f)
		fclose(f);
	return got == 4;
}

static void check_process(cJSON *p, bool sanitized)
{
	cJSON *role = cJSON_GetObjectItem(p, "role");
	cJSON *pid = cJSON_GetObjectItem(p, "pid");
	cJSON *missing = cJSON_GetObjectItem(p, "missing");
	const char *r = cJSON_IsString(role) ? role->valuestring : "?";
	unsigned long long caps = 0;
	int nnp = -1, sec = -1;
	unsigned euid = 0;
	bool core = strcmp(r, "core") == 0;

	TAP_OK(cJSON_IsNumber(pid) &&
		       held((pid_t)pid->valuedouble, &caps, &nnp, &sec, &euid),
	       "%s: its status file is read", r);
	TAP_OK((caps & NEVER_CAPS) == 0 && (core || !(caps & CORE_ONLY)) &&
		       (core || caps == 0),
	       "%s: holds no capability it has no use for (CapEff %llx)", r,
	       caps);
	if (!core)
		TAP_OK(euid != 0 &&
			       cJSON_IsNumber(cJSON_GetObjectItem(p, "uid")) &&
			       cJSON_GetObjectItem(p, "uid")->valuedouble ==
				       (double)euid,
		       "%s: runs as an unprivileged user (uid %u), and says so",
		       r, euid);
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
	if (cJSON_GetArraySize(missing) > 0) {
		char *txt = cJSON_PrintUnformatted(missing);

		printf("# %s: missing %s\n", r, txt ? txt : "?");
		free(txt);
	}
	TAP_OK(cJSON_IsArray(missing) && cJSON_GetArraySize(missing) == 0,
	       "%s: nothing is missing", r);
}

/* The pids of the processes of role in a status document, at most max. */
static int pids_of(cJSON *st, const char *role, pid_t *out, int max)
{
	cJSON *p;
	int n = 0;

	cJSON_ArrayForEach(p, cJSON_GetObjectItem(st, "processes"))
	{
		cJSON *r = cJSON_GetObjectItem(p, "role");
		cJSON *pid = cJSON_GetObjectItem(p, "pid");

		if (n < max && cJSON_IsString(r) &&
		    strcmp(r->valuestring, role) == 0 && cJSON_IsNumber(pid))
			out[n++] = (pid_t)pid->valuedouble;
	}
	return n;
}

static int ndegraded(cJSON *st)
{
	return cJSON_GetArraySize(cJSON_GetObjectItem(st, "degraded"));
}

/* The history samples of target pid (its /api/v1/targets entry), -1. */
static int samples_of(const struct itest_daemon *d, pid_t pid)
{
	int status = 0, n = -1;
	cJSON *j = itest_get_json(d, "/api/v1/targets", &status), *t;

	cJSON_ArrayForEach(t, cJSON_GetObjectItem(j, "targets"))
	{
		cJSON *p = cJSON_GetObjectItem(t, "pid");
		cJSON *s = cJSON_GetObjectItem(t, "history_samples");

		if (cJSON_IsNumber(p) && (pid_t)p->valuedouble == pid &&
		    cJSON_IsNumber(s))
			n = (int)s->valuedouble;
	}
	cJSON_Delete(j);
	return n;
}

static int get_status(const struct itest_daemon *d, const char *path)
{
	struct http_response r;
	int st;

	memset(&r, 0, sizeof(r));
	st = itest_get(d, path, &r) == 0 ? r.status : 0;
	http_response_release(&r);
	return st;
}

/*
 * Kills each core in turn while an agent target (agent) is sampled and a
 * process without the agent (plain) is read.
 */
static void check_restarts(const struct itest_daemon *d, pid_t agent,
			   pid_t plain)
{
	char path[96];
	pid_t cores[4], now[4];
	int status = 0, ncores, before = samples_of(d, agent);
	cJSON *st = itest_get_json(d, "/api/v1/status", &status);

	ncores = pids_of(st, "core", cores, 4);
	cJSON_Delete(st);
	TAP_OK(ncores == 2, "two cores run, each the other's keeper (%d)",
	       ncores);
	snprintf(path, sizeof(path), "/api/v1/stacks?pid=%d&format=text",
		 (int)plain);
	for (int i = 0; i < ncores; i++) {
		bool degraded, back = false;
		int reads, health;
		long t0;

		kill(cores[i], SIGKILL);
		t0 = itest_now_ms();
		/* Gone from the daemon's view: its peer replaces it. */
		for (int k = 0; k < 100; k++) {
			st = itest_get_json(d, "/api/v1/status", &status);
			degraded = ndegraded(st) > 0;
			cJSON_Delete(st);
			if (degraded)
				break;
			itest_sleep_ms(5);
		}
		health = get_status(d, "/healthz");
		reads = get_status(d, path);
		TAP_OK(degraded && health == 503,
		       "core %d killed: the status says what is degraded, "
		       "/healthz %d",
		       (int)cores[i], health);
		TAP_OK(reads == 200,
		       "meanwhile a process without the agent is read (%d)",
		       reads);
		while (!back && itest_now_ms() - t0 < 2000) {
			st = itest_get_json(d, "/api/v1/status", &status);
			back = ndegraded(st) == 0 &&
			       pids_of(st, "core", now, 4) == 2 &&
			       now[0] != cores[i] && now[1] != cores[i];
			cJSON_Delete(st);
			if (!back)
				itest_sleep_ms(20);
		}
		TAP_OK(back && get_status(d, "/healthz") == 200,
		       "within 2 s a new core runs and all is well (%ld ms)",
		       itest_now_ms() - t0);
	}
	TAP_OK(itest_registered(d, agent) && samples_of(d, agent) >= before &&
		       before > 0,
	       "the agent target is still registered, its history kept (%d "
	       "samples, then %d)",
	       before, samples_of(d, agent));
	TAP_OK(get_status(d, path) == 200, "reads work as before");

	/* Both at once: nothing is left to start them again. */
	st = itest_get_json(d, "/api/v1/status", &status);
	ncores = pids_of(st, "core", cores, 4);
	cJSON_Delete(st);
	for (int i = 0; i < ncores; i++)
		kill(cores[i], SIGKILL);
	itest_sleep_ms(1000);
	TAP_OK(get_status(d, "/healthz") == 503 && get_status(d, path) == 503,
	       "both cores killed at once: /healthz 503, and a process "
	       "without the agent is 503 (restart stackwatchd)");
}

int main(void)
{
	static const char *const args[] = { "--sample-interval", "0", NULL };
	static const char *const sampled[] = { "--sample-interval", "100",
					       NULL };
	char fixture[256], sigwait[] = "sigwait";
	char *argv[] = { fixture, sigwait, NULL };
	struct itest_daemon d;
	pid_t agent, plain;
	int out = -1;
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

	setenv("STACKWATCH_TEST_RESPAWN_MS", "500", 1);
	if (itest_daemon_start_args(&d, sampled) < 0) {
		TAP_OK(0, "a sampling daemon starts");
		return tap_done();
	}
	unsetenv("STACKWATCH_TEST_RESPAWN_MS");
	snprintf(fixture, sizeof(fixture), "%s/fixtures/agent_target",
		 itest_target_build());
	agent = itest_spawn(&d, argv, &out);
	plain = sec_sleeper(SEC_NOBODY, SEC_NOBODY);
	TAP_OK(agent > 0 && itest_wait_line(out, "ready") &&
		       itest_wait_registered(&d, agent, 10000) && plain > 0 &&
		       sec_wait_comm(plain, "sleep"),
	       "an agent target and a process without the agent run");
	itest_sleep_ms(600); /* a few samples */
	check_restarts(&d, agent, plain);
	if (out >= 0)
		close(out);
	itest_kill(agent);
	itest_kill(plain);
	TAP_OK(itest_daemon_stop(&d) == 0, "that daemon stops cleanly too");
	itest_daemon_cleanup(&d);
	return tap_done();
}
