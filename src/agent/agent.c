/*
 * agent.c - libstackwatch-agent.so: loaded into a target with LD_PRELOAD
 * (or linked), it installs the collector's handler and starts one thread,
 * "sw-agent", that registers with the daemon over a unix socket and
 * answers its dump requests with raw dumps (no symbols: the daemon does
 * that).
 *
 * The agent never exits, aborts, blocks the host's start-up or writes to
 * stdout. When it cannot install itself it writes one line to stderr and
 * stays inert. Without a daemon it retries with backoff (100 ms doubling
 * to 5 s). After fork() the child starts its own agent thread; after
 * exec() the socket is gone (O_CLOEXEC) and a re-loaded agent starts anew.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "collector/collect.h"
#include "exec.h"
#include "collector/signal/handler.h"
#include "model/paths.h"
#include "model/procfs.h"
#include "model/wire.h"

#define BACKOFF_MIN_MS 100
#define BACKOFF_MAX_MS 5000

static char sock_path[sizeof(((struct sockaddr_un *)0)->sun_path)];
static int agent_signo;

static void say(const char *what, int err)
{
	char line[256];
	int n;

	n = snprintf(line, sizeof(line), "stackwatch agent: %s: %s\n", what,
		     sw_strerror(err));
	if (n > 0)
		(void)!write(STDERR_FILENO, line, (size_t)n);
}

static void sleep_ms(unsigned ms)
{
	struct timespec ts = { .tv_sec = ms / 1000,
			       .tv_nsec = (long)(ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

static int write_all(int fd, const uint8_t *p, size_t n)
{
	while (n > 0) {
		ssize_t w = send(fd, p, n, MSG_NOSIGNAL);

		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

static int read_all(int fd, uint8_t *p, size_t n)
{
	while (n > 0) {
		ssize_t r = read(fd, p, n);

		if (r < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (r == 0)
			return -ECONNRESET;
		p += r;
		n -= (size_t)r;
	}
	return 0;
}

static int connect_daemon(void)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd;

	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	memcpy(sa.sun_path, sock_path, sizeof(sa.sun_path));
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		int err = -errno;

		close(fd);
		return err;
	}
	return fd;
}

static int send_hello(int fd, struct wire_out *o)
{
	struct wire_hello h;
	char *cmdline = NULL;
	int rc;

	memset(&h, 0, sizeof(h));
	h.pid = getpid();
	h.signo = agent_signo;
	/*
	 * The kernel's name of the main thread, as ps shows it: a program
	 * that rewrites its argv for its title (PostgreSQL, nginx) leaves
	 * program_invocation_short_name pointing into the middle of it.
	 */
	if (procfs_read_at(AT_FDCWD, "/proc/self/comm", h.comm,
			   sizeof(h.comm)) > 0)
		h.comm[strcspn(h.comm, "\n")] = '\0';
	if (!h.comm[0])
		snprintf(h.comm, sizeof(h.comm), "%s",
			 program_invocation_short_name);
	if (procfs_read_cmdline(0, &cmdline) == 0) {
		snprintf(h.cmdline, sizeof(h.cmdline), "%s", cmdline);
		free(cmdline);
	}
	rc = wire_encode_hello(o, 0, &h);
	if (rc == 0)
		rc = write_all(fd, o->data, o->len);
	return rc;
}

/* Answers one dump request with a raw dump, or with the error. */
static int answer_dump(int fd, struct wire_out *o, uint32_t seq,
		       const struct wire_dump_req *req)
{
	uint64_t self_ips[SW_MAX_FRAMES];
	struct collect_opts co = { .timeout_ms = (int)req->timeout_ms,
				   .window = (int)req->window };
	struct sw_dump *d = NULL;
	size_t self_n;
	int status, rc;

	self_n = handler_unwind_self(self_ips, SW_MAX_FRAMES, 0);
	status = collect_self(&co, self_ips, self_n, &d);
	rc = wire_encode_dump_resp(o, seq, status, d);
	sw_dump_free(d);
	if (rc == SW_ETOOBIG || rc == -ENOMEM) /* say so, at least */
		rc = wire_encode_dump_resp(o, seq, rc, NULL);
	if (rc == 0)
		rc = write_all(fd, o->data, o->len);
	return rc;
}

/* Serves one connection until the daemon goes away or misbehaves. */
static void serve(int fd)
{
	struct wire_out o;
	uint8_t hdrbuf[WIRE_HDR_SIZE];
	uint8_t body[64];
	struct wire_hdr h;
	struct wire_dump_req req;

	wire_out_init(&o);
	if (send_hello(fd, &o) < 0)
		goto out;
	for (;;) {
		if (read_all(fd, hdrbuf, sizeof(hdrbuf)) < 0)
			break;
		/* The daemon only ever sends small dump requests. */
		if (wire_parse_hdr(hdrbuf, &h) < 0 || h.type != WIRE_DUMP_REQ ||
		    h.length > sizeof(body))
			break;
		if (read_all(fd, body, h.length) < 0)
			break;
		if (wire_decode_dump_req(body, h.length, &req) < 0)
			break;
		if (answer_dump(fd, &o, h.seq, &req) < 0)
			break;
		/* Dumps can be large; keep the buffer from staying so. */
		if (o.cap > (1u << 20)) {
			wire_out_release(&o);
			wire_out_init(&o);
		}
	}
out:
	wire_out_release(&o);
}

static void *agent_main(void *arg)
{
	unsigned backoff = BACKOFF_MIN_MS;

	(void)arg;
	prctl(PR_SET_NAME, "sw-agent", 0, 0, 0);
	for (;;) {
		int fd = connect_daemon();

		if (fd < 0) {
			sleep_ms(backoff);
			backoff = backoff * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS
							       : backoff * 2;
			continue;
		}
		backoff = BACKOFF_MIN_MS;
		serve(fd);
		close(fd);
		sleep_ms(BACKOFF_MIN_MS);
	}
	return NULL;
}

/*
 * Starts the agent thread with every signal but ours blocked, so the host's
 * signals keep going to the host's threads.
 */
static int start_thread(void)
{
	sigset_t all, old;
	pthread_attr_t attr;
	pthread_t th;
	int rc;

	sigfillset(&all);
	sigdelset(&all, agent_signo);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&attr, 256 * 1024);
	rc = pthread_create(&th, &attr, agent_main, NULL);
	pthread_attr_destroy(&attr);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return -rc;
}

static void atfork_child(void)
{
	exec_atfork_child();
	/* The child has no agent thread: it registers under its own pid. */
	if (start_thread() < 0)
		say("cannot start the agent thread in a child", -EAGAIN);
}

__attribute__((constructor)) static void agent_init(void)
{
	const char *off = getenv("STACKWATCH_DISABLE");
	int rc;

	if (off && strcmp(off, "1") == 0)
		return;
	rc = paths_agent_socket(sock_path, sizeof(sock_path));
	if (rc < 0) {
		say("cannot use the agent socket path", rc);
		return;
	}
	exec_init();
	rc = handler_install();
	if (rc < 0) {
		say("cannot install the dump signal handler", rc);
		return;
	}
	agent_signo = rc;
	rc = start_thread();
	if (rc < 0) {
		say("cannot start the agent thread", rc);
		agent_signo = 0;
		return;
	}
	pthread_atfork(NULL, NULL, atfork_child);
}
