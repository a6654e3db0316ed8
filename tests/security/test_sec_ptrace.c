/*
 * test_sec_ptrace.c - the power to ptrace, kept where it belongs.
 *
 * The daemon runs as root with its snapshot helper; processes without the
 * agent run as root and as nobody. Then:
 * - nobody asking for root's process gets 404, and not one ptrace or
 *   process_vm_readv call is made anywhere in the daemon or its helper
 *   (strace -f of both); root asking for the same process is the control:
 *   then the helper's child seizes it;
 * - nobody dumps its own process (method ptrace) but not its undumpable
 *   one, and /api/v1/processes lists its own only;
 * - the daemon itself runs under a seccomp filter (ptrace denied to it),
 *   its helper under one of its own (ptrace allowed, writing denied);
 *   and the CLI's --local as nobody names the
 *   kernel's rule when it may not trace root's process.
 */
#define _GNU_SOURCE
#include <sys/stat.h>

#include "sectest.h"
#include "tap.h"

static char fixture[512];

struct plain {
	pid_t pid;
	int out, in;
};

static int plain_start_as(struct plain *p, uid_t uid, const char *mode)
{
	int o[2], i[2];

	if (pipe(o) < 0 || pipe(i) < 0)
		return -1;
	p->pid = fork();
	if (p->pid == 0) {
		dup2(o[1], 1);
		dup2(i[0], 0);
		close(o[0]);
		close(i[1]);
		if (uid != 0 && sec_become(uid, uid, NULL, 0) < 0)
			_exit(126);
		execl(fixture, fixture, mode, (char *)NULL);
		_exit(127);
	}
	close(o[1]);
	close(i[0]);
	p->out = o[0];
	p->in = i[1];
	return itest_wait_line(p->out, "ready") ? 0 : -1;
}

static void plain_stop(struct plain *p)
{
	close(p->in);
	close(p->out);
	itest_kill(p->pid);
}

/* "Seccomp:" of a process's status: 0 none, 2 a filter. */
static int seccomp_mode(pid_t pid)
{
	char path[64], line[256];
	FILE *f;
	int mode = -1;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	f = fopen(path, "re");
	while (f && fgets(line, sizeof(line), f))
		if (strncmp(line, "Seccomp:", 8) == 0)
			mode = atoi(line + 8);
	if (f)
		fclose(f);
	return mode;
}

/*
 * Runs strace -f on the daemon and on its helper while ask() runs, and
 * counts the ptrace and process_vm_readv calls it saw. -1 when strace
 * could not run.
 */
static int count_traced(const struct itest_daemon *d, pid_t helper,
			const char *target, uid_t as, int *status,
			bool *seize_seen)
{
	char log[256], spid[16], hpid[16], h2pid[16], line[1024], path[96];
	struct sec_answer a;
	pid_t tracer, other = 0;
	FILE *f;
	int calls = 0;

	/* Both snapshot helpers (the daemon's children; the second is
	 * the first's keeper, and requests go to either). */
	snprintf(path, sizeof(path), "/proc/%d/task/%d/children", (int)d->pid,
		 (int)d->pid);
	f = fopen(path, "re");
	while (f && fscanf(f, "%d", &tracer) == 1)
		if (tracer != helper && !other)
			other = tracer;
	if (f)
		fclose(f);
	snprintf(log, sizeof(log), "%s/strace.log", d->dir);
	unlink(log);
	snprintf(spid, sizeof(spid), "%d", (int)d->pid);
	snprintf(hpid, sizeof(hpid), "%d", (int)helper);
	snprintf(h2pid, sizeof(h2pid), "%d", (int)(other ? other : helper));
	tracer = fork();
	if (tracer == 0) {
		int null = open("/dev/null", O_WRONLY);

		dup2(null, 2);
		execlp("strace", "strace", "-f", "-qq", "-o", log, "-e",
		       "trace=ptrace,process_vm_readv,process_vm_writev,bpf,"
		       "perf_event_open",
		       "-p", spid, "-p", hpid, "-p", h2pid, (char *)NULL);
		_exit(127);
	}
	itest_sleep_ms(700); /* strace attaches to every thread */
	sec_get_as(as, as, NULL, 0, d->url, NULL, NULL, target, &a);
	*status = a.status;
	itest_sleep_ms(300);
	kill(tracer, SIGINT);
	waitpid(tracer, NULL, 0);
	f = fopen(log, "re");
	if (!f)
		return -1;
	*seize_seen = false;
	while (fgets(line, sizeof(line), f)) {
		if (strstr(line, "ptrace(") || strstr(line, "process_vm_") ||
		    strstr(line, "bpf(") || strstr(line, "perf_event_open(")) {
			/* The first few, to tell what a failure saw. */
			if (calls < 4)
				tap_note("%.200s", strtok(line, "\n"));
			calls++;
		}
		/* The read itself: a stop, or the kernel read's iterator. */
		if (strstr(line, "PTRACE_SEIZE") ||
		    strstr(line, "BPF_ITER_CREATE"))
			*seize_seen = true;
	}
	fclose(f);
	unlink(log);
	return calls;
}

