/*
 * test_sec_sockets.c - the CLI and the agent talk only to a socket that
 * root or their own user set up, served by root or their own user.
 *
 * A user without $XDG_RUNTIME_DIR (uid V here, the first of 65533, 65532,
 * ... whose /tmp/stackwatch-V this test can create) has its default
 * sockets in /tmp/stackwatch-V, a name anyone may take first in /tmp. A
 * fake server run as nobody sits at those paths and reports every
 * connection it gets: how many bytes, whether a bearer token came.
 *
 * - the directory and the socket are nobody's: the CLI run as V with
 *   STACKWATCH_TOKEN refuses them (exit 3, the reason on stderr) and never
 *   connects; the agent of a program run as V never connects either (its
 *   thread is seen waiting out its backoff), while a program of V pointed
 *   at the real daemon registers;
 * - the directory is V's and the socket root's, but nobody listens on it
 *   (the peer check): the CLI connects and closes without a byte (exit
 *   3, the server's uid on stderr); so does the agent, for the default
 *   path and for one named by STACKWATCH_SOCKET;
 * - the good path: the real daemon (root) on V's default paths: the agent
 *   of V's program registers there and the CLI of V lists it.
 *
 * Every process is started in a process group of its own, killed with it
 * and checked gone; /tmp/stackwatch-V and what is in it are removed.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/un.h>

#include "sectest.h"
#include "tap.h"

#define TOKEN "sw-sec-token-squatted-4711"
#define FAKE_ANSWER_BODY                                                     \
	"{\"targets\":[{\"pid\":4242,\"uid\":0,\"threads\":1,\"signal\":38," \
	"\"comm\":\"squatted\",\"cmdline\":\"squatted\"}]}"

static char tb[4096];	/* where V's programs come from (absolute) */
static char vdir[64];	/* /tmp/stackwatch-V, ours */
static char vhttp[128]; /* its http.sock */
static char vagent[128];
static uid_t victim;

static pid_t groups[32]; /* every process group started, to check */
static int ngroups;

/* Kills pid's process group and reaps pid. */
static void reap_group(pid_t pid)
{
	if (pid <= 0)
		return;
	kill(-pid, SIGKILL);
	waitpid(pid, NULL, 0);
}

/* Forks into a process group of its own, remembered for the last check. */
static pid_t fork_group(void)
{
	pid_t pid = fork();

	if (pid == 0)
		setpgid(0, 0);
	if (pid > 0) {
		setpgid(pid, pid);
		if (ngroups < (int)(sizeof(groups) / sizeof(groups[0])))
			groups[ngroups++] = pid;
	}
	return pid;
}

/* The sanitizers' options, passed on to what runs as V. */
static int add_sanitizer_env(char **env, int n, char store[][512])
{
	static const char *const names[] = { "ASAN_OPTIONS", "UBSAN_OPTIONS",
					     "TSAN_OPTIONS" };

	for (size_t i = 0; i < 3; i++) {
		const char *v = getenv(names[i]);

		if (v) {
			snprintf(store[i], 512, "%s=%s", names[i], v);
			env[n++] = store[i];
		}
	}
	return n;
}

/* ---- the fake server ---------------------------------------------- */

struct fake {
	pid_t pid;
	int report; /* one line per connection: "conn BYTES BEARER PROBE" */
	char path[108];
};

struct seen {
	int conns;    /* connections but the probe */
	size_t bytes; /* bytes they sent */
	bool bearer;  /* one of them sent "Bearer" */
	bool probe;   /* the probe's line came */
	int first;    /* bytes of the first connection, -1 before one */
};

/*
 * Serves lfd for good, one connection at a time: reads up to the end of
 * an HTTP header, EOF or 3 s of silence, answers a request with a fake
 * target list, and reports the connection to report.
 */
static void fake_serve(int lfd, int report)
{
	static char buf[65536];

	signal(SIGPIPE, SIG_IGN); /* a client that left before the answer */
	for (;;) {
		struct timeval tv = { 3, 0 };
		size_t n = 0;
		int c = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);

		if (c < 0) {
			if (errno == EINTR)
				continue;
			_exit(1);
		}
		setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
		while (n < sizeof(buf)) {
			ssize_t r = read(c, buf + n, sizeof(buf) - n);

			if (r <= 0)
				break;
			n += (size_t)r;
			if (memmem(buf, n, "\r\n\r\n", 4)) {
				dprintf(c,
					"HTTP/1.1 200 OK\r\n"
					"Content-Type: application/json\r\n"
					"Content-Length: %zu\r\n"
					"Connection: close\r\n\r\n%s",
					strlen(FAKE_ANSWER_BODY),
					FAKE_ANSWER_BODY);
				break;
			}
		}
		dprintf(report, "conn %zu %d %d\n", n,
			memmem(buf, n, "Bearer", 6) != NULL,
			n >= 5 && memcmp(buf, "PROBE", 5) == 0);
		close(c);
	}
}

