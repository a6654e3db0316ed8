/*
 * sectest.h - for the tests of tests/security/: the real daemon runs as
 * root (these tests need root), and requests or hostile agents run as an
 * unprivileged user, as `setpriv --reuid=65534 --regid=65534
 * --clear-groups` would start them. Header only, on top of itest.h.
 */
#ifndef SW_SECTEST_H
#define SW_SECTEST_H

#include <grp.h>
#include <poll.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>

#include "itest.h"

#define SEC_NOBODY 65534

/*
 * Whether this build runs under a sanitizer. Its allocator keeps what is
 * freed in quarantine instead of handing it back, so the daemon's RSS
 * then says nothing about ours: memory checks are skipped.
 */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SEC_SANITIZED 1
#else
#define SEC_SANITIZED 0
#endif

/*
 * The folder of a copy of the CLI that any user may run: the build may
 * sit below a folder only its owner may enter (a clone in mktemp -d's
 * 0700 folder), where nobody could not run it. Made once, removed at
 * exit.
 */
static char sec_cli_folder[64];

static inline void sec_cli_remove(void)
{
	char path[128];

	snprintf(path, sizeof(path), "%s/stackwatch", sec_cli_folder);
	unlink(path);
	rmdir(sec_cli_folder);
}

static inline const char *sec_cli_dir(void)
{
	char cmd[512];

	if (sec_cli_folder[0])
		return sec_cli_folder;
	snprintf(sec_cli_folder, sizeof(sec_cli_folder), "/tmp/sw-cli-XXXXXX");
	if (!mkdtemp(sec_cli_folder) || chmod(sec_cli_folder, 0755) < 0) {
		sec_cli_folder[0] = '\0';
		return itest_build();
	}
	snprintf(cmd, sizeof(cmd), "cp %s/stackwatch %s/stackwatch",
		 itest_build(), sec_cli_folder);
	if (system(cmd) != 0) {
		rmdir(sec_cli_folder);
		sec_cli_folder[0] = '\0';
		return itest_build();
	}
	atexit(sec_cli_remove);
	return sec_cli_folder;
}

/* Drops to uid and gid, with groups (n of them) as the only others. */
static inline int sec_become(uid_t uid, gid_t gid, const gid_t *groups,
			     size_t n)
{
	if (setgroups(n, groups) < 0 || setresgid(gid, gid, gid) < 0 ||
	    setresuid(uid, uid, uid) < 0)
		return -1;
	return 0;
}

/*
 * fmt (a path with one "%d") for pid into buf: the paths a test walks
 * are data, and a format that is not a literal is not checked.
 */
static inline void sec_path_pid(char *buf, size_t size, const char *fmt,
				pid_t pid)
{
	const char *at = strstr(fmt, "%d");

	if (!at) {
		snprintf(buf, size, "%s", fmt);
		return;
	}
	snprintf(buf, size, "%.*s%d%s", (int)(at - fmt), fmt, (int)pid, at + 2);
}

/* Writes s to the file at path; 0 or -1. */
static inline int sec_write_file(const char *path, const char *s)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	ssize_t n = fd < 0 ? -1 : write(fd, s, strlen(s));

	if (fd >= 0)
		close(fd);
	return n == (ssize_t)strlen(s) ? 0 : -1;
}

/*
 * Enters a user namespace of its own (plus the other namespaces of flags,
 * CLONE_NEWNS), its uid and gid mapped to 0 there, as `unshare -Ur`
 * makes one: the caller then holds every capability in it, and none over
 * the host. 0 or -1.
 */
static inline int sec_enter_userns(int flags)
{
	uid_t uid = geteuid();
	gid_t gid = getegid();
	char map[64];

	/* A process that just left root is not dumpable: its /proc files
	 * are root's, its own maps among them. */
	if (prctl(PR_SET_DUMPABLE, 1, 0, 0, 0) < 0 ||
	    unshare(CLONE_NEWUSER | flags) < 0)
		return -1;
	snprintf(map, sizeof(map), "0 %u 1\n", (unsigned)uid);
	if (sec_write_file("/proc/self/uid_map", map) < 0 ||
	    sec_write_file("/proc/self/setgroups", "deny") < 0)
		return -1;
	snprintf(map, sizeof(map), "0 %u 1\n", (unsigned)gid);
	if (sec_write_file("/proc/self/gid_map", map) < 0)
		return -1;
	return setresuid(0, 0, 0) < 0 || setresgid(0, 0, 0) < 0 ? -1 : 0;
}

