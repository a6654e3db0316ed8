/*
 * access.c - who may see what (access.h).
 */
#include <errno.h>
#include <linux/capability.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "model/procfs.h"
#include "access.h"
#include "model/clock.h"
#include "model/procmaps.h"
#include "procid.h"
#include "render/group.h"
#include "tcred.h"

void access_init(struct access *a, const struct peer *p, bool token,
		 gid_t admin_gid)
{
	a->peer = *p;
	a->all = token || (p->known && p->uid == 0) ||
		 (admin_gid != (gid_t)-1 && peer_in_group(p, admin_gid));
	a->who.uid = p->known ? p->uid : (uid_t)-1;
	a->who.priority = a->all;
	a->kernel_stacks =
		p->known &&
		((p->caps & (1ull << CAP_SYS_ADMIN)) ||
		 (admin_gid != (gid_t)-1 && peer_in_group(p, admin_gid)));
}

bool access_kernel_stacks(const struct access *a)
{
	return a->kernel_stacks;
}

/*
 * Our own rule, stricter than the kernel's, for when the helper cannot
 * ask the kernel: the requester's uid and gid all of the process's, no
 * capability it lacks, and the process dumpable.
 */
static bool own_rule(const struct access *a, const struct procid *id)
{
	for (int i = 0; i < 3; i++)
		if (id->uid[i] != a->peer.uid || id->gid[i] != a->peer.gid)
			return false;
	return id->dumpable && (id->cap_prm & ~a->peer.caps) == 0;
}

/* a's credentials as the kernel's ptrace rule weighs them. */
static struct ptracer_cred cred_of(const struct access *a)
{
	struct ptracer_cred c = { .uid = a->peer.uid,
				  .gid = a->peer.gid,
				  .caps = a->peer.caps };

	return c;
}

/*
 * The rule for the processes of ids (n of them, read just before) into
 * ok[i], asked of the kernel through the helper in batches.
 */
static void rule_allows(const struct access *a, const struct procid *ids,
			const pid_t *pids, size_t n, bool *ok)
{
	struct ptracer_cred cred = cred_of(a);
	struct ptracer_task *tasks = calloc(n ? n : 1, sizeof(*tasks));
	int rc = tasks ? 0 : -ENOMEM;

	for (size_t i = 0; i < n; i++)
		ok[i] = false;
	for (size_t i = 0; tasks && i < n; i++) {
		tasks[i].pid = pids[i];
		tasks[i].tid = ids[i].tid;
	}
	if (tasks)
		rc = ptracer_check(&cred, tasks, n, ok);
	free(tasks);
	if (rc == PTRACER_EGONE)
		for (size_t i = 0; i < n; i++)
			ok[i] = own_rule(a, &ids[i]);
}

void access_sees_pids(const struct access *a, const pid_t *pids, size_t n,
		      bool *ok)
{
	struct procid *ids;

	for (size_t i = 0; i < n; i++)
		ok[i] = a->all;
	if (a->all || !a->peer.known || n == 0)
		return;
	ids = calloc(n, sizeof(*ids));
	if (!ids)
		return;
	for (size_t i = 0; i < n; i++)
		if (procid_read(pids[i], &ids[i]) < 0)
			ids[i].tid = 0; /* gone: the helper allows nothing */
	rule_allows(a, ids, pids, n, ok);
	for (size_t i = 0; i < n; i++)
		ok[i] = ok[i] && ids[i].tid > 0;
	free(ids);
}

bool access_sees_pid(const struct access *a, pid_t pid)
{
	bool ok = false;

	if (pid > 0)
		access_sees_pids(a, &pid, 1, &ok);
	return ok;
}

void access_sees_all(const struct access *a, struct target **ts, size_t n,
		     bool *ok)
{
	struct procid *ids;
	pid_t *pids;

	for (size_t i = 0; i < n; i++)
		ok[i] = a->all && target_alive(ts[i]);
	if (a->all || !a->peer.known || n == 0)
		return;
	ids = calloc(n, sizeof(*ids));
	pids = calloc(n, sizeof(*pids));
	if (!ids || !pids)
		goto out;
	for (size_t i = 0; i < n; i++) {
		pids[i] = ts[i]->self ? getpid() : ts[i]->pid;
		if (ts[i]->self ? procid_read(pids[i], &ids[i]) < 0
				: target_unchanged(ts[i], &ids[i]) < 0)
			ids[i].tid = 0;
	}
	rule_allows(a, ids, pids, n, ok);
	/*
	 * Unchanged still after the rule was asked: what was allowed is the
	 * process the target stands for.
	 */
	for (size_t i = 0; i < n; i++)
		ok[i] = ok[i] && ids[i].tid > 0 &&
			target_unchanged(ts[i], NULL) == 0;
out:
	free(ids);
	free(pids);
}