/*
 * Starts a fake server at path that listens as uid; the socket file is
 * made by root when bind_as_root, else by uid. Waits for it to listen.
 */
static int fake_start(struct fake *f, const char *path, uid_t uid,
		      bool bind_as_root)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int p[2], ready[2];
	char c;

	memset(f, 0, sizeof(*f));
	f->report = -1;
	snprintf(f->path, sizeof(f->path), "%s", path);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	if (pipe2(p, O_CLOEXEC) < 0 || pipe2(ready, O_CLOEXEC) < 0)
		return -1;
	f->pid = fork_group();
	if (f->pid == 0) {
		int lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

		close(p[0]);
		close(ready[0]);
		if (lfd < 0 ||
		    (!bind_as_root && sec_become(uid, uid, NULL, 0) < 0) ||
		    bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
		    chmod(path, 0666) < 0 ||
		    (bind_as_root && sec_become(uid, uid, NULL, 0) < 0) ||
		    listen(lfd, 16) < 0)
			_exit(1);
		(void)!write(ready[1], "r", 1);
		close(ready[1]);
		fake_serve(lfd, p[1]);
		_exit(0);
	}
	close(p[1]);
	close(ready[1]);
	f->report = p[0];
	c = 0;
	if (f->pid < 0 || read(ready[0], &c, 1) != 1 || c != 'r') {
		close(ready[0]);
		return -1;
	}
	close(ready[0]);
	return 0;
}

static void fake_stop(struct fake *f)
{
	reap_group(f->pid);
	f->pid = 0;
	if (f->report >= 0)
		close(f->report);
	f->report = -1;
	unlink(f->path);
}

/*
 * Reads the fake's next report line, waiting at most ms for it, into s.
 * True when one came.
 */
static bool fake_poll(struct fake *f, struct seen *s, long ms)
{
	struct pollfd pfd = { .fd = f->report, .events = POLLIN };
	char line[128];
	size_t bytes;
	int bearer, probe;

	if (s->probe || poll(&pfd, 1, ms > 0 ? (int)ms : 0) != 1 ||
	    !itest_read_line(f->report, line, sizeof(line)) ||
	    sscanf(line, "conn %zu %d %d", &bytes, &bearer, &probe) != 3)
		return false;
	if (probe) {
		s->probe = true;
		return true;
	}
	if (s->first < 0)
		s->first = (int)bytes;
	s->conns++;
	s->bytes += bytes;
	s->bearer |= bearer != 0;
	return true;
}

/*
 * Sends the fake a request of our own and reads every line up to its:
 * the fake serves in order, so what came before it is all there was.
 */
static bool fake_settle(struct fake *f, struct seen *s)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	long end = itest_now_ms() + 15000;

	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", f->path);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    send(fd, "PROBE\r\n\r\n", 9, MSG_NOSIGNAL) != 9) {
		if (fd >= 0)
			close(fd);
		return false;
	}
	close(fd);
	while (!s->probe && itest_now_ms() < end)
		fake_poll(f, s, end - itest_now_ms());
	return s->probe;
}

/* ---- what runs as V ------------------------------------------------ */

struct ran {
	int status; /* exit status, -1 when killed */
	char out[8192];
	char err[2048];
};

/* Reads fd to its end (or size - 1 bytes) into buf; closes fd. */
static void slurp(int fd, char *buf, size_t size)
{
	size_t n = 0;
	ssize_t r;

	while (n < size - 1 && (r = read(fd, buf + n, size - 1 - n)) > 0)
		n += (size_t)r;
	buf[n] = '\0';
	close(fd);
}

/*
 * Runs the CLI as V with only PATH, STACKWATCH_TOKEN and the sanitizers'
 * options in its environment (no XDG_RUNTIME_DIR: the /tmp defaults).
 */