/*
 * GETs target as HTTP/1.0 over the unix socket path, or over TCP to
 * 127.0.0.1:port, as curl would: the server is not asked who it is (in
 * a user namespace that does not map root, the daemon's socket shows as
 * the overflow uid, and the CLI's client refuses it). The status in
 * *status and the body in resp (its body malloc'd). 0 or -1.
 */
static inline int sec_raw_get(const char *path, int port, const char *target,
			      int *status, struct http_response *resp)
{
	struct sockaddr_un un = { .sun_family = AF_UNIX };
	struct sockaddr_in in = { .sin_family = AF_INET,
				  .sin_port = htons((uint16_t)port),
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	size_t cap = 1 << 20, got = 0;
	char *buf = malloc(cap + 1), req[1024], *body;
	int fd =
		socket(path ? AF_UNIX : AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	ssize_t n;

	if (!buf || fd < 0)
		goto fail;
	snprintf(un.sun_path, sizeof(un.sun_path), "%s", path ? path : "");
	if (path ? connect(fd, (struct sockaddr *)&un, sizeof(un))
		 : connect(fd, (struct sockaddr *)&in, sizeof(in)))
		goto fail;
	snprintf(req, sizeof(req), "GET %s HTTP/1.0\r\nHost: localhost\r\n\r\n",
		 target);
	if (write(fd, req, strlen(req)) != (ssize_t)strlen(req))
		goto fail;
	while (got < cap && (n = read(fd, buf + got, cap - got)) > 0)
		got += (size_t)n;
	buf[got] = '\0';
	body = strstr(buf, "\r\n\r\n");
	if (sscanf(buf, "HTTP/1.%*d %d", status) != 1 || !body)
		goto fail;
	body += 4;
	resp->body_len = got - (size_t)(body - buf);
	memmove(buf, body, resp->body_len + 1);
	resp->body = buf;
	close(fd);
	return 0;
fail:
	free(buf);
	if (fd >= 0)
		close(fd);
	return -1;
}

/* No user namespace of its own: sec_get_start_in()'s userns. */
#define SEC_HOST_NS (-1)

struct sec_answer {
	int status; /* HTTP status, 0 when none came */
	char body[65536];
};

/* A GET under way in a child of ours (sec_get_start()). */
struct sec_pending {
	pid_t pid;
	int fd; /* the child's answer: status, then body */
};

/*
 * Starts a GET of target as uid/gid (plus groups), in a child: over TCP
 * at base_url, or over the unix socket path when unix_socket is not
 * NULL. The token, when not NULL, goes with it. With userns not
 * SEC_HOST_NS, the child asks from a user namespace of its own
 * (sec_enter_userns(userns)). Fork from the main thread only (a child of
 * a thread could inherit a lock another thread held).
 */
static inline void sec_get_start_in(int userns, uid_t uid, gid_t gid,
				    const gid_t *groups, size_t ngroups,
				    const char *base_url,
				    const char *unix_socket, const char *token,
				    const char *target, struct sec_pending *pg)
{
	int p[2];

	pg->pid = -1;
	pg->fd = -1;
	if (pipe(p) < 0)
		return;
	pg->pid = fork();
	if (pg->pid == 0) {
		struct http_opts o;
		struct http_response r;
		int status = 0;

		close(p[0]);
		if (sec_become(uid, gid, groups, ngroups) < 0)
			_exit(1);
		if (userns != SEC_HOST_NS && sec_enter_userns(userns) < 0)
			_exit(1);
		http_opts_init(&o);
		o.token = token;
		o.unix_socket = unix_socket;
		memset(&r, 0, sizeof(r));
		if (userns != SEC_HOST_NS) {
			const char *colon = strrchr(base_url, ':');

			if (sec_raw_get(unix_socket,
					colon ? atoi(colon + 1) : 0, target,
					&status, &r) < 0)
				status = 0;
		} else if (http_get(unix_socket ? "http://localhost" : base_url,
				    target, &o, &r) == 0) {
			status = r.status;
		}
		(void)!write(p[1], &status, sizeof(status));
		if (r.body)
			(void)!write(p[1], r.body, r.body_len);
		_exit(0);
	}
	close(p[1]);
	pg->fd = p[0];
}

/* sec_get_start_in() from the host's user namespace. */
static inline void sec_get_start(uid_t uid, gid_t gid, const gid_t *groups,
				 size_t ngroups, const char *base_url,
				 const char *unix_socket, const char *token,
				 const char *target, struct sec_pending *pg)
{
	sec_get_start_in(SEC_HOST_NS, uid, gid, groups, ngroups, base_url,
			 unix_socket, token, target, pg);
}

/* Waits for the GET of pg and reads its answer into a. */
static inline void sec_get_finish(struct sec_pending *pg, struct sec_answer *a)
{
	ssize_t n, got = 0;

	memset(a, 0, sizeof(*a));
	if (pg->fd < 0)
		return;
	if (read(pg->fd, &a->status, sizeof(a->status)) != sizeof(a->status))
		a->status = 0;
	while ((n = read(pg->fd, a->body + got, sizeof(a->body) - 1 - got)) > 0)
		got += n;
	a->body[got] = '\0';
	close(pg->fd);
	pg->fd = -1;
	waitpid(pg->pid, NULL, 0);
}

/* sec_get_start() and sec_get_finish() at once. */
static inline void sec_get_as(uid_t uid, gid_t gid, const gid_t *groups,
			      size_t ngroups, const char *base_url,
			      const char *unix_socket, const char *token,
			      const char *target, struct sec_answer *a)
{
	struct sec_pending pg;

	sec_get_start(uid, gid, groups, ngroups, base_url, unix_socket, token,
		      target, &pg);
	sec_get_finish(&pg, a);
}

/* The pids of a /api/v1/targets answer, at most max; -1 if it is not one. */
static inline int sec_target_pids(const char *body, pid_t *out, int max)
{
	cJSON *j = cJSON_Parse(body), *t;
	int n = 0;

	if (!cJSON_IsArray(cJSON_GetObjectItem(j, "targets"))) {
		cJSON_Delete(j);
		return -1;
	}
	cJSON_ArrayForEach(t, cJSON_GetObjectItem(j, "targets"))
	{
		cJSON *p = cJSON_GetObjectItem(t, "pid");

		if (n < max && cJSON_IsNumber(p))
			out[n++] = (pid_t)p->valuedouble;
	}
	cJSON_Delete(j);
	return n;
}

static inline bool sec_has(const pid_t *pids, int n, pid_t pid)
{
	for (int i = 0; i < n; i++)
		if (pids[i] == pid)
			return true;
	return false;
}

/*
 * Starts argv under the agent as uid/gid (no other groups), pointed at d,
 * in a process group of its own (its pid's). Its stdout in *out.
 */
static inline pid_t sec_spawn_as(const struct itest_daemon *d, uid_t uid,
				 gid_t gid, char *const argv[], int *out)
{
	char agent[256];
	int p[2];
	pid_t pid;

	snprintf(agent, sizeof(agent), "%s/libstackwatch-agent.so",
		 itest_target_build());
	if (pipe(p) < 0)
		return -1;
	pid = fork();
	if (pid == 0) {
		setpgid(0, 0);
		dup2(p[1], 1);
		close(p[0]);
		close(p[1]);
		if (sec_become(uid, gid, NULL, 0) < 0)
			_exit(126);
		setenv("LD_PRELOAD", agent, 1);
		setenv("STACKWATCH_SOCKET", d->sock, 1);
		execv(argv[0], argv);
		_exit(127);
	}
	if (pid > 0)
		setpgid(pid, pid);
	close(p[1]);
	*out = p[0];
	return pid;
}

/*
 * `sleep 600` as uid/gid (no other groups), exec'd, so that it is
 * dumpable (a process that just left root is not); its pid.
 */
static inline pid_t sec_sleeper(uid_t uid, gid_t gid)
{
	pid_t pid = fork();

	if (pid == 0) {
		if (uid && sec_become(uid, gid, NULL, 0) < 0)
			_exit(126);
		execlp("sleep", "sleep", "600", (char *)NULL);
		_exit(127);
	}
	return pid;
}

/* Waits (10 s at most) until pid runs the program named comm. */
static inline bool sec_wait_comm(pid_t pid, const char *comm)
{
	char path[64], now[32];
	size_t n = strlen(comm);

	snprintf(path, sizeof(path), "/proc/%d/comm", (int)pid);
	for (long end = itest_now_ms() + 10000; itest_now_ms() < end;) {
		FILE *f = fopen(path, "r");
		bool done = f && fgets(now, sizeof(now), f) &&
			    strncmp(now, comm, n) == 0 && now[n] == '\n';

		if (f)
			fclose(f);
		if (done)
			return true;
		itest_sleep_ms(2);
	}
	return false;
}

/*
 * Runs tests/fixtures/hostile_agent as nobody against d in mode, with up
 * to three arguments (NULL for none); its stdout in *out.
 */
static inline pid_t sec_hostile(const struct itest_daemon *d, const char *mode,
				const char *a1, const char *a2, const char *a3,
				int *out)
{
	char hostile[256];
	char *argv[] = { hostile,    (char *)d->sock, (char *)mode, (char *)a1,
			 (char *)a2, (char *)a3,      NULL };
	int p[2];
	pid_t pid;

	snprintf(hostile, sizeof(hostile), "%s/fixtures/hostile_agent",
		 itest_target_build());
	if (pipe(p) < 0)
		return -1;
	pid = fork();
	if (pid == 0) {
		dup2(p[1], 1);
		close(p[0]);
		close(p[1]);
		if (sec_become(SEC_NOBODY, SEC_NOBODY, NULL, 0) < 0)
			_exit(126);
		execv(argv[0], argv);
		_exit(127);
	}
	close(p[1]);
	*out = p[0];
	return pid;
}

/* Starts a hostile agent and waits until the daemon lists it. */
static inline pid_t sec_start_hostile(const struct itest_daemon *d,
				      const char *mode, const char *a1,
				      const char *a2, const char *a3)
{
	int out;
	pid_t pid = sec_hostile(d, mode, a1, a2, a3, &out);

	if (pid > 0 && (!itest_wait_line(out, "ready") ||
			!itest_wait_registered(d, pid, 10000))) {
		itest_kill(pid);
		pid = -1;
	}
	if (pid > 0)
		close(out);
	return pid;
}

/* GET as root with a deadline; the status, 0 when none came in time. */
static inline int sec_root_get(const struct itest_daemon *d, const char *target,
			       int timeout_ms, cJSON **json)
{
	struct http_opts o;
	struct http_response r;
	int status = 0;

	http_opts_init(&o);
	o.timeout_ms = timeout_ms;
	memset(&r, 0, sizeof(r));
	if (http_get(d->url, target, &o, &r) == 0)
		status = r.status;
	if (json)
		*json = status ? cJSON_Parse(r.body) : NULL;
	http_response_release(&r);
	return status;
}

/* Whether the daemon's log has a line with what and the number n. */
static inline bool sec_log_has(const struct itest_daemon *d, const char *what,
			       int n)
{
	char line[512], num[16];
	bool found = false;
	FILE *f = fopen(d->log, "r");

	snprintf(num, sizeof(num), " %d", n);
	while (f && !found && fgets(line, sizeof(line), f))
		found = strstr(line, what) && strstr(line, num);
	if (f)
		fclose(f);
	return found;
}

/*
 * The daemon's test gate (src/daemon/gate.h): a unix socket the daemon
 * connects to before each read, saying "read PID METHOD UID", and that
 * holds the read until the test answers. Start the daemon with
 * STACKWATCH_TEST_GATE set to path (sec_gate_open() sets it; unset it
 * again once the daemon runs).
 */
struct sec_gate {
	int fd;
	char path[108];
};

static inline int sec_gate_open(struct sec_gate *g, const char *dir)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };

	snprintf(g->path, sizeof(g->path), "%s/gate.sock", dir);
	memcpy(sa.sun_path, g->path, strlen(g->path) + 1);
	g->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	/* The daemon's service is an unprivileged user: it must reach it. */
	if (g->fd < 0 || bind(g->fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    listen(g->fd, 64) < 0 || chmod(dir, 0711) < 0 ||
	    chmod(g->path, 0666) < 0)
		return -1;
	setenv("STACKWATCH_TEST_GATE", g->path, 1);
	return 0;
}

/*
 * The next read held at the gate within timeout_ms: its connection, with
 * its line ("read PID METHOD UID") in line; -1 when none came.
 */
static inline int sec_gate_next(struct sec_gate *g, int timeout_ms, char *line,
				size_t size)
{
	struct pollfd p = { .fd = g->fd, .events = POLLIN };
	size_t got = 0;
	int c;

	line[0] = '\0';
	if (poll(&p, 1, timeout_ms) != 1)
		return -1;
	c = accept4(g->fd, NULL, NULL, SOCK_CLOEXEC);
	if (c < 0)
		return -1;
	while (got + 1 < size) {
		struct pollfd q = { .fd = c, .events = POLLIN };
		ssize_t n;

		if (poll(&q, 1, timeout_ms) != 1)
			break;
		n = read(c, line + got, 1);
		if (n <= 0 || line[got] == '\n')
			break;
		got++;
	}
	line[got] = '\0';
	return c;
}

/* Lets the read held on c go on. */
static inline void sec_gate_release(int c)
{
	if (c < 0)
		return;
	(void)!write(c, "g", 1);
	close(c);
}

static inline void sec_gate_close(struct sec_gate *g)
{
	if (g->fd >= 0)
		close(g->fd);
	unlink(g->path);
}

#endif /* SW_SECTEST_H */
