/*
 * broker.c - the reads under /proc the service asks a core for (broker.h).
 *
 * The service's side sends one REQ_BROKER request with a fresh socket
 * for its answer, as every request to a core goes (ptracer_msg.h), and
 * waits for it a bounded time. The core's side checks the path against
 * the few shapes it serves before it touches anything.
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "broker.h"
#include "cores.h"
#include "fdmsg.h"
#include "model/clock.h"
#include "model/procfs.h"
#include "peer.h"
#include "ptracer_msg.h"
#include "stackwatch.h"
#include "symbols/modopen.h"

/* How long the service waits for an answer (a core may be busy). */
#define BROKER_WAIT_NS (5ull * 1000000000ull)

static _Atomic bool in_use;

/* --- the service's side --------------------------------------------- */

/*
 * Sends the request (op, path of len bytes, the other fields) to a core
 * and waits for its answer: *a, up to size bytes of text into buf, and
 * the descriptor attached into *fd (when fd). 0 or a negative errno.
 */
static int ask(uint32_t op, const void *path, size_t len,
	       const struct request *fields, struct broker_answer *a, char *buf,
	       size_t size, int *fd)
{
	struct request rq = *fields;
	char *msg = malloc(sizeof(*a) + BROKER_READ_MAX);
	ssize_t n = -1;
	int sv[2], rc, got = -1;

	if (fd)
		*fd = -1;
	if (!msg)
		return -ENOMEM;
	rq.magic = PTRACER_MAGIC;
	rq.kind = REQ_BROKER;
	rq.n = op;
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0) {
		free(msg);
		return -errno;
	}
	rc = cores_send(&rq, sizeof(rq), path, len, &sv[1], 1);
	close(sv[1]);
	if (rc == 0)
		n = fdmsg_recv(sv[0], msg, sizeof(*a) + BROKER_READ_MAX,
			       clock_now_ns() + BROKER_WAIT_NS, &got);
	close(sv[0]);
	if (rc == 0 && n < (ssize_t)sizeof(*a))
		rc = n < 0 ? (int)n : SW_EFORMAT;
	if (rc == 0) {
		memcpy(a, msg, sizeof(*a));
		if (buf && a->rc > 0) {
			size_t text = (size_t)n - sizeof(*a);

			/* As a direct read into buf would: size - 1 at most. */
			if ((size_t)a->rc != text || size == 0) {
				rc = SW_EFORMAT;
			} else {
				if (text > size - 1)
					text = size - 1;
				memcpy(buf, msg + sizeof(*a), text);
				a->rc = (int32_t)text;
			}
		}
	}
	free(msg);
	if (rc == 0 && fd && a->rc == 0 && got < 0)
		rc = SW_EFORMAT;
	if (rc < 0 || !fd) {
		if (got >= 0)
			close(got);
		return rc;
	}
	*fd = got;
	return 0;
}

static int svc_open(const char *path, size_t len, int how, struct stat *st)
{
	struct request f = { 0 };
	struct broker_answer a;
	int fd, rc;

	memset(st, 0, sizeof(*st));
	if (len > BROKER_PATH_MAX)
		return -ENAMETOOLONG;
	rc = ask((uint32_t)how, path, len, &f, &a, NULL, 0, &fd);
	if (rc < 0)
		return rc;
	if (a.rc < 0) {
		st->st_mode = a.mode; /* what was refused, when it was */
		return a.rc;
	}
	if (fstat(fd, st) < 0) {
		rc = -errno;
		close(fd);
		return rc;
	}
	return fd;
}

static ssize_t svc_read(const char *path, char *buf, size_t size)
{
	struct request f = { 0 };
	struct broker_answer a;
	size_t len = strlen(path) + 1;
	int rc;

	if (size == 0)
		return -EINVAL;
	if (len > BROKER_PATH_MAX)
		return -ENAMETOOLONG;
	rc = ask(BROKER_READ, path, len, &f, &a, buf, size, NULL);
	if (rc < 0)
		return rc;
	if (a.rc < 0)
		return a.rc;
	buf[a.rc] = '\0';
	return a.rc;
}

static const struct procfs_broker svc_broker = { svc_open, svc_read };

void broker_use(void)
{
	in_use = true;
	procfs_set_broker(&svc_broker);
}

bool broker_in_use(void)
{
	return in_use;
}

pid_t broker_find_holder(uint32_t inode, uid_t owner, int *fdnum)
{
	struct request f = { .uid = owner, .flags = inode };
	struct broker_answer a;

	if (ask(BROKER_HOLDER, NULL, 0, &f, &a, NULL, 0, NULL) < 0 ||
	    a.rc < 0 || a.pid <= 0)
		return 0;
	*fdnum = a.fdnum;
	return a.pid;
}

bool broker_holds(pid_t pid, int fdnum, uint32_t inode)
{
	struct request f = { .pid = pid,
			     .gid = (uint32_t)fdnum,
			     .flags = inode };
	struct broker_answer a;

	return ask(BROKER_HOLDS, NULL, 0, &f, &a, NULL, 0, NULL) == 0 &&
	       a.rc == 1;
}

/* --- the core's side ------------------------------------------------ */

/* Skips "DIGITS" at *p (no leading zero, a pid's range); false if none. */
static bool skip_number(const char **p)
{
	const char *s = *p;
	size_t n = 0;

	while (isdigit((unsigned char)s[n]))
		n++;
	if (n == 0 || n > 10 || (s[0] == '0' && n > 1))
		return false;
	*p = s + n;
	return true;
}

