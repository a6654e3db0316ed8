/*
 * test_it_isolate.c - programs that would notice the agent's thread, run
 * under the agent with the real daemon: a fork child that unshares a
 * user namespace or enters a mount namespace, privilege dropping with
 * kept capabilities (tests/fixtures/sandbox.c and setpriv), a
 * double-fork daemon and nginx in its default daemon mode, whose
 * processes that exit must leave the targets at once. Runs as root.
 */
#include <dirent.h>
#include <sys/stat.h>

#include "itest.h"
#include "tap.h"

static char sandbox[256];

/* Runs argv under the agent; its exit status, its first line in line. */
static int run(const struct itest_daemon *d, char *const argv[], char *line,
	       size_t size)
{
	int out, st = -1;
	pid_t pid = itest_spawn(d, argv, &out);

	line[0] = '\0';
	if (pid < 0)
		return -1;
	itest_read_line(out, line, size);
	waitpid(pid, &st, 0);
	close(out);
	return st;
}

static void test_namespaces(const struct itest_daemon *d)
{
	char *argv[] = { sandbox, (char *)"unshare", NULL };
	char line[256];
	int st = run(d, argv, line, sizeof(line));

	TAP_OK(WIFEXITED(st) && WEXITSTATUS(st) == 0 &&
		       strcmp(line, "child ok") == 0,
	       "a fork child unshares a user namespace and enters a mount "
	       "namespace (%s)",
	       line);
}

/* Whether the dump of pid answers 200 with every thread ok. */
static bool dumps_whole(const struct itest_daemon *d, pid_t pid)
{
	char path[96];
	int status;
	cJSON *j;
	bool whole;

	snprintf(path, sizeof(path), "/api/v1/stacks?pid=%d", (int)pid);
	j = itest_get_json(d, path, &status);
	whole = status == 200 && j &&
		cJSON_GetObjectItem(j, "threads_ok")->valuedouble ==
			cJSON_GetObjectItem(j, "threads_total")->valuedouble;
	cJSON_Delete(j);
	return whole;
}

static void test_privileges(const struct itest_daemon *d)
{
	char *setpriv[] = {
		(char *)"/usr/bin/setpriv", (char *)"--reuid=65534",
		(char *)"--regid=65534",    (char *)"--clear-groups",
		(char *)"/bin/true",	    NULL
	};
	char *drop[] = { sandbox, (char *)"dropcaps", (char *)"wait", NULL };
	char line[256];
	int out, in, st;
	pid_t pid;

	st = run(d, setpriv, line, sizeof(line));
	TAP_OK(WIFEXITED(st) && WEXITSTATUS(st) == 0,
	       "setpriv --reuid --regid --clear-groups runs its command (%s "
	       "%d)",
	       WIFSIGNALED(st) ? "signal" : "exit",
	       WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));

	pid = itest_spawn_io(d, drop, &out, &in);
	TAP_OK(itest_read_line(out, line, sizeof(line)) &&
		       strcmp(line, "dropped") == 0,
	       "keepcaps, setresuid, capset, setresgid: all succeed (%s)",
	       line);
	/* Registered again as nobody, every thread dumped. */
	TAP_OK(itest_wait_registered(d, pid, 10000) && dumps_whole(d, pid),
	       "then it is registered again and every thread is dumped");
	close(in);
	waitpid(pid, &st, 0);
	TAP_OK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "and it exits 0");
	close(out);
}

/* Waits until pid is no longer in the targets; ms it took, or -1. */
static long wait_unlisted(const struct itest_daemon *d, pid_t pid, long ms)
{
	long start = itest_now_ms();

	while (itest_now_ms() - start < ms) {
		if (!itest_registered(d, pid))
			return itest_now_ms() - start;
		itest_sleep_ms(10);
	}
	return -1;
}

/* The pid in a line "WHAT PID" read from fd, or 0. */
static pid_t read_pid(int fd, const char *what)
{
	char line[128];
	long v = 0;
	size_t n = strlen(what);

	if (!itest_read_line(fd, line, sizeof(line)) ||
	    strncmp(line, what, n) != 0 || line[n] != ' ')
		return 0;
	v = strtol(line + n + 1, NULL, 10);
	return (pid_t)v;
}

