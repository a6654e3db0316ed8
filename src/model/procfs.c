/*
 * procfs.c - bounded readers and defensive parsers of /proc (procfs.h).
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "procfs.h"

/* Parses an unsigned decimal at *p, advancing it. false when none. */
static bool parse_u64(const char **p, const char *end, uint64_t *out)
{
	uint64_t v = 0;
	const char *s = *p;

	if (s >= end || *s < '0' || *s > '9')
		return false;
	while (s < end && *s >= '0' && *s <= '9') {
		unsigned d = (unsigned)(*s - '0');
		if (v > (UINT64_MAX - d) / 10)
			return false;
		v = v * 10 + d;
		s++;
	}
	*p = s;
	*out = v;
	return true;
}

int procfs_parse_stat(const char *buf, size_t len, struct procfs_task *out)
{
	const char *end = buf + len, *open, *close = NULL, *p;
	size_t namelen;
	uint64_t v;
	int field;

	out->sigpnd = 0;
	out->start_ticks = 0;
	open = memchr(buf, '(', len);
	if (!open)
		return SW_EFORMAT;
	/* The name may hold ')' itself: the last one closes it. */
	for (p = open; p < end; p++)
		if (*p == ')')
			close = p;
	if (!close || close + 2 >= end || close[1] != ' ')
		return SW_EFORMAT;
	namelen = (size_t)(close - open - 1);
	if (namelen >= SW_COMM_MAX)
		namelen = SW_COMM_MAX - 1;
	memcpy(out->name, open + 1, namelen);
	out->name[namelen] = '\0';
	p = close + 2;
	out->state = *p++;
	/* Fields after the state: 4 ppid ... 14 utime, 15 stime. */
	for (field = 4; field <= 15; field++) {
		if (p >= end || *p != ' ')
			return SW_EFORMAT;
		p++;
		if (p < end && *p == '-')
			p++; /* signed fields such as tty_nr */
		if (!parse_u64(&p, end, &v))
			return SW_EFORMAT;
		if (field == 14)
			out->utime_ticks = v;
		else if (field == 15)
			out->stime_ticks = v;
	}
	/* Then ... 22 starttime, left 0 when the line stops short. */
	for (; field <= 22; field++) {
		if (p >= end || *p != ' ')
			return 0;
		p++;
		if (p < end && *p == '-')
			p++;
		if (!parse_u64(&p, end, &v))
			return 0;
	}
	out->start_ticks = v;
	return 0;
}

int procfs_parse_stat_field(const char *buf, size_t len, int field,
			    uint64_t *out)
{
	const char *end = buf + len, *close = NULL, *p;
	uint64_t v = 0;

	if (field < 4)
		return SW_EFORMAT;
	/* The name may hold ')' itself: the last one closes it. */
	for (p = buf; p < end; p++)
		if (*p == ')')
			close = p;
	if (!close || close + 3 >= end || close[1] != ' ')
		return SW_EFORMAT;
	p = close + 3; /* past ") " and the state */
	for (int f = 4; f <= field; f++) {
		if (p >= end || *p != ' ')
			return SW_EFORMAT;
		p++;
		if (p < end && *p == '-')
			p++;
		if (!parse_u64(&p, end, &v))
			return SW_EFORMAT;
	}
	*out = v;
	return 0;
}

int procfs_start_time(pid_t pid, uint64_t *out)
{
	char path[64], buf[1024];
	struct procfs_task t;
	ssize_t n;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	n = procfs_read_at(AT_FDCWD, path, buf, sizeof(buf) - 1);
	if (n < 0)
		return (int)n;
	if (procfs_parse_stat(buf, (size_t)n, &t) || !t.start_ticks)
		return SW_EFORMAT;
	*out = t.start_ticks;
	return 0;
}

const char *procfs_status_value(const char *buf, size_t len, const char *key)
{
	size_t klen = strlen(key);
	const char *p = buf, *end = buf + len;

	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		const char *eol = nl ? nl : end;

		if ((size_t)(eol - p) > klen && memcmp(p, key, klen) == 0 &&
		    p[klen] == ':') { /* NOLINT: bytes read, not garbage */
			p += klen + 1;
			while (p < eol && (*p == '\t' || *p == ' '))
				p++;
			return p;
		}
		p = eol + 1;
	}
	return NULL;
}

int procfs_parse_status_hex(const char *buf, size_t len, const char *key,
			    uint64_t *out)
{
	const char *p = procfs_status_value(buf, len, key), *end = buf + len;
	uint64_t v = 0;
	int digits = 0;

	if (!p)
		return -ENOENT;
	for (; p < end && *p != '\n'; p++) {
		int d;

		if (*p >= '0' && *p <= '9')
			d = *p - '0';
		else if (*p >= 'a' && *p <= 'f')
			d = *p - 'a' + 10;
		else if (*p >= 'A' && *p <= 'F')
			d = *p - 'A' + 10;
		else
			return SW_EFORMAT;
		if (++digits > 16)
			return SW_EFORMAT;
		v = (v << 4) | (uint64_t)d;
	}
	if (!digits)
		return SW_EFORMAT;
	*out = v;
	return 0;
}