static void cli_as_victim(const char *cmd, struct ran *r)
{
	char cli[4200], san[3][512];
	char *argv[] = { cli, (char *)cmd, NULL };
	char *env[8] = { (char *)"PATH=/usr/bin:/bin",
			 (char *)"STACKWATCH_TOKEN=" TOKEN };
	int o[2], e[2], st;
	pid_t pid;

	memset(r, 0, sizeof(*r));
	r->status = -1;
	add_sanitizer_env(env, 2, san);
	snprintf(cli, sizeof(cli), "%s/stackwatch", tb);
	if (pipe2(o, O_CLOEXEC) < 0 || pipe2(e, O_CLOEXEC) < 0)
		return;
	pid = fork_group();
	if (pid == 0) {
		dup2(o[1], 1);
		dup2(e[1], 2);
		if (sec_become(victim, victim, NULL, 0) < 0)
			_exit(126);
		execve(cli, argv, env);
		_exit(127);
	}
	close(o[1]);
	close(e[1]);
	slurp(o[0], r->out, sizeof(r->out));
	slurp(e[0], r->err, sizeof(r->err));
	r->err[strcspn(r->err, "\n")] = '\0'; /* its first line */
	if (pid > 0 && waitpid(pid, &st, 0) == pid && WIFEXITED(st))
		r->status = WEXITSTATUS(st);
	reap_group(pid);
}

/*
 * Starts agent_target sigwait as V under the agent, with
 * STACKWATCH_SOCKET=sock when sock is not NULL (else the default path),
 * and waits for its "ready".
 */
static pid_t target_as_victim(const char *sock)
{
	char fix[4200], agent[4200], sockenv[160], san[3][512];
	char *argv[] = { fix, (char *)"sigwait", NULL };
	char *env[8] = { (char *)"PATH=/usr/bin:/bin", agent };
	int n = 2, o[2];
	pid_t pid;

	snprintf(fix, sizeof(fix), "%s/fixtures/agent_target", tb);
	snprintf(agent, sizeof(agent), "LD_PRELOAD=%s/libstackwatch-agent.so",
		 tb);
	if (sock) {
		snprintf(sockenv, sizeof(sockenv), "STACKWATCH_SOCKET=%s",
			 sock);
		env[n++] = sockenv;
	}
	add_sanitizer_env(env, n, san);
	if (pipe2(o, O_CLOEXEC) < 0)
		return -1;
	pid = fork_group();
	if (pid == 0) {
		dup2(o[1], 1);
		if (sec_become(victim, victim, NULL, 0) < 0)
			_exit(126);
		execve(fix, argv, env);
		_exit(127);
	}
	close(o[1]);
	if (pid > 0 && !itest_wait_line(o[0], "ready")) {
		reap_group(pid);
		pid = -1;
	}
	close(o[0]);
	return pid;
}

/*
 * The system call pid's agent thread ("sw-agent") is in: its number, -2
 * while it runs, -1 when there is no such thread.
 */
static long agent_syscall(pid_t pid)
{
	char path[300], buf[64];
	struct dirent *e;
	long nr = -1;
	DIR *dir;

	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	dir = opendir(path);
	while (dir && nr == -1 && (e = readdir(dir))) {
		FILE *f;
		bool agent;

		snprintf(path, sizeof(path), "/proc/%d/task/%s/comm", (int)pid,
			 e->d_name);
		f = fopen(path, "r");
		if (!f)
			continue;
		agent = fgets(buf, sizeof(buf), f) &&
			strcmp(buf, "sw-agent\n") == 0;
		fclose(f);
		if (!agent)
			continue;
		snprintf(path, sizeof(path), "/proc/%d/task/%s/syscall",
			 (int)pid, e->d_name);
		f = fopen(path, "r");
		if (f && fgets(buf, sizeof(buf), f))
			nr = strncmp(buf, "running", 7) == 0 ? -2 : atol(buf);
		if (f)
			fclose(f);
	}
	if (dir)
		closedir(dir);
	return nr;
}

/* ---- the cases ----------------------------------------------------- */

/* Sets the owner and mode of V's directory. */
static bool set_vdir(uid_t owner, mode_t mode)
{
	return chown(vdir, owner, owner) == 0 && chmod(vdir, mode) == 0;
}

