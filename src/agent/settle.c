/*
 * settle.c - the agent's thread starts where the process settles
 * (settle.h), and the waits that tell where that is.
 *
 * The point has to be a call: a thread that would wait out the delay is
 * the very cost avoided, and a timer's signal would interrupt what the
 * process is doing (and a handler may not create a thread). A call of the
 * program into one of these libc functions is a point where the calling
 * thread holds none of libc's locks, so pthread_create() there is what
 * the program itself could have done, with three exceptions checked
 * before anything starts:
 * - a vfork() child (our pid is not its pid): it shares its parent's
 *   memory and must do nothing but exec or _exit;
 * - a signal handler of the program's that calls a wait (poll(), read(),
 *   sleep() are async-signal-safe): it may have interrupted malloc() or
 *   pthread_create() itself. The thread is on an alternate signal stack
 *   (sigaltstack() says), or a signal frame is on its stack between here
 *   and the top: the kernel's frame begins with the handler's return
 *   address, the restorer of the program's sigaction(), so the stack is
 *   searched for any restorer of a handler the program has installed,
 *   through process_vm_readv() on ourselves, or /proc/self/mem where a
 *   filter forbids it (a fault ends the search, it does not crash). A word that
 * matches for another reason (an old frame left in an unset local) only puts
 * the start off to a later call;
 * - a thread under a seccomp mode the program entered through libc
 *   (exec.c), or created by one: a new thread would inherit its filter,
 *   and our calls are not in its allow-list. Another thread may start it;
 *   after a filter given to every thread (TSYNC), none does.
 *
 * These checks are async-signal-safe (raw system calls, atomics, a static
 * buffer under a flag): they may run in a handler, to find out that they
 * do.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <semaphore.h>
#include <signal.h>
#include <stddef.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#include "collector/exec.h"
#include "collector/signal/handler.h"
#include "collector/signal/sigctx.h"
#include "collector/signal/sigmask.h"
#include "collector/signal/sys.h"
#include "collector/waits.h"
#include "model/clock.h"
#include "settle.h"

/* The most of a thread's stack searched for a signal frame. */
#define SCAN_MAX_BYTES (8u << 20)
/* Distinct restorers looked for (every libc handler has the same one). */
#define RESTORERS_MAX 8

SW_FORK_STATE static _Atomic int pending;  /* 1: armed, not yet started */
SW_FORK_STATE static _Atomic int checking; /* 1: a check in progress */
static uint64_t delay_ns;
SW_FORK_STATE static _Atomic uint64_t born_ns; /* when armed (monotonic) */
SW_FORK_STATE static pid_t armed_pid;
static void (*start_fn)(void); /* the agent's: starts the thread */

/* Under checking. */
static uintptr_t restorers[RESTORERS_MAX];
static uint64_t scan_buf[2048];

/*
 * The restorers of the program's handlers into restorers[]: their count,
 * 0 when the program has no handler (our own handler never calls these
 * functions), -1 when one has none (then any stack may hold its frame).
 */
static int find_restorers(void)
{
	int n = 0;

	for (int sig = 1; sig <= 64; sig++) {
		struct sys_sigaction ka = { 0 };
		bool known = false;

		if (sig == SIGKILL || sig == SIGSTOP || sig == handler_signo)
			continue;
		if (sys_call4(SYS_rt_sigaction, sig, NULL, &ka,
			      sizeof(uint64_t)) != 0)
			continue;
		if ((uintptr_t)ka.handler == (uintptr_t)SIG_DFL ||
		    (uintptr_t)ka.handler == (uintptr_t)SIG_IGN)
			continue;
		if (!(ka.flags & SYS_SA_RESTORER))
			return -1;
		for (int i = 0; i < n; i++)
			known |= restorers[i] == (uintptr_t)ka.restorer;
		if (known)
			continue;
		if (n == RESTORERS_MAX)
			return -1;
		restorers[n++] = (uintptr_t)ka.restorer;
	}
	return n;
}

