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
#include "coresig.h"
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

/* "12 ms", "3.4 s", "2 min": CPU time as ps and top would put it. */
static void put_cpu(struct out *o, uint64_t ms)
{
	if (ms < 10000)
		put(o, "%" PRIu64 " ms", ms);
	else if (ms < 600000)
		put(o, "%.1f s", (double)ms / 1000.0);
	else
		put(o, "%" PRIu64 " min", ms / 60000);
}

/*
 * "state: 3 S, 1 R; cpu 12 ms": how many of the group's threads are in
 * each scheduler state (most first) and the CPU time they used together,
 * as jstack gives each thread's state.
 */
static void put_states(struct out *o, const struct sw_dump *d,
		       const size_t *by_tid, const struct sw_group *g)
{
	static const char order[] = "RDSTtZXI";
	size_t count[sizeof(order)] = { 0 }; /* the last: any other */
	bool said[sizeof(order)] = { false };
	uint64_t ms = 0;

	for (size_t i = 0; i < g->count; i++) {
		const struct sw_thread *t = find_tid(d, by_tid, g->tids[i]);
		const char *at;

		if (!t)
			continue;
		at = t->state ? strchr(order, t->state) : NULL;
		count[at ? (size_t)(at - order) : sizeof(order) - 1]++;
		ms += t->utime_ms + t->stime_ms;
	}
	put(o, "state: ");
	for (size_t n = 0, first = 1; n < sizeof(order); n++) {
		size_t best = sizeof(order);

		/* The largest count not yet said; ties in order's order. */
		for (size_t k = 0; k < sizeof(order); k++)
			if (count[k] && !said[k] &&
			    (best == sizeof(order) || count[k] > count[best]))
				best = k;
		if (best == sizeof(order))
			break;
		said[best] = true;
		put(o, "%s%zu %c", first ? "" : ", ", count[best],
		    best < sizeof(order) - 1 ? order[best] : '?');
		first = 0;
	}
	put(o, "; cpu ");
	put_cpu(o, ms);
	put(o, "\n");
}

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
	put_states(o, d, by_tid, g);
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

/*
 * "mutex 0x...", then the global it is when it lies in one: "mutex
 * 0x... (g_queue_lock)". what is the lock's word ("rwlock (to read)").
 */
static void put_lock(struct out *o, const struct sw_dump *d, const char *what,
		     uint64_t addr)
{
	uint64_t off = 0;
	const char *sym = dump_addr_name(d, addr, &off);

	put(o, "%s 0x%" PRIx64, what, addr);
	if (sym) {
		put(o, " (");
		put_name(o, sym);
		if (off)
			put(o, "+0x%" PRIx64, off);
		put(o, ")");
	}
}