int procfs_parse_status_ids(const char *buf, size_t len, const char *key,
			    uint32_t *ids, int max)
{
	const char *p = procfs_status_value(buf, len, key), *end = buf + len;
	int n = 0;

	if (!p)
		return -ENOENT;
	while (n < max) {
		uint64_t v;

		while (p < end && (*p == ' ' || *p == '\t'))
			p++;
		if (p >= end || *p == '\n')
			break;
		if (!parse_u64(&p, end, &v) || v > UINT32_MAX)
			return SW_EFORMAT;
		ids[n++] = (uint32_t)v;
	}
	return n;
}

int procfs_parse_status_dec(const char *buf, size_t len, const char *key,
			    int64_t *out)
{
	const char *p = procfs_status_value(buf, len, key), *end = buf + len;
	bool neg = false;
	uint64_t v;

	if (!p)
		return -ENOENT;
	if (p < end && *p == '-') {
		neg = true;
		p++;
	}
	if (!parse_u64(&p, end, &v) || v > INT64_MAX)
		return SW_EFORMAT;
	if (p < end && *p != '\n')
		return SW_EFORMAT;
	*out = neg ? -(int64_t)v : (int64_t)v;
	return 0;
}

/* Set once, while other threads may be reading /proc: atomic. */
static const struct procfs_broker *_Atomic broker_at;

void procfs_set_broker(const struct procfs_broker *b)
{
	atomic_store_explicit(&broker_at, b, memory_order_release);
}

const struct procfs_broker *procfs_get_broker(void)
{
	return atomic_load_explicit(&broker_at, memory_order_acquire);
}

/* The absolute path of path under dirfd, into out; false if none. */
static bool full_path(int dirfd, const char *path, char *out, size_t size)
{
	char self[40];
	ssize_t n;

	if (path[0] == '/' || dirfd == AT_FDCWD)
		return (size_t)snprintf(out, size, "%s", path) < size;
	snprintf(self, sizeof(self), "/proc/self/fd/%d", dirfd);
	n = readlink(self, out, size - 1);
	if (n <= 0 || (size_t)n >= size - 1)
		return false;
	out[n] = '\0';
	return (size_t)snprintf(out + n, size - (size_t)n, "/%s", path) <
	       size - (size_t)n;
}

/* Whether the kernel refused us (not: there is no such file). */
static bool refused(int err)
{
	return err == -EACCES || err == -EPERM;
}

static ssize_t brokered_read(const struct procfs_broker *b, int dirfd,
			     const char *path, char *buf, size_t size)
{
	char full[256];

	if (!full_path(dirfd, path, full, sizeof(full)))
		return -ENAMETOOLONG;
	return b->read(full, buf, size);
}

int procfs_open(const char *path)
{
	const struct procfs_broker *b;
	struct stat st;
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);

	if (fd >= 0)
		return fd;
	fd = -errno;
	b = procfs_get_broker();
	if (b && refused(fd))
		fd = b->open(path, strlen(path) + 1, PROCFS_HOW_READ, &st);
	return fd;
}

int procfs_stat(const char *path, struct stat *st)
{
	const struct procfs_broker *b;
	int fd;

	if (stat(path, st) == 0)
		return 0;
	fd = -errno;
	b = procfs_get_broker();
	if (!b || !refused(fd))
		return fd;
	fd = b->open(path, strlen(path) + 1, PROCFS_HOW_PATH, st);
	if (fd < 0)
		return fd;
	close(fd);
	return 0;
}

ssize_t procfs_read_checked(int dirfd, const char *path, char *buf, size_t size)
{
	const struct procfs_broker *b = procfs_get_broker();

	if (size == 0)
		return -EINVAL;
	if (b)
		return brokered_read(b, dirfd, path, buf, size);
	return procfs_read_at(dirfd, path, buf, size);
}

ssize_t procfs_read_at(int dirfd, const char *path, char *buf, size_t size)
{
	ssize_t n;
	size_t got = 0;
	int fd, err;

	if (size == 0)
		return -EINVAL;
	fd = openat(dirfd, path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	if (fd < 0 && refused(-errno) && procfs_get_broker())
		return brokered_read(procfs_get_broker(), dirfd, path, buf,
				     size);
	if (fd < 0)
		return errno == ENOENT ? -ESRCH : -errno;
	while (got < size - 1) {
		n = read(fd, buf + got, size - 1 - got);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			err = errno == ENOENT ? -ESRCH : -errno;
			close(fd);
			return err;
		}
		if (n == 0)
			break;
		got += (size_t)n;
	}
	close(fd);
	buf[got] = '\0';
	return (ssize_t)got;
}

