/*
 * render_text.c - the pstack-style text of INTERFACE.md: a header line,
 * one block per group (largest first) with up to TEXT_NAMES member names
 * and the frames of one member, then the threads that were not dumped.
 * Blocks are separated by one blank line; the output ends with a newline.
 *
 *	Process 4242 (myserver): 75 threads, 9 groups, collected in 0.8 ms
 *	64 threads: worker-1 (4243), worker-2 (4244), ...
 *	#0  0x00007f3e8c2d8df2 in __futex_abstimed_wait_common () from /lib/...
 *	#1  0x000055d0c0c6a6db in worker_wait () at worker.c:40
 *
 * Source files are shown by their base name, as gdb and pstack do; the
 * full path is in the JSON. An inlined frame ends with " (inlined)" and
 * shares the ip of the frame after it. A placeholder frame such as
 * "[in dynamic loader]" is printed without the "()" of a function. Names
 * from the target are printed with control characters replaced, so they
 * cannot forge lines.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "model/buf.h"
#include "locks.h"
#include "render.h"

#define TEXT_MAX (64u << 20) /* bytes of one rendering */
#define TEXT_NAMES 8	     /* member names listed per group */

/* A buffer whose first error sticks, so a renderer checks once. */
struct out {
	struct buf b;
	int err;
};

