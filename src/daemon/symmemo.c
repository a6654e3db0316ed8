/*
 * symmemo.c - a target's known stacks and their symbols (symmemo.h).
 */
#include "symmemo.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

struct stack {
	uint64_t hash;
	uint32_t flags;
	uint32_t nips;
	uint64_t *ips; /* owned */
	uint64_t exact[SW_MAX_FRAMES / 64];
	size_t nframes;
	struct sw_frame *frames; /* owned, and their strings */
	int next;		 /* the next stack of its bucket, -1: none */
};

struct symmemo {
	size_t nmodules;
	struct sw_module *modules; /* owned copies: what the stacks are of */
	unsigned glibc_minor;
	bool glibc_static;
	bool waits_known; /* names and bare were looked up with libc */
	size_t nnames;
	struct sw_addr_name *names; /* owned, sorted by start */
	size_t nbare;
	uint64_t *bare; /* words looked up that no global holds, sorted */
	size_t n, cap;
	struct stack *v;
	int *buckets; /* SYMMEMO_MAX_STACKS * 2 of them, -1: empty */
	size_t bytes;
};

#define NBUCKETS (SYMMEMO_MAX_STACKS * 2)

static uint64_t mix(uint64_t h, uint64_t v)
{
	h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
	return h * 0xff51afd7ed558ccdull;
}

static size_t exact_words(size_t nips)
{
	size_t n = (nips + 63) / 64;

	return n < SW_MAX_FRAMES / 64 ? n : SW_MAX_FRAMES / 64;
}

static uint64_t stack_hash(const struct sw_thread *t)
{
	uint64_t h = mix(t->nips, t->flags);

	for (size_t i = 0; i < t->nips; i++)
		h = mix(h, t->ips[i]);
	for (size_t i = 0; i < exact_words(t->nips); i++)
		h = mix(h, t->exact[i]);
	return h;
}

static bool stack_is(const struct stack *s, uint64_t h,
		     const struct sw_thread *t)
{
	return s->hash == h && s->nips == t->nips && s->flags == t->flags &&
	       (!t->nips ||
		memcmp(s->ips, t->ips, t->nips * sizeof(*t->ips)) == 0) &&
	       memcmp(s->exact, t->exact,
		      exact_words(t->nips) * sizeof(*t->exact)) == 0;
}

static const struct stack *find(const struct symmemo *m, uint64_t h,
				const struct sw_thread *t)
{
	if (!m->buckets)
		return NULL;
	for (int i = m->buckets[h % NBUCKETS]; i >= 0; i = m->v[i].next)
		if (stack_is(&m->v[i], h, t))
			return &m->v[i];
	return NULL;
}

static bool same_module(const struct sw_module *a, const struct sw_module *b)
{
	return a->start == b->start && a->end == b->end && a->bias == b->bias &&
	       a->build_id_len == b->build_id_len &&
	       memcmp(a->build_id, b->build_id, a->build_id_len) == 0 &&
	       (a->path && b->path ? strcmp(a->path, b->path) == 0
				   : a->path == b->path);
}

static bool same_modules(const struct symmemo *m, const struct sw_dump *d)
{
	if (m->nmodules != d->nmodules)
		return false;
	for (size_t i = 0; i < d->nmodules; i++)
		if (!same_module(&m->modules[i], &d->modules[i]))
			return false;
	return true;
}

static int cmp_u64(const void *a, const void *b)
{
	const uint64_t *x = a, *y = b;

	return (*x > *y) - (*x < *y);
}

/* The name of m that holds addr, or NULL. */
static const struct sw_addr_name *name_of(const struct symmemo *m,
					  uint64_t addr)
{
	for (size_t i = 0; i < m->nnames; i++)
		if (addr - m->names[i].start < m->names[i].size)
			return &m->names[i];
	return NULL;
}

static bool known_bare(const struct symmemo *m, uint64_t addr)
{
	return m->nbare &&
	       bsearch(&addr, m->bare, m->nbare, sizeof(addr), cmp_u64);
}

static bool waits(const struct sw_thread *t)
{
	return t->status == SW_ST_OK && t->wait;
}

/* A copy of s's frames in d's memory, or NULL. */
static struct sw_frame *frames_in(struct sw_dump *d, const struct stack *s)
{
	struct sw_frame *f = dump_alloc(d, s->nframes * sizeof(*f) + 1);

