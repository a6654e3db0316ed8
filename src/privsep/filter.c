/*
 * filter.c - the seccomp filters of the daemon's processes (filter.h).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <seccomp.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "filter.h"

/* Calls no process of ours makes: the system's, not a process's. */
static const int system_calls[] = {
	SCMP_SYS(mount),
	SCMP_SYS(umount2),
	SCMP_SYS(pivot_root),
	SCMP_SYS(chroot),
	SCMP_SYS(move_mount),
	SCMP_SYS(open_tree),
	SCMP_SYS(fsopen),
	SCMP_SYS(fsmount),
	SCMP_SYS(fsconfig),
	SCMP_SYS(fspick),
	SCMP_SYS(mount_setattr),
	SCMP_SYS(reboot),
	SCMP_SYS(kexec_load),
	SCMP_SYS(kexec_file_load),
	SCMP_SYS(init_module),
	SCMP_SYS(finit_module),
	SCMP_SYS(delete_module),
	SCMP_SYS(swapon),
	SCMP_SYS(swapoff),
	SCMP_SYS(acct),
	SCMP_SYS(settimeofday),
	SCMP_SYS(clock_settime),
	SCMP_SYS(clock_adjtime),
	SCMP_SYS(adjtimex),
	SCMP_SYS(sethostname),
	SCMP_SYS(setdomainname),
	SCMP_SYS(iopl),
	SCMP_SYS(ioperm),
	SCMP_SYS(process_vm_writev),
	SCMP_SYS(pidfd_getfd),
	SCMP_SYS(unshare),
	SCMP_SYS(setns),
	SCMP_SYS(keyctl),
	SCMP_SYS(add_key),
	SCMP_SYS(request_key),
	SCMP_SYS(userfaultfd),
	SCMP_SYS(quotactl),
	SCMP_SYS(syslog),
};

/* What only the core may: read other processes, take credentials. */
static const int core_calls[] = {
	SCMP_SYS(ptrace),
	SCMP_SYS(process_vm_readv),
	SCMP_SYS(bpf),
	SCMP_SYS(perf_event_open),
	SCMP_SYS(setuid),
	SCMP_SYS(setgid),
	SCMP_SYS(setreuid),
	SCMP_SYS(setregid),
	SCMP_SYS(setresuid),
	SCMP_SYS(setresgid),
	SCMP_SYS(setfsuid),
	SCMP_SYS(setfsgid),
	SCMP_SYS(setgroups),
	SCMP_SYS(capset),
	SCMP_SYS(sched_setscheduler),
	SCMP_SYS(sched_setattr),
	SCMP_SYS(sched_setparam),
	SCMP_SYS(setpriority),
};

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))

/* Says what failed into why and returns rc. */
static int fail(char *why, size_t size, int rc, const char *what)
{
	snprintf(why, size, "%s: %s", what, strerror(-rc));
	return rc;
}

/* Adds "fail with EPERM" rules for calls (n of them) to ctx. */
static int deny_all(scmp_filter_ctx ctx, const int *calls, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		int rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), calls[i],
					  0);

		if (rc < 0)
			return rc;
	}
	return 0;
}

/* Sets no_new_privs, loads ctx on every thread and frees it. */
static int load(scmp_filter_ctx ctx, char *why, size_t size)
{
	int rc;

	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0) {
		rc = -errno;
		seccomp_release(ctx);
		return fail(why, size, rc, "no_new_privs");
	}
	rc = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_TSYNC, 1);
	if (rc == 0)
		rc = seccomp_load(ctx);
	seccomp_release(ctx);
	return rc < 0 ? fail(why, size, rc, "seccomp()") : 0;
}

/*
 * Denies call unless its first three arguments are all id: the service's
 * setresuid() and setresgid() to its own user, nothing else.
 */
static int only_to(scmp_filter_ctx ctx, int call, scmp_datum_t id)
{
	int rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), call, 1,
				  SCMP_A0(SCMP_CMP_NE, id));

	if (rc == 0)
		rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), call, 1,
				      SCMP_A1(SCMP_CMP_NE, id));
	if (rc == 0)
		rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), call, 1,
				      SCMP_A2(SCMP_CMP_NE, id));
	return rc;
}

int filter_lock_service(uid_t uid, gid_t gid, char *why, size_t size)
{
	scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
	int rc;

	if (!ctx)
		return fail(why, size, -ENOMEM, "seccomp_init");
	rc = deny_all(ctx, system_calls, NELEM(system_calls));
	for (size_t i = 0; rc == 0 && i < NELEM(core_calls); i++) {
		int call = core_calls[i];

		if (call == SCMP_SYS(setresuid))
			rc = only_to(ctx, call, (scmp_datum_t)uid);
		else if (call == SCMP_SYS(setresgid))
			rc = only_to(ctx, call, (scmp_datum_t)gid);
		else if (call == SCMP_SYS(setgroups))
			rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), call,
					      1, SCMP_A0(SCMP_CMP_NE, 0));
		else
			rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), call,
					      0);
	}
	if (rc < 0) {
		seccomp_release(ctx);
		return fail(why, size, rc, "seccomp_rule_add");
	}
	return load(ctx, why, size);
}

