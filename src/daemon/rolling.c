/*
 * rolling.c - a window of a target's history as one profile (rolling.h).
 *
 * Each sample's groups are merged by the hash of their stack
 * (render/group.h), compared in full where hashes meet, into a table of
 * distinct stacks with a count each; the frames shown are those of the
 * first sample that had the stack.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "model/clock.h"
#include "render/group.h"
#include "render/render.h"
#include "access.h"
#include "rolling.h"
#include "stacks.h"

struct rstack {
	uint64_t h;
	const struct sw_dump *d; /* where its frames are; NULL: empty slot */
	const struct sw_thread *t;
	uint64_t count;
};

struct rtable {
	struct rstack *s;
	size_t cap, n; /* cap a power of two */
};

static int rt_grow(struct rtable *rt)
{
	size_t cap = rt->cap ? rt->cap * 2 : 256;
	struct rstack *ns = calloc(cap, sizeof(*ns));

	if (!ns)
		return -ENOMEM;
	for (size_t i = 0; i < rt->cap; i++) {
		size_t j;

		if (!rt->s[i].d)
			continue;
		for (j = rt->s[i].h & (cap - 1); ns[j].d;
		     j = (j + 1) & (cap - 1))
			;
		ns[j] = rt->s[i];
	}
	free(rt->s);
	rt->s = ns;
	rt->cap = cap;
	return 0;
}

/* Adds count threads with t's stack (of d, hash h) to rt. */
static int rt_add(struct rtable *rt, const struct sw_dump *d,
		  const struct sw_thread *t, uint64_t h, uint64_t count)
{
	size_t j;

	if ((rt->n + 1) * 2 > rt->cap && rt_grow(rt) < 0)
		return -ENOMEM;
	for (j = h & (rt->cap - 1); rt->s[j].d; j = (j + 1) & (rt->cap - 1)) {
		struct rstack *e = &rt->s[j];

		if (e->h == h && group_same_stack(e->d, e->t, d, t)) {
			e->count += count;
			return 0;
		}
	}
	rt->s[j] = (struct rstack){ h, d, t, count };
	rt->n++;
	return 0;
}

/* The CPU time (ms) thread t of a sample used since prev's, or 0. */
static uint64_t cpu_since(const struct sw_dump *prev, const size_t *idx,
			  const struct sw_thread *t)
{
	const struct sw_thread *p = stacks_find_tid(prev, idx, t->tid);
	uint64_t now = t->utime_ms + t->stime_ms, then;

	if (!p)
		return 0;
	then = p->utime_ms + p->stime_ms;
	return now > then ? now - then : 0;
}

/*
 * Adds sample d's groups: their threads (wall), or with prev (cpu) the
 * CPU time their threads used since prev, in ms.
 */
static int add_sample(struct rtable *rt, const struct sw_dump *d,
		      const struct sw_dump *prev, bool cpu, uint64_t *total)
{
	uint64_t *mh = group_module_hashes(d);
	size_t *idx = cpu && prev ? stacks_index_by_tid(prev) : NULL;
	int rc = 0;

	if (!mh || (cpu && prev && !idx)) {
		free(mh);
		free(idx);
		return -ENOMEM;
	}
	for (size_t g = 0; !rc && g < d->ngroups; g++) {
		const struct sw_group *grp = &d->groups[g];
		const struct sw_thread *rep;
		uint64_t count = 0;

		if (grp->rep >= d->nthreads)
			continue;
		rep = &d->threads[grp->rep];
		if (!cpu) {
			count = grp->count;
		} else if (idx) {
			for (size_t i = 0; i < d->nthreads; i++)
				if (d->threads[i].group == (int)g)
					count += cpu_since(prev, idx,
							   &d->threads[i]);
		}
		if (!count)
			continue;
		*total += count;
		rc = rt_add(rt, d, rep, group_stack_hash(mh, d->nmodules, rep),
			    count);
	}
	free(mh);
	free(idx);
	return rc;
}

static int by_count(const void *a, const void *b)
{
	const struct rstack *x = a, *y = b;

	return (x->count < y->count) - (x->count > y->count);
}

int rolling_profile(struct target *t, const struct access *a, double since_s,
		    double until_s, bool cpu, cJSON **out)
{
	uint64_t now = clock_now_ns(), total = 0;
	uint64_t from = since_s * 1e9 < (double)now
				? now - (uint64_t)(since_s * 1e9)
				: 0;
	uint64_t to = until_s * 1e9 < (double)now
			      ? now - (uint64_t)(until_s * 1e9)
			      : 0;
	struct rtable rt = { 0 };
	struct sdump **sds = NULL;
	cJSON *doc = NULL, *groups;
	size_t n = 0, k = 0;
	int rc;

	*out = NULL;
	rc = stacks_history(t, from, to, &sds, &n);
	/* Of each sample, the threads a may read (access.h). */
	for (size_t i = 0; rc == 0 && i < n; i++) {
		struct sdump *v = access_view(a, sds[i], true);

		if (!v)
			rc = -ENOMEM;
		else
			sdump_put(sds[i]);
		if (v)
			sds[i] = v;
	}
	for (size_t i = 0; rc == 0 && i < n; i++)
		rc = add_sample(&rt, sds[i]->d, i ? sds[i - 1]->d : NULL, cpu,
				&total);
	if (rc == 0 && !(doc = cJSON_CreateObject()))
		rc = -ENOMEM;
	if (rc < 0)
		goto out;
	/* The distinct stacks packed at the front, largest first. */
	for (size_t i = 0; i < rt.cap; i++)
		if (rt.s[i].d)
			rt.s[k++] = rt.s[i];
	if (k)
		qsort(rt.s, k, sizeof(*rt.s), by_count);
	cJSON_AddNumberToObject(doc, "pid", t->pid);
	cJSON_AddStringToObject(doc, "comm", t->comm);
	cJSON_AddStringToObject(doc, "mode", cpu ? "cpu" : "wall");
	cJSON_AddStringToObject(doc, "unit", cpu ? "ms" : "threads");
	cJSON_AddNumberToObject(doc, "samples", (double)n);
	if (n) {
		char at[40];

		render_iso_time(&sds[0]->d->collected_at, at, sizeof(at));
		cJSON_AddStringToObject(doc, "from", at);
		render_iso_time(&sds[n - 1]->d->collected_at, at, sizeof(at));
		cJSON_AddStringToObject(doc, "to", at);
	}
	cJSON_AddNumberToObject(doc, "total", (double)total);
	groups = cJSON_AddArrayToObject(doc, "groups");
	for (size_t i = 0; groups && i < k && i < ROLLING_MAX_GROUPS; i++) {
		cJSON *g = cJSON_CreateObject();
		cJSON *fr = render_json_frames(rt.s[i].d, rt.s[i].t);

		if (!g || !fr || !cJSON_AddItemToArray(groups, g)) {
			cJSON_Delete(g);
			cJSON_Delete(fr);
			rc = -ENOMEM;
			break;
		}
		cJSON_AddNumberToObject(g, "count", (double)rt.s[i].count);
		cJSON_AddItemToObject(g, "frames", fr);
	}
	if (!groups)
		rc = -ENOMEM;
	if (rc < 0) {
		cJSON_Delete(doc);
		doc = NULL;
	}
	*out = doc;
out:
	free(rt.s);
	for (size_t i = 0; i < n; i++)
		sdump_put(sds[i]);
	free(sds);
	return rc;
}