/* "mutex 0x... held by NAME (TID)" of thread i's wait, and onward. */
static void put_chain(struct out *o, const struct sw_dump *d,
		      const struct locks *l, size_t i)
{
	size_t seen[CHAIN_MAX + 1], n = 0;

	seen[n++] = i;
	for (;;) {
		const struct lock_wait *w = &l->w[i];
		const struct sw_thread *owner;

		put_lock(o, d,
			 w->kind == LOCK_MUTEX ? "mutex"
			 : w->write	       ? "rwlock (to write)"
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

/* "NAME (TID), NAME (TID) and N more" of the given threads. */
static void put_members(struct out *o, const struct sw_dump *d,
			const size_t *idx, size_t n)
{
	for (size_t k = 0; k < n && k < TEXT_NAMES; k++) {
		const struct sw_thread *t = &d->threads[idx[k]];

		put(o, "%s", k ? ", " : "");
		put_name(o, t->name);
		put(o, " (%d)", (int)t->tid);
	}
	if (n > TEXT_NAMES)
		put(o, " and %zu more", n - TEXT_NAMES);
}

/*
 * Below a group's frames: what its threads wait for, one line per lock
 * and owner naming the threads that wait there, then what its threads
 * hold that others wait for:
 *
 *	w-1 (11), w-2 (12): waiting for mutex 0x... (g_lock) held by m (10)
 *	m (10): holds mutex 0x... (g_lock), 2 threads waiting
 */
static void put_waits(struct out *o, const struct sw_dump *d,
		      const size_t *by_tid, const struct locks *l,
		      const struct sw_group *g)
{
	size_t *idx = malloc(g->count * sizeof(*idx)), n = 0;
	bool *done = calloc(g->count ? g->count : 1, sizeof(*done));

	if (!idx || !done) {
		free(idx);
		free(done);
		o->err = o->err ? o->err : -ENOMEM;
		return;
	}
	for (size_t k = 0; k < g->count; k++) {
		const struct sw_thread *t = find_tid(d, by_tid, g->tids[k]);

		if (t)
			idx[n++] = (size_t)(t - d->threads);
	}
	for (size_t k = 0; k < n; k++) {
		const struct lock_wait *w = &l->w[idx[k]];
		size_t *same = idx + k, m = 0;

		if (done[k] || w->kind == LOCK_NONE)
			continue;
		/* The later members with the same lock and owner join it,
		 * moved up behind it (done marks who was said). */
		for (size_t j = k; j < n; j++) {
			const struct lock_wait *v = &l->w[idx[j]];
			size_t x = idx[k + m];
			bool dx = done[k + m];

			if (done[j] || v->kind == LOCK_NONE ||
			    v->addr != w->addr || v->owner != w->owner)
				continue;
			idx[k + m] = idx[j];
			idx[j] = x;
			done[j] = dx;
			done[k + m] = true;
			m++;
		}
		put_members(o, d, same, m);
		put(o, ": waiting for ");
		put_chain(o, d, l, same[0]);
		put(o, "\n");
	}
	for (size_t k = 0; k < n; k++) {
		struct lock_held held[LOCKS_HELD_MAX];
		size_t nh = locks_held(l, idx[k], held, LOCKS_HELD_MAX);

		for (size_t h = 0; h < nh; h++) {
			put_members(o, d, &idx[k], 1);
			put(o, ": holds ");
			put_lock(o, d, locks_kind_name(held[h].kind),
				 held[h].addr);
			put(o, ", %u thread%s waiting\n", held[h].waiters,
			    plural(held[h].waiters));
		}
	}
	free(idx);
	free(done);
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
 * A crash's core: the signal that ended the process, as gdb opens with
 * it, with its code, the faulting address and the thread that got it.
 * A core cut short: what is missing.
 */
static void put_core(struct out *o, const struct sw_dump *d)
{
	const struct sw_core_signal *cs = &d->core_signal;
	const char *name = coresig_name(cs->number);
	const char *text = coresig_text(cs->number);
	const char *code = coresig_code_name(cs->number, cs->code);

	if (cs->number) {
		if (name)
			put(o, "Program terminated with signal %s, %s", name,
			    text);
		else
			put(o, "Program terminated with signal %d", cs->number);
		if (code)
			put(o, " (%s", code);
		else
			put(o, " (code %d", cs->code);
		if (cs->has_addr)
			put(o, ", address 0x%" PRIx64, cs->addr);
		put(o, "), in thread %d.\n", (int)cs->tid);
	}
	put(o, "(from a core file)\n");
	if (d->core_cut_need)
		put(o,
		    "(the core file is cut short: it has %" PRIu64
		    " bytes of the %" PRIu64 " its segments need; memory "
		    "past its end is unknown, so stacks may be short)\n",
		    d->core_cut_size, d->core_cut_need);
}

/*
 * A line per module that frames are in whose symbols could not be read,
 * with why. Returns whether there was any.
 */
static bool put_symbols_errors(struct out *o, const struct sw_dump *d)
{
	bool *used = dump_modules_used(d), any = false;

	for (size_t i = 0; used && i < d->nmodules; i++) {
		if (!used[i] || !d->modules[i].symbols_error)
			continue;
		put(o, "(symbols of ");
		put_name(o, d->modules[i].path ? d->modules[i].path : "?");
		put(o, " could not be read: ");
		put_name(o, d->modules[i].symbols_error);
		put(o, ")\n");
		any = true;
	}
	free(used);
	return any;
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
		put_core(&o, d);
	put_methods(&o, d);
	if (d->hidden_threads)
		put(&o,
		    "(%zu thread%s left out: %s credentials of %s own that "
		    "you may not read)\n",
		    d->hidden_threads, plural(d->hidden_threads),
		    d->hidden_threads == 1 ? "it has" : "they have",
		    d->hidden_threads == 1 ? "its" : "their");
	if (d->symbols_partial && !put_symbols_errors(&o, d))
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