/* Skips "HEX-HEX" at *p; false if not that, whole. */
static bool is_range(const char *p)
{
	size_t a = strspn(p, "0123456789abcdef"), b;

	if (a == 0 || a > 16 || p[a] != '-')
		return false;
	b = strspn(p + a + 1, "0123456789abcdef");
	return b > 0 && b <= 16 && p[a + 1 + b] == '\0';
}

static bool one_of(const char *leaf, const char *const *names)
{
	for (; *names; names++)
		if (strcmp(leaf, *names) == 0)
			return true;
	return false;
}

/*
 * Whether path is one the core serves for op: "/proc/PID/LEAF" or
 * "/proc/PID/task/TID/LEAF" with LEAF of the op's few.
 */
static bool path_allowed(uint32_t op, const char *path)
{
	static const char *const reads[] = { "wchan", "stack",	"syscall",
					     "stat",  "status", NULL };
	static const char *const opens[] = { "maps", "auxv", NULL };
	static const char *const links[] = { "ns/user", "ns/mnt", "ns/pid",
					     NULL };
	const char *p = path;
	bool task = false;

	if (strncmp(p, "/proc/", 6) != 0)
		return false;
	p += 6;
	if (!skip_number(&p) || *p++ != '/')
		return false;
	if (strncmp(p, "task/", 5) == 0) {
		p += 5;
		if (!skip_number(&p) || *p++ != '/')
			return false;
		task = true;
	}
	switch (op) {
	case BROKER_READ:
		return one_of(p, reads);
	case BROKER_OPEN_READ:
		return one_of(p, opens);
	case BROKER_OPEN_PATH:
		return one_of(p, links) ||
		       (!task && strncmp(p, "map_files/", 10) == 0 &&
			is_range(p + 10));
	case BROKER_OPEN_MODULE:
		return !task && strncmp(p, "map_files/", 10) == 0 &&
		       is_range(p + 10);
	}
	return false;
}

/* Whether root and rel are "/proc/PID/root" and "tmp/perf-N.map". */
static bool in_root_allowed(const char *root, const char *rel)
{
	const char *p = root;

	if (strncmp(p, "/proc/", 6) != 0)
		return false;
	p += 6;
	if (!skip_number(&p) || strcmp(p, "/root") != 0)
		return false;
	if (strncmp(rel, "tmp/perf-", 9) != 0)
		return false;
	p = rel + 9;
	return skip_number(&p) && strcmp(p, ".map") == 0;
}

/* Opens path as op says (a checked path); the fd or -errno, *mode. */
static int open_as(uint32_t op, const char *path, uint32_t *mode)
{
	struct stat st;
	int fd;

	switch (op) {
	case BROKER_OPEN_READ:
		fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
		return fd < 0 ? -errno : fd;
	case BROKER_OPEN_PATH:
		fd = open(path, O_PATH | O_CLOEXEC);
		return fd < 0 ? -errno : fd;
	case BROKER_OPEN_MODULE:
		return modopen_file(path, MODOPEN_FOLLOW);
	default: /* BROKER_OPEN_IN_ROOT */
		memset(&st, 0, sizeof(st));
		fd = modopen_in_root(path, path + strlen(path) + 1, &st);
		*mode = (uint32_t)st.st_mode;
		return fd;
	}
}

void broker_serve(const struct request *rq, const uint8_t *body, size_t len,
		  int answer_fd)
{
	struct broker_answer a = { .rc = -EPERM };
	const char *path = (const char *)body;
	char *text = NULL;
	int fd = -1;

	/* The body: one NUL-terminated path, or two for IN_ROOT. */
	if (rq->n == BROKER_HOLDER) {
		int fdnum = -1;

		a.pid = peer_find_holder(rq->flags, (uid_t)rq->uid, &fdnum);
		a.fdnum = fdnum;
		a.rc = 0;
	} else if (rq->n == BROKER_HOLDS) {
		a.rc = rq->pid > 0 &&
		       peer_holds(rq->pid, (int)rq->gid, rq->flags);
	} else if (len == 0 || len > BROKER_PATH_MAX || body[len - 1] != '\0') {
		a.rc = -EINVAL;
	} else if (rq->n == BROKER_OPEN_IN_ROOT) {
		size_t first = strlen(path) + 1;

		if (first < len && strlen(path + first) + 1 == len - first &&
		    in_root_allowed(path, path + first))
			a.rc = fd = open_as(rq->n, path, &a.mode);
	} else if (strlen(path) + 1 != len || !path_allowed(rq->n, path)) {
		a.rc = -EPERM;
	} else if (rq->n == BROKER_READ) {
		text = malloc(BROKER_READ_MAX);
		a.rc = text ? (int32_t)procfs_read_at(AT_FDCWD, path, text,
						      BROKER_READ_MAX)
			    : -ENOMEM;
	} else {
		a.rc = fd = open_as(rq->n, path, &a.mode);
	}
	if (fd >= 0)
		a.rc = 0;
	(void)fdmsg_send(answer_fd, &a, sizeof(a), text,
			 text && a.rc > 0 ? (size_t)a.rc : 0, fd);
	if (fd >= 0)
		close(fd);
	free(text);
}
