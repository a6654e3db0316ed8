/*
 * nspid.c - tids of a target in another pid namespace, translated from the
 * kernel's NSpid lines (nspid.h).
 *
 * What /proc says is treated like anything else from outside: reads are
 * bounded (one page per status file, at most SW_MAX_THREADS tasks) and the
 * parser accepts any bytes.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "nspid.h"
#include "model/procfs.h"

bool nspid_foreign(pid_t pid)
{
	char path[64];
	struct stat self, other;

	snprintf(path, sizeof(path), "/proc/%d/ns/pid", (int)pid);
	if (stat("/proc/self/ns/pid", &self) < 0 ||
	    procfs_stat(path, &other) < 0)
		return false;
	return self.st_dev != other.st_dev || self.st_ino != other.st_ino;
}

/* A task's id in its own namespace and in the daemon's. */
struct idpair {
	pid_t inner;
	pid_t outer;
};

static int cmp_inner(const void *a, const void *b)
{
	pid_t x = ((const struct idpair *)a)->inner;
	pid_t y = ((const struct idpair *)b)->inner;

	return (x > y) - (x < y);
}

/*
 * The inner-to-outer ids of the tasks under taskfd (/proc/PID/task),
 * sorted by inner id. *out is malloc'd. A task that exits while it is
 * read, or whose NSpid line does not name itself first, is left out.
 */
static int read_ids(int taskfd, struct idpair **out, size_t *n)
{
	struct idpair *ids;
	pid_t *tids;
	size_t ntids, cnt = 0;
	int rc;

	rc = procfs_list_tasks(taskfd, SW_MAX_THREADS, &tids, &ntids);
	if (rc < 0)
		return rc;
	ids = malloc((ntids ? ntids : 1) * sizeof(*ids));
	if (!ids) {
		free(tids);
		return -ENOMEM;
	}
	for (size_t i = 0; i < ntids; i++) {
		char path[32], buf[4096];
		pid_t outer, inner;
		ssize_t len;

		snprintf(path, sizeof(path), "%d/status", (int)tids[i]);
		len = procfs_read_at(taskfd, path, buf, sizeof(buf));
		if (len < 0 ||
		    procfs_parse_nspid(buf, (size_t)len, &outer, &inner) < 0 ||
		    outer != tids[i])
			continue;
		ids[cnt].inner = inner;
		ids[cnt++].outer = outer;
	}
	free(tids);
	qsort(ids, cnt, sizeof(*ids), cmp_inner);
	*out = ids;
	*n = cnt;
	return 0;
}

int nspid_translate(pid_t pid, struct sw_dump *d)
{
	struct idpair *ids;
	char path[64];
	size_t n;
	int taskfd, rc;

	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	taskfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (taskfd < 0)
		return errno == ENOENT ? -ESRCH : -errno;
	rc = read_ids(taskfd, &ids, &n);
	close(taskfd);
	if (rc < 0)
		return rc;
	for (size_t i = 0; i < d->nthreads; i++) {
		struct sw_thread *t = &d->threads[i];
		struct idpair key = { .inner = t->tid };
		const struct idpair *hit =
			bsearch(&key, ids, n, sizeof(*ids), cmp_inner);

		if (hit) {
			t->ns_tid = t->tid;
			t->tid = hit->outer;
			continue;
		}
		t->tid = 0;
		free(t->ips);
		t->ips = NULL;
		t->nips = 0;
		dump_thread_set_error(t, SW_ST_EXITED,
				      "the thread exited before its id in "
				      "the daemon's pid namespace was read");
	}
	free(ids);
	return 0;
}

static int cmp_pid(const void *a, const void *b)
{
	pid_t x = *(const pid_t *)a, y = *(const pid_t *)b;

	return (x > y) - (x < y);
}

int nspid_to_inner(pid_t pid, const pid_t *tids, size_t n, pid_t **out,
		   size_t *nout)
{
	pid_t *ids = NULL;
	char path[64];
	size_t cnt = 0;
	int taskfd;

	*out = NULL;
	*nout = 0;
	if (n == 0)
		return 0;
	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	taskfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (taskfd < 0)
		return errno == ENOENT ? -ESRCH : -errno;
	ids = malloc(n * sizeof(*ids));
	if (!ids) {
		close(taskfd);
		return -ENOMEM;
	}
	for (size_t i = 0; i < n; i++) {
		char buf[4096];
		pid_t outer, inner;
		ssize_t len;

		if (tids[i] <= 0)
			continue;
		snprintf(path, sizeof(path), "%d/status", (int)tids[i]);
		len = procfs_read_at(taskfd, path, buf, sizeof(buf));
		/* Its own line names it first, or it is not that task. */
		if (len < 0 ||
		    procfs_parse_nspid(buf, (size_t)len, &outer, &inner) < 0 ||
		    outer != tids[i])
			continue;
		ids[cnt++] = inner;
	}
	close(taskfd);
	qsort(ids, cnt, sizeof(*ids), cmp_pid);
	*nout = 0;
	for (size_t i = 0; i < cnt; i++)
		if (*nout == 0 || ids[i] != ids[*nout - 1])
			ids[(*nout)++] = ids[i];
	if (*nout == 0) {
		free(ids);
		ids = NULL;
	}
	*out = ids;
	return 0;
}