/* A signal frame's words: the restorer, then the ucontext to the code
 * segment of the interrupted registers. */
#define UC_WORD(field) (1 + offsetof(ucontext_t, field) / 8)
#define GREG_WORD(r) (UC_WORD(uc_mcontext.gregs) + (r))
#define FRAME_WORDS (GREG_WORD(REG_CSGSFS) + 1)
#define UC_FLAGS_KNOWN 0x7ull /* UC_FP_XSTATE, _SIGCONTEXT_SS, _STRICT_... */
#define USER_CS 0x33u	      /* 64-bit user code */
#ifndef SS_AUTODISARM
#define SS_AUTODISARM (1u << 31)
#endif

/*
 * Whether the words f[0, FRAME_WORDS) at address at are a signal frame
 * the kernel wrote: a restorer, then a ucontext whose fields are what
 * the kernel puts there (known flags, no link, a valid stack state,
 * user code interrupted at a pc, below its sp). A restorer's address
 * left in a local that was never set, or in what is left of an old frame
 * that later calls wrote over, is not one: a fork child keeps its
 * parent's frames above the fork for good, and such a word there would
 * otherwise keep its thread from ever starting (a PostgreSQL backend).
 */
static bool signal_frame_at(const uint64_t *f, uint64_t at)
{
	uint32_t ss_flags = (uint32_t)f[UC_WORD(uc_stack.ss_flags)];

	ss_flags &= ~(uint32_t)SS_AUTODISARM;
	return !(f[UC_WORD(uc_flags)] & ~UC_FLAGS_KNOWN) &&
	       f[UC_WORD(uc_link)] == 0 &&
	       (ss_flags == 0 || ss_flags == SS_ONSTACK ||
		ss_flags == SS_DISABLE) &&
	       (f[GREG_WORD(REG_CSGSFS)] & 0xffff) == USER_CS &&
	       f[GREG_WORD(REG_RIP)] != 0 && f[GREG_WORD(REG_RSP)] > at;
}

/*
 * Whether words [0, count) of scan_buf, read from address at, hold a
 * signal frame of one of the n restorers. One too near the end to be
 * whole is left to the next read, which starts FRAME_WORDS before this
 * one ends (at the end of the stack, no frame fits).
 */
static bool holds_restorer(size_t count, int n, uint64_t at)
{
	for (size_t w = 0; w + FRAME_WORDS <= count; w++)
		for (int i = 0; i < n; i++)
			if (scan_buf[w] == restorers[i] &&
			    signal_frame_at(&scan_buf[w], at + w * 8))
				return true;
	return false;
}

/*
 * Whether the calling thread may be inside a handler of the program's.
 * noinline: the search starts at this function's frame, above the locals
 * of find_restorers() (which held the restorers it read).
 */
/*
 * Reads scan_buf's worth of our own memory at at into it: the bytes read
 * up to the first unmapped page, or a negative errno. process_vm_readv()
 * first; where a filter forbids it (a container runtime's default profile
 * does), /proc/self/mem, opened once into *mem. Both fail on a bad page
 * instead of faulting.
 */
static long read_self(pid_t pid, uintptr_t at, int *mem)
{
	struct iovec local = { scan_buf, sizeof(scan_buf) };
	struct iovec remote = { (void *)at, sizeof(scan_buf) };
	long got;

	if (*mem < 0) {
		got = sys_call6(SYS_process_vm_readv, pid, (long)&local, 1,
				(long)&remote, 1, 0);
		if (got != -ENOSYS && got != -EPERM)
			return got;
		*mem = (int)sys_call4(SYS_openat, AT_FDCWD,
				      "/proc/thread-self/mem",
				      O_RDONLY | O_CLOEXEC, 0);
		if (*mem < 0)
			return *mem;
	}
	got = sys_call4(SYS_pread64, *mem, scan_buf, sizeof(scan_buf), at);
	return got == -EIO ? 0 : got;
}

