/*
 * itest.h - helpers of the integration tests: the real daemon on
 * 127.0.0.1:0 with a private agent socket, real programs under the real
 * agent, real HTTP (the CLI's client). Header-only, like tap.h.
 */
#ifndef SW_ITEST_H
#define SW_ITEST_H

#include <cjson/cJSON.h>
#include <errno.h>
#include <ctype.h>
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../../src/cli/http.h"

struct itest_daemon {
	pid_t pid;
	int port;
	char dir[64]; /* private temp dir: socket, log */
	char sock[128];
	char http_sock[128]; /* the daemon's HTTP unix socket */
	char log[128];
	char url[64];
};

static inline const char *itest_build(void)
{
	const char *b = getenv("BUILD");

	return b && *b ? b : "build";
}

/*
 * Where the programs a test watches come from (the agent and the
 * fixtures): $SW_TARGET_BUILD when set, else the build under test. A
 * ThreadSanitizer run of the daemon points it at a plain build, since
 * TSan defers signals in the programs it instruments (a spinning thread
 * never takes our signal), which is no property of the daemon.
 */
static inline const char *itest_target_build(void)
{
	const char *b = getenv("SW_TARGET_BUILD");

	return b && *b ? b : itest_build();
}

static inline void itest_sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) != 0)
		;
}

static inline long itest_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

/* Reads the daemon's log for "listening on http://ADDR:PORT". */
static inline int itest_find_port(const char *log)
{
	char line[512];
	int port = 0;
	FILE *f = fopen(log, "r");

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f)) {
		const char *colon;

		if (strncmp(line, "listening on http://", 20) != 0)
			continue;
		colon = strrchr(line, ':');
		if (colon && sscanf(colon + 1, "%d", &port) == 1)
			break;
	}
	fclose(f);
	return port;
}

/*
 * Starts build/stackwatchd on 127.0.0.1:0 with its agent socket in a fresh
 * temp dir, plus extra arguments (NULL-terminated), and waits for its
 * "listening on" line. wrap (NULL-terminated, or NULL) is a command line
 * put before the daemon's, run from $PATH: it must exec the daemon in the
 * same process (capsh ... -- -c 'exec "$@"' sh), so that d->pid is the
 * daemon's. Returns 0 or -1.
 */
static inline int itest_daemon_start_under(struct itest_daemon *d,
					   const char *const *wrap,
					   const char *const *extra)
{
	char bin[256];
	const char *argv[48];
	int n = 0;

	memset(d, 0, sizeof(*d));
	snprintf(d->dir, sizeof(d->dir), "/tmp/sw-itest-XXXXXX");
	if (!mkdtemp(d->dir))
		return -1;
	snprintf(d->sock, sizeof(d->sock), "%s/agent.sock", d->dir);
	snprintf(d->http_sock, sizeof(d->http_sock), "%s/http.sock", d->dir);
	snprintf(d->log, sizeof(d->log), "%s/daemon.log", d->dir);
	snprintf(bin, sizeof(bin), "%s/stackwatchd", itest_build());
	for (; wrap && *wrap && n < 16; wrap++)
		argv[n++] = *wrap;
	argv[n++] = bin;
	argv[n++] = "--listen";
	argv[n++] = "127.0.0.1:0";
	argv[n++] = "--agent-socket";
	argv[n++] = d->sock;
	argv[n++] = "--http-socket";
	argv[n++] = d->http_sock;
	argv[n++] = "--config";
	argv[n++] = "/dev/null";
	for (; extra && *extra && n < 46; extra++)
		argv[n++] = *extra;
	argv[n] = NULL;
	d->pid = fork();
	if (d->pid < 0)
		return -1;
	if (d->pid == 0) {
		int fd = open(d->log, O_WRONLY | O_CREAT | O_TRUNC, 0644);

		dup2(fd, 2);
		execvp(argv[0], (char *const *)argv);
		_exit(127);
	}
	for (long end = itest_now_ms() + 20000; itest_now_ms() < end;) {
		d->port = itest_find_port(d->log);
		if (d->port > 0)
			break;
		if (waitpid(d->pid, NULL, WNOHANG) == d->pid) {
			d->pid = 0;
			return -1;
		}
		itest_sleep_ms(10);
	}
	if (d->port <= 0)
		return -1;
	snprintf(d->url, sizeof(d->url), "http://127.0.0.1:%d", d->port);
	return 0;
}