static void put(struct out *o, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void put(struct out *o, const char *fmt, ...)
{
	va_list ap;

	if (o->err)
		return;
	va_start(ap, fmt);
	o->err = buf_vaddf(&o->b, fmt, ap);
	va_end(ap);
}

/* Appends a name from the target or the debug info, made harmless. */
static void put_name(struct out *o, const char *s)
{
	if (!o->err)
		o->err = buf_adds_safe(&o->b, s ? s : "", NULL);
}

static const char *plural(size_t n)
{
	return n == 1 ? "" : "s";
}

static const char *base_name(const char *path)
{
	const char *slash = strrchr(path, '/');

	return slash ? slash + 1 : path;
}

/* One frame line: "#N  0xIP in FUNC () at FILE:LINE" or "from MODULE". */
static void put_frame(struct out *o, const struct sw_dump *d, size_t i,
		      const struct sw_frame *f)
{
	const char *module = NULL;

	if (f->module >= 0 && (size_t)f->module < d->nmodules)
		module = d->modules[f->module].path;
	put(o, "#%-2zu 0x%016" PRIx64 " in ", i, f->ip);
	put_name(o, f->function ? f->function : "??");
	/*
	 * gdb's "func ()"; demangled C++ names carry their own parameter
	 * list, and placeholders such as "[in dynamic loader]" are not
	 * functions.
	 */
	if (!f->function ||
	    (f->function[0] != '[' && !strchr(f->function, '(')))
		put(o, " ()");
	if (f->file && f->line > 0) {
		put(o, " at ");
		put_name(o, base_name(f->file));
		put(o, ":%d", f->line);
	} else if (module) {
		put(o, " from ");
		put_name(o, module);
	}
	if (f->inlined)
		put(o, " (inlined)");
	put(o, "\n");
}

/* The thread with this tid in by_tid (indices sorted by tid), or NULL. */
static const struct sw_thread *find_tid(const struct sw_dump *d,
					const size_t *by_tid, pid_t tid)
{
	size_t lo = 0, hi = d->nthreads;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		pid_t t = d->threads[by_tid[mid]].tid;

		if (t == tid)
			return &d->threads[by_tid[mid]];
		if (t < tid)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

static void put_waits(struct out *o, const struct sw_dump *d,
		      const size_t *by_tid, const struct locks *l,
		      const struct sw_group *g);

/* "N threads: name (tid), ..." and the frames of the group's member. */
static void put_group(struct out *o, const struct sw_dump *d,
		      const size_t *by_tid, const struct sw_group *g,
		      const struct locks *l)
{
	const struct sw_thread *rep;

	put(o, "%zu thread%s: ", g->count, plural(g->count));
	for (size_t i = 0; i < g->count && i < TEXT_NAMES; i++) {
		const struct sw_thread *t = find_tid(d, by_tid, g->tids[i]);

		if (i)
			put(o, ", ");
		put_name(o, t ? t->name : "?");
		put(o, " (%d)", (int)g->tids[i]);
	}
	if (g->count > TEXT_NAMES)
		put(o, ", ...");
	put(o, "\n");
	if (g->rep >= d->nthreads)
		return;
	rep = &d->threads[g->rep];
	for (size_t i = 0; i < rep->nframes; i++)
		put_frame(o, d, i, &rep->frames[i]);
	if (!rep->nframes)
		put(o, "(no frames)\n");
	if (rep->flags & SW_TF_TRUNCATED)
		put(o, "... (more frames not captured)\n");
	else if (rep->flags & SW_TF_STACK_CUT)
		put(o, "... (stack copy cut short: the frames beyond it are "
		       "not known)\n");
	if (l->w)
		put_waits(o, d, by_tid, l, g);
}

#define CHAIN_MAX 8 /* hops of a waits-for chain shown in one line */

/* "mutex 0x... held by NAME (TID)" of thread i's wait, and onward. */
static void put_chain(struct out *o, const struct sw_dump *d,
		      const struct locks *l, size_t i)
{
	size_t seen[CHAIN_MAX + 1], n = 0;

	seen[n++] = i;
	for (;;) {
		const struct lock_wait *w = &l->w[i];
		const struct sw_thread *owner;

		put(o, "%s 0x%" PRIx64,
		    w->kind == LOCK_MUTEX ? "mutex"
		    : w->write		  ? "rwlock (to write)"
					  : "rwlock (to read)",
		    w->addr);
		if (w->owner_index < 0) {
			if (w->owner > 0)
				put(o, " held by tid %d, which exited",
				    (int)w->owner);
			else if (w->kind == LOCK_RWLOCK)
				put(o, " held by readers");
		} else {
			owner = &d->threads[w->owner_index];
			put(o, " held by ");
			put_name(o, owner->name);
			put(o, " (%d)", (int)owner->tid);
			if (w->held > 1)
				put(o, " %u times", w->held);
		}
		if (w->owner_died)
			put(o, " (a previous owner died holding it)");
		if (w->owner_index < 0 ||
		    l->w[w->owner_index].kind == LOCK_NONE)
			return;
		for (size_t k = 0; k < n; k++)
			if (seen[k] == (size_t)w->owner_index) {
				put(o, ": deadlock");
				return;
			}
		if (n > CHAIN_MAX) {
			put(o, ", ...");
			return;
		}
		i = (size_t)w->owner_index;
		seen[n++] = i;
		put(o, ", which waits for ");
	}
}

/*
 * Below a group's frames: what its threads wait for, one line per lock
 * (and owner), from the first waiter of each.
 */
static void put_waits(struct out *o, const struct sw_dump *d,
		      const size_t *by_tid, const struct locks *l,
		      const struct sw_group *g)
{
	for (size_t k = 0; k < g->count; k++) {
		const struct sw_thread *t = find_tid(d, by_tid, g->tids[k]);
		size_t i, seen = 0;

		if (!t)
			continue;
		i = (size_t)(t - d->threads);
		if (l->w[i].kind == LOCK_NONE)
			continue;
		for (size_t j = 0; j < k; j++) {
			const struct sw_thread *u =
				find_tid(d, by_tid, g->tids[j]);
			const struct lock_wait *uw =
				u ? &l->w[u - d->threads] : NULL;

			if (uw && uw->kind != LOCK_NONE &&
			    uw->addr == l->w[i].addr &&
			    uw->owner == l->w[i].owner)
				seen++;
		}
		if (seen)
			continue;
		put(o, "waiting for ");
		put_chain(o, d, l, i);
		put(o, "\n");
	}
}

/* "DEADLOCK: A (1) waits for mutex 0x... held by B (2), ...". */
/* "(read: 998 kernel, 3 signal)": how the threads were read. */
static void put_methods(struct out *o, const struct sw_dump *d)
{
	size_t n[SW_READ_COUNT] = { 0 };
	const char *sep = "(read: ";

	for (size_t i = 0; i < d->nthreads; i++)
		if (d->threads[i].status == SW_ST_OK &&
		    (unsigned)d->threads[i].read < SW_READ_COUNT)
			n[d->threads[i].read]++;
	for (int r = 0; r < SW_READ_COUNT; r++) {
		const char *name = dump_read_name((enum sw_read)r);

		if (!n[r] || !name)
			continue;
		put(o, "%s%zu %s", sep, n[r], name);
		sep = ", ";
	}
	if (sep[0] == ',')
		put(o, ")\n");
}

static void put_deadlocks(struct out *o, const struct sw_dump *d,
			  const struct locks *l)
{
	for (size_t c = 0; c < l->ncycles; c++) {
		size_t first = l->cycles[c].threads[0];

		put(o, "DEADLOCK: ");
		put_name(o, d->threads[first].name);
		put(o, " (%d) waits for ", (int)d->threads[first].tid);
		put_chain(o, d, l, first);
		put(o, "\n");
	}
}

/* "N threads not dumped:" and one line per such thread, by tid. */
static void put_not_dumped(struct out *o, const struct sw_dump *d,
			   const size_t *by_tid)
{
	size_t n = 0;

	for (size_t i = 0; i < d->nthreads; i++)
		n += d->threads[i].status != SW_ST_OK;
	if (!n)
		return;
	if (d->ngroups)
		put(o, "\n");
	put(o, "%zu thread%s not dumped:\n", n, plural(n));
	for (size_t k = 0; k < d->nthreads; k++) {
		const struct sw_thread *t = &d->threads[by_tid[k]];

		if (t->status == SW_ST_OK)
			continue;
		put(o, "  ");
		put_name(o, t->name);
		put(o, " (%d): %s: ", (int)t->tid, dump_status_name(t->status));
		put_name(o, t->error ? t->error : dump_status_name(t->status));
		put(o, "\n");
	}
}

static int tid_cmp(const void *a, const void *b, void *arg)
{
	const struct sw_thread *t = arg;
	pid_t x = t[*(const size_t *)a].tid, y = t[*(const size_t *)b].tid;

	return (x > y) - (x < y);
}

/*
 * See render.h. *out is a malloc'd string the caller frees. Returns 0,
 * -ENOMEM, or SW_ETOOBIG past TEXT_MAX bytes; reads d only.
 */
int render_text(const struct sw_dump *d, char **out)
{
	struct out o = { .err = 0 };
	struct locks l;
	size_t *by_tid;
	int rc;

	*out = NULL;
	if (locks_analyze(d, &l) < 0)
		return -ENOMEM;
	by_tid = malloc((d->nthreads ? d->nthreads : 1) * sizeof(*by_tid));
	if (!by_tid) {
		locks_release(&l);
		return -ENOMEM;
	}
	for (size_t i = 0; i < d->nthreads; i++)
		by_tid[i] = i;
	qsort_r(by_tid, d->nthreads, sizeof(*by_tid), tid_cmp,
		(void *)d->threads);
	buf_init(&o.b, TEXT_MAX);
	put(&o, "Process %d (", (int)d->pid);
	put_name(&o, d->comm);
	put(&o, "): %zu thread%s, %zu group%s, collected in %.1f ms\n",
	    d->nthreads, plural(d->nthreads), d->ngroups, plural(d->ngroups),
	    (double)d->elapsed_us / 1000.0);
	if (d->method == SW_METHOD_PTRACE)
		put(&o,
		    "(ptrace snapshot: each thread was paused for at most "
		    "%" PRIu64 " us, %" PRIu64 " us in all)\n",
		    d->paused_us_max, d->paused_us_total);
	else if (d->method == SW_METHOD_CORE)
		put(&o, "(from a core file)\n");
	put_methods(&o, d);
	if (d->symbols_partial)
		put(&o, "(symbolizing stopped at its time budget: some frames "
			"are addresses only)\n");
	if (d->jit_map_refused) {
		put(&o, "(");
		put_name(&o, d->jit_map_refused);
		put(&o, ")\n");
	}
	if (l.unsupported)
		put(&o, "(%s)\n", l.unsupported);
	put_deadlocks(&o, d, &l);
	for (size_t i = 0; i < d->ngroups; i++) {
		if (i)
			put(&o, "\n");
		put_group(&o, d, by_tid, &d->groups[i], &l);
	}
	put_not_dumped(&o, d, by_tid);
	free(by_tid);
	locks_release(&l);
	rc = o.err ? o.err : buf_detach(&o.b, out);
	buf_release(&o.b);
	return rc;
}
