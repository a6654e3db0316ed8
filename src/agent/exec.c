/*
 * exec.c - the exec family, made safe against a dump in progress.
 *
 * A real-time signal pending on the thread that calls execve() survives
 * into the new program, where our handler is gone and the signal's
 * default action terminates the process. So every exec function waits for
 * a dump in progress to end and holds off new ones (collect_hold) until
 * the exec either replaces us or fails. glibc's execv, execvp, execl...
 * call execve internally, not through the PLT, so each is defined here.
 *
 * A child of vfork() shares its parent's memory and must not take the
 * parent's lock (it would never give it back): it calls through at once.
 * It needs no protection either, since no dump of the parent signals it.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "collector/collect.h"
#include "exec.h"

typedef int (*execve_fn)(const char *, char *const[], char *const[]);
typedef int (*execvpe_fn)(const char *, char *const[], char *const[]);
typedef int (*fexecve_fn)(int, char *const[], char *const[]);

static execve_fn real_execve;
static execvpe_fn real_execvpe;
static fexecve_fn real_fexecve;
static pid_t agent_pid;

void exec_init(void)
{
	*(void **)&real_execve = dlsym(RTLD_NEXT, "execve");
	*(void **)&real_execvpe = dlsym(RTLD_NEXT, "execvpe");
	*(void **)&real_fexecve = dlsym(RTLD_NEXT, "fexecve");
	agent_pid = getpid();
}

void exec_atfork_child(void)
{
	agent_pid = getpid();
}

/* True when this process may take the collector's lock around an exec. */
static bool may_hold(void)
{
	return agent_pid != 0 && getpid() == agent_pid;
}

int execve(const char *path, char *const argv[], char *const envp[])
{
	bool hold = may_hold();
	int rc, err;

	if (!real_execve) {
		errno = ENOSYS;
		return -1;
	}
	if (hold)
		collect_hold();
	rc = real_execve(path, argv, envp);
	err = errno;
	if (hold)
		collect_release();
	errno = err;
	return rc;
}

int execvpe(const char *file, char *const argv[], char *const envp[])
{
	bool hold = may_hold();
	int rc, err;

	if (!real_execvpe) {
		errno = ENOSYS;
		return -1;
	}
	if (hold)
		collect_hold();
	rc = real_execvpe(file, argv, envp);
	err = errno;
	if (hold)
		collect_release();
	errno = err;
	return rc;
}

int fexecve(int fd, char *const argv[], char *const envp[])
{
	bool hold = may_hold();
	int rc, err;

	if (!real_fexecve) {
		errno = ENOSYS;
		return -1;
	}
	if (hold)
		collect_hold();
	rc = real_fexecve(fd, argv, envp);
	err = errno;
	if (hold)
		collect_release();
	errno = err;
	return rc;
}

int execv(const char *path, char *const argv[])
{
	return execve(path, argv, environ);
}

int execvp(const char *file, char *const argv[])
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

int execl(const char *path, const char *arg, ...)
{
	va_list ap;
	char **argv;

	va_start(ap, arg);
	/* cppcheck-suppress allocaCalled */
	LIST_ARGV(ap, arg, argv);
	va_end(ap);
	return execve(path, argv, environ);
}

int execlp(const char *file, const char *arg, ...)
{
	va_list ap;
	char **argv;

	va_start(ap, arg);
	/* cppcheck-suppress allocaCalled */
	LIST_ARGV(ap, arg, argv);
	va_end(ap);
	return execvpe(file, argv, environ);
}

int execle(const char *path, const char *arg, ...)
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
