/*
 * agent.c - libstackwatch-agent.so: loaded into a target with LD_PRELOAD
 * (or linked), it installs the collector's handler and, once the process
 * settles (settle.h: most exec or exit before), starts one thread,
 * "sw-agent", that registers with the daemon over a unix socket and
 * answers its dump requests with raw dumps (no symbols: the daemon does
 * that). A request may name threads the daemon has read by other means:
 * those get no signal and are left out of the answer (its HELLO says it
 * understands such requests, WIRE_FEAT_SKIP).
 *
 * The agent never exits, aborts, blocks the host's start-up or writes to
 * stdout. When it cannot install itself it writes one line to stderr and
 * stays inert. Without a daemon it retries with backoff (100 ms doubling
 * to 5 s).
 *
 * The thread has a descriptor table of its own, empty when it starts
 * (close_range(CLOSE_RANGE_UNSHARE)), and its connection lives there
 * alone. A program owns its descriptor numbers: it may close any of them
 * or put its own file on any with dup2(), numbers it never opened
 * included (a daemon closes every one from 3 up as it detaches). On a
 * table shared with the program, a check that a number is still our
 * socket and the send() or read() after it could never be one step: in
 * between, the program could put its own socket there, and a dump (its
 * stacks) went into it, or the agent read its data. Locks and
 * interposers of close(), dup2(), dup3(), close_range() and their
 * syscall() forms would close that gap only for calls made through them,
 * at a cost on every close() of a server, and only against callers that
 * had seen our current number: one that read it a moment before we took
 * a new number (at connect time) still closed ours. With tables apart the
 * kernel keeps them apart: no call of the program, through libc or not,
 * can name our socket, close it or put anything in its place, and no
 * call of ours can reach the program's files; its close() and dup2() are
 * libc's own. What that decides:
 * - A program that closes everything (a loop over 3..1023, close_range())
 *   closes only its own descriptors; the agent stays registered on the
 *   connection it had, as an agent should, and the program never sees
 *   our socket among its descriptors (/proc/PID/fd); it is under
 *   /proc/PID/task/TID/fd of the thread.
 * - fork() and vfork() copy the calling thread's table, which never held
 *   our socket: a child has nothing of the parent's connection (else the
 *   daemon would never see the parent go) and starts its own agent
 *   thread when it settles; exec() ends the thread and its table with it, and a
 *   re-loaded agent starts anew.
 * - Nothing can wake the thread out of a poll() on its socket by closing
 *   or shutting it down: it also polls a pipe of its own table, which
 *   agent_pause() opens for writing through /proc/self/task/TID/fd/N (a
 *   descriptor of the caller's, opened and closed at once) and writes a
 *   byte to, again until the thread is gone, since one written just
 *   before the thread drained the pipe is lost. No signal is used: the
 *   thread blocks every signal, ours too, so that one sent to the process
 *   on our number by someone else goes to the program's threads, or stays
 *   pending, as without us. Where the pipe cannot be opened so (a process
 *   that is not dumpable: its /proc entries are root's), poll() returns
 *   every SLICE_UNDUMPABLE_MS to look at the stop flag; else every
 *   WAIT_SLICE_MS. Our transfers never block outside poll().
 * - A kernel without CLOSE_RANGE_UNSHARE (before 5.9) gets the table by
 *   unshare(CLONE_FILES), a copy of the program's that the thread empties
 *   at once: for those microseconds its files have one more holder (a
 *   pipe's reader sees the end of a file a moment later). A thread that
 *   can have neither (a seccomp filter) never connects: it says so once
 *   on stderr and ends.
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
#include <dirent.h>
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
#include <linux/close_range.h>
#include <sched.h>
#include <time.h>
#include <unistd.h>

#include "agent.h"
#include "collector/collect.h"
#include "collector/exec.h"
#include "collector/signal/futex.h"
#include "collector/signal/handler.h"
#include "collector/signal/sigctx.h"
#include "collector/signal/sys.h"
#include "model/clock.h"
#include "model/paths.h"
#include "model/procfs.h"
#include "model/sockcheck.h"
#include "model/wire.h"
#include "settle.h"

#define BACKOFF_MIN_MS 100
#define BACKOFF_MAX_MS 5000

/* How long agent_pause() waits for the kernel to forget the thread. */
#define GONE_WAIT_MS 200

