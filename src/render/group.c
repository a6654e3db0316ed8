/*
 * group.c - gathers the threads of a dump that have the same stack
 * (group.h), in expected linear time: each thread's stack is hashed once
 * and compared in full only with the groups whose hash it shares.
 *
 * Frame equality, the rule of INTERFACE.md made exact: same inlined flag,
 * same module (by path and build-id, so it holds across dumps), and then
 *  - without a function on either side: same offset, and no function on
 *    the other side either;
 *  - with a function: same name, and the same file:line when the frames
 *    have one. A frame with a line and one without are different: within
 *    one build of a module that only happens with broken debug info, and
 *    treating it as equal would make the rule intransitive (a:5 = b:? =
 *    c:7 but a != c), which no grouping could honour. The hash therefore
 *    covers the line too, and offsets within one line never split.
 *
 * Threads that stopped at the same ips share one frame array: the
 * symbolizer builds it once (symbolize.c). So before the rule's hash of
 * names and files, a thread is looked up by its frame array in a small
 * cache of the arrays met last: the array of an earlier thread means that
 * thread's stack, whatever it holds. A process has few distinct stacks, so
 * nearly every thread is placed by one pointer compare; one that misses
 * goes by the rule, which gives the same group, only slower.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "group.h"

#define HASH_SEED 0xcbf29ce484222325ULL
#define HASH_MUL 0x9e3779b97f4a7c15ULL

/* Hashes n bytes a word at a time: stacks hash many short strings. */
static uint64_t hash_bytes(uint64_t h, const void *p, size_t n)
{
	const unsigned char *c = p;
	uint64_t w;

	for (; n >= 8; c += 8, n -= 8) {
		memcpy(&w, c, 8);
		h = (h ^ w) * HASH_MUL;
		h ^= h >> 32;
	}
	w = 0;
	memcpy(&w, c, n);
	h = (h ^ w ^ ((uint64_t)n << 56)) * HASH_MUL; /* length: "ab","c" */
	return h ^ (h >> 32);
}

static uint64_t hash_str(uint64_t h, const char *s)
{
	return hash_bytes(h, s, strlen(s));
}

static uint64_t hash_u64(uint64_t h, uint64_t v)
{
	h = (h ^ v) * HASH_MUL;
	return h ^ (h >> 32);
}

static const struct sw_module *frame_module(const struct sw_dump *d,
					    const struct sw_frame *f)
{
	if (f->module < 0 || (size_t)f->module >= d->nmodules)
		return NULL;
	return &d->modules[f->module];
}

static bool module_eq(const struct sw_module *a, const struct sw_module *b)
{
	if (a == b)
		return true;
	if (!a || !b || a->build_id_len != b->build_id_len ||
	    memcmp(a->build_id, b->build_id, a->build_id_len) != 0)
		return false;
	return strcmp(a->path ? a->path : "", b->path ? b->path : "") == 0;
}

static bool has_line(const struct sw_frame *f)
{
	return f->file && f->line > 0;
}

static bool frame_eq(const struct sw_dump *da, const struct sw_frame *a,
		     const struct sw_dump *db, const struct sw_frame *b)
{
	if (a->inlined != b->inlined ||
	    !module_eq(frame_module(da, a), frame_module(db, b)))
		return false;
	if (!a->function || !b->function)
		return !a->function && !b->function && a->offset == b->offset;
	if (strcmp(a->function, b->function) != 0 || has_line(a) != has_line(b))
		return false;
	return !has_line(a) ||
	       (a->line == b->line && strcmp(a->file, b->file) == 0);
}

bool group_same_stack(const struct sw_dump *da, const struct sw_thread *a,
		      const struct sw_dump *db, const struct sw_thread *b)
{
	if (a->nframes != b->nframes)
		return false;
	for (size_t i = 0; i < a->nframes; i++)
		if (!frame_eq(da, &a->frames[i], db, &b->frames[i]))
			return false;
	return true;
}

/*
 * The hash of t's stack, consistent with group_same_stack(): what frame_eq
 * compares, and nothing it ignores. modhash holds each module's hash.
 */