static int cmp_pid(const void *a, const void *b)
{
	pid_t x = *(const pid_t *)a, y = *(const pid_t *)b;

	return (x > y) - (x < y);
}

int procfs_list_tasks(int taskfd, size_t max, pid_t **out, size_t *n)
{
	char dbuf[8192];
	size_t cap = 64, cnt = 0;
	pid_t *ids = malloc(cap * sizeof(*ids));
	long nread;

	if (!ids)
		return -ENOMEM;
	if (lseek(taskfd, 0, SEEK_SET) < 0)
		goto fail_errno;
	while ((nread = syscall(SYS_getdents64, taskfd, dbuf, sizeof(dbuf))) >
	       0) {
		for (long off = 0; off < nread;) {
			struct dirent64 *de = (struct dirent64 *)(dbuf + off);
			const char *s = de->d_name;
			uint64_t v;

			off += de->d_reclen;
			if (!parse_u64(&s, s + strlen(s), &v) || *s || v == 0 ||
			    v > INT32_MAX)
				continue;
			if (cnt == max) {
				free(ids);
				return SW_ETOOBIG;
			}
			if (cnt == cap) {
				pid_t *bigger =
					realloc(ids, 2 * cap * sizeof(*ids));
				if (!bigger) {
					free(ids);
					return -ENOMEM;
				}
				ids = bigger;
				cap *= 2;
			}
			ids[cnt++] = (pid_t)v;
		}
	}
	if (nread < 0)
		goto fail_errno;
	qsort(ids, cnt, sizeof(*ids), cmp_pid);
	*out = ids;
	*n = cnt;
	return 0;
fail_errno:
	nread = -errno;
	free(ids);
	return (int)nread;
}

int procfs_parse_status_task(const char *buf, size_t len, struct procfs_task *t,
			     uint64_t *sigblk)
{
	const char *name = procfs_status_value(buf, len, "Name");
	const char *state = procfs_status_value(buf, len, "State");
	const char *end = buf + len, *mode;
	size_t n = 0;

	if (!name || !state || state >= end)
		return SW_EFORMAT;
	while (name + n < end && name[n] != '\n' && n < SW_COMM_MAX - 1)
		n++;
	memcpy(t->name, name, n);
	t->name[n] = '\0';
	t->state = *state;
	t->utime_ticks = 0;
	t->stime_ticks = 0;
	if (procfs_parse_status_hex(buf, len, "SigPnd", &t->sigpnd) < 0)
		t->sigpnd = 0;
	/* 1 strict, 2 filter; a kernel without seccomp has no line. */
	t->seccomp = 0;
	mode = procfs_status_value(buf, len, "Seccomp");
	if (mode && mode < end && *mode >= '0' && *mode <= '9')
		t->seccomp = *mode - '0';
	return procfs_parse_status_hex(buf, len, "SigBlk", sigblk);
}

int procfs_read_task(int taskfd, pid_t tid, struct procfs_task *t,
		     uint64_t *sigblk)
{
	char path[64], buf[4096];
	ssize_t n;

	if (sigblk) {
		/* One read gives name, state and mask; CPU times come
		 * from the thread itself (getrusage in the handler). */
		snprintf(path, sizeof(path), "%d/status", (int)tid);
		n = procfs_read_at(taskfd, path, buf, sizeof(buf));
		if (n < 0)
			return (int)n;
		return procfs_parse_status_task(buf, (size_t)n, t, sigblk);
	}
	snprintf(path, sizeof(path), "%d/stat", (int)tid);
	n = procfs_read_at(taskfd, path, buf, sizeof(buf));
	if (n < 0)
		return (int)n;
	return procfs_parse_stat(buf, (size_t)n, t);
}

int procfs_read_cmdline(pid_t pid, char **out)
{
	char path[64], *buf;
	ssize_t n;

	buf = malloc(4096);
	if (!buf)
		return -ENOMEM;
	if (pid)
		snprintf(path, sizeof(path), "/proc/%d/cmdline", (int)pid);
	else
		/* Our own thread: the first one may have exited. */
		snprintf(path, sizeof(path), "/proc/thread-self/cmdline");
	n = procfs_read_at(AT_FDCWD, path, buf, 4096);
	if (n < 0) {
		free(buf);
		return (int)n;
	}
	while (n > 0 && buf[n - 1] == '\0')
		n--;
	for (ssize_t i = 0; i < n; i++)
		if (buf[i] == '\0')
			buf[i] = ' ';
	buf[n] = '\0';
	*out = buf;
	return 0;
}

