/*
 * filter.h - the seccomp filters of the daemon's processes, written with
 * libseccomp (as systemd and runc write theirs): a list of the system
 * calls each process may not make (the service, the privileged core),
 * or of the only ones it may (a parser worker).
 *
 * A call a filter denies fails with EPERM: code that tries one gets an
 * error, never a kill, so a library that probes for a call goes on.
 * Every filter sets no_new_privs first (the kernel wants it of a process
 * without CAP_SYS_ADMIN) and covers every thread (TSYNC).
 */
#ifndef SW_FILTER_H
#define SW_FILTER_H

#include <stddef.h>
#include <sys/types.h>

#include <stddef.h>

/*
 * The service's filter (the process that parses HTTP and agent
 * messages): no ptrace, process_vm_*, bpf or perf_event_open, no other
 * credentials but uid and gid, its own user's (setresuid(uid, uid,
 * uid), setresgid() the same with gid, setgroups(0, NULL): the one way
 * it gives up root), no capset, no real-time priority, no mounts, no
 * module or kexec loading. 0, or a negative errno with why (size bytes)
 * saying what failed.
 */
int filter_lock_service(uid_t uid, gid_t gid, char *why, size_t size);

/*
 * The privileged core's (the snapshot helper's): what it needs (ptrace,
 * process_vm_readv, bpf, perf_event_open, its requesters' credentials
 * for a moment) and nothing that writes another process or the system:
 * no process_vm_writev, no open for writing (so no /proc/PID/mem
 * written), no pidfd_getfd, no mounts, no module or kexec loading, and
 * no program run but its own: execveat() of exe_fd (its own executable,
 * opened O_PATH) with AT_EMPTY_PATH, to start its peer again (cores.h).
 * As filter_lock_service().
 */
int filter_lock_core(int exe_fd, char *why, size_t size);

/*
 * A parser worker's: only what reading the descriptors it is given and
 * talking on its socket take. Its socket (sock) alone may be sent on or
 * received from; memory may be mapped, never executable; no file may be
 * opened, no process but itself signalled, nothing started. As
 * filter_lock_service().
 */
int filter_lock_worker(int sock, char *why, size_t size);

#endif /* SW_FILTER_H */