bool access_sees(const struct access *a, struct target *t)
{
	bool ok = false;

	access_sees_all(a, &t, 1, &ok);
	return ok;
}

int access_list(struct registry *reg, const struct access *a,
		struct target ***out, size_t *n)
{
	struct target **ts;
	size_t all, k = 0;
	bool *ok;
	int rc = registry_list(reg, &ts, &all);

	if (rc < 0)
		return rc;
	ok = calloc(all ? all : 1, sizeof(*ok));
	if (!ok) {
		registry_put_all(ts, all);
		return -ENOMEM;
	}
	access_sees_all(a, ts, all, ok);
	for (size_t i = 0; i < all; i++) {
		if (ok[i])
			ts[k++] = ts[i];
		else
			target_put(ts[i]);
	}
	free(ok);
	*out = ts;
	*n = k;
	return 0;
}

struct target *access_get(struct registry *reg, const struct access *a,
			  pid_t pid)
{
	struct target *t = registry_get(reg, pid);

	if (t && !access_sees(a, t)) {
		target_put(t);
		return NULL;
	}
	return t;
}

struct target *access_get_process(struct registry *reg, const struct access *a,
				  pid_t pid)
{
	struct target *t = access_get(reg, a, pid);
	int err;

	if (t)
		return t;
	if (!access_sees_pid(a, pid))
		return NULL;
	t = registry_get_process(reg, pid, &a->who, &err);
	/* Pinned now: the same rule for the process that was pinned. */
	if (t && !access_sees(a, t)) {
		target_put(t);
		return NULL;
	}
	return t;
}

const char *access_unseen_why(const struct access *a, pid_t pid, char *buf,
			      size_t size)
{
	char path[32];
	struct stat st;

	snprintf(path, sizeof(path), "/proc/%d", (int)pid);
	if (a->all && pid > 0 && stat(path, &st) < 0 && errno == ENOENT)
		snprintf(buf, size, "no process %d", (int)pid);
	else
		snprintf(buf, size, "pid %d is not a process you may see",
			 (int)pid);
	return buf;
}

/*
 * Which of d's marked threads a may read, into ok[i] for thread i (the
 * unmarked ones are true): asked of the kernel under a's credentials,
 * all at once; a marked thread of the past never.
 */
static void threads_allowed(const struct access *a, const struct sw_dump *d,
			    bool past, bool *ok)
{
	struct ptracer_cred cred = cred_of(a);
	struct ptracer_task *tasks = NULL;
	size_t *at = NULL, n = 0;
	bool *got = NULL;
	int rc = 0;

	for (size_t i = 0; i < d->nthreads; i++) {
		ok[i] = a->all || !(d->threads[i].flags & SW_TF_OTHER_CREDS);
		n += !ok[i];
	}
	if (!n || past || !a->peer.known)
		return;
	tasks = calloc(n, sizeof(*tasks));
	at = calloc(n, sizeof(*at));
	got = calloc(n, sizeof(*got));
	if (!tasks || !at || !got)
		goto out;
	n = 0;
	for (size_t i = 0; i < d->nthreads; i++) {
		if (ok[i])
			continue;
		tasks[n].pid = d->pid;
		tasks[n].tid = d->threads[i].tid;
		at[n++] = i;
	}
	rc = ptracer_check(&cred, tasks, n, got);
	for (size_t i = 0; rc == 0 && i < n; i++)
		ok[at[i]] = got[i];
out:
	free(tasks);
	free(at);
	free(got);
}

/*
 * Whether a may read a file of mode, uid and gid, as the kernel's
 * permission bits say (ACLs aside, which could only allow more):
 * capabilities that pass them count only over the host (peer.h).
 */
static bool may_read_file(const struct access *a, const struct stat *st)
{
	const uint64_t dac =
		(1ull << CAP_DAC_OVERRIDE) | (1ull << CAP_DAC_READ_SEARCH);

	if (a->peer.caps & dac)
		return true;
	if (a->peer.uid == st->st_uid)
		return st->st_mode & S_IRUSR;
	if (peer_in_group(&a->peer, st->st_gid))
		return st->st_mode & S_IRGRP;
	return st->st_mode & S_IROTH;
}

/*
 * What unreadable_modules() found lately, per HTTP thread: a history of
 * a thousand samples has the same few modules in each, and a page asks
 * again every few seconds. Kept MEMO_NS, for one requester's
 * credentials and one mapping of one process.
 */
#define MEMO_SLOTS 64
#define MEMO_NS 2000000000ull
static __thread struct memo {
	uint64_t at_ns;
	pid_t pid;
	uint64_t start;
	uid_t uid;
	gid_t gid;
	int ngroups;
	uint64_t caps;
	bool hide;
} memo[MEMO_SLOTS];
static __thread unsigned memo_next;