static inline int itest_daemon_start_args(struct itest_daemon *d,
					  const char *const *extra)
{
	return itest_daemon_start_under(d, NULL, extra);
}

static inline int itest_daemon_start(struct itest_daemon *d)
{
	static const char *const none[] = { "--sample-interval", "0", NULL };

	return itest_daemon_start_args(d, none);
}

/*
 * Stops the daemon with SIGTERM and returns its exit status (or -1 when it
 * died of a signal or did not stop within 15 s, then killed).
 */
static inline int itest_daemon_stop(struct itest_daemon *d)
{
	int st = 0;

	if (d->pid <= 0)
		return -1;
	kill(d->pid, SIGTERM);
	for (long end = itest_now_ms() + 15000; itest_now_ms() < end;) {
		if (waitpid(d->pid, &st, WNOHANG) == d->pid) {
			d->pid = 0;
			return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
		}
		itest_sleep_ms(10);
	}
	kill(d->pid, SIGKILL);
	waitpid(d->pid, NULL, 0);
	d->pid = 0;
	return -1;
}

/* Removes the temp dir (after the daemon stopped). */
static inline void itest_daemon_cleanup(struct itest_daemon *d)
{
	char path[160];

	snprintf(path, sizeof(path), "%s/daemon.log", d->dir);
	unlink(path);
	unlink(d->sock);
	unlink(d->http_sock);
	rmdir(d->dir);
}

/*
 * Forks and execs argv with the agent preloaded and pointed at d's socket.
 * The child's stdout goes to *out_fd (a pipe) when out_fd is not NULL.
 */
static inline pid_t itest_spawn_io(const struct itest_daemon *d,
				   char *const argv[], int *out_fd, int *in_fd)
{
	char agent[256];
	int p[2] = { -1, -1 }, q[2] = { -1, -1 };
	pid_t pid;

	snprintf(agent, sizeof(agent), "%s/libstackwatch-agent.so",
		 itest_target_build());
	if (out_fd && pipe(p) < 0)
		return -1;
	if (in_fd && pipe(q) < 0)
		return -1;
	pid = fork();
	if (pid == 0) {
		if (out_fd) {
			dup2(p[1], 1);
			close(p[0]);
			close(p[1]);
		}
		if (in_fd) {
			dup2(q[0], 0);
			close(q[0]);
			close(q[1]);
		}
		setenv("LD_PRELOAD", agent, 1);
		setenv("STACKWATCH_SOCKET", d->sock, 1);
		execv(argv[0], argv);
		_exit(127);
	}
	if (out_fd) {
		close(p[1]);
		*out_fd = p[0];
	}
	if (in_fd) {
		close(q[0]);
		*in_fd = q[1];
	}
	return pid;
}

static inline pid_t itest_spawn(const struct itest_daemon *d,
				char *const argv[], int *out_fd)
{
	return itest_spawn_io(d, argv, out_fd, NULL);
}

/* Reads one line from fd into buf (without the newline); false at EOF. */
static inline bool itest_read_line(int fd, char *buf, size_t size)
{
	size_t n = 0;
	char c;

	while (read(fd, &c, 1) == 1) {
		if (c == '\n') {
			buf[n] = '\0';
			return true;
		}
		if (n < size - 1)
			buf[n++] = c;
	}
	return false;
}

/* Reads lines from fd until one equals want; false at EOF. */
static inline bool itest_wait_line(int fd, const char *want)
{
	char line[256];
	size_t n = 0;
	char c;

	while (read(fd, &c, 1) == 1) {
		if (c != '\n') {
			if (n < sizeof(line) - 1)
				line[n++] = c;
			continue;
		}
		line[n] = '\0';
		n = 0;
		if (strcmp(line, want) == 0)
			return true;
	}
	return false;
}

/* GET target from the daemon; 0 with r filled, or the client's error. */
static inline int itest_get(const struct itest_daemon *d, const char *target,
			    struct http_response *r)
{
	struct http_opts o;

