/*
 * pprof.c - the pprof builder of pprof.h.
 *
 * Everything is interned in tables of its own (strings, functions,
 * mappings, locations, samples), each an array of values plus an open
 * addressing index from a key of bytes to the position in the array. The
 * protobuf-c message tree is made only at the end, pointing into those
 * arrays, packed in one call and gzipped with zlib; nothing of it is kept.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "model/utf8.h"
#include "pprof.h"
#include "render/profile.pb-c.h"

/* Bounds of one profile: past them pprof_add() answers SW_ETOOBIG. */
#define PPROF_MAX_ITEMS (1u << 22)   /* of each table */
#define PPROF_MAX_BYTES (256u << 20) /* of strings and keys together */
#define PPROF_MAX_KEY 65536	     /* bytes of one location or sample key */
#define PPROF_GZIP_LEVEL 1	     /* zlib's fastest; see README.md */

/* An index from keys (copied bytes) to positions: open addressing. */
struct ient {
	uint64_t h;
	char *key; /* NULL: empty slot */
	uint32_t klen;
	uint32_t val;
};

struct index {
	struct ient *e;
	size_t cap; /* a power of two, or 0 */
	size_t n;
};

/* What a location keeps besides its message: where its lines are. */
struct locx {
	size_t line_off;
	size_t nline;
};

struct psample {
	size_t loc_off, nloc; /* in p->locids */
	size_t lab_off, nlab; /* in p->labels */
	int64_t values[PPROF_MAX_TYPES];
};

/* A growable array of fixed-size items. */
struct vec {
	void *v;
	size_t n, cap, size;
};

struct pprof {
	size_t ntypes;
	int64_t types[PPROF_MAX_TYPES][2]; /* string indexes */
	size_t default_type;		   /* index into types */
	int64_t period_type[2];
	int64_t period;
	int64_t time_nanos, duration_nanos;
	size_t bytes; /* strings and keys held */

	struct vec strs; /* char *, [0] is "" */
	struct index str_ix;
	struct vec funcs; /* Perftools__Profiles__Function */
	struct index func_ix;
	struct vec maps; /* Perftools__Profiles__Mapping */
	struct index map_ix;
	struct vec locs;  /* Perftools__Profiles__Location */
	struct vec locxs; /* struct locx, one per location */
	struct vec lines; /* Perftools__Profiles__Line */
	struct index loc_ix;
	struct vec samples; /* struct psample */
	struct vec locids;  /* uint64_t */
	struct vec labels;  /* Perftools__Profiles__Label */
	struct index sample_ix;

	/* The location ids of the last stack added (many threads share it). */
	const struct sw_dump *cache_d;
	struct timespec cache_at;
	const struct sw_frame *cache_frames;
	size_t cache_nframes;
	struct vec cache_ids; /* uint64_t */
	struct vec scratch;   /* char: keys being built */
};

static void vec_init(struct vec *v, size_t size)
{
	v->v = NULL;
	v->n = v->cap = 0;
	v->size = size;
}

/* Room for one more item at the end: its address (zeroed), or NULL. */
static void *vec_push(struct vec *v)
{
	char *at;

	if (v->n >= PPROF_MAX_ITEMS)
		return NULL;
	if (v->n == v->cap) {
		size_t cap = v->cap ? v->cap * 2 : 16;
		void *nv = realloc(v->v, cap * v->size);

		if (!nv)
			return NULL;
		v->v = nv;
		v->cap = cap;
	}
	at = (char *)v->v + v->n++ * v->size;
	memset(at, 0, v->size);
	return at;
}

/* Appends n bytes to a char vector. 0 or -ENOMEM. */
static int vec_add_bytes(struct vec *v, const void *p, size_t n)
{
	if (v->n + n > v->cap) {
		size_t cap = v->cap ? v->cap : 256;
		void *nv;

		while (cap < v->n + n)
			cap *= 2;
		nv = realloc(v->v, cap);
		if (!nv)
			return -ENOMEM;
		v->v = nv;
		v->cap = cap;
	}
	memcpy((char *)v->v + v->n, p, n);
	v->n += n;
	return 0;
}