int filter_lock_core(int exe_fd, char *why, size_t size)
{
	static const int calls[] = {
		SCMP_SYS(execve),   SCMP_SYS(openat2),	 SCMP_SYS(creat),
		SCMP_SYS(truncate), SCMP_SYS(ftruncate),
	};
	scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
	int rc;

	if (!ctx)
		return fail(why, size, -ENOMEM, "seccomp_init");
	rc = deny_all(ctx, system_calls, NELEM(system_calls));
	if (rc == 0)
		rc = deny_all(ctx, calls, NELEM(calls));
	/* Its own program only, by the descriptor it opened at start. */
	if (rc == 0)
		rc = seccomp_rule_add(
			ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(execveat), 1,
			SCMP_A0(SCMP_CMP_NE, (scmp_datum_t)exe_fd));
	if (rc == 0)
		rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM),
				      SCMP_SYS(execveat), 1,
				      SCMP_A4(SCMP_CMP_NE, AT_EMPTY_PATH));
	/* Opens for reading only: no process's memory written through
	 * /proc/PID/mem, no file of the system changed. */
	for (int k = 0; rc == 0 && k < 2; k++) {
		int mode = k ? O_RDWR : O_WRONLY;

		rc = seccomp_rule_add(
			ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(open), 1,
			SCMP_A1(SCMP_CMP_MASKED_EQ, O_ACCMODE, mode));
		if (rc == 0)
			rc = seccomp_rule_add(
				ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(openat), 1,
				SCMP_A2(SCMP_CMP_MASKED_EQ, O_ACCMODE, mode));
	}
	if (rc < 0) {
		seccomp_release(ctx);
		return fail(why, size, rc, "seccomp_rule_add");
	}
	return load(ctx, why, size);
}

/* What a worker may call, whatever the arguments. */
static const int worker_calls[] = {
	SCMP_SYS(read),		 SCMP_SYS(pread64),
	SCMP_SYS(readv),	 SCMP_SYS(preadv),
	SCMP_SYS(lseek),	 SCMP_SYS(close),
	SCMP_SYS(fstat),	 SCMP_SYS(munmap),
	SCMP_SYS(mremap),	 SCMP_SYS(brk),
	SCMP_SYS(madvise),	 SCMP_SYS(futex),
	SCMP_SYS(exit),		 SCMP_SYS(exit_group),
	SCMP_SYS(rt_sigreturn),	 SCMP_SYS(rt_sigprocmask),
	SCMP_SYS(getpid),	 SCMP_SYS(gettid),
	SCMP_SYS(clock_gettime), SCMP_SYS(clock_nanosleep),
	SCMP_SYS(nanosleep),	 SCMP_SYS(getrandom),
	SCMP_SYS(dup),		 SCMP_SYS(fcntl),
	SCMP_SYS(poll),		 SCMP_SYS(ppoll),
	SCMP_SYS(sched_yield),	 SCMP_SYS(getuid),
	SCMP_SYS(geteuid),	 SCMP_SYS(getgid),
	SCMP_SYS(getegid),	 SCMP_SYS(uname),
	SCMP_SYS(rt_sigaction),	 SCMP_SYS(sigaltstack),
};

static int allow(scmp_filter_ctx ctx, int call, unsigned n,
		 const struct scmp_arg_cmp *cmp)
{
	return seccomp_rule_add_array(ctx, SCMP_ACT_ALLOW, call, n, cmp);
}

int filter_lock_worker(int sock, char *why, size_t size)
{
	scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ERRNO(EPERM));
	const struct scmp_arg_cmp on_sock =
		SCMP_A0(SCMP_CMP_EQ, (scmp_datum_t)sock);
	const struct scmp_arg_cmp no_exec =
		SCMP_A2(SCMP_CMP_MASKED_EQ, PROT_EXEC, 0);
	const struct scmp_arg_cmp self =
		SCMP_A0(SCMP_CMP_EQ, (scmp_datum_t)getpid());
	/* fstat() only: of a descriptor, never of a path. */
	const struct scmp_arg_cmp empty_path[] = {
		SCMP_A3(SCMP_CMP_MASKED_EQ, AT_EMPTY_PATH, AT_EMPTY_PATH),
		SCMP_A0(SCMP_CMP_LT, 0x7fffffff),
	};
	const struct scmp_arg_cmp get_only = SCMP_A2(SCMP_CMP_EQ, 0);
	int rc = 0;

	if (!ctx)
		return fail(why, size, -ENOMEM, "seccomp_init");
	for (size_t i = 0; rc == 0 && i < NELEM(worker_calls); i++)
		rc = allow(ctx, worker_calls[i], 0, NULL);
	/* Its one socket: requests in, answers and questions out. */
	if (rc == 0)
		rc = allow(ctx, SCMP_SYS(recvmsg), 1, &on_sock);
	if (rc == 0)
		rc = allow(ctx, SCMP_SYS(sendmsg), 1, &on_sock);
	if (rc == 0)
		rc = allow(ctx, SCMP_SYS(recvfrom), 1, &on_sock);
	if (rc == 0)
		rc = allow(ctx, SCMP_SYS(sendto), 1, &on_sock);
	if (rc == 0)
		rc = allow(ctx, SCMP_SYS(write), 1, &on_sock);
	/* Memory, never executable. */
	if (rc == 0)
		rc = allow(ctx, SCMP_SYS(mmap), 1, &no_exec);
	if (rc == 0)
		rc = allow(ctx, SCMP_SYS(mprotect), 1, &no_exec);
	/* glibc's fstat() is newfstatat(fd, "", AT_EMPTY_PATH). */
	if (rc == 0)
		rc = allow(ctx, SCMP_SYS(newfstatat), 2, empty_path);
	/* abort() and raise() signal the worker itself only. */
	if (rc == 0)
		rc = allow(ctx, SCMP_SYS(tgkill), 1, &self);
	if (rc == 0)
		rc = allow(ctx, SCMP_SYS(prlimit64), 1, &get_only);
	if (rc < 0) {
		seccomp_release(ctx);
		return fail(why, size, rc, "seccomp_rule_add");
	}
	return load(ctx, why, size);
}
