/*
 * procid.c - a process's credentials and image (procid.h).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "model/procfs.h"
#include "procid.h"

/* The stat fields that place an image: startcode, startstack, start_brk. */
static const int layout_fields[3] = { 26, 28, 47 };

/* The directory of thread tid of pid under /proc. */
static void task_dir(pid_t pid, pid_t tid, char *buf, size_t size)
{
	/*
	 * The thread's own files, the leader's too: /proc/PID/stat sums
	 * every thread's times (a thousand threads, twice a dump), while
	 * the fields read here are the thread's, or its process's memory
	 * layout, the same in either.
	 */
	snprintf(buf, size, "/proc/%d/task/%d", (int)pid, (int)tid);
}

/* Credentials from the thread's status file, and its state. */
static int read_status(const char *dir, struct procid *out, char *state)
{
	char path[96], buf[4096];
	uint32_t ids[3];
	const char *st;
	struct stat sb;
	ssize_t n;
	int fd, rc;

	snprintf(path, sizeof(path), "%s/status", dir);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? -ESRCH : -errno;
	/*
	 * The file, not the directory: the kernel gives a process's /proc
	 * files to root while it is not dumpable.
	 */
	if (fstat(fd, &sb) < 0) {
		rc = -errno;
		close(fd);
		return rc;
	}
	n = read(fd, buf, sizeof(buf) - 1);
	rc = n < 0 ? -errno : 0;
	close(fd);
	if (n <= 0)
		return n < 0 ? rc : -ESRCH;
	buf[n] = '\0';
	if (procfs_parse_status_ids(buf, (size_t)n, "Uid", ids, 3) != 3)
		return -EINVAL;
	for (int i = 0; i < 3; i++)
		out->uid[i] = (uid_t)ids[i];
	if (procfs_parse_status_ids(buf, (size_t)n, "Gid", ids, 3) != 3)
		return -EINVAL;
	for (int i = 0; i < 3; i++)
		out->gid[i] = (gid_t)ids[i];
	if (procfs_parse_status_hex(buf, (size_t)n, "CapPrm", &out->cap_prm))
		return -EINVAL;
	st = procfs_status_value(buf, (size_t)n, "State");
	*state = st ? *st : '?';
	out->dumpable = sb.st_uid == out->uid[1];
	return 0;
}

/* The image's layout from the thread's stat file. */
static int read_layout(const char *dir, struct procid *out)
{
	char path[96], buf[1024];
	ssize_t n;

	snprintf(path, sizeof(path), "%s/stat", dir);
	n = procfs_read_checked(AT_FDCWD, path, buf, sizeof(buf));
	if (n < 0)
		return n == -ENOENT ? -ESRCH : (int)n;
	for (int i = 0; i < 3; i++)
		if (procfs_parse_stat_field(buf, (size_t)n, layout_fields[i],
					    &out->layout[i]))
			return -EINVAL;
	return 0;
}

/*
 * The procid of one thread; *state 'z' for a thread whose stat places no
 * image (every field 0): one that is leaving, its memory let go before
 * it is a zombie, or a kernel thread.
 */
static int read_thread(pid_t pid, pid_t tid, struct procid *out, char *state)
{
	char dir[64];
	int rc;

	task_dir(pid, tid, dir, sizeof(dir));
	out->tid = tid;
	rc = read_status(dir, out, state);
	if (rc == 0 && *state != 'Z')
		rc = read_layout(dir, out);
	if (rc == 0 && *state != 'Z' && !out->layout[0] && !out->layout[1] &&
	    !out->layout[2])
		*state = 'z';
	return rc;
}

/* A live thread of pid other than its exited leader, into out. */
static int read_live_thread(pid_t pid, struct procid *out)
{
	char path[64];
	pid_t *tids = NULL;
	size_t n = 0;
	int fd, rc;

	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? -ESRCH : -errno;
	rc = procfs_list_tasks(fd, 1u << 16, &tids, &n);
	close(fd);
	if (rc < 0)
		return rc;
	rc = -ESRCH;
	for (size_t i = 0; i < n && rc == -ESRCH; i++) {
		char state = '?';

		if (tids[i] == pid)
			continue;
		rc = read_thread(pid, tids[i], out, &state);
		if (rc == 0 && (state == 'Z' || state == 'z'))
			rc = -ESRCH;
	}
	free(tids);
	return rc;
}

int procid_read(pid_t pid, struct procid *out)
{
	char state = '?';
	int rc;

	memset(out, 0, sizeof(*out));
	if (pid <= 0)
		return -ESRCH;
	rc = read_thread(pid, pid, out, &state);
	if (rc == 0 && state == 'Z')
		rc = read_live_thread(pid, out);
	if (rc == 0 && state == 'z') {
		/* Leaving, or a kernel thread (which has no other). */
		struct procid first = *out;

		rc = read_live_thread(pid, out);
		if (rc == -ESRCH) {
			*out = first;
			rc = 0;
		}
	}
	return rc;
}

bool procid_same(const struct procid *a, const struct procid *b)
{
	return memcmp(a->uid, b->uid, sizeof(a->uid)) == 0 &&
	       memcmp(a->gid, b->gid, sizeof(a->gid)) == 0 &&
	       a->cap_prm == b->cap_prm && a->dumpable == b->dumpable &&
	       memcmp(a->layout, b->layout, sizeof(a->layout)) == 0;
}