#define VEC_AT(vec, type, i) (&((type *)(vec)->v)[i])

/* FNV-1a over the key's bytes. */
static uint64_t hash_key(const void *p, size_t n)
{
	const unsigned char *s = p;
	uint64_t h = 1469598103934665603ull;

	for (size_t i = 0; i < n; i++)
		h = (h ^ s[i]) * 1099511628211ull;
	return h;
}

/* The slot of key in ix: its own, or the empty one where it would go. */
static struct ient *index_slot(const struct index *ix, const void *key,
			       size_t klen, uint64_t h)
{
	size_t mask = ix->cap - 1;

	for (size_t i = h & mask;; i = (i + 1) & mask) {
		struct ient *e = &ix->e[i];

		if (!e->key || (e->h == h && e->klen == klen &&
				memcmp(e->key, key, klen) == 0))
			return e;
	}
}

static int index_grow(struct index *ix)
{
	size_t cap = ix->cap ? ix->cap * 2 : 64;
	struct ient *e = calloc(cap, sizeof(*e));
	struct index nix = { e, cap, ix->n };

	if (!e)
		return -ENOMEM;
	for (size_t i = 0; i < ix->cap; i++)
		if (ix->e[i].key)
			*index_slot(&nix, ix->e[i].key, ix->e[i].klen,
				    ix->e[i].h) = ix->e[i];
	free(ix->e);
	*ix = nix;
	return 0;
}

/*
 * Looks key up in ix. Found: *val is its value and 1 is returned. Not
 * found: key is inserted with value val_new (copied) and 0 is returned;
 * or -ENOMEM, SW_ETOOBIG.
 */
static int index_get(struct pprof *p, struct index *ix, const void *key,
		     size_t klen, uint32_t val_new, uint32_t *val)
{
	uint64_t h = hash_key(key, klen);
	struct ient *e;

	if (ix->cap) {
		e = index_slot(ix, key, klen, h);
		if (e->key) {
			*val = e->val;
			return 1;
		}
	}
	if (p->bytes + klen > PPROF_MAX_BYTES || klen > UINT32_MAX)
		return SW_ETOOBIG;
	if ((ix->n + 1) * 2 > ix->cap && index_grow(ix) < 0)
		return -ENOMEM;
	e = index_slot(ix, key, klen, h);
	e->key = malloc(klen ? klen : 1);
	if (!e->key)
		return -ENOMEM;
	memcpy(e->key, key, klen);
	e->klen = (uint32_t)klen;
	e->h = h;
	e->val = *val = val_new;
	ix->n++;
	p->bytes += klen;
	return 0;
}

static void index_free(struct index *ix)
{
	for (size_t i = 0; i < ix->cap; i++)
		free(ix->e[i].key);
	free(ix->e);
}

/* s as valid UTF-8: a copy with '?' for every byte that is not. */
static char *utf8_copy(const char *s)
{
	size_t n = strlen(s);
	char *c = malloc(n + 1);
	uint32_t cp;

	if (!c)
		return NULL;
	for (size_t i = 0; i < n;) {
		size_t k = utf8_seq((const unsigned char *)s + i, &cp);

		if (k == 0) {
			c[i++] = '?';
			continue;
		}
		memcpy(c + i, s + i, k);
		i += k;
	}
	c[n] = '\0';
	return c;
}

/* The string table index of s ("" and NULL: 0). Negative on failure. */
static int64_t intern(struct pprof *p, const char *s)
{
	size_t n = s ? strlen(s) : 0;
	uint32_t at = 0;
	char **slot;
	int rc;

	if (n == 0)
		return 0;
	rc = index_get(p, &p->str_ix, s, n, (uint32_t)p->strs.n, &at);
	if (rc < 0)
		return rc;
	if (rc == 1)
		return at;
	slot = vec_push(&p->strs);
	if (!slot)
		return p->strs.n >= PPROF_MAX_ITEMS ? SW_ETOOBIG : -ENOMEM;
	*slot = utf8_copy(s);
	if (!*slot) {
		p->strs.n--;
		return -ENOMEM;
	}
	p->bytes += n;
	return at;
}

