/*
 * ran.c - the threads a target's last periodic sample read by signal
 * (ran.h).
 */
#define _GNU_SOURCE
#include "ran.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "model/procfs.h"

/*
 * The bytes by which the kernel moves a thread's pc back onto its system
 * call instruction to restart the call after a handler: the context the
 * handler saw may name that instruction, /proc the one after it.
 */
#if defined(__x86_64__) || defined(__i386__)
#define RESTART_BACK 2
#elif defined(__aarch64__) || defined(__riscv)
#define RESTART_BACK 4
#else
#define RESTART_BACK 0
#endif

/* /proc/PID/task/TID/schedstat: on-CPU ns, runqueue ns, times switched in. */
struct figures {
	uint64_t v[3];
};

struct ran_thread {
	pid_t tid;
	pid_t ns_tid;
	char name[SW_COMM_MAX];
	char state;
	uint64_t utime_ms, stime_ms;
	uint32_t flags; /* of its read, without SW_TF_REUSED */
	uint64_t captured_ns;
	bool ready; /* fig valid: may be reused while they hold */
	struct figures fig;
	size_t nips;
	uint64_t *ips;
	uint64_t exact[SW_MAX_FRAMES / 64];
};

struct ran {
	size_t n; /* sorted by tid */
	struct ran_thread *v;
};

static int cmp_tid(const void *a, const void *b)
{
	const struct ran_thread *x = a, *y = b;

	return (x->tid > y->tid) - (x->tid < y->tid);
}

static int cmp_thread(const void *a, const void *b)
{
	const struct sw_thread *x = a, *y = b;

	return (x->tid > y->tid) - (x->tid < y->tid);
}

static const struct ran_thread *find(const struct ran *r, pid_t tid)
{
	struct ran_thread key = { .tid = tid };

	if (!r || !r->n)
		return NULL;
	return bsearch(&key, r->v, r->n, sizeof(key), cmp_tid);
}

/* /proc/PID/task open as a directory, or -errno. */
static int open_tasks(pid_t pid)
{
	char path[48];
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	return fd < 0 ? -errno : fd;
}

/* Thread tid's schedstat. 0, -ESRCH when it is gone, or SW_EFORMAT. */
static int read_figures(int taskfd, pid_t tid, struct figures *f)
{
	char path[32], buf[96];
	ssize_t n;

	snprintf(path, sizeof(path), "%d/schedstat", (int)tid);
	n = procfs_read_at(taskfd, path, buf, sizeof(buf));
	if (n < 0)
		return (int)n;
	if (sscanf(buf, "%" SCNu64 " %" SCNu64 " %" SCNu64, &f->v[0], &f->v[1],
		   &f->v[2]) != 3)
		return SW_EFORMAT;
	return 0;
}

static bool same_figures(const struct figures *a, const struct figures *b)
{
	return memcmp(a->v, b->v, sizeof(a->v)) == 0;
}

int ran_skip(const struct ran *r, pid_t pid, pid_t **skip, size_t *nskip)
{
	int taskfd;

	*skip = NULL;
	*nskip = 0;
	if (!r || !r->n)
		return 0;
	*skip = malloc(r->n * sizeof(**skip));
	if (!*skip)
		return -ENOMEM;
	taskfd = open_tasks(pid);
	for (size_t i = 0; taskfd >= 0 && i < r->n; i++) {
		struct figures now;

		if (r->v[i].ready &&
		    read_figures(taskfd, r->v[i].tid, &now) == 0 &&
		    same_figures(&now, &r->v[i].fig))
			(*skip)[(*nskip)++] = r->v[i].tid;
	}
	if (taskfd >= 0)
		close(taskfd);
	/* r is sorted by tid: so is the set. */
	return 0;
}

/* Thread e as it was read, marked reused; 0 or -ENOMEM. */
static int put_back(const struct ran_thread *e, struct sw_thread *t)
{
	t->ips = calloc(e->nips ? e->nips : 1, sizeof(*t->ips));
	if (!t->ips)
		return -ENOMEM;
	memcpy(t->ips, e->ips, e->nips * sizeof(*t->ips));
	t->nips = e->nips;
	t->ns_tid = e->ns_tid;
	memcpy(t->name, e->name, sizeof(t->name));
	t->state = e->state;
	t->utime_ms = e->utime_ms;
	t->stime_ms = e->stime_ms;
	t->status = SW_ST_OK;
	t->read = SW_READ_SIGNAL;
	t->flags = e->flags | SW_TF_REUSED;
	t->captured_ns = e->captured_ns;
	memcpy(t->exact, e->exact, sizeof(t->exact));
	return 0;
}

int ran_fill(const struct ran *r, const pid_t *skip, size_t nskip,
	     struct sw_dump *d)
{
	struct sw_thread *nv;
	int filled = 0;