__attribute__((noinline)) static bool in_program_handler(void)
{
	/* This thread's: the first thread may have exited, its memory
	 * gone with it as far as its pid is concerned. */
	pid_t pid = (pid_t)sys_call0(SYS_gettid);
	uintptr_t at = (uintptr_t)__builtin_frame_address(0) & ~(uintptr_t)7;
	stack_t ss = { 0 };
	bool found = false;
	int n, mem = -1;

	if (sys_call2(SYS_sigaltstack, NULL, &ss) == 0 &&
	    (ss.ss_flags & SS_ONSTACK))
		return true;
	n = find_restorers();
	if (n <= 0)
		return n < 0;
	for (size_t done = 0; done < SCAN_MAX_BYTES;) {
		long got = read_self(pid, at, &mem);

		if (got == -ENOSYS || got == -EPERM || got == -EACCES) {
			found = true; /* cannot tell */
			break;
		}
		if (got <= 0)
			break;
		if (holds_restorer((size_t)got / sizeof(uint64_t), n, at)) {
			found = true;
			break;
		}
		if ((size_t)got < sizeof(scan_buf))
			break;
		/* Overlapping: a frame cut at the end is whole in the next. */
		at += (uintptr_t)got - FRAME_WORDS * 8;
		done += (size_t)got - FRAME_WORDS * 8;
	}
	if (mem >= 0)
		sys_call2(SYS_close, mem, 0);
	return found;
}

/*
 * A settled point, maybe: wait_ns is how long the call may block (-1:
 * with no end, 0: not at all). Starts the thread when the process has
 * lived the delay, or the call may outlast what is left of it.
 */
static void settle_check(int64_t wait_ns)
{
	uint64_t age, left;

	if (!atomic_load_explicit(&pending, memory_order_relaxed) ||
	    exec_seccomp_here)
		return;
	age = clock_now_ns() - atomic_load(&born_ns);
	left = age < delay_ns ? delay_ns - age : 0;
	if (left > 0 && wait_ns >= 0 && (uint64_t)wait_ns <= left)
		return;
	if (atomic_exchange(&checking, 1))
		return; /* another thread checks, or a handler interrupted us */
	if (atomic_load(&pending) &&
	    (pid_t)sys_call0(SYS_getpid) == armed_pid && !in_program_handler())
		start_fn();
	atomic_store(&checking, 0);
}

/*
 * A read on fd, which blocks or not: while the process is young, a read
 * that would not block (a file, data waiting) is no settled point; one
 * that would is a wait with no end. Asked by a poll() of no time, raw
 * (ours is an interposer), only while armed.
 */
static void settle_fd(int fd)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	uint64_t age;

	if (!atomic_load_explicit(&pending, memory_order_relaxed) ||
	    exec_seccomp_here)
		return;
	age = clock_now_ns() - atomic_load(&born_ns);
	if (age >= delay_ns)
		settle_check(0);
	else if (sys_call3(SYS_poll, (long)&p, 1, 0) == 0)
		settle_check(-1);
}

void settle_now(void)
{
	if (atomic_load_explicit(&pending, memory_order_relaxed))
		settle_check(-1);
}

void settle_arm(void)
{
	armed_pid = (pid_t)sys_call0(SYS_getpid);
	atomic_store(&born_ns, clock_now_ns());
	atomic_store(&checking, 0);
	atomic_store(&pending, 1);
	sigmask_settle_hook = settle_check;
}

void settle_quiesce(void)
{
	for (int i = 0; i < 100000 && atomic_load(&checking); i++)
		sched_yield();
}

bool settle_armed(void)
{
	return atomic_load(&pending) != 0;
}

void settle_disarm(void)
{
	atomic_store(&pending, 0);
	sigmask_settle_hook = NULL;
}

/* An absolute time on clock id, as ns from now (0 if past). */
static int64_t until_ns(clockid_t id, const struct timespec *abs)
{
	struct timespec now;
	int64_t d;

	if (!abs || clock_gettime(id, &now) != 0)
		return -1;
	d = (int64_t)(abs->tv_sec - now.tv_sec) * 1000000000 +
	    (abs->tv_nsec - now.tv_nsec);
	return d > 0 ? d : 0;
}