static int push_fail(const struct vec *v)
{
	return v->n >= PPROF_MAX_ITEMS ? SW_ETOOBIG : -ENOMEM;
}

struct pprof *pprof_new(const char *const (*types)[2], size_t ntypes,
			const char *const period_type[2], int64_t period)
{
	struct pprof *p;
	char **empty;

	if (ntypes == 0 || ntypes > PPROF_MAX_TYPES)
		return NULL;
	p = calloc(1, sizeof(*p));
	if (!p)
		return NULL;
	vec_init(&p->strs, sizeof(char *));
	vec_init(&p->funcs, sizeof(Perftools__Profiles__Function));
	vec_init(&p->maps, sizeof(Perftools__Profiles__Mapping));
	vec_init(&p->locs, sizeof(Perftools__Profiles__Location));
	vec_init(&p->locxs, sizeof(struct locx));
	vec_init(&p->lines, sizeof(Perftools__Profiles__Line));
	vec_init(&p->samples, sizeof(struct psample));
	vec_init(&p->locids, sizeof(uint64_t));
	vec_init(&p->labels, sizeof(Perftools__Profiles__Label));
	vec_init(&p->cache_ids, sizeof(uint64_t));
	vec_init(&p->scratch, 1);
	empty = vec_push(&p->strs);
	if (!empty || !(*empty = strdup("")))
		goto fail;
	p->ntypes = ntypes;
	for (size_t i = 0; i < ntypes; i++) {
		int64_t t = intern(p, types[i][0]), u = intern(p, types[i][1]);

		if (t < 0 || u < 0)
			goto fail;
		p->types[i][0] = t;
		p->types[i][1] = u;
	}
	p->period_type[0] = intern(p, period_type[0]);
	p->period_type[1] = intern(p, period_type[1]);
	if (p->period_type[0] < 0 || p->period_type[1] < 0)
		goto fail;
	p->period = period;
	return p;
fail:
	pprof_free(p);
	return NULL;
}

void pprof_set_default_type(struct pprof *p, size_t i)
{
	if (i < p->ntypes)
		p->default_type = i;
}

void pprof_set_time(struct pprof *p, int64_t time_nanos, int64_t duration_nanos)
{
	p->time_nanos = time_nanos;
	p->duration_nanos = duration_nanos;
}

size_t pprof_nsamples(const struct pprof *p)
{
	return p->samples.n;
}

/* The id of the function (name, file). 0 for none; negative on failure. */
static int64_t function_id(struct pprof *p, const struct sw_frame *f)
{
	int64_t key[2];
	Perftools__Profiles__Function *fn;
	uint32_t at = 0;
	int rc;

	if (!f->function)
		return 0;
	key[0] = intern(p, f->function);
	key[1] = intern(p, f->file);
	if (key[0] < 0 || key[1] < 0)
		return key[0] < 0 ? key[0] : key[1];
	rc = index_get(p, &p->func_ix, key, sizeof(key), (uint32_t)p->funcs.n,
		       &at);
	if (rc < 0)
		return rc;
	if (rc == 1)
		return (int64_t)at + 1;
	fn = vec_push(&p->funcs);
	if (!fn)
		return push_fail(&p->funcs);
	perftools__profiles__function__init(fn);
	fn->id = (uint64_t)at + 1;
	fn->name = fn->system_name = key[0];
	fn->filename = key[1];
	return (int64_t)fn->id;
}

static void hex_of(const uint8_t *b, size_t n, char *out)
{
	static const char digits[] = "0123456789abcdef";

	for (size_t i = 0; i < n; i++) {
		out[2 * i] = digits[b[i] >> 4];
		out[2 * i + 1] = digits[b[i] & 15];
	}
	out[2 * n] = '\0';
}

/*
 * The mapping id for a frame of d in module m (-1: outside every module,
 * then named by whether it has a function). Negative on failure.
 */