	http_opts_init(&o);
	return http_get(d->url, target, &o, r);
}

/* GET and parse JSON; NULL when anything fails. *status gets the code. */
static inline cJSON *itest_get_json(const struct itest_daemon *d,
				    const char *target, int *status)
{
	struct http_response r;
	cJSON *j;

	memset(&r, 0, sizeof(r));
	*status = 0;
	if (itest_get(d, target, &r) < 0)
		return NULL;
	*status = r.status;
	j = cJSON_Parse(r.body);
	http_response_release(&r);
	return j;
}

/* True when pid is in /api/v1/targets. */
static inline bool itest_registered(const struct itest_daemon *d, pid_t pid)
{
	int status;
	cJSON *j = itest_get_json(d, "/api/v1/targets", &status), *t;
	bool found = false;

	cJSON_ArrayForEach(t, cJSON_GetObjectItem(j, "targets"))
	{
		cJSON *p = cJSON_GetObjectItem(t, "pid");

		if (cJSON_IsNumber(p) && (pid_t)p->valuedouble == pid)
			found = true;
	}
	cJSON_Delete(j);
	return found;
}

/* The signal pid's entry in /api/v1/targets names, or -1. */
static inline int itest_target_signal(const struct itest_daemon *d, pid_t pid)
{
	int status, signo = -1;
	cJSON *j = itest_get_json(d, "/api/v1/targets", &status), *t;

	cJSON_ArrayForEach(t, cJSON_GetObjectItem(j, "targets"))
	{
		cJSON *p = cJSON_GetObjectItem(t, "pid");
		cJSON *s = cJSON_GetObjectItem(t, "signal");

		if (cJSON_IsNumber(p) && (pid_t)p->valuedouble == pid &&
		    cJSON_IsNumber(s))
			signo = (int)s->valuedouble;
	}
	cJSON_Delete(j);
	return signo;
}

/* Waits until pid registered (true) or ms passed (false). */
static inline bool itest_wait_registered(const struct itest_daemon *d,
					 pid_t pid, long ms)
{
	for (long end = itest_now_ms() + ms; itest_now_ms() < end;) {
		if (itest_registered(d, pid))
			return true;
		itest_sleep_ms(20);
	}
	return false;
}

/* A number from /metrics: the line "NAME VALUE". -1 when absent. */
static inline double itest_metric(const struct itest_daemon *d,
				  const char *name)
{
	struct http_response r;
	double v = -1;
	size_t n = strlen(name);

	memset(&r, 0, sizeof(r));
	if (itest_get(d, "/metrics", &r) == 0 && r.status == 200) {
		for (char *l = r.body; l && *l; l = strchr(l, '\n')) {
			if (*l == '\n')
				l++;
			if (strncmp(l, name, n) == 0 && l[n] == ' ') {
				v = atof(l + n + 1);
				break;
			}
		}
	}
	http_response_release(&r);
	return v;
}

/* Kills and reaps a child. */
static inline void itest_kill(pid_t pid)
{
	if (pid <= 0)
		return;
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
}

/* True while our child pid has not exited (it is not reaped here). */
static inline bool itest_alive(pid_t pid)
{
	siginfo_t info;

	memset(&info, 0, sizeof(info));
	if (waitid(P_PID, (id_t)pid, &info, WEXITED | WNOHANG | WNOWAIT) < 0)
		return false;
	return info.si_pid == 0;
}

/* The tids of pid (at most max), -1 when it is gone. */
static inline int itest_tids(pid_t pid, pid_t *tids, int max)
{
	char path[64];
	struct dirent *e;
	DIR *dir;
	int n = 0;

	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	dir = opendir(path);
	if (!dir)
		return -1;
	while ((e = readdir(dir)) && n < max)
		if (isdigit((unsigned char)e->d_name[0]))
			tids[n++] = (pid_t)atoi(e->d_name);
	closedir(dir);
	return n;
}

/*
 * The context switches of a task so far (voluntary and not), -1 when it
 * cannot be read: a blocked thread makes none until something wakes it,
 * and a ptrace stop does.
 */