/* The longest the thread sleeps in poll() before it looks again. */
#define WAIT_SLICE_MS 5000
/* The slice where agent_pause() cannot reach the wake pipe. */
#define SLICE_UNDUMPABLE_MS 50

/* agent_pause()'s wakes: 1 ms apart at first, at most this much. */
#define WAKE_MAX_MS 64

static char sock_path[sizeof(((struct sockaddr_un *)0)->sun_path)];
static int agent_signo; /* nonzero once the handler is installed */
static int told_signo;	/* the signal the daemon was last told */
SW_FORK_STATE static pid_t agent_pid; /* whose thread it is */
static long start_delay_ms;	      /* STACKWATCH_START_DELAY_MS (settle.h) */

/* sock_path is the default, not $STACKWATCH_SOCKET: its path is checked. */
static bool sock_is_default;

/*
 * The thread and its connection: conn is a number in the thread's own
 * descriptor table, used by the thread alone. pause_lock serializes
 * starting and stopping the thread.
 */
SW_FORK_STATE static int conn = -1;
static _Atomic int wake_fd = -1; /* the wake pipe's read end, its table */
static _Atomic int waiting; /* 1: the thread is in (or going into) poll() */

SW_FORK_STATE static pthread_mutex_t pause_lock = PTHREAD_MUTEX_INITIALIZER;
SW_FORK_STATE static bool running; /* under pause_lock: a thread exists */
SW_FORK_STATE static bool
	wanted; /* under pause_lock: started (settle.h), not given up */
SW_FORK_STATE static bool
	rearm; /* under pause_lock: armed when the pause began */
SW_FORK_STATE static int pauses; /* under pause_lock: stopped while > 0 */
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

/*
 * Empties the thread's descriptor table of whatever fds it took from the
 * table it copied (unshare(CLONE_FILES) of a kernel before 5.9).
 */
static void close_copies(void)
{
	DIR *d = opendir("/proc/thread-self/fd");
	struct dirent *e;

	if (!d) {
		for (int fd = 0; fd < 65536; fd++)
			close(fd);
		return;
	}
	while ((e = readdir(d)))
		if (e->d_name[0] != '.' && atoi(e->d_name) != dirfd(d))
			close(atoi(e->d_name));
	closedir(d);
}

/*
 * Gives the calling thread (the agent's, as it starts) a descriptor table
 * of its own, empty, so that its connection is out of the program's
 * reach and the program's files out of ours (the opening comment). Raw
 * system calls: unshare() is an interposer of ours (isolate.c) that
 * would stop this very thread. Returns 0, or a negative errno with the
 * table still the program's.
 */
static int own_table(void)
{
	long rc = sys_call3(SYS_close_range, 0, ~0U, CLOSE_RANGE_UNSHARE);

	if (rc == 0)
		return 0;
	rc = sys_call2(SYS_unshare, CLONE_FILES, 0);
	if (rc < 0)
		return (int)rc;
	close_copies();
	return 0;
}

/*
 * The wake pipe, in the thread's own table, non-blocking both ways. Its
 * write end is kept open too, so that opening the read end's /proc entry
 * for writing finds a reader. -1 when there is none (then the clock).
 */
static void make_wake_pipe(void)
{
	int p[2];

	atomic_store(&wake_fd, -1);
	if (pipe2(p, O_CLOEXEC | O_NONBLOCK) == 0)
		atomic_store(&wake_fd, p[0]);
}

/* Empties the wake pipe. */
static void drain_wake(int rd)
{
	char buf[64];

	while (read(rd, buf, sizeof(buf)) > 0)
		;
}

/*
 * Waits until fd is ready for events, a wake, or WAIT_SLICE_MS: 0 for the
 * caller to try again, -ECANCELED when the thread is asked to stop. The
 * flag waiting and stop_word are written and read in opposite orders
 * here and in agent_pause(), sequentially consistent: either this sees
 * the stop and never sleeps, or agent_pause() sees the flag and wakes it.
 */