uint64_t group_stack_hash(const uint64_t *modhash, size_t nmodules,
			  const struct sw_thread *t)
{
	uint64_t h = hash_u64(HASH_SEED, t->nframes);

	for (size_t i = 0; i < t->nframes; i++) {
		const struct sw_frame *f = &t->frames[i];

		h = hash_u64(h, f->module >= 0 && (size_t)f->module < nmodules
					? modhash[f->module]
					: 0);
		h = hash_u64(h, f->inlined);
		if (!f->function) {
			h = hash_u64(h, f->offset);
			continue;
		}
		h = hash_str(h, f->function);
		if (has_line(f))
			h = hash_u64(hash_str(h, f->file), (uint64_t)f->line);
	}
	return h;
}

#define ARRAY_CACHE 64 /* slots of the frame array cache; a power of two */

/* A frame array met, and the group of the threads that share it. */
struct aslot {
	const struct sw_frame *frames;
	size_t nframes;
	size_t group; /* index into tg + 1; 0 marks an empty slot */
};

/* The cache slot of t's frame array. */
static struct aslot *aslot_of(struct aslot *cache, const struct sw_thread *t)
{
	uint64_t h = hash_u64(HASH_SEED, (uint64_t)(uintptr_t)t->frames);

	return &cache[(h ^ (h >> 29)) & (ARRAY_CACHE - 1)];
}

/* A group while it is being built: members linked through next[]. */
struct tgroup {
	size_t rep; /* first member: the lowest tid */
	pid_t rep_tid;
	size_t last;
	size_t count;
};

struct hslot {
	uint64_t hash;
	size_t group; /* index + 1; 0 marks an empty slot */
};

/* A thread to sort by tid. */
struct tidx {
	pid_t tid;
	size_t idx;
};

static int tid_cmp(const void *a, const void *b)
{
	const struct tidx *x = a, *y = b;

	return (x->tid > y->tid) - (x->tid < y->tid);
}

/* Largest first; ties: the group whose lowest tid is lower. */
static int group_cmp(const void *a, const void *b)
{
	const struct tgroup *x = a, *y = b;

	if (x->count != y->count)
		return x->count > y->count ? -1 : 1;
	return (x->rep_tid > y->rep_tid) - (x->rep_tid < y->rep_tid);
}

/* Hashes of the dump's modules: build-id and path. NULL on no memory. */
uint64_t *group_module_hashes(const struct sw_dump *d)
{
	uint64_t *mh = malloc((d->nmodules ? d->nmodules : 1) * sizeof(*mh));

	if (!mh)
		return NULL;
	for (size_t i = 0; i < d->nmodules; i++) {
		const struct sw_module *m = &d->modules[i];
		uint32_t n = m->build_id_len < SW_BUILD_ID_MAX
				     ? m->build_id_len
				     : SW_BUILD_ID_MAX;

		mh[i] = hash_str(hash_bytes(HASH_SEED, m->build_id, n),
				 m->path ? m->path : "");
	}
	return mh;
}

/*
 * The group of thread ti by the rule (stack hash, then a full compare
 * with each candidate group's first member), created when there is none.
 * Returns its index in tg.
 */
static size_t group_of(const struct sw_dump *d, size_t ti,
		       const uint64_t *modhash, struct hslot *tab,
		       size_t nslots, struct tgroup *tg, size_t *ngroups)
{
	const struct sw_thread *t = &d->threads[ti];
	uint64_t h = group_stack_hash(modhash, d->nmodules, t);
	size_t i = (size_t)(h ^ (h >> 29)) & (nslots - 1);

	for (;; i = (i + 1) & (nslots - 1)) {
		struct hslot *e = &tab[i];
		struct tgroup *g;

		if (!e->group) {
			e->hash = h;
			e->group = ++*ngroups;
			g = &tg[*ngroups - 1];
			g->rep = ti;
			g->rep_tid = t->tid;
			g->count = 0;
			return *ngroups - 1;
		}
		g = &tg[e->group - 1];
		if (e->hash == h &&
		    group_same_stack(d, &d->threads[g->rep], d, t))
			return e->group - 1;
	}
}

