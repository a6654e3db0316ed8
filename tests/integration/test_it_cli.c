/*
 * test_it_cli.c - the CLI against the real daemon: `stackwatch run`
 * registers a program (same pid), `targets` lists it, `dump` prints its
 * stacks in every format, an unknown pid is exit 1, no daemon is exit 3.
 */
#include "itest.h"
#include "tap.h"

/* Runs a shell command, captures up to size bytes of its stdout. */
static int capture(const char *cmd, char *out, size_t size)
{
	FILE *p = popen(cmd, "r");
	size_t n = 0;
	int st;

	out[0] = '\0';
	if (!p)
		return -1;
	while (n < size - 1) {
		size_t r = fread(out + n, 1, size - 1 - n, p);

		if (r == 0)
			break;
		n += r;
	}
	out[n] = '\0';
	st = pclose(p);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

int main(void)
{
	static char out[1 << 16];
	struct itest_daemon d;
	char cli[256], fix[256], cmd[1024], line[64];
	int fd, rc;
	pid_t pid, shown = 0;

	snprintf(cli, sizeof(cli), "%s/stackwatch", itest_build());
	snprintf(fix, sizeof(fix), "%s/fixtures/agent_target", itest_build());
	if (itest_daemon_start(&d) < 0) {
		TAP_OK(0, "the daemon starts");
		return tap_done();
	}
	/* stackwatch run: the shell's pid is the program's pid. */
	{
		int p[2];

		if (pipe(p) < 0)
			return 1;
		pid = fork();
		if (pid == 0) {
			dup2(p[1], 1);
			close(p[0]);
			close(p[1]);
			unsetenv("LD_PRELOAD");
			execl(cli, cli, "run", "--socket", d.sock, "--", fix,
			      "sigwait", (char *)NULL);
			_exit(127);
		}
		close(p[1]);
		fd = p[0];
	}
	TAP_OK(itest_read_line(fd, line, sizeof(line)) &&
		       strcmp(line, "ready") == 0,
	       "stackwatch run started the program");
	TAP_OK(itest_wait_registered(&d, pid, 10000),
	       "it registered under the same pid (%d)", (int)pid);
	snprintf(cmd, sizeof(cmd), "%s --url %s targets", cli, d.url);
	rc = capture(cmd, out, sizeof(out));
	{
		char want[32];

		snprintf(want, sizeof(want), "%d ", (int)pid);
		TAP_OK(rc == 0 && strstr(out, want) &&
			       strstr(out, "agent_target sigwait"),
		       "stackwatch targets lists it (exit %d)", rc);
	}
	snprintf(cmd, sizeof(cmd), "%s --url %s dump %d", cli, d.url, (int)pid);
	rc = capture(cmd, out, sizeof(out));
	sscanf(out, "Process %d", &shown);
	TAP_OK(rc == 0 && shown == pid && strstr(out, "4 threads: worker") &&
		       strstr(out, "in worker () at agent_target.c:"),
	       "stackwatch dump prints its stacks as text");
	snprintf(cmd, sizeof(cmd), "%s --url %s dump --format json %d", cli,
		 d.url, (int)pid);
	rc = capture(cmd, out, sizeof(out));
	{
		cJSON *j = cJSON_Parse(out);

		TAP_OK(rc == 0 && j &&
			       cJSON_GetObjectItem(j, "threads_ok")
					       ->valuedouble == 6,
		       "stackwatch dump --format json: 6 threads ok");
		cJSON_Delete(j);
	}
	snprintf(cmd, sizeof(cmd), "%s --url %s dump --format folded %d", cli,
		 d.url, (int)pid);
	rc = capture(cmd, out, sizeof(out));
	TAP_OK(rc == 0 && strstr(out, ";worker;pthread_cond_wait") &&
		       strstr(out, " 4\n"),
	       "stackwatch dump --format folded");
	snprintf(cmd, sizeof(cmd), "%s --url %s dump 1 2>/dev/null", cli,
		 d.url);
	TAP_OK(capture(cmd, out, sizeof(out)) == 1,
	       "dump of a pid that is not a target exits 1");
	itest_kill(pid);
	close(fd);
	itest_daemon_stop(&d);
	snprintf(cmd, sizeof(cmd), "%s --url %s targets 2>/dev/null", cli,
		 d.url);
	TAP_OK(capture(cmd, out, sizeof(out)) == 3,
	       "with the daemon gone the CLI exits 3");
	itest_daemon_cleanup(&d);
	return tap_done();
}