static void test_daemonize(const struct itest_daemon *d)
{
	char *argv[] = { sandbox, (char *)"daemonize", NULL };
	pid_t parent, middle, daemon;
	long gone_parent = -1, gone_middle;
	int out, st;

	parent = itest_spawn(d, argv, &out);
	TAP_OK(read_pid(out, "parent") == parent &&
		       (middle = read_pid(out, "middle")) > 0 &&
		       (daemon = read_pid(out, "daemon")) > 0,
	       "a double-fork daemon says its three pids");
	if (!middle || !daemon)
		return;
	gone_middle = wait_unlisted(d, middle, 3000);
	waitpid(parent, &st, 0);
	gone_parent = wait_unlisted(d, parent, 3000);
	TAP_OK(gone_middle >= 0 && gone_parent >= 0,
	       "the parent and the middle child leave the targets once they "
	       "exit (after %ld and %ld ms)",
	       gone_parent, gone_middle);
	TAP_OK(itest_wait_registered(d, daemon, 10000) &&
		       dumps_whole(d, daemon),
	       "the daemon itself stays registered and is dumped whole");
	kill(daemon, SIGKILL);
	TAP_OK(wait_unlisted(d, daemon, 3000) >= 0,
	       "and leaves the targets when killed");
	close(out);
}

/* The children of pid (its main thread's), at most max. */
static size_t children(pid_t pid, pid_t *out, size_t max)
{
	char path[64];
	size_t n = 0;
	long v;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/task/%d/children", (int)pid,
		 (int)pid);
	f = fopen(path, "r");
	if (!f)
		return 0;
	while (n < max && fscanf(f, "%ld", &v) == 1)
		out[n++] = (pid_t)v;
	fclose(f);
	return n;
}

static bool write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	bool ok;

	if (!f)
		return false;
	ok = fputs(text, f) >= 0;
	return fclose(f) == 0 && ok;
}

/* True when a pid names no live process (gone, or a zombie not ours). */
static bool gone_pid(pid_t pid)
{
	char path[64], state = 0;
	FILE *f;

	if (kill(pid, 0) < 0 && errno == ESRCH)
		return true;
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	f = fopen(path, "r");
	if (!f)
		return true;
	if (fscanf(f, "%*d (%*[^)]) %c", &state) != 1)
		state = 0;
	fclose(f);
	return state == 'Z' || state == 'X';
}

/*
 * nginx daemonizes into a session of its own, out of reach of a kill of
 * our process group: its master and workers are ended one by one, given
 * 5 s to leave after the master's SIGTERM, then killed. True when none
 * was left alive to kill.
 */
static bool reap_all(pid_t master, const pid_t *workers, size_t nw)
{
	bool clean = true;
	long end = itest_now_ms() + 5000;

	for (;;) {
		bool left = master > 0 && !gone_pid(master);

		for (size_t i = 0; i < nw; i++)
			left = left || !gone_pid(workers[i]);
		if (!left)
			return clean;
		if (itest_now_ms() >= end) {
			if (!clean)
				return false;
			clean = false;
			if (master > 0)
				kill(master, SIGKILL);
			for (size_t i = 0; i < nw; i++)
				kill(workers[i], SIGKILL);
			end = itest_now_ms() + 5000;
		}
		itest_sleep_ms(20);
	}
}