	if (!nskip)
		return 0;
	nv = realloc(d->threads, (d->nthreads + nskip) * sizeof(*nv));
	if (!nv)
		return -ENOMEM;
	d->threads = nv;
	for (size_t i = 0; i < nskip; i++) {
		struct sw_thread *t;
		const struct ran_thread *e = find(r, skip[i]);

		if (e && !e->ready)
			e = NULL;
		t = &d->threads[d->nthreads++];
		memset(t, 0, sizeof(*t));
		t->tid = skip[i];
		t->group = -1;
		t->unchanged_s = -1;
		if (e && put_back(e, t) == 0) {
			filled++;
			continue;
		}
		t->state = '?';
		dump_thread_set_error(t, SW_ST_ERROR,
				      "its earlier stack was not kept");
	}
	qsort(d->threads, d->nthreads, sizeof(*d->threads), cmp_thread);
	return filled;
}

void ran_free(struct ran *r)
{
	if (!r)
		return;
	for (size_t i = 0; i < r->n; i++)
		free(r->v[i].ips);
	free(r->v);
	free(r);
}

/*
 * Whether t, read by signal just now, is asleep where it was caught: its
 * pc in /proc, read after its figures (*f), is the one its handler saw
 * (or past the system call the kernel restarts there). Had it run
 * between the two reads, its figures would no longer be *f, and the next
 * sample would read it again: *f is what it must still have then.
 */
static bool asleep_where_caught(int taskfd, const struct sw_thread *t,
				struct figures *f)
{
	uint64_t pc = 0;

	if (read_figures(taskfd, t->tid, f) < 0 ||
	    procfs_read_syscall(taskfd, t->tid, NULL, &pc) < 0)
		return false;
	return pc == t->ips[0] ||
	       (RESTART_BACK && pc == t->ips[0] + RESTART_BACK);
}

/* Whether t's stack is the one e kept. */
static bool same_stack(const struct sw_thread *t, const struct ran_thread *e)
{
	return e && e->nips == t->nips &&
	       memcmp(e->ips, t->ips, t->nips * sizeof(*t->ips)) == 0;
}

/* The entry of t (figures f, or none) into e; 0 or -ENOMEM. */
static int keep(const struct sw_thread *t, const struct figures *f,
		struct ran_thread *e)
{
	e->ips = calloc(t->nips ? t->nips : 1, sizeof(*e->ips));
	if (!e->ips)
		return -ENOMEM;
	memcpy(e->ips, t->ips, t->nips * sizeof(*e->ips));
	e->nips = t->nips;
	e->tid = t->tid;
	e->ns_tid = t->ns_tid;
	memcpy(e->name, t->name, sizeof(e->name));
	e->state = t->state;
	e->utime_ms = t->utime_ms;
	e->stime_ms = t->stime_ms;
	e->flags = t->flags & ~SW_TF_REUSED;
	e->captured_ns = t->captured_ns;
	e->ready = f != NULL;
	if (f)
		e->fig = *f;
	memcpy(e->exact, t->exact, sizeof(e->exact));
	return 0;
}

/* Whether t is a thread ran_update() may keep, by what it carries. */
static bool keepable(const struct sw_thread *t)
{
	return t->status == SW_ST_OK && t->read == SW_READ_SIGNAL &&
	       t->nips > 0 && t->nips <= SW_MAX_FRAMES && !t->wait;
}

void ran_update(struct ran **r, pid_t pid, const struct sw_dump *d)
{
	struct ran *nr = NULL;
	size_t addrs = 0;
	int taskfd = -1;

	for (size_t i = 0; i < d->nthreads; i++)
		if (keepable(&d->threads[i]))
			addrs += d->threads[i].nips;
	/* Too big to keep beside its history: every sample signals all. */
	if (addrs > RAN_MAX_ADDRS)
		goto fail;
	nr = calloc(1, sizeof(*nr));
	if (nr)
		nr->v = calloc(d->nthreads ? d->nthreads : 1, sizeof(*nr->v));
	if (!nr || !nr->v)
		goto fail;
	taskfd = open_tasks(pid);
	if (taskfd < 0)
		goto fail;
	for (size_t i = 0; i < d->nthreads; i++) {
		const struct sw_thread *t = &d->threads[i];
		const struct ran_thread *old;
		struct figures f;
		bool ready;

		if (!keepable(t))
			continue;
		old = find(*r, t->tid);
		if (t->flags & SW_TF_REUSED) {
			/* Unchanged since *r had it: kept as it was. */
			if (!old || !old->ready)
				continue;
			f = old->fig;
			ready = true;
		} else {
			/*
			 * A call the signal cut short let it run on: only
			 * caught twice at the same stack is it known to go
			 * back there (it was there before this read too).
			 */
			ready = same_stack(t, old) &&
				asleep_where_caught(taskfd, t, &f);
		}
		if (keep(t, ready ? &f : NULL, &nr->v[nr->n]) < 0)
			goto fail;
		nr->n++;
	}
	close(taskfd);
	qsort(nr->v, nr->n, sizeof(*nr->v), cmp_tid);
	ran_free(*r);
	*r = nr;
	return;
fail:
	if (taskfd >= 0)
		close(taskfd);
	ran_free(nr);
	ran_free(*r);
	*r = NULL;
}
