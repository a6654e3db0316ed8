/*
 * kept.c - the threads a target's last kernel read found (kept.h).
 */
#include "kept.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

struct kept_thread {
	pid_t tid;
	uint64_t nvcsw, nivcsw;
	struct sw_wait wait; /* addr 0: none */
	uint32_t flags;	     /* SW_TF_* of its unwind */
	size_t nips;
	uint64_t *ips;
	uint64_t exact[SW_MAX_FRAMES / 64];
};

struct kept {
	size_t n; /* sorted by tid */
	struct kept_thread *v;
	/* The modules of the last read that listed any. */
	size_t nmodules;
	struct sw_module *modules;
};

static void free_modules(struct sw_module *m, size_t n)
{
	for (size_t i = 0; m && i < n; i++) {
		free(m[i].path);
		free(m[i].symbols_error);
	}
	free(m);
}

/* A deep copy of n modules (paths duplicated), or NULL. */
static struct sw_module *copy_modules(const struct sw_module *m, size_t n)
{
	struct sw_module *c = calloc(n ? n : 1, sizeof(*c));

	for (size_t i = 0; c && i < n; i++) {
		c[i] = m[i];
		c[i].path = m[i].path ? strdup(m[i].path) : NULL;
		c[i].symbols_error =
			m[i].symbols_error ? strdup(m[i].symbols_error) : NULL;
		if ((m[i].path && !c[i].path) ||
		    (m[i].symbols_error && !c[i].symbols_error)) {
			free_modules(c, i + 1);
			return NULL;
		}
	}
	return c;
}

static int cmp_tid(const void *a, const void *b)
{
	const struct kept_thread *x = a, *y = b;

	return (x->tid > y->tid) - (x->tid < y->tid);
}

static const struct kept_thread *find(const struct kept *k, pid_t tid)
{
	struct kept_thread key = { .tid = tid };

	if (!k || !k->n)
		return NULL;
	return bsearch(&key, k->v, k->n, sizeof(key), cmp_tid);
}

int kept_offer(const struct kept *k, struct ptracer_same **out, size_t *n)
{
	size_t m = 0;

	*out = NULL;
	*n = 0;
	if (!k || !k->n)
		return 0;
	*out = malloc(k->n * sizeof(**out));
	if (!*out)
		return -ENOMEM;
	for (size_t i = 0; i < k->n; i++) {
		(*out)[m].tid = k->v[i].tid;
		(*out)[m].wait_addr = k->v[i].wait.addr;
		(*out)[m].wait_op = k->v[i].wait.op;
		(*out)[m].nvcsw = k->v[i].nvcsw;
		(*out)[m].nivcsw = k->v[i].nivcsw;
		m++;
	}
	*n = m;
	return 0;
}

size_t kept_fill(const struct kept *k, struct sw_dump *d)
{
	size_t filled = 0;

	/* Nothing was unwound: no thread ran, no module came or went. */
	if (!d->nmodules && k && k->nmodules) {
		/* An empty array is still an array (a dump off the wire). */
		free(d->modules);
		d->modules = copy_modules(k->modules, k->nmodules);
		d->nmodules = d->modules ? k->nmodules : 0;
	}

	for (size_t i = 0; i < d->nthreads; i++) {
		struct sw_thread *t = &d->threads[i];
		const struct kept_thread *kt;
		uint64_t *ips;

		if (!(t->flags & SW_TF_REUSED) || t->status != SW_ST_OK)
			continue;
		kt = find(k, t->tid);
		/* Kept by another read meanwhile: not the stack offered. */
		if (kt && (kt->nvcsw != t->nvcsw || kt->nivcsw != t->nivcsw))
			kt = NULL;
		ips = kt ? malloc((kt->nips ? kt->nips : 1) * sizeof(*ips))
			 : NULL;
		if (!ips) {
			dump_thread_set_error(t, SW_ST_ERROR,
					      "its earlier stack was not kept");
			continue;
		}
		memcpy(ips, kt->ips, kt->nips * sizeof(*ips));
		free(t->ips);
		t->ips = ips;
		t->nips = kt->nips;
		memcpy(t->exact, kt->exact, sizeof(t->exact));
		t->flags |= kt->flags & ~SW_TF_REUSED;
		filled++;
	}
	return filled;
}

void kept_free(struct kept *k)
{
	if (!k)
		return;
	for (size_t i = 0; i < k->n; i++)
		free(k->v[i].ips);
	free(k->v);
	free_modules(k->modules, k->nmodules);
	free(k);
}

void kept_update(struct kept **k, const struct sw_dump *d)
{
	struct kept *nk;
	size_t m = 0, addrs = 0;

	for (size_t i = 0; i < d->nthreads; i++)
		if (d->threads[i].status == SW_ST_OK &&
		    d->threads[i].read == SW_READ_KERNEL)
			addrs += d->threads[i].nips;
	/* Too big to keep beside its history: every read copies all. */
	if (addrs > KEPT_MAX_ADDRS)
		goto fail_empty;
	nk = calloc(1, sizeof(*nk));

	if (nk)
		nk->v = calloc(d->nthreads ? d->nthreads : 1, sizeof(*nk->v));
	if (!nk || !nk->v)
		goto fail;
	for (size_t i = 0; i < d->nthreads; i++) {
		const struct sw_thread *t = &d->threads[i];
		struct kept_thread *kt = &nk->v[m];

		if (t->status != SW_ST_OK || t->read != SW_READ_KERNEL ||
		    !t->nips)
			continue;
		kt->tid = t->tid;
		kt->nvcsw = t->nvcsw;
		kt->nivcsw = t->nivcsw;
		if (t->wait && t->wait->addr)
			kt->wait = *t->wait;
		kt->flags = t->flags;
		kt->nips = t->nips;
		kt->ips = malloc(t->nips * sizeof(*kt->ips));
		if (!kt->ips)
			goto fail;
		memcpy(kt->ips, t->ips, t->nips * sizeof(*kt->ips));
		memcpy(kt->exact, t->exact, sizeof(kt->exact));
		nk->n = ++m;
	}
	qsort(nk->v, nk->n, sizeof(*nk->v), cmp_tid);
	if (d->nmodules) {
		nk->modules = copy_modules(d->modules, d->nmodules);
		nk->nmodules = nk->modules ? d->nmodules : 0;
	} else if (*k) { /* still those of the read before */
		nk->modules = (*k)->modules;
		nk->nmodules = (*k)->nmodules;
		(*k)->modules = NULL;
		(*k)->nmodules = 0;
	}
	kept_free(*k);
	*k = nk;
	return;
fail:
	kept_free(nk);
fail_empty:
	kept_free(*k);
	*k = NULL;
}