int main(void)
{
	static const char *const args[] = { "--sample-interval", "0", NULL };
	struct itest_daemon d;
	struct plain roots = { 0 }, mine = { 0 }, secret = { 0 };
	struct sec_answer a;
	char target[128], cmd[1024], out[4096];
	pid_t helper;
	int status, calls;
	bool seize = false;

	if (geteuid() != 0) {
		TAP_SKIP("needs root: the daemon runs as root, requesters as "
			 "nobody");
		return tap_done();
	}
	snprintf(fixture, sizeof(fixture), "%s/fixtures/plain_target",
		 itest_target_build());
	if (itest_daemon_start_args(&d, args) < 0) {
		TAP_OK(0, "the daemon starts");
		return tap_done();
	}
	chmod(d.dir, 0711);
	if (plain_start_as(&roots, 0, "2") < 0 ||
	    plain_start_as(&mine, SEC_NOBODY, "2") < 0) {
		TAP_OK(0, "the plain fixtures start");
		goto out;
	}
	helper = itest_first_child(d.pid);
	TAP_OK(helper > 0, "the daemon has its snapshot helper (pid %d)",
	       (int)helper);
	/*
	 * The helper loads its kernel reader as it starts: bpf() calls of
	 * its own, which a busy machine drew out into the window counted
	 * below. Its first answer (the methods of /api/v1/status) comes
	 * once that is done.
	 */
	{
		cJSON *st = itest_get_json(&d, "/api/v1/status", &status);

		TAP_OK(st && status == 200,
		       "the helper has started: it answered the daemon's "
		       "status (%d)",
		       status);
		cJSON_Delete(st);
	}

	/* nobody may not see root's process: nothing is traced at all. */
	snprintf(target, sizeof(target), "/api/v1/stacks?pid=%d",
		 (int)roots.pid);
	if (system("command -v strace >/dev/null 2>&1") != 0) {
		TAP_SKIP("strace is not installed");
	} else {
		calls = count_traced(&d, helper, target, SEC_NOBODY, &status,
				     &seize);
		TAP_OK(status == 404,
		       "nobody asking for root's process: 404 "
		       "(%d)",
		       status);
		TAP_OK(calls == 0,
		       "and no ptrace, process_vm_readv, bpf or "
		       "perf_event_open call anywhere in the daemon or its "
		       "helper (%d)",
		       calls);
		calls = count_traced(&d, helper, target, 0, &status, &seize);
		TAP_OK(status == 200 && calls > 0 && seize,
		       "the control: root's request for it is read by the "
		       "helper's child (%d, %d calls, PTRACE_SEIZE or "
		       "BPF_ITER_CREATE %s)",
		       status, calls, seize ? "seen" : "not seen");
	}

	/* nobody's own processes: dumpable yes, undumpable no. */
	snprintf(target, sizeof(target), "/api/v1/stacks?pid=%d",
		 (int)mine.pid);
	sec_get_as(SEC_NOBODY, SEC_NOBODY, NULL, 0, d.url, NULL, NULL, target,
		   &a);
	TAP_OK(a.status == 200 && strstr(a.body, "\"method\":\"ptrace\"") &&
		       strstr(a.body, "plain_park"),
	       "nobody dumps its own process by ptrace (%d)", a.status);
	sec_get_as(SEC_NOBODY, SEC_NOBODY, NULL, 0, d.url, NULL, NULL,
		   "/api/v1/processes", &a);
	{
		char own[32], other[32];

		snprintf(own, sizeof(own), "\"pid\":%d,", (int)mine.pid);
		snprintf(other, sizeof(other), "\"pid\":%d,", (int)roots.pid);
		TAP_OK(a.status == 200 && strstr(a.body, own) &&
			       !strstr(a.body, other) &&
			       !strstr(a.body, "\"user\":\"root\""),
		       "/api/v1/processes lists nobody's own only");
	}
	if (plain_start_as(&secret, SEC_NOBODY, "undumpable") == 0) {
		snprintf(target, sizeof(target), "/api/v1/stacks?pid=%d",
			 (int)secret.pid);
		sec_get_as(SEC_NOBODY, SEC_NOBODY, NULL, 0, d.url, NULL, NULL,
			   target, &a);
		TAP_OK(a.status == 404,
		       "nobody's undumpable process: 404 for nobody (%d)",
		       a.status);
		plain_stop(&secret);
	} else {
		TAP_OK(0, "the undumpable fixture starts");
	}

	/* Only the helper may ptrace. */
	if (SEC_SANITIZED)
		TAP_SKIP("the sanitizer's leak check ptraces at exit: no "
			 "seccomp filter in this build");
	else
		TAP_OK(seccomp_mode(d.pid) == 2 && seccomp_mode(helper) == 2,
		       "the daemon runs under a seccomp filter (%d), its "
		       "helper under one of its own that lets it ptrace, as "
		       "root's dump above shows (%d)",
		       seccomp_mode(d.pid), seccomp_mode(helper));

	/* The CLI's own snapshot, as nobody, of root's process. */
	snprintf(cmd, sizeof(cmd),
		 "setpriv --reuid=%d --regid=%d --clear-groups "
		 "%s/stackwatch dump --local %d 2>&1",
		 SEC_NOBODY, SEC_NOBODY, itest_target_build(), (int)roots.pid);
	{
		FILE *f = popen(cmd, "r");
		size_t n = f ? fread(out, 1, sizeof(out) - 1, f) : 0;
		int st = f ? pclose(f) : -1;

		out[n] = '\0';
		TAP_OK(WIFEXITED(st) && WEXITSTATUS(st) == 5 &&
			       strstr(out, "needs CAP_SYS_PTRACE"),
		       "--local as nobody of root's process: not permitted, "
		       "exit 5, the kernel's rule named (%s)",
		       out);
	}
out:
	if (roots.pid > 0)
		plain_stop(&roots);
	if (mine.pid > 0)
		plain_stop(&mine);
	itest_daemon_stop(&d);
	itest_daemon_cleanup(&d);
	return tap_done();
}
