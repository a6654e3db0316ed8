/*
 * tcred.c - threads that keep credentials of their own (tcred.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/procfs.h"
#include "ptracer.h"
#include "tcred.h"

struct tcred {
	size_t n;    /* marked tids, ascending */
	pid_t *tids; /* malloc'd; NULL when none */
};

static int cmp_pid(const void *a, const void *b)
{
	pid_t x = *(const pid_t *)a, y = *(const pid_t *)b;

	return (x > y) - (x < y);
}

static bool was_marked(const struct tcred *tc, pid_t tid)
{
	return tc && tc->n &&
	       bsearch(&tid, tc->tids, tc->n, sizeof(pid_t), cmp_pid);
}

/*
 * Whether a requester bound by the access rule could ever be shown the
 * process id is: dumpable, not root's, its three uids one uid and its
 * three gids one gid (the kernel's ptrace rule wants the reader's fsuid
 * and fsgid equal to all of them).
 */
static bool seen_by_users(const struct procid *id)
{
	return id->dumpable && id->uid[0] != 0 && id->uid[0] == id->uid[1] &&
	       id->uid[1] == id->uid[2] && id->gid[0] == id->gid[1] &&
	       id->gid[1] == id->gid[2];
}

/*
 * Without the helper: thread tid's own status against id, as access.c's
 * own rule does for a process (its uids and gids id's, no capability id
 * lacks). False when it cannot be read.
 */
static bool status_same(const struct procid *id, pid_t pid, pid_t tid)
{
	char path[64], buf[4096];
	uint32_t ids[3];
	uint64_t prm;
	ssize_t n;

	snprintf(path, sizeof(path), "/proc/%d/task/%d/status", (int)pid,
		 (int)tid);
	n = procfs_read_at(AT_FDCWD, path, buf, sizeof(buf));
	if (n < 0 ||
	    procfs_parse_status_ids(buf, (size_t)n, "Uid", ids, 3) != 3)
		return false;
	for (int i = 0; i < 3; i++)
		if (ids[i] != id->uid[i])
			return false;
	if (procfs_parse_status_ids(buf, (size_t)n, "Gid", ids, 3) != 3)
		return false;
	for (int i = 0; i < 3; i++)
		if (ids[i] != id->gid[i])
			return false;
	return procfs_parse_status_hex(buf, (size_t)n, "CapPrm", &prm) == 0 &&
	       (prm & ~id->cap_prm) == 0;
}

/*
 * Asks whether id's credentials may read each thread tasks[i] (n of
 * them) into ok[i]: the helper, in batches; without it, each thread's
 * status.
 */
static void ask(const struct procid *id, pid_t pid, struct ptracer_task *tasks,
		size_t n, bool *ok)
{
	struct ptracer_cred cred = { .uid = id->uid[1],
				     .gid = id->gid[1],
				     .caps = id->cap_prm };
	int rc = ptracer_check(&cred, tasks, n, ok);

	if (rc == PTRACER_EGONE)
		for (size_t i = 0; i < n; i++)
			ok[i] = status_same(id, pid, tasks[i].tid);
}

void tcred_mark(struct tcred **tc, const struct procid *id, pid_t pid,
		struct sw_dump *d)
{
	struct ptracer_task *tasks;
	size_t n = 0, nmarked = 0, k = 0;
	pid_t *marked;
	bool *ok;

	for (size_t i = 0; i < d->nthreads; i++)
		d->threads[i].flags &= ~SW_TF_OTHER_CREDS;
	if (!seen_by_users(id)) {
		if (*tc)
			(*tc)->n = 0;
		return;
	}
	tasks = calloc(d->nthreads ? d->nthreads : 1, sizeof(*tasks));
	ok = calloc(d->nthreads ? d->nthreads : 1, sizeof(*ok));
	marked = malloc((d->nthreads ? d->nthreads : 1) * sizeof(*marked));
	if (!*tc)
		*tc = calloc(1, sizeof(**tc));
	if (!tasks || !ok || !marked || !*tc) {
		for (size_t i = 0; i < d->nthreads; i++)
			d->threads[i].flags |= SW_TF_OTHER_CREDS;
		goto out;
	}
	for (size_t i = 0; i < d->nthreads; i++) {
		const struct sw_thread *t = &d->threads[i];

		if (!(t->flags & SW_TF_REUSED) || t->status != SW_ST_OK) {
			tasks[n].pid = pid;
			tasks[n++].tid = t->tid;
		}
	}
	ask(id, pid, tasks, n, ok);
	for (size_t i = 0; i < d->nthreads; i++) {
		struct sw_thread *t = &d->threads[i];
		bool other;

		if (k < n && tasks[k].tid == t->tid)
			other = !ok[k++];
		else
			other = was_marked(*tc, t->tid);
		if (other) {
			t->flags |= SW_TF_OTHER_CREDS;
			marked[nmarked++] = t->tid;
		}
	}
	qsort(marked, nmarked, sizeof(*marked), cmp_pid);
	free((*tc)->tids);
	(*tc)->tids = marked;
	(*tc)->n = nmarked;
	marked = NULL;
out:
	free(marked);
	free(tasks);
	free(ok);
}

bool tcred_any(const struct sw_dump *d)
{
	for (size_t i = 0; i < d->nthreads; i++)
		if (d->threads[i].flags & SW_TF_OTHER_CREDS)
			return true;
	return false;
}

void tcred_free(struct tcred *tc)
{
	if (!tc)
		return;
	free(tc->tids);
	free(tc);
}