static inline long itest_task_switches(pid_t pid, pid_t tid)
{
	char path[96], buf[2048];
	const char *v, *nv;
	FILE *f;
	size_t n;

	snprintf(path, sizeof(path), "/proc/%d/task/%d/status", (int)pid,
		 (int)tid);
	f = fopen(path, "re");
	if (!f)
		return -1;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	v = strstr(buf, "\nvoluntary_ctxt_switches:");
	nv = strstr(buf, "\nnonvoluntary_ctxt_switches:");
	if (!v || !nv)
		return -1;
	return atol(v + 26) + atol(nv + 29);
}

/* The first child of pid (a daemon's snapshot helper), 0 if none. */
static inline pid_t itest_first_child(pid_t pid)
{
	char path[96], buf[256] = "";
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/task/%d/children", (int)pid,
		 (int)pid);
	f = fopen(path, "re");
	if (!f)
		return 0;
	if (!fgets(buf, sizeof(buf), f))
		buf[0] = '\0';
	fclose(f);
	return (pid_t)atoi(buf);
}

/* Runs cmd (sh -c), its stdout into buf; its exit status, -1 if it died. */
static inline int itest_run_capture(const char *cmd, char *buf, size_t size)
{
	FILE *f = popen(cmd, "r");
	size_t n = 0;
	int st;

	buf[0] = '\0';
	if (!f)
		return -1;
	while (n < size - 1) {
		size_t got = fread(buf + n, 1, size - 1 - n, f);

		if (got == 0)
			break;
		n += got;
	}
	buf[n] = '\0';
	st = pclose(f);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* The thread called name in a dump (its "threads"), or NULL. */
static inline cJSON *itest_thread_named(cJSON *doc, const char *name)
{
	cJSON *t;

	cJSON_ArrayForEach(t, cJSON_GetObjectItem(doc, "threads"))
	{
		cJSON *n = cJSON_GetObjectItem(t, "name");

		if (cJSON_IsString(n) && strcmp(n->valuestring, name) == 0)
			return t;
	}
	return NULL;
}

/* A fixture in a process group of its own, its stdin and stdout piped. */
struct itest_fix {
	pid_t pid; /* also its process group; -1: none */
	int out, in;
};

/*
 * Starts program MODE in a process group of its own, under the agent
 * registering on agent_sock when that is not NULL; waits for its "ready".
 */
static inline bool itest_fix_start(struct itest_fix *f, const char *program,
				   const char *mode, const char *agent_sock)
{
	char agent[PATH_MAX];
	int o[2], i[2];

	f->pid = -1;
	if (pipe(o) < 0 || pipe(i) < 0)
		return false;
	snprintf(agent, sizeof(agent), "%s/libstackwatch-agent.so",
		 itest_target_build());
	f->pid = fork();
	if (f->pid == 0) {
		setpgid(0, 0);
		dup2(o[1], 1);
		dup2(i[0], 0);
		close(o[0]);
		close(o[1]);
		close(i[0]);
		close(i[1]);
		if (agent_sock) {
			setenv("LD_PRELOAD", agent, 1);
			setenv("STACKWATCH_SOCKET", agent_sock, 1);
		}
		execl(program, program, mode, (char *)NULL);
		_exit(127);
	}
	if (f->pid > 0)
		setpgid(f->pid, f->pid);
	close(o[1]);
	close(i[0]);
	f->out = o[0];
	f->in = i[1];
	return f->pid > 0 && itest_wait_line(f->out, "ready");
}

/*
 * Kills the fixture's process group; whether none of it is left once
 * the kernel has reaped it (slowly on a busy machine: 5 s at most).
 */
static inline bool itest_fix_stop(struct itest_fix *f)
{
	bool gone;

	if (f->pid <= 0)
		return true;
	close(f->in);
	close(f->out);
	kill(-f->pid, SIGKILL);
	waitpid(f->pid, NULL, 0);
	for (long end = itest_now_ms() + 5000;
	     kill(-f->pid, 0) == 0 && itest_now_ms() < end;)
		itest_sleep_ms(10);
	gone = kill(-f->pid, 0) < 0 && errno == ESRCH;
	f->pid = -1;
	return gone;
}

#endif /* SW_ITEST_H */