static int64_t mapping_id(struct pprof *p, const struct sw_dump *d, int m,
			  const struct sw_frame *f)
{
	const struct sw_module *mod = m >= 0 ? &d->modules[m] : NULL;
	const char *name = mod		 ? (mod->path ? mod->path : "[unknown]")
			   : f->function ? "[jit]"
					 : "[unknown]";
	Perftools__Profiles__Mapping *mp;
	char build_id[2 * SW_BUILD_ID_MAX + 1];
	struct vec *key = &p->scratch;
	int64_t pid = d->pid, start = mod ? (int64_t)mod->start : -1;
	uint32_t at = 0;
	int rc;

	key->n = 0;
	if (vec_add_bytes(key, &pid, sizeof(pid)) < 0 ||
	    vec_add_bytes(key, &start, sizeof(start)) < 0 ||
	    vec_add_bytes(key, name, strlen(name)) < 0)
		return -ENOMEM;
	rc = index_get(p, &p->map_ix, key->v, key->n, (uint32_t)p->maps.n, &at);
	if (rc < 0)
		return rc;
	if (rc == 1) {
		mp = VEC_AT(&p->maps, Perftools__Profiles__Mapping, at);
	} else {
		int64_t fname = intern(p, name), bid = 0;

		if (fname < 0)
			return fname;
		if (mod && mod->build_id_len) {
			hex_of(mod->build_id,
			       mod->build_id_len > SW_BUILD_ID_MAX
				       ? SW_BUILD_ID_MAX
				       : mod->build_id_len,
			       build_id);
			bid = intern(p, build_id);
			if (bid < 0)
				return bid;
		}
		mp = vec_push(&p->maps);
		if (!mp)
			return push_fail(&p->maps);
		perftools__profiles__mapping__init(mp);
		mp->id = (uint64_t)at + 1;
		mp->filename = fname;
		mp->build_id = bid;
		if (mod) {
			mp->memory_start = mod->start;
			mp->memory_limit = mod->end;
		} else {
			mp->memory_start = f->ip;
			mp->memory_limit = f->ip + 1;
		}
		mp->has_functions = mp->has_filenames = mp->has_line_numbers =
			mp->has_inline_frames = d->symbolized;
	}
	if (!mod) { /* a range that holds every address seen in it */
		if (f->ip < mp->memory_start)
			mp->memory_start = f->ip;
		if (f->ip >= mp->memory_limit)
			mp->memory_limit = f->ip + 1;
	}
	return (int64_t)mp->id;
}

/*
 * The location of frames[0..n): n - 1 frames inlined into the last one,
 * which gives the address and the mapping. Its id in *id, or negative.
 */
static int location_of(struct pprof *p, const struct sw_dump *d,
		       const struct sw_frame *frames, size_t n, uint64_t *id)
{
	const struct sw_frame *phys = &frames[n - 1];
	int m = phys->module >= 0 && (size_t)phys->module < d->nmodules
			? phys->module
			: -1;
	int64_t mid = mapping_id(p, d, m, phys);
	struct vec *key = &p->scratch;
	Perftools__Profiles__Location *loc;
	struct locx *lx;
	size_t line_off;
	uint32_t at = 0;
	int rc;

	if (mid < 0)
		return (int)mid;
	/* The lines first, into the pool: their ids are part of the key. */
	line_off = p->lines.n;
	for (size_t i = 0; i < n; i++) {
		int64_t fid = function_id(p, &frames[i]);
		Perftools__Profiles__Line *ln;

		if (fid < 0)
			goto undo;
		if (fid == 0)
			continue;
		ln = vec_push(&p->lines);
		if (!ln) {
			fid = push_fail(&p->lines);
			goto undo;
		}
		perftools__profiles__line__init(ln);
		ln->function_id = (uint64_t)fid;
		ln->line = frames[i].line;
		continue;
	undo:
		p->lines.n = line_off;
		return (int)fid;
	}
	key->n = 0;
	rc = vec_add_bytes(key, &mid, sizeof(mid));
	rc = rc ? rc : vec_add_bytes(key, &phys->ip, sizeof(phys->ip));
	for (size_t i = line_off; !rc && i < p->lines.n; i++) {
		const Perftools__Profiles__Line *ln =
			VEC_AT(&p->lines, Perftools__Profiles__Line, i);

		rc = vec_add_bytes(key, &ln->function_id,
				   sizeof(ln->function_id));
		rc = rc ? rc : vec_add_bytes(key, &ln->line, sizeof(ln->line));
	}
	if (!rc && key->n > PPROF_MAX_KEY)
		rc = SW_ETOOBIG;
	if (!rc)
		rc = index_get(p, &p->loc_ix, key->v, key->n,
			       (uint32_t)p->locs.n, &at);
	if (rc < 0) {
		p->lines.n = line_off;
		return rc;
	}
	if (rc == 1) { /* known already: the lines just made are its own */
		p->lines.n = line_off;
		*id = (uint64_t)at + 1;
		return 0;
	}
	loc = vec_push(&p->locs);
	lx = loc ? vec_push(&p->locxs) : NULL;
	if (!lx) {
		p->lines.n = line_off;
		return push_fail(&p->locs);
	}
	perftools__profiles__location__init(loc);
	loc->id = (uint64_t)at + 1;
	loc->mapping_id = (uint64_t)mid;
	loc->address = phys->ip;
	lx->line_off = line_off;
	lx->nline = p->lines.n - line_off;
	*id = loc->id;
	return 0;
}

