/*
 * procfs.h - readers of /proc for the collector and the daemon.
 *
 * Everything read from /proc is treated as untrusted text: bounded reads,
 * parsers that accept any bytes and fail cleanly. The parsers are separate
 * from the readers so they can be fuzzed.
 */
#ifndef SW_PROCFS_H
#define SW_PROCFS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "dump.h"

struct procfs_task {
	char name[SW_COMM_MAX];
	char state;
	uint64_t utime_ticks;
	uint64_t stime_ticks;
	uint64_t sigpnd; /* signals pending for the thread itself (status) */
	uint64_t start_ticks; /* since boot; 0 when the line stops short */
	int seccomp; /* status's "Seccomp:" mode, 0 none (or no such line) */
};

/* Parses the text of /proc/PID/task/TID/stat. 0 or SW_EFORMAT. */
int procfs_parse_stat(const char *buf, size_t len, struct procfs_task *out);

/*
 * Field number field (4 or more, as proc(5) numbers them: 28 startstack,
 * 47 start_brk) of the text of a stat file, which must be numeric; a
 * negative value is read as its magnitude. 0, or SW_EFORMAT when the
 * line is malformed or stops short of it.
 */
int procfs_parse_stat_field(const char *buf, size_t len, int field,
			    uint64_t *out);

/*
 * The start time of process pid (clock ticks since boot, /proc/PID/stat):
 * with the pid, what names one process for good. 0 or a negative errno
 * (SW_EFORMAT for an unreadable line).
 */
int procfs_start_time(pid_t pid, uint64_t *out);

/*
 * Points at the value of "KEY:" at the start of a line of a status file
 * (after the colon and any blanks), or NULL when no line has that key.
 * The value runs to the next newline or to buf + len.
 */
const char *procfs_status_value(const char *buf, size_t len, const char *key);

/*
 * Finds "KEY:\t<value>" in the text of a status file and parses the value
 * as hexadecimal (SigBlk) or decimal (TracerPid). 0, -ENOENT when the key
 * is missing, SW_EFORMAT when the value is malformed.
 */
int procfs_parse_status_hex(const char *buf, size_t len, const char *key,
			    uint64_t *out);

/*
 * The ids (decimal, blank-separated) of the "KEY:" line of a status file,
 * at most max of them into ids: Uid and Gid (real, effective, saved, file
 * system), Groups. Returns how many, -ENOENT without such a line, or
 * SW_EFORMAT for a value that is not an id.
 */
int procfs_parse_status_ids(const char *buf, size_t len, const char *key,
			    uint32_t *ids, int max);
int procfs_parse_status_dec(const char *buf, size_t len, const char *key,
			    int64_t *out);

/*
 * Reads a small file under dirfd (openat, O_RDONLY|O_CLOEXEC) into buf,
 * NUL-terminated, at most size - 1 bytes. Returns the length or -errno.
 */
ssize_t procfs_read_at(int dirfd, const char *path, char *buf, size_t size);

/*
 * The broker: how a process that holds no privilege (the daemon's
 * service) reads what only a privileged one may under /proc/PID: the
 * files the kernel checks at open (maps, auxv, map_files, the namespace
 * links, a process's root) and those it checks at each read (wchan,
 * stack, syscall, the layout fields of stat). Set once at start, before
 * any thread reads /proc; without one (the default) all is read directly.
 *
 * open() opens path as how says (PROCFS_HOW_*), *st its status; read()
 * reads it, as procfs_read_at() would. Both return what their direct
 * counterparts would: a descriptor or a length, else a negative errno.
 */
enum {
	PROCFS_HOW_READ = 1,   /* O_RDONLY */
	PROCFS_HOW_PATH = 2,   /* O_PATH, a final magic link followed */
	PROCFS_HOW_MODULE = 3, /* modopen_file(path, MODOPEN_FOLLOW) */
	PROCFS_HOW_IN_ROOT = 4 /* path "ROOT/\0REL": modopen_in_root() */
};
struct stat;
struct procfs_broker {
	int (*open)(const char *path, size_t len, int how, struct stat *st);
	ssize_t (*read)(const char *path, char *buf, size_t size);
};
void procfs_set_broker(const struct procfs_broker *b);
const struct procfs_broker *procfs_get_broker(void);