/*
 * Puts each thread of order[0..n) (ok threads, ascending tid) into a group
 * of tg, creating groups as needed; next[] links each group's members in
 * order. A thread whose frame array is in the cache joins that array's
 * group directly; the others go by the rule. Returns the number of
 * groups, or 0 when n is 0. Expected O(n).
 */
static size_t assign(const struct sw_dump *d, const struct tidx *order,
		     size_t n, const uint64_t *modhash, struct hslot *tab,
		     size_t nslots, struct tgroup *tg, size_t *next)
{
	struct aslot cache[ARRAY_CACHE] = { 0 };
	size_t ngroups = 0;

	for (size_t k = 0; k < n; k++) {
		size_t ti = order[k].idx, gi;
		const struct sw_thread *t = &d->threads[ti];
		struct aslot *a = aslot_of(cache, t);
		struct tgroup *g;

		if (a->group && a->frames == t->frames &&
		    a->nframes == t->nframes) {
			gi = a->group - 1;
		} else {
			gi = group_of(d, ti, modhash, tab, nslots, tg,
				      &ngroups);
			*a = (struct aslot){ t->frames, t->nframes, gi + 1 };
		}
		g = &tg[gi];
		if (g->count)
			next[g->last] = ti;
		g->last = ti;
		g->count++;
		next[ti] = SIZE_MAX;
	}
	return ngroups;
}

/* Turns the built groups into d->groups. 0 or -ENOMEM. */
static int publish(struct sw_dump *d, struct tgroup *tg, size_t ngroups,
		   const size_t *next)
{
	d->groups = calloc(ngroups ? ngroups : 1, sizeof(*d->groups));
	if (!d->groups)
		return -ENOMEM;
	qsort(tg, ngroups, sizeof(*tg), group_cmp);
	for (size_t gi = 0; gi < ngroups; gi++) {
		struct sw_group *g = &d->groups[gi];
		size_t k = 0;

		g->tids = malloc(tg[gi].count * sizeof(*g->tids));
		if (!g->tids)
			return -ENOMEM;
		d->ngroups = gi + 1;
		g->count = tg[gi].count;
		g->rep = tg[gi].rep;
		for (size_t ti = tg[gi].rep; ti != SIZE_MAX; ti = next[ti]) {
			g->tids[k++] = d->threads[ti].tid;
			d->threads[ti].group = (int)gi;
		}
	}
	return 0;
}

/* See group.h. Thread-safe for different dumps. */
int group_dump(struct sw_dump *d)
{
	size_t n = 0, nslots = 16, ngroups;
	struct tidx *order = NULL;
	size_t *next = NULL;
	uint64_t *modhash = NULL;
	struct hslot *tab = NULL;
	struct tgroup *tg = NULL;
	bool sorted = true;
	int rc = -ENOMEM;

	dump_release_groups(d);
	order = malloc((d->nthreads ? d->nthreads : 1) * sizeof(*order));
	next = malloc((d->nthreads ? d->nthreads : 1) * sizeof(*next));
	modhash = group_module_hashes(d);
	if (!order || !next || !modhash)
		goto out_free;
	for (size_t i = 0; i < d->nthreads; i++) {
		if (d->threads[i].status != SW_ST_OK)
			continue;
		order[n] = (struct tidx){ d->threads[i].tid, i };
		sorted = sorted && (!n || order[n - 1].tid < order[n].tid);
		n++;
	}
	/* The collector lists /proc in tid order: usually sorted already. */
	if (!sorted)
		qsort(order, n, sizeof(*order), tid_cmp);
	while (nslots < 2 * n)
		nslots *= 2;
	tab = calloc(nslots, sizeof(*tab));
	tg = calloc(n ? n : 1, sizeof(*tg));
	if (!tab || !tg)
		goto out_free;
	ngroups = assign(d, order, n, modhash, tab, nslots, tg, next);
	rc = publish(d, tg, ngroups, next);
	if (rc)
		dump_release_groups(d);
out_free:
	free(tg);
	free(tab);
	free(modhash);
	free(next);
	free(order);
	return rc;
}