/* The location ids of t's stack into p->cache_ids, innermost first. */
static int stack_ids(struct pprof *p, const struct sw_dump *d,
		     const struct sw_thread *t)
{
	size_t start = 0;

	if (p->cache_d == d && p->cache_frames == t->frames &&
	    p->cache_nframes == t->nframes &&
	    p->cache_at.tv_sec == d->collected_at.tv_sec &&
	    p->cache_at.tv_nsec == d->collected_at.tv_nsec)
		return 0;
	p->cache_d = NULL;
	p->cache_ids.n = 0;
	for (size_t i = 0; i < t->nframes; i++) {
		uint64_t id = 0, *slot;
		int rc;

		if (t->frames[i].inlined && i + 1 < t->nframes)
			continue;
		rc = location_of(p, d, &t->frames[start], i + 1 - start, &id);
		if (rc < 0)
			return rc;
		slot = vec_push(&p->cache_ids);
		if (!slot)
			return push_fail(&p->cache_ids);
		*slot = id;
		start = i + 1;
	}
	p->cache_d = d;
	p->cache_at = d->collected_at;
	p->cache_frames = t->frames;
	p->cache_nframes = t->nframes;
	return 0;
}

/*
 * The module of d that is its program: the one its main thread (tid =
 * pid) started in, the outermost frame (_start), else the one named as
 * the process (its comm, which the kernel cuts at 15 bytes); -1 when
 * neither tells.
 */
static int program_module(const struct sw_dump *d)
{
	for (size_t i = 0; i < d->nthreads; i++) {
		const struct sw_thread *t = &d->threads[i];

		if (t->tid == d->pid && t->status == SW_ST_OK && t->nframes &&
		    t->frames[t->nframes - 1].module >= 0 &&
		    (size_t)t->frames[t->nframes - 1].module < d->nmodules)
			return t->frames[t->nframes - 1].module;
	}
	for (size_t i = 0; d->comm[0] && i < d->nmodules; i++) {
		const char *path = d->modules[i].path, *slash;

		if (!path)
			continue;
		slash = strrchr(path, '/');
		if (!strncmp(slash ? slash + 1 : path, d->comm,
			     strlen(d->comm)))
			return (int)i;
	}
	return -1;
}