	for (size_t i = 0; f && i < s->nframes; i++) {
		f[i] = s->frames[i];
		if (s->frames[i].function &&
		    !(f[i].function = dump_strdup(d, s->frames[i].function)))
			return NULL;
		if (s->frames[i].file &&
		    !(f[i].file = dump_strdup(d, s->frames[i].file)))
			return NULL;
	}
	return f;
}

/* d's lock names: those of m that hold the words d's threads wait on. */
static int names_in(const struct symmemo *m, struct sw_dump *d)
{
	struct sw_addr_name *v = NULL;
	size_t n = 0;

	for (size_t i = 0; i < d->nthreads; i++) {
		const struct sw_addr_name *a;
		bool seen = false;

		if (!waits(&d->threads[i]))
			continue;
		a = name_of(m, d->threads[i].wait->addr);
		for (size_t k = 0; a && k < n && !seen; k++)
			seen = v[k].start == a->start;
		if (!a || seen || n >= SW_ADDR_NAMES_MAX)
			continue;
		if (!v && !(v = calloc(SW_ADDR_NAMES_MAX, sizeof(*v))))
			return -ENOMEM;
		v[n] = *a;
		v[n].name = strdup(a->name);
		if (!v[n].name)
			break;
		n++;
	}
	/* m's names are sorted, and so is any subset taken in their order:
	 * sort anyway, the threads came in their own order. */
	for (size_t i = 1; i < n; i++)
		for (size_t k = i; k > 0 && v[k - 1].start > v[k].start; k--) {
			struct sw_addr_name t = v[k];

			v[k] = v[k - 1];
			v[k - 1] = t;
		}
	d->addr_names = v;
	d->naddr_names = n;
	return 0;
}

int symmemo_fill(const struct symmemo *m, struct sw_dump *d, uint64_t *hits)
{
	const struct stack **of;
	struct sw_frame **made;
	bool any_wait = false;
	int rc = 0;

	*hits = 0;
	if (!m || !m->n || !same_modules(m, d))
		return 0;
	for (size_t i = 0; i < d->nthreads; i++) {
		const struct sw_thread *t = &d->threads[i];

		if (!waits(t))
			continue;
		any_wait = true;
		if (!name_of(m, t->wait->addr) && !known_bare(m, t->wait->addr))
			return 0;
	}
	if (any_wait && !m->waits_known)
		return 0;
	of = calloc(d->nthreads ? d->nthreads : 1, sizeof(*of));
	if (!of)
		return 0; /* a parser can still do it */
	for (size_t i = 0; i < d->nthreads; i++) {
		const struct sw_thread *t = &d->threads[i];

		if (t->status != SW_ST_OK)
			continue;
		of[i] = find(m, stack_hash(t), t);
		if (!of[i]) {
			free(of);
			return 0;
		}
	}
	/* Everything is known: d is named as the symbolizer names it. */
	made = calloc(m->n, sizeof(*made));
	if (!made) {
		free(of);
		return 0;
	}
	for (size_t i = 0; i < d->nthreads; i++)
		dump_thread_release_frames(&d->threads[i]);
	dump_release_mem(d);
	dump_release_addr_names(d);
	for (size_t i = 0; i < d->nthreads && rc == 0; i++) {
		struct sw_thread *t = &d->threads[i];
		size_t k;

		if (!of[i])
			continue;
		/* Threads of one stack share its frames. */
		k = (size_t)(of[i] - m->v);
		if (!made[k]) {
			made[k] = frames_in(d, of[i]);
			*hits += of[i]->nips;
		}
		t->frames = made[k];
		t->nframes = made[k] ? of[i]->nframes : 0;
		if (!made[k])
			rc = -ENOMEM;
	}
	free(made);
	free(of);
	if (rc == 0)
		rc = names_in(m, d);
	if (rc) {
		for (size_t i = 0; i < d->nthreads; i++)
			dump_thread_release_frames(&d->threads[i]);
		dump_release_mem(d);
		dump_release_addr_names(d);
		return rc;
	}
	d->symbolized = true;
	d->symbols_partial = false;
	d->glibc_minor = m->glibc_minor;
	d->glibc_static = m->glibc_static;
	return 1;
}

