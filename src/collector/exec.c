/*
 * exec.c - the exec family, made safe against a dump in progress.
 *
 * A real-time signal pending on the thread that calls execve() survives
 * into the new program, where our handler is gone and the signal's
 * default action kills it. So every way into execve that a program takes
 * through libc waits for a dump in progress to end and holds off new ones
 * (dumplock.h) until the exec either replaces us or fails, and first
 * takes back any signal of ours still pending on the calling thread (one a
 * dump left behind when the thread could not take it in time). glibc's
 * execv, execvp, execl... call execve internally, not through the PLT, so
 * each is defined here; so is syscall(), for SYS_execve and SYS_execveat
 * made through it. Only an exec by a raw system call instruction escapes.
 *
 * Part of the collector, so the library has it as well as the agent. A
 * child of vfork() shares its parent's memory and must not take the
 * parent's lock (it would never give it back): it calls through at once.
 * It needs no protection either, since no dump of the parent signals it.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <linux/seccomp.h>
#include <stdatomic.h>
#include <linux/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "dumplock.h"
#include "collector/signal/sigctx.h"
#include "collector/signal/sys.h"
#include "exec.h"

typedef int (*execve_fn)(const char *, char *const[], char *const[]);
typedef int (*execveat_fn)(int, const char *, char *const[], char *const[],
			   int);
typedef int (*fexecve_fn)(int, char *const[], char *const[]);
typedef long (*syscall_fn)(long, ...);

static execve_fn real_execve;
static execveat_fn real_execveat;
static execve_fn real_execvpe;
static fexecve_fn real_fexecve;
SW_FORK_STATE static pid_t owner_pid; /* whose dumps we hold off */

/* For the syscall() trampoline below, which calls them by name. */
__attribute__((visibility("hidden"), used)) long exec_syscall(long number,
							      long a, long b,
							      long c, long d,
							      long e);
__attribute__((visibility("hidden"), used)) syscall_fn exec_resolve_syscall(
	void);

static void atfork_child(void)
{
	owner_pid = (pid_t)sys_call0(SYS_getpid); /* no PLT call to bind */
}

static void resolve(void)
{
	*(void **)&real_execve = dlsym(RTLD_NEXT, "execve");
	*(void **)&real_execveat = dlsym(RTLD_NEXT, "execveat");
	*(void **)&real_execvpe = dlsym(RTLD_NEXT, "execvpe");
	*(void **)&real_fexecve = dlsym(RTLD_NEXT, "fexecve");
	exec_resolve_syscall();
	owner_pid = getpid();
	pthread_atfork(NULL, NULL, atfork_child);
}

void exec_guard_init(void)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;

	pthread_once(&once, resolve);
}

/* Before main: a vfork() child may exec before any dump, and must not
 * resolve anything itself. */
__attribute__((constructor)) static void exec_guard_ctor(void)
{
	exec_guard_init();
}

/*
 * Takes back every instance of our signal pending on this thread: with
 * dumps held off none can come after. Raw system calls: the mask and wait
 * functions of libc are ours (sigmask.c) and leave our signal out.
 */
SW_INTERPOSER static void drain_ours(void)
{
	struct timespec zero = { 0, 0 };
	int signo = handler_signo;
	uint64_t set, old;

	if (signo <= 0)
		return;
	set = 1ull << (signo - 1);
	if (sys_call4(SYS_rt_sigprocmask, SIG_BLOCK, &set, &old, sizeof(set)))
		return;
	while (sys_call4(SYS_rt_sigtimedwait, &set, NULL, &zero, sizeof(set)) ==
	       signo)
		;
	sys_call4(SYS_rt_sigprocmask, SIG_SETMASK, &old, NULL, sizeof(old));
}

/*
 * Holds dumps off around an exec of this process. False (nothing held) in
 * a vfork() child, or when a dump did not end in time.
 */
SW_INTERPOSER static bool hold(void)
{
	if (!owner_pid || getpid() != owner_pid || !dumplock_take_bounded())
		return false;
	drain_ours();
	return true;
}

SW_INTERPOSER static void release(bool held)
{
	int err = errno;

	if (held)
		dumplock_give();
	errno = err;
}

void (*exec_quiesce_stop)(void);
void (*exec_before_filter)(void);
void (*exec_quiesce_start)(void);
_Atomic int exec_seccomp_entered;
__thread int exec_seccomp_here __attribute__((tls_model("initial-exec")));

/*
 * Before a seccomp mode goes in: no dump in progress (one could signal
 * this thread after it entered the mode, and our handler's calls are not
 * in the program's allow-list), none of ours pending on this thread, and
 * the dumper told to read every thread's status again, where the mode
 * shows (collect.c never signals such a thread). For a filter given to
 * every thread (TSYNC) the agent's thread stops first: it would be
 * filtered too, and its calls (socket, poll, tgkill...) are not the
 * program's. The hold is taken after the stop, which waits for a dump
 * the thread is serving. Returns whether dumps are held off.
 */