int pprof_add(struct pprof *p, const struct sw_dump *d,
	      const struct sw_thread *frames_of, const int64_t *values,
	      const struct pprof_label *labels, size_t nlabels)
{
	int64_t lab[PPROF_MAX_LABELS][2];
	struct vec *key = &p->scratch;
	struct psample *s;
	size_t nids;
	uint32_t at = 0;
	int rc;

	if (nlabels > PPROF_MAX_LABELS)
		return -EINVAL;
	/*
	 * pprof takes the first mapping for the program ("File:" in go tool
	 * pprof, the binary it looks symbols up in): the first dump's own,
	 * before its frames bring in libc.
	 */
	if (!p->maps.n) {
		int m = program_module(d);
		struct sw_frame none = { 0 };
		int64_t id = m >= 0 ? mapping_id(p, d, m, &none) : 0;

		if (id < 0)
			return (int)id;
	}
	rc = stack_ids(p, d, frames_of);
	if (rc < 0)
		return rc;
	for (size_t i = 0; i < nlabels; i++) {
		lab[i][0] = intern(p, labels[i].key);
		lab[i][1] = intern(p, labels[i].str);
		if (lab[i][0] < 0 || lab[i][1] < 0)
			return (int)(lab[i][0] < 0 ? lab[i][0] : lab[i][1]);
	}
	nids = p->cache_ids.n;
	key->n = 0;
	rc = vec_add_bytes(key, &nids, sizeof(nids));
	rc = rc ? rc
		: vec_add_bytes(key, p->cache_ids.v, nids * sizeof(uint64_t));
	rc = rc ? rc : vec_add_bytes(key, lab, nlabels * sizeof(lab[0]));
	if (!rc && key->n > PPROF_MAX_KEY)
		rc = SW_ETOOBIG;
	if (!rc)
		rc = index_get(p, &p->sample_ix, key->v, key->n,
			       (uint32_t)p->samples.n, &at);
	if (rc < 0)
		return rc;
	if (rc == 1) {
		s = VEC_AT(&p->samples, struct psample, at);
		for (size_t i = 0; i < p->ntypes; i++)
			s->values[i] += values[i];
		return 0;
	}
	s = vec_push(&p->samples);
	if (!s)
		return push_fail(&p->samples);
	s->loc_off = p->locids.n;
	s->nloc = nids;
	s->lab_off = p->labels.n;
	s->nlab = nlabels;
	memcpy(s->values, values, p->ntypes * sizeof(values[0]));
	for (size_t i = 0; i < nids; i++) {
		uint64_t *slot = vec_push(&p->locids);

		if (!slot)
			return push_fail(&p->locids);
		*slot = VEC_AT(&p->cache_ids, uint64_t, 0)[i];
	}
	for (size_t i = 0; i < nlabels; i++) {
		Perftools__Profiles__Label *l = vec_push(&p->labels);

		if (!l)
			return push_fail(&p->labels);
		perftools__profiles__label__init(l);
		l->key = lab[i][0];
		l->str = lab[i][1];
	}
	return 0;
}

/* Gzips n bytes of in into *out (malloc'd), *len bytes. 0 or -ENOMEM. */
static int gzip_of(const uint8_t *in, size_t n, void **out, size_t *len)
{
	z_stream z;
	uLong bound;
	uint8_t *buf;
	int rc;

	memset(&z, 0, sizeof(z));
	/* 15 + 16: a gzip header and trailer around the deflate stream. */
	if (deflateInit2(&z, PPROF_GZIP_LEVEL, Z_DEFLATED, 15 + 16, 8,
			 Z_DEFAULT_STRATEGY) != Z_OK)
		return -ENOMEM;
	bound = deflateBound(&z, (uLong)n);
	buf = malloc(bound);
	if (!buf) {
		deflateEnd(&z);
		return -ENOMEM;
	}
	z.next_in = (Bytef *)in;
	z.avail_in = (uInt)n;
	z.next_out = buf;
	z.avail_out = (uInt)bound;
	rc = deflate(&z, Z_FINISH);
	*len = z.total_out;
	deflateEnd(&z);
	if (rc != Z_STREAM_END) {
		free(buf);
		return -ENOMEM;
	}
	*out = buf;
	return 0;
}