static void clear_stacks(struct symmemo *m)
{
	for (size_t i = 0; i < m->n; i++) {
		struct stack *s = &m->v[i];

		for (size_t k = 0; k < s->nframes; k++) {
			free((char *)s->frames[k].function);
			free((char *)s->frames[k].file);
		}
		free(s->frames);
		free(s->ips);
	}
	m->n = 0;
	m->bytes = 0;
	if (m->buckets)
		memset(m->buckets, 0xff, NBUCKETS * sizeof(*m->buckets));
}

static void clear(struct symmemo *m)
{
	clear_stacks(m);
	for (size_t i = 0; i < m->nmodules; i++) {
		free(m->modules[i].path);
		free(m->modules[i].symbols_error);
	}
	free(m->modules);
	m->modules = NULL;
	m->nmodules = 0;
	for (size_t i = 0; i < m->nnames; i++)
		free(m->names[i].name);
	free(m->names);
	m->names = NULL;
	m->nnames = 0;
	free(m->bare);
	m->bare = NULL;
	m->nbare = 0;
	m->waits_known = false;
	m->glibc_minor = 0;
	m->glibc_static = false;
}

/* Takes d's module table (what frames' module indexes are of). */
static int take_modules(struct symmemo *m, const struct sw_dump *d)
{
	m->modules = calloc(d->nmodules ? d->nmodules : 1, sizeof(*m->modules));
	if (!m->modules)
		return -ENOMEM;
	for (size_t i = 0; i < d->nmodules; i++) {
		m->modules[i] = d->modules[i];
		m->modules[i].symbols_error = NULL;
		m->modules[i].path =
			d->modules[i].path ? strdup(d->modules[i].path) : NULL;
		m->nmodules = i + 1;
		if (d->modules[i].path && !m->modules[i].path)
			return -ENOMEM;
	}
	m->nmodules = d->nmodules;
	return 0;
}

/* Whether t's frames lie only in modules known by their build-id. */
static bool keepable(const struct sw_dump *d, const struct sw_thread *t)
{
	if (t->status != SW_ST_OK || (t->nframes && !t->frames) ||
	    t->nips > SW_MAX_FRAMES_HARD)
		return false;
	for (size_t i = 0; i < t->nframes; i++) {
		int k = t->frames[i].module;

		if (k >= 0 &&
		    ((size_t)k >= d->nmodules || !d->modules[k].build_id_len ||
		     d->modules[k].symbols_error))
			return false;
	}
	return true;
}

static char *dup_or_null(const char *s, bool *oom)
{
	char *c = s ? strdup(s) : NULL;

	if (s && !c)
		*oom = true;
	return c;
}