static bool memo_find(const struct access *a, pid_t pid, uint64_t start,
		      bool *hide)
{
	uint64_t now = clock_now_ns();

	for (unsigned i = 0; i < MEMO_SLOTS; i++) {
		const struct memo *e = &memo[i];

		if (e->at_ns && now - e->at_ns < MEMO_NS && e->pid == pid &&
		    e->start == start && e->uid == a->peer.uid &&
		    e->gid == a->peer.gid && e->ngroups == a->peer.ngroups &&
		    e->caps == a->peer.caps) {
			*hide = e->hide;
			return true;
		}
	}
	return false;
}

static void memo_put(const struct access *a, pid_t pid, uint64_t start,
		     bool hide)
{
	struct memo *e = &memo[memo_next++ % MEMO_SLOTS];

	e->at_ns = clock_now_ns();
	e->pid = pid;
	e->start = start;
	e->uid = a->peer.uid;
	e->gid = a->peer.gid;
	e->ngroups = a->peer.ngroups;
	e->caps = a->peer.caps;
	e->hide = hide;
}

/*
 * Which of d's modules have a file a may not read (hide[i]), and how
 * many: their symbols and lines come from parts of the file the process
 * never mapped (the symbol table, the debug information), which a
 * process that mapped the file before it dropped its privileges shows
 * to whoever may read its memory. The file is the one the process maps
 * at the module's start (its map_files link, as the symbolizer opens
 * it); a module that cannot be told so is hidden. Modules without a
 * file (the vDSO, JIT code named by the user's own perf map) are not.
 */
static size_t unreadable_modules(const struct access *a,
				 const struct sw_dump *d, bool *hide)
{
	struct procmaps pm;
	size_t n = 0;
	int maps = 1; /* 1: not read yet; 0: read; < 0: failed */

	for (size_t i = 0; i < d->nmodules; i++)
		hide[i] = false;
	if (a->all || !a->peer.known || !d->symbolized || !d->nmodules)
		return 0;
	for (size_t i = 0; i < d->nmodules; i++) {
		const struct sw_module *m = &d->modules[i];
		const struct procmap *mp = NULL;
		char path[96];
		struct stat st;

		if (!m->path || m->path[0] != '/')
			continue;
		if (memo_find(a, d->pid, m->start, &hide[i])) {
			n += hide[i];
			continue;
		}
		if (maps == 1)
			maps = procmaps_read(d->pid, &pm);
		mp = maps == 0 ? procmaps_find(&pm, m->start) : NULL;
		if (mp)
			snprintf(path, sizeof(path),
				 "/proc/%d/map_files/%lx-%lx", (int)d->pid,
				 (unsigned long)mp->start,
				 (unsigned long)mp->end);
		hide[i] = !mp || procfs_stat(path, &st) < 0 ||
			  !may_read_file(a, &st);
		if (mp)
			memo_put(a, d->pid, m->start, hide[i]);
		n += hide[i];
	}
	if (maps == 0)
		procmaps_release(&pm);
	return n;
}

struct sdump *access_view(const struct access *a, struct sdump *sd, bool past)
{
	const struct sw_dump *d = sd->d;
	struct sdump *v = NULL;
	struct sw_dump *c = NULL;
	size_t hidden = 0, unread;
	bool *ok, *hide;

	if (a->all) {
		sdump_get(sd);
		return sd;
	}
	ok = calloc(d->nthreads ? d->nthreads : 1, sizeof(*ok));
	hide = calloc(d->nmodules ? d->nmodules : 1, sizeof(*hide));
	if (!ok || !hide)
		goto out;
	if (tcred_any(d))
		threads_allowed(a, d, past, ok);
	else
		for (size_t i = 0; i < d->nthreads; i++)
			ok[i] = true;
	for (size_t i = 0; i < d->nthreads; i++)
		hidden += !ok[i];
	unread = unreadable_modules(a, d, hide);
	if (!hidden && !unread) {
		sdump_get(sd);
		v = sd;
		goto out;
	}
	v = calloc(1, sizeof(*v));
	if (!v || dump_clone_some(d, ok, &c) < 0 ||
	    (unread && dump_strip_modules(c, hide) < 0) || group_dump(c) < 0) {
		sw_dump_free(c);
		free(v);
		v = NULL;
		goto out;
	}
	c->hidden_threads += hidden;
	atomic_init(&v->refs, 1);
	v->d = c;
	v->mono_ns = sd->mono_ns;
	v->sched_ns = sd->sched_ns;
	v->bytes = dump_bytes(c);
out:
	free(ok);
	free(hide);
	return v;
}