int pprof_finish(struct pprof *p, void **out, size_t *len)
{
	Perftools__Profiles__Profile prof = PERFTOOLS__PROFILES__PROFILE__INIT;
	Perftools__Profiles__ValueType vts[PPROF_MAX_TYPES], pt;
	Perftools__Profiles__ValueType *vtp[PPROF_MAX_TYPES];
	Perftools__Profiles__Sample *smp = NULL, **smpp = NULL;
	Perftools__Profiles__Label **labp = NULL;
	Perftools__Profiles__Line **linep = NULL;
	void **mapp = NULL, **locp = NULL, **funcp = NULL;
	int64_t *vals = NULL;
	uint8_t *packed = NULL;
	size_t size;
	int rc = -ENOMEM;

	*out = NULL;
	*len = 0;
	if (p->ntypes > PPROF_MAX_TYPES || p->samples.n > SIZE_MAX / 64)
		return SW_ETOOBIG;
	for (size_t i = 0; i < p->ntypes; i++) {
		perftools__profiles__value_type__init(&vts[i]);
		vts[i].type = p->types[i][0];
		vts[i].unit = p->types[i][1];
		vtp[i] = &vts[i];
	}
	perftools__profiles__value_type__init(&pt);
	pt.type = p->period_type[0];
	pt.unit = p->period_type[1];

	smp = calloc(p->samples.n + 1, sizeof(*smp));
	/* NOLINTNEXTLINE(bugprone-sizeof-expression): pointers */
	smpp = calloc(p->samples.n + 1, sizeof(*smpp));
	vals = calloc(p->samples.n * p->ntypes + 1, sizeof(*vals));
	/* NOLINTNEXTLINE(bugprone-sizeof-expression): pointers */
	labp = calloc(p->labels.n + 1, sizeof(*labp));
	/* NOLINTNEXTLINE(bugprone-sizeof-expression): pointers */
	linep = calloc(p->lines.n + 1, sizeof(*linep));
	mapp = calloc(p->maps.n + 1, sizeof(*mapp));
	locp = calloc(p->locs.n + 1, sizeof(*locp));
	funcp = calloc(p->funcs.n + 1, sizeof(*funcp));
	if (!smp || !smpp || !vals || !labp || !linep || !mapp || !locp ||
	    !funcp)
		goto out;
	for (size_t i = 0; i < p->labels.n; i++)
		labp[i] = VEC_AT(&p->labels, Perftools__Profiles__Label, i);
	for (size_t i = 0; i < p->lines.n; i++)
		linep[i] = VEC_AT(&p->lines, Perftools__Profiles__Line, i);
	for (size_t i = 0; i < p->samples.n; i++) {
		const struct psample *s =
			VEC_AT(&p->samples, struct psample, i);

		perftools__profiles__sample__init(&smp[i]);
		smp[i].n_location_id = s->nloc;
		smp[i].location_id = VEC_AT(&p->locids, uint64_t, s->loc_off);
		memcpy(&vals[i * p->ntypes], s->values,
		       p->ntypes * sizeof(*vals));
		smp[i].n_value = p->ntypes;
		smp[i].value = &vals[i * p->ntypes];
		smp[i].n_label = s->nlab;
		smp[i].label = &labp[s->lab_off];
		smpp[i] = &smp[i];
	}
	for (size_t i = 0; i < p->maps.n; i++)
		mapp[i] = VEC_AT(&p->maps, Perftools__Profiles__Mapping, i);
	for (size_t i = 0; i < p->locs.n; i++) {
		Perftools__Profiles__Location *l =
			VEC_AT(&p->locs, Perftools__Profiles__Location, i);
		const struct locx *lx = VEC_AT(&p->locxs, struct locx, i);

		l->n_line = lx->nline;
		l->line = &linep[lx->line_off];
		locp[i] = l;
	}
	for (size_t i = 0; i < p->funcs.n; i++)
		funcp[i] = VEC_AT(&p->funcs, Perftools__Profiles__Function, i);

	prof.n_sample_type = p->ntypes;
	prof.sample_type = vtp;
	prof.n_sample = p->samples.n;
	prof.sample = smpp;
	prof.n_mapping = p->maps.n;
	prof.mapping = (Perftools__Profiles__Mapping **)mapp;
	prof.n_location = p->locs.n;
	prof.location = (Perftools__Profiles__Location **)locp;
	prof.n_function = p->funcs.n;
	prof.function = (Perftools__Profiles__Function **)funcp;
	prof.n_string_table = p->strs.n;
	prof.string_table = p->strs.v;
	prof.time_nanos = p->time_nanos;
	prof.duration_nanos = p->duration_nanos;
	prof.period_type = &pt;
	prof.period = p->period;
	prof.default_sample_type = p->types[p->default_type][0];

	size = perftools__profiles__profile__get_packed_size(&prof);
	if (size > UINT32_MAX) {
		rc = SW_ETOOBIG;
		goto out;
	}
	packed = malloc(size ? size : 1);
	if (!packed)
		goto out;
	if (perftools__profiles__profile__pack(&prof, packed) != size) {
		rc = -EIO;
		goto out;
	}
	rc = gzip_of(packed, size, out, len);
out:
	free(packed);
	free(smp);
	free(smpp);
	free(vals);
	free(labp);
	free(linep);
	free(mapp);
	free(locp);
	free(funcp);
	return rc;
}