/* A socket planted by nobody, in a directory of nobody's. */
static void check_squatted(const struct itest_daemon *d)
{
	struct fake f;
	struct seen s = { .first = -1 };
	struct ran r;
	pid_t squat, control;
	long end, nr = -1;
	bool settled;

	if (!set_vdir(SEC_NOBODY, 0755) ||
	    fake_start(&f, vhttp, SEC_NOBODY, false) < 0) {
		TAP_OK(0, "a fake server as nobody listens at %s", vhttp);
		return;
	}
	cli_as_victim("targets", &r);
	TAP_OK(fake_settle(&f, &s), "the fake HTTP server answered our probe");
	TAP_OK(r.status == 3 && strstr(r.err, vhttp) &&
		       strstr(r.err, "belongs to uid 65534") &&
		       !strstr(r.out, "squatted"),
	       "the CLI as uid %u refuses the squatted %s (exit %d: %s)",
	       (unsigned)victim, vhttp, r.status, r.err);
	TAP_OK(s.conns == 0 && s.bytes == 0 && !s.bearer,
	       "the squatter got no connection and no token from the CLI "
	       "(%d connections, %zu bytes, token %s)",
	       s.conns, s.bytes, s.bearer ? "sent" : "not sent");
	fake_stop(&f);

	memset(&s, 0, sizeof(s));
	s.first = -1;
	if (fake_start(&f, vagent, SEC_NOBODY, false) < 0) {
		TAP_OK(0, "a fake agent socket as nobody listens at %s",
		       vagent);
		return;
	}
	squat = target_as_victim(NULL);
	control = target_as_victim(d->sock);
	TAP_OK(control > 0 && itest_wait_registered(d, control, 10000),
	       "control: a program of uid %u pointed at the real daemon "
	       "registers",
	       (unsigned)victim);
	/*
	 * The squatted program's agent thread waiting out its backoff
	 * (futex) has tried and given up; one that registered would sit
	 * in read(), and the fake would report its HELLO.
	 */
	end = itest_now_ms() + 10000;
	while (squat > 0 && itest_now_ms() < end &&
	       (nr = agent_syscall(squat)) != SYS_futex && !s.conns)
		fake_poll(&f, &s, 20);
	/* The fake reports a connection before it closes it. */
	while (fake_poll(&f, &s, 0))
		;
	TAP_OK(nr == SYS_futex && s.conns == 0,
	       "the agent of uid %u does not connect to the squatted %s (its "
	       "thread waits out the backoff: system call %ld, %d "
	       "connections)",
	       (unsigned)victim, vagent, nr, s.conns);
	settled = fake_settle(&f, &s);
	TAP_OK(settled && s.conns == 0 && s.bytes == 0,
	       "the squatter got no connection and no HELLO from the agent "
	       "(%d connections, %zu bytes)",
	       s.conns, s.bytes);
	reap_group(squat);
	reap_group(control);
	fake_stop(&f);
}

/*
 * A socket that passes the path checks (V's directory, root's socket)
 * whose listener is nobody: the peer check.
 */
static void check_peer(const char *explicit_dir)
{
	char explicit_sock[160];
	struct fake f;
	struct seen s = { .first = -1 };
	struct ran r;
	pid_t t;

	if (!set_vdir(victim, 0755) ||
	    fake_start(&f, vhttp, SEC_NOBODY, true) < 0) {
		TAP_OK(0, "a fake server as nobody listens at %s", vhttp);
		return;
	}
	cli_as_victim("targets", &r);
	TAP_OK(fake_settle(&f, &s), "the fake HTTP server answered our probe");
	TAP_OK(r.status == 3 && strstr(r.err, "runs as uid 65534") &&
		       !strstr(r.out, "squatted"),
	       "the CLI as uid %u refuses a server run by nobody at %s "
	       "(exit %d: %s)",
	       (unsigned)victim, vhttp, r.status, r.err);
	TAP_OK(s.bytes == 0 && !s.bearer,
	       "that server got no byte and no token from the CLI (%d "
	       "connections, %zu bytes, token %s)",
	       s.conns, s.bytes, s.bearer ? "sent" : "not sent");
	fake_stop(&f);

	/* The agent, at its default path. */
	memset(&s, 0, sizeof(s));
	s.first = -1;
	if (fake_start(&f, vagent, SEC_NOBODY, true) < 0) {
		TAP_OK(0, "a fake agent socket as nobody listens at %s",
		       vagent);
		return;
	}
	t = target_as_victim(NULL);
	for (long end = itest_now_ms() + 10000;
	     t > 0 && s.first < 0 && itest_now_ms() < end;)
		fake_poll(&f, &s, end - itest_now_ms());
	TAP_OK(s.first == 0 && !s.bearer,
	       "the agent of uid %u connects to a server run by nobody at "
	       "its default path and closes without a HELLO (%d bytes)",
	       (unsigned)victim, s.first);
	reap_group(t);
	fake_stop(&f);

	/* The agent, at a path named by STACKWATCH_SOCKET. */
	memset(&s, 0, sizeof(s));
	s.first = -1;
	snprintf(explicit_sock, sizeof(explicit_sock), "%s/named.sock",
		 explicit_dir);
	if (fake_start(&f, explicit_sock, SEC_NOBODY, true) < 0) {
		TAP_OK(0, "a fake agent socket as nobody listens at %s",
		       explicit_sock);
		return;
	}
	t = target_as_victim(explicit_sock);
	for (long end = itest_now_ms() + 10000;
	     t > 0 && s.first < 0 && itest_now_ms() < end;)
		fake_poll(&f, &s, end - itest_now_ms());
	TAP_OK(s.first == 0,
	       "STACKWATCH_SOCKET naming a server run by nobody: the agent "
	       "of uid %u closes without a HELLO (%d bytes)",
	       (unsigned)victim, s.first);
	reap_group(t);
	fake_stop(&f);
}