SW_INTERPOSER static bool seccomp_enter(bool everyone)
{
	bool held;

	if (everyone && exec_quiesce_stop)
		exec_quiesce_stop();
	else if (!everyone && exec_before_filter)
		exec_before_filter();
	held = hold();
	exec_seccomp_here = 1;
	atomic_store(&exec_seccomp_entered, 1);
	atomic_fetch_add(&handler_recheck_epoch, 1);
	return held;
}

/*
 * After it: dumps go on (they will leave this thread alone). A TSYNC
 * filter that went in keeps the agent's thread stopped for good; one that
 * failed (rc not 0: -1, or the tid of a thread that could not be synced)
 * starts it again.
 */
SW_INTERPOSER static void seccomp_leave(bool held, bool everyone, long rc)
{
	release(held);
	if (everyone && rc != 0 && exec_quiesce_start)
		exec_quiesce_start();
}

#define SW_STR(x) SW_STR2(x)
#define SW_STR2(x) #x

#define GUARDED(real, call)             \
	do {                            \
		bool held_;             \
		int rc_;                \
		if (!(real)) {          \
			errno = ENOSYS; \
			return -1;      \
		}                       \
		held_ = hold();         \
		rc_ = (call);           \
		release(held_);         \
		return rc_;             \
	} while (0)

SW_INTERPOSER int execve(const char *path, char *const argv[],
			 char *const envp[])
{
	GUARDED(real_execve, real_execve(path, argv, envp));
}

SW_INTERPOSER int execveat(int dirfd, const char *path, char *const argv[],
			   char *const envp[], int flags)
{
	GUARDED(real_execveat, real_execveat(dirfd, path, argv, envp, flags));
}

SW_INTERPOSER int execvpe(const char *file, char *const argv[],
			  char *const envp[])
{
	GUARDED(real_execvpe, real_execvpe(file, argv, envp));
}

SW_INTERPOSER int fexecve(int fd, char *const argv[], char *const envp[])
{
	GUARDED(real_fexecve, real_fexecve(fd, argv, envp));
}

/*
 * syscall(): a trampoline in assembly, so that every other number goes on
 * to libc's syscall() with its registers and stack untouched (in C, we
 * could only read six variadic arguments whether or not the caller passed
 * them). SYS_execve and SYS_execveat, whose arguments are all in
 * registers, go through exec_syscall() below. If libc's is not resolved
 * yet (a constructor that runs before ours), it is resolved first, the
 * argument registers kept.
 */
__attribute__((visibility("hidden"))) syscall_fn exec_real_syscall;

syscall_fn exec_resolve_syscall(void)
{
	if (!exec_real_syscall)
		*(void **)&exec_real_syscall = dlsym(RTLD_NEXT, "syscall");
	return exec_real_syscall;
}

SW_INTERPOSER long exec_syscall(long number, long a, long b, long c, long d,
				long e)
{
	syscall_fn f = exec_resolve_syscall();
	bool held, everyone;
	long rc;
	int err;

	if (!f) {
		errno = ENOSYS;
		return -1;
	}
	if (number == SYS_prctl && a != PR_SET_SECCOMP)
		return f(number, a, b, c, d, e);
	if (number == SYS_seccomp || number == SYS_prctl) {
		everyone = number == SYS_seccomp &&
			   a == SECCOMP_SET_MODE_FILTER &&
			   (b & SECCOMP_FILTER_FLAG_TSYNC);
		held = seccomp_enter(everyone);
		rc = f(number, a, b, c, d, e);
		err = errno;
		seccomp_leave(held, everyone, rc);
		errno = err;
		return rc;
	}
	held = hold();
	rc = f(number, a, b, c, d, e);
	release(held);
	return rc;
}

