/*
 * agent.c - libstackwatch-agent.so: loaded into a target with LD_PRELOAD
 * (or linked), it installs the collector's handler and starts one thread,
 * "sw-agent", that registers with the daemon over a unix socket and
 * answers its dump requests with raw dumps (no symbols: the daemon does
 * that). A request may name threads the daemon has read by other means:
 * those get no signal and are left out of the answer (its HELLO says it
 * understands such requests, WIRE_FEAT_SKIP).
 *
 * The agent never exits, aborts, blocks the host's start-up or writes to
 * stdout. When it cannot install itself it writes one line to stderr and
 * stays inert. Without a daemon it retries with backoff (100 ms doubling
 * to 5 s). After fork() the child closes its copy of the parent's
 * connection (else the daemon would never see the parent go) and starts
 * its own agent thread; after exec() the socket is gone (O_CLOEXEC) and a
 * re-loaded agent starts anew.
 *
 * The program's stacks, command line and name go only to a daemon run by
 * root or by the program's own effective uid. A socket at the default
 * path must pass the path rule of model/sockcheck.h (for a user without
 * $XDG_RUNTIME_DIR its directory is in /tmp, where anyone could have made
 * it first), and every server, one named by $STACKWATCH_SOCKET too, the
 * peer rule, before the HELLO. A socket that fails is treated as no
 * daemon at all: retried with the backoff, silently.
 *
 * The thread can be stopped and started again (agent_pause(), agent.h):
 * some calls work only in a process of one thread, or change credentials
 * in every thread at once (isolate.c), and our thread must not be in
 * their way.
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
#include <stdatomic.h>
#include <stdbool.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "agent.h"
#include "collector/collect.h"
#include "collector/exec.h"
#include "collector/signal/futex.h"
#include "collector/signal/handler.h"
#include "collector/signal/sigctx.h"
#include "model/clock.h"
#include "model/paths.h"
#include "model/procfs.h"
#include "model/sockcheck.h"
#include "model/wire.h"

#define BACKOFF_MIN_MS 100
#define BACKOFF_MAX_MS 5000

/* How long agent_pause() waits for the kernel to forget the thread. */
#define GONE_WAIT_MS 200

static char sock_path[sizeof(((struct sockaddr_un *)0)->sun_path)];
static int agent_signo; /* nonzero once the handler is installed */
static int told_signo;	/* the signal the daemon was last told */
static pid_t agent_pid; /* the process the thread belongs to */

/* sock_path is the default, not $STACKWATCH_SOCKET: its path is checked. */
static bool sock_is_default;

/*
 * The thread and its connection. conn_lock guards conn (with the identity
 * of the socket, so that a descriptor the program closed and reused is
 * never taken for ours) and is held only for moments; pause_lock
 * serializes starting and stopping the thread.
 */
static pthread_mutex_t conn_lock = PTHREAD_MUTEX_INITIALIZER;
static int conn = -1;
static dev_t conn_dev;
static ino_t conn_ino;

static pthread_mutex_t pause_lock = PTHREAD_MUTEX_INITIALIZER;
static bool running; /* under pause_lock: a thread exists */
static int pauses;   /* under pause_lock: stopped while > 0 */
static pthread_t thread;
static _Atomic pid_t thread_tid;
static _Atomic uint32_t stop_word; /* 1: the thread is asked to exit */

static void say(const char *what, int err)
{
	char line[256];
	int n;

	n = snprintf(line, sizeof(line), "stackwatch agent: %s: %s\n", what,
		     sw_strerror(err));
	if (n > 0)
		(void)!write(STDERR_FILENO, line, (size_t)n);
}

static bool stopping(void)
{
	return atomic_load_explicit(&stop_word, memory_order_acquire) != 0;
}

/* Sleeps ms, or less when the thread is asked to stop. True: stop. */
static bool wait_stop(unsigned ms)
{
	uint64_t until = clock_now_ns() + (uint64_t)ms * 1000000ull;

	while (!stopping() && clock_now_ns() < until)
		futex_wait_until(&stop_word, 0, until);
	return stopping();
}

/* Whether fd is still the socket we opened (the program may close and
 * reuse descriptor numbers). Under conn_lock. */
static bool conn_is_ours(int fd)
{
	struct stat st;

	return fd >= 0 && fstat(fd, &st) == 0 && S_ISSOCK(st.st_mode) &&
	       st.st_dev == conn_dev && st.st_ino == conn_ino;
}