static int64_t ms_ns(int ms)
{
	return ms < 0 ? -1 : (int64_t)ms * 1000000;
}

/* A wait of a call's waitpid()-style options: none with WNOHANG. */
static int64_t options_ns(int options)
{
	return (options & WNOHANG) ? 0 : -1;
}

/*
 * libc's functions, resolved by the constructor (settle_init()) and
 * again on a call that comes before it (another library's constructor).
 */
enum real {
	R_POLL,
	R_POLL_CHK,
	R_SELECT,
	R_EPOLL_WAIT,
	R_NANOSLEEP,
	R_CLOCK_NANOSLEEP,
	R_SLEEP,
	R_USLEEP,
	R_PAUSE,
	R_WAIT,
	R_WAITPID,
	R_WAIT3,
	R_WAIT4,
	R_WAITID,
	R_ACCEPT,
	R_ACCEPT4,
	R_PTHREAD_JOIN,
	R_SEM_WAIT,
	R_SEM_TIMEDWAIT,
	R_SEM_CLOCKWAIT,
	R_PTHREAD_CREATE,
	R_READ,
	R_READV,
	R_READ_CHK,
	R_RECV,
	R_RECVFROM,
	R_RECVMSG,
	R_COND_WAIT,
	R_COND_TIMEDWAIT,
	R_COND_CLOCKWAIT,
	R_FGETS,
	R_GETCHAR,
	R_GETC,
	R_FGETC,
	R_GETLINE,
	R_GETDELIM,
	R_FREAD,
	R_COUNT
};

static const char *const real_names[R_COUNT] = {
	"poll",
	"__poll_chk",
	"select",
	"epoll_wait",
	"nanosleep",
	"clock_nanosleep",
	"sleep",
	"usleep",
	"pause",
	"wait",
	"waitpid",
	"wait3",
	"wait4",
	"waitid",
	"accept",
	"accept4",
	"pthread_join",
	"sem_wait",
	"sem_timedwait",
	"sem_clockwait",
	"pthread_create",
	"read",
	"readv",
	"__read_chk",
	"recv",
	"recvfrom",
	"recvmsg",
	"pthread_cond_wait",
	"pthread_cond_timedwait",
	"pthread_cond_clockwait",
	"fgets",
	"getchar",
	"getc",
	"fgetc",
	"getline",
	"getdelim",
	"fread",
};

static void *volatile reals[R_COUNT];

static void *real(enum real r)
{
	void *f = reals[r];

	if (!f) {
		/* The condition variables of glibc 2.3.2 on, not the old. */
		if (r == R_COND_WAIT || r == R_COND_TIMEDWAIT)
			f = dlvsym(RTLD_NEXT, real_names[r], "GLIBC_2.3.2");
		if (!f)
			f = dlsym(RTLD_NEXT, real_names[r]);
		reals[r] = f;
	}
	return f;
}

long settle_init(void (*start)(void))
{
	const char *env = getenv("STACKWATCH_START_DELAY_MS");
	long ms = SETTLE_DELAY_MS_DEFAULT;

	start_fn = start;
	for (int r = 0; r < R_COUNT; r++)
		real((enum real)r);
	if (env && *env) {
		char *end;
		long v;

		errno = 0;
		v = strtol(env, &end, 10);
		if (errno == 0 && *end == '\0' && v >= 0 && v <= 86400000L)
			ms = v;
	}
	delay_ns = (uint64_t)ms * 1000000ull;
	return ms;
}

/*
 * Each interposer: the check (one load while nothing is armed), then
 * libc's function, or ENOSYS (-1 and errno, or the error for the
 * pthread ones) when it could not be found.
 */