void pprof_free(struct pprof *p)
{
	if (!p)
		return;
	for (size_t i = 0; i < p->strs.n; i++)
		free(VEC_AT(&p->strs, char *, 0)[i]);
	free(p->strs.v);
	free(p->funcs.v);
	free(p->maps.v);
	free(p->locs.v);
	free(p->locxs.v);
	free(p->lines.v);
	free(p->samples.v);
	free(p->locids.v);
	free(p->labels.v);
	free(p->cache_ids.v);
	free(p->scratch.v);
	index_free(&p->str_ix);
	index_free(&p->func_ix);
	index_free(&p->map_ix);
	index_free(&p->loc_ix);
	index_free(&p->sample_ix);
	free(p);
}

/* "S", "R"...: a thread's state as the JSON writes it. */
static void state_str(char c, char s[2])
{
	s[0] = c > 0x20 && c < 0x7f ? c : '?';
	s[1] = '\0';
}

/* Adds one dump's groups to p, a count profile. */
static int add_counts(struct pprof *p, const struct sw_dump *d)
{
	size_t *order = NULL, *first = NULL;
	char pid[16], state[2];
	int rc = 0;

	if (d->ngroups == 0)
		return 0;
	/* The ok threads in the order of their groups (a counting sort). */
	order = calloc(d->nthreads + 1, sizeof(*order));
	first = calloc(d->ngroups + 1, sizeof(*first));
	if (!order || !first) {
		rc = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < d->nthreads; i++) {
		int g = d->threads[i].group;

		if (g >= 0 && (size_t)g < d->ngroups)
			first[g + 1]++;
	}
	for (size_t g = 0; g < d->ngroups; g++)
		first[g + 1] += first[g];
	for (size_t i = 0; i < d->nthreads; i++) {
		int g = d->threads[i].group;

		if (g >= 0 && (size_t)g < d->ngroups)
			order[first[g]++] = i;
	}
	/* first[g] is now where group g ends; it started where g - 1 ends. */
	snprintf(pid, sizeof(pid), "%d", (int)d->pid);
	for (size_t g = 0, from = 0; !rc && g < d->ngroups; g++) {
		const struct sw_group *grp = &d->groups[g];
		const struct sw_thread *rep;

		if (grp->rep >= d->nthreads) {
			from = first[g];
			continue;
		}
		rep = &d->threads[grp->rep];
		for (size_t k = from; !rc && k < first[g]; k++) {
			const struct sw_thread *t = &d->threads[order[k]];
			const int64_t one = 1;
			struct pprof_label labs[4] = {
				{ "pid", pid },
				{ "comm", d->comm },
				{ "thread", t->name },
				{ "state", state },
			};

			state_str(t->state, state);
			rc = pprof_add(p, d, rep, &one, labs, 4);
		}
		from = first[g];
	}
out:
	free(order);
	free(first);
	return rc;
}

int render_pprof_count(const struct sw_dump *const *ds, size_t n,
		       const char *type, void **out, size_t *len)
{
	const char *const types[1][2] = { { type, "count" } };
	const char *const period[2] = { type, "count" };
	struct pprof *p = pprof_new(types, 1, period, 1);
	int64_t when = 0;
	int rc = 0;

	*out = NULL;
	*len = 0;
	if (!p)
		return -ENOMEM;
	for (size_t i = 0; !rc && i < n; i++) {
		int64_t t = (int64_t)ds[i]->collected_at.tv_sec * 1000000000 +
			    ds[i]->collected_at.tv_nsec;

		if (!when || t < when)
			when = t;
		rc = add_counts(p, ds[i]);
	}
	pprof_set_time(p, when, 0);
	if (!rc)
		rc = pprof_finish(p, out, len);
	pprof_free(p);
	return rc;
}