static int add_stack(struct symmemo *m, uint64_t h, const struct sw_thread *t)
{
	size_t bytes = t->nips * sizeof(uint64_t) +
		       t->nframes * sizeof(struct sw_frame) +
		       sizeof(struct stack);
	struct stack *s;
	bool oom = false;

	for (size_t i = 0; i < t->nframes; i++)
		bytes +=
			(t->frames[i].function
				 ? strlen(t->frames[i].function) + 1
				 : 0) +
			(t->frames[i].file ? strlen(t->frames[i].file) + 1 : 0);
	if (bytes > SYMMEMO_MAX_BYTES / 4)
		return 0; /* one stack that would be most of it */
	/* Full: start over with the stacks of now. */
	if (m->n >= SYMMEMO_MAX_STACKS || m->bytes + bytes > SYMMEMO_MAX_BYTES)
		clear_stacks(m);
	if (m->n == m->cap) {
		size_t cap = m->cap ? m->cap * 2 : 64;
		struct stack *v = realloc(m->v, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		m->v = v;
		m->cap = cap;
	}
	s = &m->v[m->n];
	memset(s, 0, sizeof(*s));
	s->hash = h;
	s->flags = t->flags;
	s->nips = (uint32_t)t->nips;
	memcpy(s->exact, t->exact, sizeof(s->exact));
	s->ips = malloc(t->nips ? t->nips * sizeof(*s->ips) : 1);
	s->frames = calloc(t->nframes ? t->nframes : 1, sizeof(*s->frames));
	if (!s->ips || !s->frames) {
		free(s->ips);
		free(s->frames);
		return -ENOMEM;
	}
	if (t->nips)
		memcpy(s->ips, t->ips, t->nips * sizeof(*s->ips));
	for (size_t i = 0; i < t->nframes; i++) {
		s->frames[i] = t->frames[i];
		s->frames[i].function =
			dup_or_null(t->frames[i].function, &oom);
		s->frames[i].file = dup_or_null(t->frames[i].file, &oom);
	}
	s->nframes = t->nframes;
	if (oom) {
		for (size_t i = 0; i < s->nframes; i++) {
			free((char *)s->frames[i].function);
			free((char *)s->frames[i].file);
		}
		free(s->frames);
		free(s->ips);
		return -ENOMEM;
	}
	s->next = m->buckets[h % NBUCKETS];
	m->buckets[h % NBUCKETS] = (int)m->n;
	m->n++;
	m->bytes += bytes;
	return 0;
}

/* The names and bare words of d's waits, added to m's. */
static int add_waits(struct symmemo *m, const struct sw_dump *d)
{
	for (size_t i = 0; i < d->naddr_names; i++) {
		const struct sw_addr_name *a = &d->addr_names[i];
		struct sw_addr_name *v;
		size_t k;

		if (name_of(m, a->start) || !a->name)
			continue;
		if (m->nnames >= SW_ADDR_NAMES_MAX * 4)
			return -ENOSPC;
		v = realloc(m->names, (m->nnames + 1) * sizeof(*v));
		if (!v)
			return -ENOMEM;
		m->names = v;
		for (k = m->nnames; k > 0 && v[k - 1].start > a->start; k--)
			v[k] = v[k - 1];
		v[k] = *a;
		v[k].name = strdup(a->name);
		if (!v[k].name) {
			memmove(&v[k], &v[k + 1], (m->nnames - k) * sizeof(*v));
			return -ENOMEM;
		}
		m->nnames++;
	}
	for (size_t i = 0; i < d->nthreads; i++) {
		uint64_t addr, *v;

		if (!waits(&d->threads[i]))
			continue;
		addr = d->threads[i].wait->addr;
		if (dump_addr_name(d, addr, &(uint64_t){ 0 }) ||
		    known_bare(m, addr))
			continue;
		if (m->nbare >= SYMMEMO_MAX_WAITS)
			return -ENOSPC;
		v = realloc(m->bare, (m->nbare + 1) * sizeof(*v));
		if (!v)
			return -ENOMEM;
		m->bare = v;
		v[m->nbare++] = addr;
		qsort(v, m->nbare, sizeof(*v), cmp_u64);
	}
	return 0;
}

void symmemo_update(struct symmemo **mp, const struct sw_dump *d)
{
	struct symmemo *m = *mp;
	bool any_wait = false;

	if (!d->symbolized || d->symbols_partial)
		return;
	if (!m) {
		m = calloc(1, sizeof(*m));
		if (!m)
			return;
		*mp = m;
	}
	if (!m->buckets) {
		m->buckets = malloc(NBUCKETS * sizeof(*m->buckets));
		if (!m->buckets)
			return;
		memset(m->buckets, 0xff, NBUCKETS * sizeof(*m->buckets));
	}
	if (!m->modules || !same_modules(m, d)) {
		clear(m);
		if (take_modules(m, d) != 0) {
			clear(m);
			return;
		}
	}
	if (d->glibc_minor > m->glibc_minor)
		m->glibc_minor = d->glibc_minor;
	m->glibc_static |= d->glibc_static;
	for (size_t i = 0; i < d->nthreads && !any_wait; i++)
		any_wait = waits(&d->threads[i]);
	/* A dump with waits had its libc looked at and its words named,
	 * unless there were more than the symbolizer names. */
	if (any_wait) {
		if (d->naddr_names < SW_ADDR_NAMES_MAX && add_waits(m, d) == 0)
			m->waits_known = true;
		else
			m->waits_known = false;
	}
	for (size_t i = 0; i < d->nthreads; i++) {
		const struct sw_thread *t = &d->threads[i];
		uint64_t h;

		if (!keepable(d, t))
			continue;
		h = stack_hash(t);
		if (!find(m, h, t) && add_stack(m, h, t) != 0)
			return;
	}
}

size_t symmemo_stacks(const struct symmemo *m)
{
	return m ? m->n : 0;
}

size_t symmemo_bytes(const struct symmemo *m)
{
	return m ? m->bytes : 0;
}

void symmemo_free(struct symmemo *m)
{
	if (!m)
		return;
	clear(m);
	free(m->v);
	free(m->buckets);
	free(m);
}