#define CALL_REAL(r, name, err, ...)     \
	do {                             \
		__typeof__(&name) f_;    \
		*(void **)&f_ = real(r); \
		if (!f_) {               \
			errno = ENOSYS;  \
			return (err);    \
		}                        \
		return f_(__VA_ARGS__);  \
	} while (0)

static inline void settle(int64_t wait_ns)
{
	if (atomic_load_explicit(&pending, memory_order_relaxed))
		settle_check(wait_ns);
}

SW_INTERPOSER int poll(struct pollfd *fds, nfds_t n, int timeout)
{
	settle(ms_ns(timeout));
	CALL_REAL(R_POLL, poll, -1, fds, n, timeout);
}

/* poll() of a program built with _FORTIFY_SOURCE. */
int __poll_chk(struct pollfd *fds, nfds_t n, int timeout, size_t fdslen);

SW_INTERPOSER int __poll_chk(struct pollfd *fds, nfds_t n, int timeout,
			     size_t fdslen)
{
	settle(ms_ns(timeout));
	CALL_REAL(R_POLL_CHK, __poll_chk, -1, fds, n, timeout, fdslen);
}

SW_INTERPOSER int select(int n, fd_set *rd, fd_set *wr, fd_set *ex,
			 struct timeval *tv)
{
	settle(!tv ? -1
		   : (int64_t)tv->tv_sec * 1000000000 +
			       (int64_t)tv->tv_usec * 1000);
	CALL_REAL(R_SELECT, select, -1, n, rd, wr, ex, tv);
}

SW_INTERPOSER int epoll_wait(int epfd, struct epoll_event *ev, int max,
			     int timeout)
{
	settle(ms_ns(timeout));
	CALL_REAL(R_EPOLL_WAIT, epoll_wait, -1, epfd, ev, max, timeout);
}

SW_INTERPOSER int nanosleep(const struct timespec *req, struct timespec *rem)
{
	settle(req ? waits_ts_ns(req) : 0);
	CALL_REAL(R_NANOSLEEP, nanosleep, -1, req, rem);
}

SW_INTERPOSER int clock_nanosleep(clockid_t id, int flags,
				  const struct timespec *req,
				  struct timespec *rem)
{
	settle(!req			 ? 0
	       : (flags & TIMER_ABSTIME) ? until_ns(id, req)
					 : waits_ts_ns(req));
	CALL_REAL(R_CLOCK_NANOSLEEP, clock_nanosleep, ENOSYS, id, flags, req,
		  rem);
}

SW_INTERPOSER unsigned int sleep(unsigned int s)
{
	settle((int64_t)s * 1000000000);
	CALL_REAL(R_SLEEP, sleep, s, s);
}

SW_INTERPOSER int usleep(useconds_t us)
{
	settle((int64_t)us * 1000);
	CALL_REAL(R_USLEEP, usleep, -1, us);
}

SW_INTERPOSER int pause(void)
{
	settle(-1);
	CALL_REAL(R_PAUSE, pause, -1);
}

SW_INTERPOSER pid_t wait(int *status)
{
	settle(-1);
	CALL_REAL(R_WAIT, wait, -1, status);
}

SW_INTERPOSER pid_t waitpid(pid_t pid, int *status, int options)
{
	settle(options_ns(options));
	CALL_REAL(R_WAITPID, waitpid, -1, pid, status, options);
}

SW_INTERPOSER pid_t wait3(int *status, int options, struct rusage *ru)
{
	settle(options_ns(options));
	CALL_REAL(R_WAIT3, wait3, -1, status, options, ru);
}

SW_INTERPOSER pid_t wait4(pid_t pid, int *status, int options,
			  struct rusage *ru)
{
	settle(options_ns(options));
	CALL_REAL(R_WAIT4, wait4, -1, pid, status, options, ru);
}

SW_INTERPOSER int waitid(idtype_t type, id_t id, siginfo_t *info, int options)
{
	settle(options_ns(options));
	CALL_REAL(R_WAITID, waitid, -1, type, id, info, options);
}