/*
 * Opens path (under /proc) read-only; one the kernel refuses us goes to
 * the broker, when there is one. The fd or a negative errno.
 */
int procfs_open(const char *path);

/* stat() of path (under /proc), through the broker when refused. */
int procfs_stat(const char *path, struct stat *st);

/*
 * As procfs_read_at(), for a file whose contents the kernel gives in full
 * only to a privileged reader (wchan, stack, syscall, the layout fields
 * of stat): through the broker whenever there is one.
 */
ssize_t procfs_read_checked(int dirfd, const char *path, char *buf,
			    size_t size);

/*
 * Lists the thread ids under the task directory open at taskfd, ascending.
 * *out is malloc'd (caller frees). At most max ids; more is SW_ETOOBIG.
 */
int procfs_list_tasks(int taskfd, size_t max, pid_t **out, size_t *n);

/*
 * Parses the text of /proc/PID/task/TID/status: name, state, the signals
 * pending for the thread (SigPnd, 0 when absent) and the blocked-signal
 * mask (CPU times are left 0). 0 or SW_EFORMAT.
 */
int procfs_parse_status_task(const char *buf, size_t len, struct procfs_task *t,
			     uint64_t *sigblk);

/*
 * Reads one task. With sigblk, from its status file: name, state and the
 * blocked-signal mask, CPU times 0 (one read: this runs once per thread
 * per dump). Without, from its stat file: name, state and CPU times in
 * ticks. Returns 0, -ESRCH when the task is gone, or SW_EFORMAT.
 */
int procfs_read_task(int taskfd, pid_t tid, struct procfs_task *t,
		     uint64_t *sigblk);

/*
 * Thread tid's stack pointer and pc while it is off its CPU, from its
 * syscall file under taskfd ("NR A1..A6 SP PC" in a system call, "-1 SP
 * PC" out of one); either pointer may be NULL. 0, -EAGAIN while it runs,
 * -ESRCH when it is gone, or SW_EFORMAT.
 */
int procfs_read_syscall(int taskfd, pid_t tid, uint64_t *sp, uint64_t *pc);

/*
 * Reads /proc/PID/cmdline (pid 0: self) with the NUL separators turned
 * into spaces, at most 4 kB. *out is malloc'd. 0 or -errno.
 */
int procfs_read_cmdline(pid_t pid, char **out);

/* What /proc/PID/stat says of a process as a whole. */
struct procfs_proc {
	char state;
	unsigned long flags; /* PF_*: PROCFS_PF_KTHREAD for a kernel thread */
	long threads;
};
#define PROCFS_PF_KTHREAD 0x00200000

/* Reads the stat file of pid. 0, -errno, or SW_EFORMAT. */
int procfs_read_proc(pid_t pid, struct procfs_proc *out);

/* The real uid of process pid (its status file). 0 or -errno. */
int procfs_read_uid(pid_t pid, uid_t *out);

/*
 * Whether the process pinned by pidfd (pidfd_open(2), SO_PEERPIDFD) has
 * not exited: a pidfd turns readable when its process exits. false for
 * -1. Never blocks.
 */
bool procfs_pidfd_alive(int pidfd);

/* TracerPid of a process (pid 0: self). 0 or -errno. */
int procfs_tracer_pid(pid_t pid, pid_t *out);

#define PROCFS_NSPID_MAX_LEVELS 32 /* the kernel's MAX_PID_NS_LEVEL */

/*
 * Parses the "NSpid:" line of the text of a status file (len bytes, any
 * bytes are safe): *outer gets the first id (the namespace of the /proc
 * that was read), *inner the last (the task's own namespace); they are
 * equal for a task in the reader's namespace. Returns 0, -ENOENT when
 * there is no NSpid line (kernels before 4.1), or SW_EFORMAT when it is
 * malformed: empty, an id that is not a decimal from 1 to INT32_MAX, or
 * more than PROCFS_NSPID_MAX_LEVELS ids.
 */
int procfs_parse_nspid(const char *buf, size_t len, pid_t *outer, pid_t *inner);

/*
 * The pid of process pid (as we see it) in its own pid namespace, from
 * the NSpid line of its status; pid itself when that is ours or cannot be
 * read.
 */
pid_t procfs_inner_pid(pid_t pid);

#endif /* SW_PROCFS_H */