static int write_all(int fd, const uint8_t *p, size_t n)
{
	bool ours;

	pthread_mutex_lock(&conn_lock);
	ours = fd == conn && conn_is_ours(fd);
	pthread_mutex_unlock(&conn_lock);
	if (!ours)
		return -EBADF;
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
	bool ours;

	pthread_mutex_lock(&conn_lock);
	ours = fd == conn && conn_is_ours(fd);
	pthread_mutex_unlock(&conn_lock);
	if (!ours)
		return -EBADF;
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

/*
 * Connects to the daemon and makes the socket the thread's connection,
 * once the socket's path (the default one only) and its server passed
 * the checks of model/sockcheck.h for our effective uid of now (a program
 * may have changed it since it started). Returns the descriptor, or a
 * negative errno (-EPERM for a socket that failed them, -ECANCELED when
 * asked to stop meanwhile).
 */
static int connect_daemon(void)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	uid_t euid = geteuid();
	struct stat st;
	int fd, err;

	if (sock_is_default) {
		err = sockcheck_path(sock_path, euid, NULL);
		if (err < 0)
			return err;
	}
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	memcpy(sa.sun_path, sock_path, sizeof(sa.sun_path));
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    fstat(fd, &st) < 0) {
		err = -errno;
		goto out_close;
	}
	err = sockcheck_peer(fd, euid, NULL);
	if (err < 0)
		goto out_close;
	pthread_mutex_lock(&conn_lock);
	if (stopping()) {
		pthread_mutex_unlock(&conn_lock);
		close(fd);
		return -ECANCELED;
	}
	conn = fd;
	conn_dev = st.st_dev;
	conn_ino = st.st_ino;
	pthread_mutex_unlock(&conn_lock);
	return fd;
out_close:
	close(fd);
	return err;
}

/* Closes the thread's connection, if the descriptor is still ours. */
static void disconnect(void)
{
	pthread_mutex_lock(&conn_lock);
	if (conn_is_ours(conn))
		close(conn);
	conn = -1;
	pthread_mutex_unlock(&conn_lock);
}

static int send_hello(int fd, struct wire_out *o)
{
	struct wire_hello h;
	char *cmdline = NULL;
	int rc;

	memset(&h, 0, sizeof(h));
	h.pid = getpid();
	h.signo = told_signo = collect_signal();
	h.features = WIRE_FEAT_SKIP;
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
				   .window = (int)req->window,
				   .skip = req->skip,
				   .nskip = req->nskip };
	struct sw_dump *d = NULL;
	size_t self_n;
	int status, rc;

	self_n = handler_unwind_self(self_ips, SW_MAX_FRAMES, 0);
	status = collect_self(&co, self_ips, self_n, &d);
	/* The program claimed our signal since we last said (signo.c). */
	if (collect_signal() != told_signo) {
		told_signo = collect_signal();
		rc = wire_encode_signal(o, seq, told_signo);
		if (rc == 0)
			rc = write_all(fd, o->data, o->len);
		if (rc < 0) {
			sw_dump_free(d);
			return rc;
		}
	}
	rc = wire_encode_dump_resp(o, seq, status, d);
	sw_dump_free(d);
	if (rc == SW_ETOOBIG || rc == -ENOMEM) /* say so, at least */
		rc = wire_encode_dump_resp(o, seq, rc, NULL);
	if (rc == 0)
		rc = write_all(fd, o->data, o->len);
	return rc;
}

/*
 * Reads the body of a request of len bytes and decodes it into *req (its
 * skip set for the caller to release). Most requests fit in small; one
 * with a skip set is read into a buffer of its own, freed here.
 */
static int read_request(int fd, uint32_t len, uint8_t *small, size_t nsmall,
			struct wire_dump_req *req)
{
	uint8_t *body = len <= nsmall ? small : malloc(len);
	int rc;

	if (!body)
		return -ENOMEM;
	rc = read_all(fd, body, len);
	if (rc == 0)
		rc = wire_decode_dump_req(body, len, req);
	if (body != small)
		free(body);
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
	int rc;