SW_INTERPOSER int accept(int fd, struct sockaddr *addr, socklen_t *len)
{
	settle(-1);
	CALL_REAL(R_ACCEPT, accept, -1, fd, addr, len);
}

SW_INTERPOSER int accept4(int fd, struct sockaddr *addr, socklen_t *len,
			  int flags)
{
	settle(-1);
	CALL_REAL(R_ACCEPT4, accept4, -1, fd, addr, len, flags);
}

SW_INTERPOSER int pthread_join(pthread_t t, void **ret)
{
	settle(-1);
	CALL_REAL(R_PTHREAD_JOIN, pthread_join, ENOSYS, t, ret);
}

SW_INTERPOSER int sem_wait(sem_t *s)
{
	settle(-1);
	CALL_REAL(R_SEM_WAIT, sem_wait, -1, s);
}

SW_INTERPOSER int sem_timedwait(sem_t *s, const struct timespec *abs)
{
	settle(until_ns(CLOCK_REALTIME, abs));
	CALL_REAL(R_SEM_TIMEDWAIT, sem_timedwait, -1, s, abs);
}

SW_INTERPOSER int sem_clockwait(sem_t *s, clockid_t id,
				const struct timespec *abs)
{
	settle(until_ns(id, abs));
	CALL_REAL(R_SEM_CLOCKWAIT, sem_clockwait, -1, s, id, abs);
}

static struct settle_thread_hooks thread_hooks;

void settle_set_thread_hooks(const struct settle_thread_hooks *h)
{
	thread_hooks = *h;
}

/*
 * A thread of the program's: counted in while it runs (settle.h); one
 * created by a thread under a seccomp mode is under it too.
 */
struct program_start {
	void *(*fn)(void *);
	void *arg;
	bool filtered;
	bool counted; /* made() was told */
};

/* In the interposers' section: unwinders leave its frame out. */
SW_INTERPOSER static void *start_program(void *p)
{
	struct program_start s = *(struct program_start *)p;

	free(p);
	if (s.filtered)
		exec_seccomp_here = 1;
	if (s.counted && thread_hooks.enters)
		thread_hooks.enters();
	return s.fn(s.arg);
}

/* A new thread of the program's: ours first, once the delay is over. */
SW_INTERPOSER int pthread_create(pthread_t *t, const pthread_attr_t *attr,
				 void *(*fn)(void *), void *arg)
{
	int (*f)(pthread_t *, const pthread_attr_t *, void *(*)(void *),
		 void *);
	struct program_start *s;
	int rc;

	settle(0);
	*(void **)&f = real(R_PTHREAD_CREATE);
	if (!f)
		return EAGAIN;
	if (thread_hooks.own && thread_hooks.own(fn))
		return f(t, attr, fn, arg);
	s = malloc(sizeof(*s));
	/* Uncounted, it would only let ours stop early; filtered, it must
	 * not start at all. */
	if (!s)
		return exec_seccomp_here ? EAGAIN : f(t, attr, fn, arg);
	s->fn = fn;
	s->arg = arg;
	s->filtered = exec_seccomp_here != 0;
	s->counted =
		thread_hooks.made && thread_hooks.unmade && thread_hooks.enters;
	if (s->counted)
		thread_hooks.made();
	rc = f(t, attr, start_program, s);
	if (rc != 0) {
		if (s->counted)
			thread_hooks.unmade();
		free(s);
	}
	return rc;
}

static inline void settle_on(int fd)
{
	if (atomic_load_explicit(&pending, memory_order_relaxed))
		settle_fd(fd);
}

SW_INTERPOSER ssize_t read(int fd, void *buf, size_t n)
{
	settle_on(fd);
	CALL_REAL(R_READ, read, -1, fd, buf, n);
}

SW_INTERPOSER ssize_t readv(int fd, const struct iovec *iov, int n)
{
	settle_on(fd);
	CALL_REAL(R_READV, readv, -1, fd, iov, n);
}