/* nginx as packaged: daemon mode, a master and four workers as nobody. */
static void test_nginx(const struct itest_daemon *d)
{
	char conf[512], text[4096], pidfile[512], prefix[256];
	char *argv[8];
	pid_t launcher, master = 0, workers[16];
	size_t nw = 0;
	int st = -1, ok = 0;
	long gone;
	FILE *f;

	if (access("/usr/sbin/nginx", X_OK) != 0) {
		TAP_OK(1, "# SKIP nginx is not installed");
		return;
	}
	snprintf(prefix, sizeof(prefix), "%s/nginx", d->dir);
	mkdir(prefix, 0755);
	snprintf(conf, sizeof(conf), "%s/nginx.conf", prefix);
	snprintf(pidfile, sizeof(pidfile), "%s/nginx.pid", prefix);
	snprintf(text, sizeof(text),
		 "worker_processes 4;\n"
		 "pid %s;\n"
		 "error_log %s/error.log;\n"
		 "events { worker_connections 64; }\n"
		 "http { access_log off;\n"
		 "  client_body_temp_path %s; proxy_temp_path %s;\n"
		 "  fastcgi_temp_path %s; uwsgi_temp_path %s;\n"
		 "  scgi_temp_path %s;\n"
		 "  server { listen unix:%s/http.sock; return 204; } }\n",
		 pidfile, prefix, prefix, prefix, prefix, prefix, prefix,
		 prefix);
	if (!write_file(conf, text)) {
		TAP_OK(0, "nginx's configuration is written");
		return;
	}
	argv[0] = (char *)"/usr/sbin/nginx";
	argv[1] = (char *)"-c";
	argv[2] = conf;
	argv[3] = (char *)"-p";
	argv[4] = prefix;
	argv[5] = NULL;
	launcher = itest_spawn(d, argv, NULL);
	waitpid(launcher, &st, 0);
	TAP_OK(WIFEXITED(st) && WEXITSTATUS(st) == 0,
	       "nginx in daemon mode starts under the agent (exit %d)",
	       WIFEXITED(st) ? WEXITSTATUS(st) : -1);
	for (long end = itest_now_ms() + 5000; itest_now_ms() < end && !master;
	     itest_sleep_ms(20)) {
		f = fopen(pidfile, "r");
		if (f) {
			long v = 0;

			if (fscanf(f, "%ld", &v) == 1)
				master = (pid_t)v;
			fclose(f);
		}
	}
	for (long end = itest_now_ms() + 5000; itest_now_ms() < end && nw < 4;
	     itest_sleep_ms(20))
		nw = master ? children(master, workers, 16) : 0;
	gone = wait_unlisted(d, launcher, 3000);
	TAP_OK(master > 0 && nw == 4 && gone >= 0,
	       "the process that daemonized is not a target (gone after %ld "
	       "ms); a master and %zu workers run",
	       gone, nw);
	if (master && itest_wait_registered(d, master, 10000) &&
	    dumps_whole(d, master))
		ok++;
	for (size_t i = 0; i < nw; i++)
		if (itest_wait_registered(d, workers[i], 10000) &&
		    dumps_whole(d, workers[i]))
			ok++;
	TAP_OK(ok == 5,
	       "master and workers (now nobody) registered and dumped "
	       "whole (%d of 5)",
	       ok);
	if (master > 0) {
		kill(master, SIGTERM);
		TAP_OK(wait_unlisted(d, master, 5000) >= 0,
		       "once stopped, nginx leaves the targets");
	}
	TAP_OK(reap_all(master, workers, nw),
	       "no nginx process is left (master and %zu workers)", nw);
	snprintf(text, sizeof(text), "rm -rf '%s'", prefix);
	if (system(text) != 0)
		TAP_OK(0, "nginx's directory is removed");
}

int main(void)
{
	struct itest_daemon d;

	snprintf(sandbox, sizeof(sandbox), "%s/fixtures/sandbox",
		 itest_build());
	if (geteuid() != 0) {
		TAP_OK(1, "# SKIP needs root (namespaces, privilege dropping)");
		return tap_done();
	}
	if (itest_daemon_start(&d) < 0) {
		TAP_OK(0, "the daemon starts");
		return tap_done();
	}
	/* Programs that become nobody must still reach the socket. */
	chmod(d.dir, 0711);
	test_namespaces(&d);
	test_privileges(&d);
	test_daemonize(&d);
	test_nginx(&d);
	TAP_OK(itest_daemon_stop(&d) == 0, "the daemon stops cleanly");
	itest_daemon_cleanup(&d);
	return tap_done();
}