	wire_out_init(&o);
	if (send_hello(fd, &o) < 0)
		goto out;
	for (;;) {
		if (read_all(fd, hdrbuf, sizeof(hdrbuf)) < 0)
			break;
		/* The daemon only ever sends dump requests, a skip set at
		 * most as large as a dump. */
		if (wire_parse_hdr(hdrbuf, &h) < 0 || h.type != WIRE_DUMP_REQ ||
		    h.length > WIRE_DUMP_REQ_MAX)
			break;
		if (read_request(fd, h.length, body, sizeof(body), &req) < 0)
			break;
		rc = answer_dump(fd, &o, h.seq, &req);
		wire_dump_req_release(&req);
		if (rc < 0)
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
	atomic_store(&thread_tid, (pid_t)syscall(SYS_gettid));
	prctl(PR_SET_NAME, "sw-agent", 0, 0, 0);
	while (!stopping()) {
		int fd = connect_daemon();

		if (fd < 0) {
			if (wait_stop(backoff))
				break;
			backoff = backoff * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS
							       : backoff * 2;
			continue;
		}
		backoff = BACKOFF_MIN_MS;
		serve(fd);
		disconnect();
		if (wait_stop(BACKOFF_MIN_MS))
			break;
	}
	return NULL;
}

/*
 * Starts the agent thread with every signal blocked, ours too: the host's
 * signals keep going to the host's threads, and one sent to the process
 * on our number by someone else is taken by a thread of the program, or
 * stays pending, as it would without us (the thread dumps itself without
 * a signal). Under pause_lock.
 */
static int start_thread(void)
{
	sigset_t all, old;
	pthread_attr_t attr;
	int rc;

	atomic_store(&stop_word, 0);
	atomic_store(&thread_tid, 0);
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, 256 * 1024);
	rc = pthread_create(&thread, &attr, agent_main, NULL);
	pthread_attr_destroy(&attr);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	running = rc == 0;
	/*
	 * Until it has said its tid, agent_pause() could not wait for the
	 * kernel to let go of it: a moment, at most a second.
	 */
	for (uint64_t until = clock_now_ns() + 1000000000ull;
	     running && !atomic_load(&thread_tid) && clock_now_ns() < until;)
		sched_yield();
	return -rc;
}

/*
 * Waits until the kernel has let go of the thread tid: pthread_join()
 * returns when the thread has left its code, a moment before the kernel
 * takes it out of the thread group, and a call that wants a process of
 * one thread would still see two.
 */
SW_INTERPOSER static void wait_gone(pid_t tid)
{
	uint64_t until = clock_now_ns() + GONE_WAIT_MS * 1000000ull;
	char path[48];

	if (tid <= 0)
		return;
	snprintf(path, sizeof(path), "/proc/self/task/%d", (int)tid);
	while (access(path, F_OK) == 0 && clock_now_ns() < until)
		sched_yield();
}

SW_INTERPOSER void agent_pause(void)
{
	pid_t tid;

	if (!agent_pid || getpid() != agent_pid)
		return; /* not started, or a vfork() child: hands off */
	pthread_mutex_lock(&pause_lock);
	if (pauses++ > 0 || !running) {
		pthread_mutex_unlock(&pause_lock);
		return;
	}
	pthread_mutex_lock(&conn_lock);
	atomic_store_explicit(&stop_word, 1, memory_order_release);
	futex_wake_all(&stop_word);
	/* Wakes a read() or send() in progress; a dump finishes first. */
	if (conn_is_ours(conn))
		shutdown(conn, SHUT_RDWR);
	pthread_mutex_unlock(&conn_lock);
	tid = atomic_load(&thread_tid);
	pthread_join(thread, NULL);
	running = false;
	wait_gone(tid);
	pthread_mutex_unlock(&pause_lock);
}

SW_INTERPOSER void agent_resume(void)
{
	if (!agent_pid || getpid() != agent_pid)
		return;
	pthread_mutex_lock(&pause_lock);
	if (pauses > 0 && --pauses == 0 && !running && agent_signo &&
	    start_thread() < 0)
		say("cannot start the agent thread again", -EAGAIN);
	pthread_mutex_unlock(&pause_lock);
}

static void atfork_child(void)
{
	agent_pid = getpid();
	/*
	 * Only this thread came along. The parent's connection did too: it
	 * is closed, or the daemon would see the parent leave only once
	 * this process is gone as well (a daemonizing program's ghost).
	 */
	pthread_mutex_init(&conn_lock, NULL);
	pthread_mutex_init(&pause_lock, NULL);
	if (conn_is_ours(conn))
		close(conn);
	conn = -1;
	pauses = 0;
	running = false;
	/* The child has no agent thread: it registers under its own pid. */
	if (start_thread() < 0)
		say("cannot start the agent thread in a child", -EAGAIN);
}

__attribute__((constructor)) static void agent_init(void)
{
	const char *off = getenv("STACKWATCH_DISABLE");
	const char *sock;
	int rc;

	if (off && strcmp(off, "1") == 0)
		return;
	sock = getenv("STACKWATCH_SOCKET");
	sock_is_default = !sock || !*sock; /* as paths_agent_socket() does */
	rc = paths_agent_socket(sock_path, sizeof(sock_path));
	if (rc < 0) {
		say("cannot use the agent socket path", rc);
		return;
	}
	rc = collect_install();
	if (rc < 0) {
		say("cannot install the dump signal handler", rc);
		return;
	}
	agent_signo = rc;
	agent_pid = getpid();
	pthread_mutex_lock(&pause_lock);
	rc = start_thread();
	pthread_mutex_unlock(&pause_lock);
	if (rc < 0) {
		say("cannot start the agent thread", rc);
		agent_signo = 0;
		return;
	}
	pthread_atfork(NULL, NULL, atfork_child);
	exec_quiesce_stop = agent_pause;
	exec_quiesce_start = agent_resume;
}