bool procfs_pidfd_alive(int pidfd)
{
	struct pollfd p = { .fd = pidfd, .events = POLLIN };

	if (pidfd < 0)
		return false;
	while (poll(&p, 1, 0) < 0)
		if (errno != EINTR)
			return false;
	return !(p.revents & (POLLIN | POLLHUP | POLLERR));
}

int procfs_tracer_pid(pid_t pid, pid_t *out)
{
	char path[64], buf[4096];
	int64_t v;
	ssize_t n;
	int rc;

	if (pid)
		snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	else
		snprintf(path, sizeof(path), "/proc/self/status");
	n = procfs_read_at(AT_FDCWD, path, buf, sizeof(buf));
	if (n < 0)
		return (int)n;
	rc = procfs_parse_status_dec(buf, (size_t)n, "TracerPid", &v);
	if (rc < 0)
		return rc;
	*out = (pid_t)v;
	return 0;
}

int procfs_read_uid(pid_t pid, uid_t *out)
{
	char path[64], buf[4096];
	uint32_t uid;
	ssize_t n;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	n = procfs_read_at(AT_FDCWD, path, buf, sizeof(buf));
	if (n < 0)
		return (int)n;
	if (procfs_parse_status_ids(buf, (size_t)n, "Uid", &uid, 1) != 1)
		return SW_EFORMAT;
	*out = (uid_t)uid;
	return 0;
}

int procfs_read_proc(pid_t pid, struct procfs_proc *out)
{
	char path[64], buf[1024];
	const char *p;
	ssize_t n;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	n = procfs_read_at(AT_FDCWD, path, buf, sizeof(buf));
	if (n < 0)
		return (int)n;
	p = strrchr(buf, ')');
	/* state ppid pgrp session tty tpgid flags ... num_threads (20th) */
	if (!p || sscanf(p + 1,
			 " %c %*d %*d %*d %*d %*d %lu %*u %*u %*u %*u %*u "
			 "%*u %*d %*d %*d %*d %ld",
			 &out->state, &out->flags, &out->threads) != 3)
		return SW_EFORMAT;
	return 0;
}

int procfs_parse_nspid(const char *buf, size_t len, pid_t *outer, pid_t *inner)
{
	const char *p = procfs_status_value(buf, len, "NSpid");
	const char *end = buf + len;
	int levels = 0;

	if (!p)
		return -ENOENT;
	while (p < end && *p != '\n') {
		uint64_t v = 0;
		int digits = 0;

		for (; p < end && *p >= '0' && *p <= '9'; p++) {
			v = v * 10 + (uint64_t)(*p - '0');
			if (++digits > 10)
				return SW_EFORMAT;
		}
		if (!digits || v == 0 || v > INT32_MAX ||
		    ++levels > PROCFS_NSPID_MAX_LEVELS)
			return SW_EFORMAT;
		if (levels == 1)
			*outer = (pid_t)v;
		*inner = (pid_t)v;
		/* Ids are separated by a tab (blanks tolerated); a blank
		 * at the end of the line is not an id. */
		while (p < end && (*p == '\t' || *p == ' '))
			p++;
	}
	return levels ? 0 : SW_EFORMAT;
}

/* The pid of pid in its own namespace (pid itself when that is ours). */
pid_t procfs_inner_pid(pid_t pid)
{
	char path[64], buf[4096];
	pid_t outer, inner;
	ssize_t n;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	n = procfs_read_at(AT_FDCWD, path, buf, sizeof(buf));
	if (n < 0 || procfs_parse_nspid(buf, (size_t)n, &outer, &inner) < 0)
		return pid;
	return inner;
}

int procfs_read_syscall(int taskfd, pid_t tid, uint64_t *sp, uint64_t *pc)
{
	char path[32], buf[256] = "", *p, *end;
	uint64_t field[9];
	ssize_t n;
	int k = 0;

	snprintf(path, sizeof(path), "%d/syscall", (int)tid);
	n = procfs_read_checked(taskfd, path, buf, sizeof(buf));
	if (n < 0)
		return (int)n;
	if (strncmp(buf, "running", 7) == 0)
		return -EAGAIN;
	p = buf;
	while (k < 9) {
		while (*p == ' ')
			p++;
		if (!*p || *p == '\n')
			break;
		errno = 0;
		/* the number is decimal (-1 out of a call), the rest 0x... */
		field[k] = k == 0 ? (uint64_t)strtoll(p, &end, 10)
				  : strtoull(p, &end, 16);
		if (end == p || errno)
			return SW_EFORMAT;
		k++;
		p = end;
	}
	if (k != 3 && k != 9)
		return SW_EFORMAT;
	if (sp)
		*sp = field[k - 2];
	if (pc)
		*pc = field[k - 1];
	return 0;
}
