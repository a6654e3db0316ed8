/*
 * test_sec_ptraced.c - one user cannot fill the daemon's table of
 * processes without the agent, and so shut root out of it.
 *
 * With --sample-ptrace, a process opened once (a ?pid= of a process
 * without the agent) stays in the table and is sampled while it lives.
 * nobody opens NPROC of its own sleeping processes, more than the table
 * holds (1024). Expected: nobody keeps at most --max-ptraced-per-user
 * of them (16 by default; its least recently asked go first), every one
 * of its requests is still answered, and root's own process is answered
 * afterwards (it was 404, "not a process you may see", once the table
 * was full).
 */
#define _GNU_SOURCE
#include "sectest.h"
#include "tap.h"

#define NPROC 1040
#define QUOTA 16

static pid_t pids[NPROC];

/* NPROC `sleep`s as nobody, in one process group (the first's). */
static int start_sleepers(pid_t *group)
{
	*group = 0;
	for (int i = 0; i < NPROC; i++) {
		pids[i] = fork();
		if (pids[i] == 0) {
			setpgid(0, *group);
			if (sec_become(SEC_NOBODY, SEC_NOBODY, NULL, 0) < 0)
				_exit(126);
			execlp("sleep", "sleep", "600", (char *)NULL);
			_exit(127);
		}
		if (pids[i] < 0)
			return -1;
		setpgid(pids[i], *group ? *group : pids[i]);
		if (!*group)
			*group = pids[i];
	}
	return 0;
}

/* Waits until every sleeper runs `sleep` (its exec done). */
static bool all_exec(void)
{
	for (int i = 0; i < NPROC; i++)
		if (!sec_wait_comm(pids[i], "sleep"))
			return false;
	return true;
}

/*
 * nobody asks for each sleeper in turn over the unix socket, in a child
 * of its own; the number answered 200.
 */
static int open_all_as_nobody(const struct itest_daemon *d)
{
	int p[2], ok = -1;
	pid_t c;

	if (pipe(p) < 0)
		return -1;
	c = fork();
	if (c == 0) {
		int n = 0;

		close(p[0]);
		if (sec_become(SEC_NOBODY, SEC_NOBODY, NULL, 0) < 0)
			_exit(126);
		for (int i = 0; i < NPROC; i++) {
			struct http_opts o;
			struct http_response r;
			char path[96];

			http_opts_init(&o);
			o.unix_socket = d->http_sock;
			memset(&r, 0, sizeof(r));
			snprintf(path, sizeof(path),
				 "/api/v1/stacks?pid=%d&format=folded",
				 (int)pids[i]);
			if (http_get("http://localhost", path, &o, &r) == 0 &&
			    r.status == 200)
				n++;
			http_response_release(&r);
		}
		(void)!write(p[1], &n, sizeof(n));
		_exit(0);
	}
	close(p[1]);
	if (read(p[0], &ok, sizeof(ok)) != sizeof(ok))
		ok = -1;
	close(p[0]);
	waitpid(c, NULL, 0);
	return ok;
}

int main(void)
{
	static const char *const args[] = {
		"--sample-interval", "0",	"--sample-ptrace",
		"--ptrace-interval", "3600000", NULL
	};
	struct itest_daemon d;
	pid_t group = 0, root_sleeper;
	char path[96];
	double kept;
	int answered, st;

	if (geteuid() != 0) {
		TAP_SKIP("needs root: the daemon runs as root, the requester "
			 "as nobody");
		return tap_done();
	}
	if (itest_daemon_start_args(&d, args) < 0) {
		TAP_OK(0, "the daemon starts");
		return tap_done();
	}
	chmod(d.dir, 0711);
	root_sleeper = sec_sleeper(0, 0);
	if (start_sleepers(&group) < 0 || !all_exec()) {
		TAP_OK(0, "%d sleeping processes of nobody run", NPROC);
		goto out;
	}
	TAP_OK(1, "%d sleeping processes of nobody run", NPROC);
	answered = open_all_as_nobody(&d);
	TAP_OK(answered == NPROC,
	       "nobody's %d requests for them are all answered (%d)", NPROC,
	       answered);
	kept = itest_metric(&d, "stackwatch_ptraced_processes");
	TAP_OK(kept >= 1 && kept <= QUOTA,
	       "the daemon keeps at most %d of them (%g)", QUOTA, kept);
	snprintf(path, sizeof(path), "/api/v1/stacks?pid=%d",
		 (int)root_sleeper);
	st = sec_root_get(&d, path, 5000, NULL);
	TAP_OK(st == 200, "root's own process is answered afterwards (%d)", st);
	snprintf(path, sizeof(path), "/api/v1/stacks?pid=%d", (int)pids[0]);
	st = sec_root_get(&d, path, 5000, NULL);
	TAP_OK(st == 200,
	       "and so is nobody's first one, forgotten since, for root (%d)",
	       st);
out:
	if (group > 0)
		kill(-group, SIGKILL);
	for (int i = 0; i < NPROC; i++)
		if (pids[i] > 0)
			waitpid(pids[i], NULL, 0);
	itest_kill(root_sleeper);
	TAP_OK(group <= 0 || kill(-group, 0) < 0,
	       "no sleeper of the test is left");
	TAP_OK(itest_daemon_stop(&d) == 0, "the daemon stops cleanly");
	itest_daemon_cleanup(&d);
	return tap_done();
}