__asm__(".section sw_interpose,\"ax\",@progbits\n"
	".globl syscall\n"
	".type syscall,@function\n"
	"syscall:\n"
	"	.cfi_startproc\n"
	"	endbr64\n"
	"	cmpq $" SW_STR(
		SYS_execve) ", %rdi\n"
			    "	je 2f\n"
			    "	cmpq $" SW_STR(
				    SYS_seccomp) ", %rdi\n"
						 "	je 2f\n"
						 "	cmpq $" SW_STR(
							 SYS_prctl) ", %rdi\n"
								    "	je 2f\n"
								    "	cmpq "
								    "$" SW_STR(
									    SYS_execveat) ", %rdi\n"
											  "	je 2f\n"
											  "1:	movq "
											  "exec_real_syscall(%rip), "
											  "%rax\n"
											  "	testq %rax, %rax\n"
											  "	jz 3f\n"
											  "	jmp *%rax\n"
											  "2:	jmp exec_syscall\n"
											  "3:	pushq %rdi\n"
											  "	.cfi_adjust_cfa_offset "
											  "8\n"
											  "	pushq %rsi\n"
											  "	.cfi_adjust_cfa_offset "
											  "8\n"
											  "	pushq %rdx\n"
											  "	.cfi_adjust_cfa_offset "
											  "8\n"
											  "	pushq %rcx\n"
											  "	.cfi_adjust_cfa_offset "
											  "8\n"
											  "	pushq %r8\n"
											  "	.cfi_adjust_cfa_offset "
											  "8\n"
											  "	pushq %r9\n"
											  "	.cfi_adjust_cfa_offset "
											  "8\n"
											  "	subq $8, %rsp\n"
											  "	.cfi_adjust_cfa_offset "
											  "8\n"
											  "	call "
											  "exec_resolve_syscall\n"
											  "	addq $8, %rsp\n"
											  "	.cfi_adjust_cfa_offset "
											  "-8\n"
											  "	popq %r9\n"
											  "	.cfi_adjust_cfa_offset "
											  "-8\n"
											  "	popq %r8\n"
											  "	.cfi_adjust_cfa_offset "
											  "-8\n"
											  "	popq %rcx\n"
											  "	.cfi_adjust_cfa_offset "
											  "-8\n"
											  "	popq %rdx\n"
											  "	.cfi_adjust_cfa_offset "
											  "-8\n"
											  "	popq %rsi\n"
											  "	.cfi_adjust_cfa_offset "
											  "-8\n"
											  "	popq %rdi\n"
											  "	.cfi_adjust_cfa_offset "
											  "-8\n"
											  "	testq %rax, %rax\n"
											  "	jnz 1b\n"
											  "	jmp exec_syscall\n"
											  "	.cfi_endproc\n"
											  ".size syscall, .-syscall\n"
											  ".text\n");

SW_INTERPOSER int execv(const char *path, char *const argv[])
{
	return execve(path, argv, environ);
}

SW_INTERPOSER int execvp(const char *file, char *const argv[])
{
	return execvpe(file, argv, environ);
}

/*
 * The list forms gather their arguments into an array on the stack, as
 * glibc does; ARG_MAX bounds how many there can be. LIST_ARGV reads them
 * up to and including the terminating NULL, leaving ap after it (where
 * execle's envp is). A macro: the array must live in the caller's frame.
 * alloca, not malloc: exec after vfork may call only async-signal-safe
 * functions; not a VLA: its size is known only inside the macro's block.
 */
#define LIST_ARGV(ap, arg, argv)                                            \
	do {                                                                \
		va_list cp_;                                                \
		size_t n_;                                                  \
		va_copy(cp_, (ap));                                         \
		for (n_ = 1; va_arg(cp_, char *) && n_ < INT_MAX / 2; n_++) \
			;                                                   \
		va_end(cp_);                                                \
		/* cppcheck-suppress allocaCalled */                        \
		(argv) = alloca((n_ + 1) * sizeof(char *));                 \
		(argv)[0] = (char *)(arg);                                  \
		for (size_t i_ = 1; i_ <= n_; i_++)                         \
			(argv)[i_] = va_arg((ap), char *);                  \
	} while (0)

SW_INTERPOSER int execl(const char *path, const char *arg, ...)
{
	va_list ap;
	char **argv;

	va_start(ap, arg);
	/* cppcheck-suppress allocaCalled */
	LIST_ARGV(ap, arg, argv);
	va_end(ap);
	return execve(path, argv, environ);
}

SW_INTERPOSER int execlp(const char *file, const char *arg, ...)
{
	va_list ap;
	char **argv;

	va_start(ap, arg);
	/* cppcheck-suppress allocaCalled */
	LIST_ARGV(ap, arg, argv);
	va_end(ap);
	return execvpe(file, argv, environ);
}

SW_INTERPOSER int execle(const char *path, const char *arg, ...)
{
	va_list ap;
	char **argv, **envp;

	va_start(ap, arg);
	/* cppcheck-suppress allocaCalled */
	LIST_ARGV(ap, arg, argv);
	envp = va_arg(ap, char **);
	va_end(ap);
	return execve(path, argv, envp);
}

/*
 * prctl(): PR_SET_SECCOMP (strict mode, or a filter for this thread) goes
 * in with dumps held off, as through syscall(); everything else goes
 * straight on. Defined with four fixed arguments after the option, not
 * as libc's variadic prototype (<sys/prctl.h> is not included here): on
 * x86-64 both pass them in the same registers, and reading the registers
 * is harmless where the caller passed fewer, where va_arg past its
 * arguments would read the caller's stack.
 */
int prctl(int option, unsigned long a2, unsigned long a3, unsigned long a4,
	  unsigned long a5);

SW_INTERPOSER int prctl(int option, unsigned long a2, unsigned long a3,
			unsigned long a4, unsigned long a5)
{
	static int (*real_prctl)(int, ...);
	bool held;
	int rc, err;

	if (!real_prctl)
		*(void **)&real_prctl = dlsym(RTLD_NEXT, "prctl");
	if (!real_prctl) {
		errno = ENOSYS;
		return -1;
	}
	if (option != PR_SET_SECCOMP)
		return real_prctl(option, a2, a3, a4, a5);
	held = seccomp_enter(false);
	rc = real_prctl(option, a2, a3, a4, a5);
	err = errno;
	seccomp_leave(held, false, rc);
	errno = err;
	return rc;
}