/* The real daemon, as root, on V's default paths. */
static void check_good_path(void)
{
	const char *args[] = { "--sample-interval",
			       "0",
			       "--agent-socket",
			       vagent,
			       "--http-socket",
			       vhttp,
			       NULL };
	struct itest_daemon d;
	char want[32];
	struct ran r;
	pid_t t;

	if (!set_vdir(0, 0755) || itest_daemon_start_args(&d, args) < 0) {
		TAP_OK(0, "the daemon starts on %s and %s", vagent, vhttp);
		return;
	}
	t = target_as_victim(NULL);
	TAP_OK(t > 0 && itest_wait_registered(&d, t, 10000),
	       "the agent of uid %u registers at its default path %s, root's",
	       (unsigned)victim, vagent);
	cli_as_victim("targets", &r);
	snprintf(want, sizeof(want), "%d ", (int)t);
	TAP_OK(r.status == 0 && strstr(r.out, want),
	       "the CLI as uid %u lists it through %s (exit %d: %s)",
	       (unsigned)victim, vhttp, r.status, r.err);
	reap_group(t);
	itest_daemon_stop(&d);
	unlink(vagent);
	unlink(vhttp);
	itest_daemon_cleanup(&d);
}

/* Takes the first /tmp/stackwatch-V that does not exist yet. */
static bool claim_victim(void)
{
	for (uid_t uid = 65533; uid > 65500; uid--) {
		snprintf(vdir, sizeof(vdir), "/tmp/stackwatch-%u",
			 (unsigned)uid);
		if (mkdir(vdir, 0700) == 0) {
			victim = uid;
			snprintf(vhttp, sizeof(vhttp), "%s/http.sock", vdir);
			snprintf(vagent, sizeof(vagent), "%s/agent.sock", vdir);
			return true;
		}
	}
	return false;
}

int main(void)
{
	static const char *const args[] = { "--sample-interval", "0", NULL };
	char explicit_dir[] = "/tmp/sw-secsock-XXXXXX";
	struct itest_daemon d;
	bool left = false;

	if (geteuid() != 0) {
		TAP_SKIP("needs root: programs run as other users");
		return tap_done();
	}
	if (!realpath(itest_target_build(), tb)) {
		TAP_OK(0, "the build %s is there", itest_target_build());
		return tap_done();
	}
	if (!claim_victim()) {
		TAP_SKIP("/tmp/stackwatch-65501 to -65533 all exist");
		return tap_done();
	}
	if (!mkdtemp(explicit_dir) || chmod(explicit_dir, 0711) < 0 ||
	    itest_daemon_start_args(&d, args) < 0) {
		TAP_OK(0, "the daemon starts");
		rmdir(vdir);
		return tap_done();
	}
	chmod(d.dir, 0711);
	tap_note("uid %u, %s", (unsigned)victim, vdir);
	check_squatted(&d);
	check_peer(explicit_dir);
	itest_daemon_stop(&d);
	itest_daemon_cleanup(&d);
	check_good_path();
	for (int i = 0; i < ngroups; i++) {
		reap_group(groups[i]);
		left |= kill(-groups[i], 0) == 0 || errno != ESRCH;
	}
	TAP_OK(!left, "no process this test started is left");
	unlink(vhttp);
	unlink(vagent);
	TAP_OK(rmdir(vdir) == 0 && rmdir(explicit_dir) == 0,
	       "%s and %s removed", vdir, explicit_dir);
	return tap_done();
}