static int wait_io(int fd, short events)
{
	int rd = atomic_load(&wake_fd);
	struct pollfd p[2] = { { .fd = fd, .events = events },
			       { .fd = rd, .events = POLLIN } };
	int rc = 0, slice = WAIT_SLICE_MS;

	if (rd < 0 || prctl(PR_GET_DUMPABLE, 0, 0, 0, 0) != 1)
		slice = SLICE_UNDUMPABLE_MS;
	atomic_store(&waiting, 1);
	if (atomic_load(&stop_word))
		rc = -ECANCELED;
	else if (poll(p, rd >= 0 ? 2 : 1, slice) < 0 && errno != EINTR)
		rc = -errno;
	if (rd >= 0 && p[1].revents)
		drain_wake(rd);
	atomic_store(&waiting, 0);
	if (rc == 0 && stopping())
		rc = -ECANCELED;
	return rc;
}

/*
 * Sends (out) or receives n bytes at p over the connection fd. The
 * transfers never block: the thread waits in wait_io() alone, where
 * agent_pause() can wake it. Returns 0, -ECONNRESET when the daemon
 * closed the connection, -ECANCELED when the thread is asked to stop, or
 * the error.
 */
static int transfer(int fd, uint8_t *p, size_t n, bool out)
{
	while (n > 0) {
		ssize_t r = out ? send(fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT)
				: recv(fd, p, n, MSG_DONTWAIT);
		int rc;

		if (r > 0) {
			p += r;
			n -= (size_t)r;
			continue;
		}
		if (r == 0)
			return -ECONNRESET;
		if (errno == EINTR)
			continue;
		if (errno != EAGAIN && errno != EWOULDBLOCK)
			return -errno;
		rc = wait_io(fd, out ? POLLOUT : POLLIN);
		if (rc < 0)
			return rc;
	}
	return 0;
}

static int write_all(int fd, const uint8_t *p, size_t n)
{
	return transfer(fd, (uint8_t *)p, n, true);
}

static int read_all(int fd, uint8_t *p, size_t n)
{
	return transfer(fd, p, n, false);
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
	int fd, err;

	if (sock_is_default) {
		err = sockcheck_path(sock_path, euid, NULL);
		if (err < 0)
			return err;
	}
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	/* Our table starts empty: keep a stray write to stderr off the wire. */
	if (fd <= STDERR_FILENO) {
		int high = fcntl(fd, F_DUPFD_CLOEXEC, STDERR_FILENO + 1);

		close(fd);
		if (high < 0)
			return -errno;
		fd = high;
	}
	memcpy(sa.sun_path, sock_path, sizeof(sa.sun_path));
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		err = -errno;
		goto out_close;
	}
	err = sockcheck_peer(fd, euid, NULL);
	if (err < 0)
		goto out_close;
	if (stopping()) {
		err = -ECANCELED;
		goto out_close;
	}
	conn = fd;
	return fd;
out_close:
	close(fd);
	return err;
}

/* Closes the thread's connection. */
static void disconnect(void)
{
	if (conn >= 0)
		close(conn);
	conn = -1;
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

/*
 * The buffer answers are built in. Ours alone (one agent thread at a
 * time), and not on its stack: a fork() child has none of our thread,
 * and the buffer the parent's thread held is then the child's to free
 * (its new thread does), not memory nobody can reach.
 */
static struct wire_out serve_out;

/* Serves one connection until the daemon goes away or misbehaves. */
static void serve(int fd)
{
	uint8_t hdrbuf[WIRE_HDR_SIZE];
	uint8_t body[64];
	struct wire_hdr h;
	struct wire_dump_req req;
	int rc;

	wire_out_release(&serve_out);
	wire_out_init(&serve_out);
	if (send_hello(fd, &serve_out) < 0)
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
		rc = answer_dump(fd, &serve_out, h.seq, &req);
		wire_dump_req_release(&req);
		if (rc < 0)
			break;
		/* Dumps can be large; keep the buffer from staying so. */
		if (serve_out.cap > (1u << 20)) {
			wire_out_release(&serve_out);
			wire_out_init(&serve_out);
		}
	}
out:
	wire_out_release(&serve_out);
}

static void *agent_main(void *arg)
{
	static _Atomic int said;
	unsigned backoff = BACKOFF_MIN_MS;
	int rc;

	(void)arg;
	atomic_store(&wake_fd, -1);
	atomic_store(&thread_tid, (pid_t)sys_call0(SYS_gettid));
	prctl(PR_SET_NAME, "sw-agent", 0, 0, 0);
	rc = own_table();
	if (rc < 0) {
		if (!atomic_exchange(&said, 1))
			say("no descriptor table of its own, not connecting",
			    rc);
		return NULL;
	}
	make_wake_pipe();
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
 * a signal, and is woken through its pipe). Under pause_lock.
 */