/* read() of a program built with _FORTIFY_SOURCE. */
ssize_t __read_chk(int fd, void *buf, size_t n, size_t buflen);

SW_INTERPOSER ssize_t __read_chk(int fd, void *buf, size_t n, size_t buflen)
{
	settle_on(fd);
	CALL_REAL(R_READ_CHK, __read_chk, -1, fd, buf, n, buflen);
}

SW_INTERPOSER ssize_t recv(int fd, void *buf, size_t n, int flags)
{
	settle_on(fd);
	CALL_REAL(R_RECV, recv, -1, fd, buf, n, flags);
}

SW_INTERPOSER ssize_t recvfrom(int fd, void *buf, size_t n, int flags,
			       struct sockaddr *from, socklen_t *len)
{
	settle_on(fd);
	CALL_REAL(R_RECVFROM, recvfrom, -1, fd, buf, n, flags, from, len);
}

SW_INTERPOSER ssize_t recvmsg(int fd, struct msghdr *msg, int flags)
{
	settle_on(fd);
	CALL_REAL(R_RECVMSG, recvmsg, -1, fd, msg, flags);
}

/*
 * A read from a stream: one of its descriptor when its buffer is empty
 * (glibc's FILE says, read without its lock: a hint is all it takes).
 */
static inline void settle_stream(FILE *f)
{
	if (atomic_load_explicit(&pending, memory_order_relaxed) && f &&
	    f->_IO_read_ptr >= f->_IO_read_end)
		settle_fd(fileno_unlocked(f));
}

SW_INTERPOSER char *fgets(char *buf, int n, FILE *f)
{
	settle_stream(f);
	CALL_REAL(R_FGETS, fgets, NULL, buf, n, f);
}

/* (stdio.h has inline getchar() and getline(): no noinline on these) */
#define SW_INTERPOSER_STDIO __attribute__((section("sw_interpose")))

SW_INTERPOSER_STDIO int getchar(void)
{
	settle_stream(stdin);
	CALL_REAL(R_GETCHAR, getchar, EOF);
}

SW_INTERPOSER int getc(FILE *f)
{
	settle_stream(f);
	CALL_REAL(R_GETC, getc, EOF, f);
}

SW_INTERPOSER int fgetc(FILE *f)
{
	settle_stream(f);
	CALL_REAL(R_FGETC, fgetc, EOF, f);
}

SW_INTERPOSER_STDIO ssize_t getline(char **line, size_t *n, FILE *f)
{
	settle_stream(f);
	CALL_REAL(R_GETLINE, getline, -1, line, n, f);
}

SW_INTERPOSER ssize_t getdelim(char **line, size_t *n, int delim, FILE *f)
{
	settle_stream(f);
	CALL_REAL(R_GETDELIM, getdelim, -1, line, n, delim, f);
}

SW_INTERPOSER size_t fread(void *buf, size_t size, size_t n, FILE *f)
{
	settle_stream(f);
	CALL_REAL(R_FREAD, fread, 0, buf, size, n, f);
}

SW_INTERPOSER int pthread_cond_wait(pthread_cond_t *c, pthread_mutex_t *m)
{
	settle(-1);
	CALL_REAL(R_COND_WAIT, pthread_cond_wait, ENOSYS, c, m);
}

SW_INTERPOSER int pthread_cond_timedwait(pthread_cond_t *c, pthread_mutex_t *m,
					 const struct timespec *abs)
{
	settle(until_ns(CLOCK_REALTIME, abs));
	CALL_REAL(R_COND_TIMEDWAIT, pthread_cond_timedwait, ENOSYS, c, m, abs);
}

SW_INTERPOSER int pthread_cond_clockwait(pthread_cond_t *c, pthread_mutex_t *m,
					 clockid_t id,
					 const struct timespec *abs)
{
	settle(until_ns(id, abs));
	CALL_REAL(R_COND_CLOCKWAIT, pthread_cond_clockwait, ENOSYS, c, m, id,
		  abs);
}