static int start_thread(void)
{
	sigset_t all, old;
	pthread_attr_t attr;
	int rc;

	collect_note_seccomp();
	atomic_store(&stop_word, 0);
	atomic_store(&thread_tid, 0);
	atomic_store(&waiting, 0);
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

/*
 * Wakes the thread tid out of poll(): a byte into its wake pipe, through
 * the pipe's entry in /proc (it lives in the thread's table, not ours),
 * by a descriptor of the caller's opened and closed here.
 */
SW_INTERPOSER static void wake(pid_t tid)
{
	int rd = atomic_load(&wake_fd), w;
	char path[64];

	if (rd < 0 || tid <= 0)
		return;
	snprintf(path, sizeof(path), "/proc/self/task/%d/fd/%d", (int)tid, rd);
	w = open(path, O_WRONLY | O_NONBLOCK | O_CLOEXEC);
	if (w < 0)
		return;
	(void)!write(w, "w", 1);
	close(w);
}

/*
 * Joins the thread, asked to stop: while it sits in poll(), it is woken,
 * again and again at growing intervals, since a wake that comes just
 * before it goes into poll() is lost. A dump in progress finishes first.
 */
SW_INTERPOSER static void join_thread(pid_t tid)
{
	unsigned ms = 1;

	for (;;) {
		struct timespec ts;

		if (atomic_load(&waiting))
			wake(tid);
		clock_gettime(CLOCK_MONOTONIC, &ts);
		ts.tv_nsec += (long)ms * 1000000L;
		ts.tv_sec += ts.tv_nsec / 1000000000L;
		ts.tv_nsec %= 1000000000L;
		if (pthread_clockjoin_np(thread, NULL, CLOCK_MONOTONIC, &ts) !=
		    ETIMEDOUT)
			return;
		ms = ms * 2 > WAKE_MAX_MS ? WAKE_MAX_MS : ms * 2;
	}
}

SW_INTERPOSER void agent_pause(void)
{
	bool disarmed = false;
	pid_t tid;

	if (!agent_pid || getpid() != agent_pid)
		return; /* not started, or a vfork() child: hands off */
	/*
	 * Not started yet: it must not start in between either (a filter
	 * for every thread would take in a thread of ours, and the settle
	 * checks' own calls). agent_resume() arms it again. Waited for
	 * outside the lock, which a check that is starting the thread takes.
	 */
	if (settle_armed()) {
		settle_disarm();
		settle_quiesce();
		disarmed = true;
	}
	pthread_mutex_lock(&pause_lock);
	rearm |= disarmed;
	if (pauses++ > 0 || !running) {
		pthread_mutex_unlock(&pause_lock);
		return;
	}
	atomic_store(&stop_word, 1); /* before waiting is read: wait_io() */
	futex_wake_all(&stop_word);
	tid = atomic_load(&thread_tid);
	join_thread(tid);
	running = false;
	wait_gone(tid);
	pthread_mutex_unlock(&pause_lock);
}

SW_INTERPOSER void agent_resume(void)
{
	if (!agent_pid || getpid() != agent_pid)
		return;
	pthread_mutex_lock(&pause_lock);
	if (pauses > 0 && --pauses == 0) {
		if (rearm)
			settle_arm();
		rearm = false;
		if (!running && wanted && agent_signo && start_thread() < 0)
			say("cannot start the agent thread again", -EAGAIN);
	}
	pthread_mutex_unlock(&pause_lock);
}

/*
 * The program's threads (settle.h's hooks: ours never keeps a process
 * alive, glibc ending it when the last of them ends), and the key whose
 * destructor tells
 * that one ends: glibc runs it in every thread made by pthread_create()
 * and in a main thread that calls pthread_exit(), before it counts the
 * thread out. 0 counted: the last one is ending, ours stops now.
 */
static pthread_key_t leave_key;
static bool leave_key_ok;
SW_FORK_STATE static _Atomic int program_threads = 1;
SW_FORK_STATE static _Atomic int left_alone; /* ours stopped for that */

SW_INTERPOSER static void thread_leaves(void *v)
{
	(void)v;
	if (atomic_fetch_sub(&program_threads, 1) == 1 &&
	    !atomic_exchange(&left_alone, 1))
		agent_pause();
}

static void agent_thread_made(void)
{
	if (atomic_fetch_add(&program_threads, 1) == 0 &&
	    atomic_exchange(&left_alone, 0))
		agent_resume();
}

static void agent_thread_unmade(void)
{
	atomic_fetch_sub(&program_threads, 1);
}

static void agent_thread_enters(void)
{
	if (leave_key_ok)
		pthread_setspecific(leave_key, (void *)1);
}

static int agent_own_start(void *(*fn)(void *))
{
	return fn == agent_main;
}

/*
 * The process settled (settle.c): its thread starts, unless one runs or
 * a pause is on (the thread starts when it ends; after a TSYNC filter,
 * never). Either way it is no longer waited for.
 */
static void start_settled(void)
{
	settle_disarm();
	if (!agent_pid || getpid() != agent_pid)
		return;
	pthread_mutex_lock(&pause_lock);
	if (!wanted && agent_signo) {
		wanted = true;
		if (pauses == 0 && !running && start_thread() < 0)
			say("cannot start the agent thread", -EAGAIN);
	}
	pthread_mutex_unlock(&pause_lock);
}

/*
 * Whether this very process was named to start at once: "stackwatch run"
 * puts its pid, which the command it execs keeps, in STACKWATCH_START_PID;
 * that command's children (other pids) settle like any.
 */
static bool named_to_start(void)
{
	const char *v = getenv("STACKWATCH_START_PID");
	char *end;
	long pid;

	if (!v || !*v)
		return false;
	errno = 0;
	pid = strtol(v, &end, 10);
	return errno == 0 && *end == '\0' && pid > 0 && pid == (long)getpid();
}

/* At once without a delay; else at the first settled point. */
static void start_or_arm(void)
{
	if (start_delay_ms > 0) {
		settle_arm();
		return;
	}
	pthread_mutex_lock(&pause_lock);
	wanted = true;
	if (start_thread() < 0)
		say("cannot start the agent thread", -EAGAIN);
	pthread_mutex_unlock(&pause_lock);
}

static void atfork_child(void)
{
	/* A raw call: a child that exits at once binds nothing. */
	agent_pid = (pid_t)sys_call0(SYS_getpid);
	/*
	 * Only this thread came along, with a copy of its own table: the
	 * parent's connection, in the agent thread's table, stayed behind,
	 * so the daemon sees the parent leave when it does (a daemonizing
	 * program's first process). conn is a number of that other table:
	 * nothing to close here.
	 */
	if (pause_lock.__data.__lock != 0)
		pthread_mutex_init(&pause_lock, NULL);
	conn = -1;
	pauses = 0;
	running = false;
	wanted = false;
	rearm = false;
	/*
	 * The child has no agent thread: it registers under its own pid,
	 * once it settles (most children exec or exit at once).
	 */
	settle_disarm();
	/* This thread is the child's only one, and the last to end. */
	atomic_store(&program_threads, 1);
	atomic_store(&left_alone, 0);
	agent_thread_enters();
	if (agent_signo)
		start_or_arm();
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
	/* Libunwind and the rest wait for a first dump: most never get one. */
	rc = collect_install_early();
	if (rc < 0) {
		say("cannot install the dump signal handler", rc);
		return;
	}
	agent_signo = rc;
	agent_pid = getpid();
	/* The main thread: it may end by pthread_exit(), the last. */
	leave_key_ok = pthread_key_create(&leave_key, thread_leaves) == 0;
	agent_thread_enters();
	if (leave_key_ok) {
		static const struct settle_thread_hooks hooks = {
			.made = agent_thread_made,
			.unmade = agent_thread_unmade,
			.enters = agent_thread_enters,
			.own = agent_own_start,
		};

		settle_set_thread_hooks(&hooks);
	}
	start_delay_ms = settle_init(start_settled);
	pthread_atfork(NULL, NULL, atfork_child);
	exec_quiesce_stop = agent_pause;
	exec_quiesce_start = agent_resume;
	exec_before_filter = settle_now;
	if (named_to_start()) {
		pthread_mutex_lock(&pause_lock);
		wanted = true;
		if (start_thread() < 0)
			say("cannot start the agent thread", -EAGAIN);
		pthread_mutex_unlock(&pause_lock);
		return;
	}
	start_or_arm();
}
