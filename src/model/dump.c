/*
 * dump.c - allocation and small queries of the dump structure (dump.h).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "dump.h"

#define DUMP_CHUNK_MIN 16384	  /* bytes of the first block of memory */
#define DUMP_CHUNK_MAX (1u << 20) /* blocks double up to this size */
#define DUMP_ALIGN 16		  /* alignment of dump_alloc() */

/*
 * A block of the dump's memory (dump_alloc()); the dump keeps a list of
 * them, the one being filled first.
 */
struct dump_chunk {
	struct dump_chunk *next;
	size_t used;
	size_t size;
	_Alignas(DUMP_ALIGN) char data[];
};

static const char *const status_names[SW_ST_COUNT] = {
	[SW_ST_OK] = "ok",	     [SW_ST_TIMEOUT] = "timeout",
	[SW_ST_EXITED] = "exited",   [SW_ST_BLOCKED] = "blocked-signal",
	[SW_ST_SKIPPED] = "skipped", [SW_ST_ERROR] = "error",
	[SW_ST_SECCOMP] = "seccomp", [SW_ST_LOWSTACK] = "low-stack",
};

const char *dump_method_name(enum sw_method m)
{
	switch (m) {
	case SW_METHOD_PTRACE:
		return "ptrace";
	case SW_METHOD_CORE:
		return "core";
	default:
		return "agent";
	}
}

const char *dump_read_name(enum sw_read r)
{
	static const char *const names[SW_READ_COUNT] = {
		[SW_READ_SIGNAL] = "signal", [SW_READ_KERNEL] = "kernel",
		[SW_READ_PERF] = "perf",     [SW_READ_PTRACE] = "ptrace",
		[SW_READ_CORE] = "core",
	};

	return (unsigned)r < SW_READ_COUNT ? names[r] : NULL;
}

const char *dump_status_name(enum sw_status st)
{
	if ((unsigned)st >= SW_ST_COUNT)
		return "error";
	return status_names[st];
}

struct sw_dump *dump_new(void)
{
	return calloc(1, sizeof(struct sw_dump));
}

void dump_thread_release_frames(struct sw_thread *t)
{
	t->frames = NULL;
	t->nframes = 0;
}

/*
 * Allocates a block for at least n bytes into the list *head. Blocks
 * double from DUMP_CHUNK_MIN to DUMP_CHUNK_MAX; a request larger than
 * that gets a block of its own, linked behind the head so that the head's
 * free room stays in use.
 */
static struct dump_chunk *chunk_new(struct dump_chunk **head, size_t n)
{
	size_t size = *head ? 2 * (*head)->size : DUMP_CHUNK_MIN;
	struct dump_chunk *c;

	if (size > DUMP_CHUNK_MAX)
		size = DUMP_CHUNK_MAX;
	if (n > size)
		size = n;
	c = malloc(sizeof(*c) + size);
	if (!c)
		return NULL;
	c->used = 0;
	c->size = size;
	if (size > DUMP_CHUNK_MAX && *head) {
		c->next = (*head)->next;
		(*head)->next = c;
	} else {
		c->next = *head;
		*head = c;
	}
	return c;
}

/* n bytes from the list *head, aligned to align (a power of two). */
static void *mem_alloc(struct dump_chunk **head, size_t n, size_t align)
{
	struct dump_chunk *c = *head;
	size_t at = c ? (c->used + align - 1) & ~(align - 1) : 0;

	if (n > SIZE_MAX - DUMP_ALIGN - sizeof(*c))
		return NULL;
	if (!c || at > c->size || c->size - at < n) {
		c = chunk_new(head, n);
		if (!c)
			return NULL;
		at = c->used;
	}
	c->used = at + n;
	return c->data + at;
}

static const char *mem_strdup(struct dump_chunk **head, const char *s)
{
	size_t n = strlen(s) + 1;
	char *p = mem_alloc(head, n, 1);

	return p ? memcpy(p, s, n) : NULL;
}

static void mem_free(struct dump_chunk *c)
{
	struct dump_chunk *next;

	for (; c; c = next) {
		next = c->next;
		free(c);
	}
}

size_t dump_bytes(const struct sw_dump *d)
{
	size_t n = sizeof(*d) + d->nthreads * sizeof(*d->threads) +
		   d->nmodules * sizeof(*d->modules) +
		   d->ngroups * sizeof(*d->groups);

	if (d->cmdline)
		n += strlen(d->cmdline) + 1;
	if (d->jit_map_refused)
		n += strlen(d->jit_map_refused) + 1;
	for (size_t i = 0; i < d->nthreads; i++) {
		n += d->threads[i].nips * sizeof(uint64_t);
		if (d->threads[i].error)
			n += strlen(d->threads[i].error) + 1;
	}
	for (size_t i = 0; i < d->nmodules; i++)
		n += d->modules[i].path ? strlen(d->modules[i].path) + 1 : 0;
	for (size_t i = 0; i < d->ngroups; i++)
		n += d->groups[i].count * sizeof(pid_t);
	for (size_t i = 0; i < d->naddr_names; i++)
		n += sizeof(*d->addr_names) + strlen(d->addr_names[i].name) + 1;
	for (const struct dump_chunk *c = d->mem; c; c = c->next)
		n += sizeof(*c) + c->size;
	return n;
}

const char *dump_addr_name(const struct sw_dump *d, uint64_t addr,
			   uint64_t *off)
{
	size_t lo = 0, hi = d->naddr_names;
	const struct sw_addr_name *e;

	/* The last global that starts at or below addr. */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (d->addr_names[mid].start <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (!lo)
		return NULL;
	e = &d->addr_names[lo - 1];
	if (addr - e->start >= e->size)
		return NULL;
	*off = addr - e->start;
	return e->name;
}

void dump_release_addr_names(struct sw_dump *d)
{
	for (size_t i = 0; i < d->naddr_names; i++)
		free(d->addr_names[i].name);
	free(d->addr_names);
	d->addr_names = NULL;
	d->naddr_names = 0;
}

void *dump_alloc(struct sw_dump *d, size_t size)
{
	return mem_alloc(&d->mem, size, DUMP_ALIGN);
}

const char *dump_strdup(struct sw_dump *d, const char *s)
{
	return mem_strdup(&d->mem, s);
}

void dump_release_mem(struct sw_dump *d)
{
	mem_free(d->mem);
	d->mem = NULL;
}

void dump_release_groups(struct sw_dump *d)
{
	for (size_t i = 0; i < d->ngroups; i++)
		free(d->groups[i].tids);
	free(d->groups);
	d->groups = NULL;
	d->ngroups = 0;
	for (size_t i = 0; i < d->nthreads; i++)
		d->threads[i].group = -1;
}

int dump_find_module(const struct sw_dump *d, uint64_t ip)
{
	for (size_t i = 0; i < d->nmodules; i++) {
		const struct sw_module *m = &d->modules[i];
		if (ip >= m->start && ip < m->end)
			return (int)i;
	}
	return -1;
}

void dump_thread_set_error(struct sw_thread *t, enum sw_status st,
			   const char *reason)
{
	t->status = st;
	free(t->error);
	t->error = reason ? strdup(reason) : NULL;
}

static char *dup_or_null(const char *s, bool *oom)
{
	char *c;

	if (!s)
		return NULL;
	c = strdup(s);
	if (!c)
		*oom = true;
	return c;
}

int dump_clone_raw(const struct sw_dump *d, struct sw_dump **out)
{
	struct sw_dump *c = dump_new();
	bool oom = false;

	if (!c)
		return -ENOMEM;
	c->pid = d->pid;
	memcpy(c->comm, d->comm, sizeof(c->comm));
	c->cmdline = dup_or_null(d->cmdline, &oom);
	c->collected_at = d->collected_at;
	c->elapsed_us = d->elapsed_us;
	c->skew_us = d->skew_us;
	c->timeout_ms = d->timeout_ms;
	c->method = d->method;
	c->paused_us_max = d->paused_us_max;
	c->paused_us_total = d->paused_us_total;
	c->core_signal = d->core_signal;
	c->core_cut_size = d->core_cut_size;
	c->core_cut_need = d->core_cut_need;
	c->hidden_threads = d->hidden_threads;
	c->threads = calloc(d->nthreads ? d->nthreads : 1, sizeof(*c->threads));
	c->modules = calloc(d->nmodules ? d->nmodules : 1, sizeof(*c->modules));
	if (!c->threads || !c->modules)
		goto fail;
	c->nthreads = d->nthreads;
	for (size_t i = 0; i < d->nthreads; i++) {
		const struct sw_thread *t = &d->threads[i];
		struct sw_thread *u = &c->threads[i];

		*u = *t;
		u->wait = NULL; /* copied below: a failure must not free t's */
		u->frames = NULL;
		u->nframes = 0;
		u->group = -1;
		u->error = dup_or_null(t->error, &oom);
		u->ips = malloc((t->nips ? t->nips : 1) * sizeof(uint64_t));
		if (!u->ips) {
			u->nips = 0;
			goto fail;
		}
		memcpy(u->ips, t->ips, t->nips * sizeof(uint64_t));
		if (t->wait) {
			u->wait = malloc(sizeof(*u->wait));
			if (!u->wait)
				goto fail;
			*u->wait = *t->wait;
		}
	}
	c->nmodules = d->nmodules;
	for (size_t i = 0; i < d->nmodules; i++) {
		c->modules[i] = d->modules[i];
		c->modules[i].path = dup_or_null(d->modules[i].path, &oom);
		c->modules[i].symbols_error =
			dup_or_null(d->modules[i].symbols_error, &oom);
	}
	if (oom)
		goto fail;
	*out = c;
	return 0;
fail:
	sw_dump_free(c);
	return -ENOMEM;
}

/*
 * A copy of t's frames and their strings in the list *mem. NULL on out of
 * memory.
 */
static struct sw_frame *copy_frames(struct dump_chunk **mem,
				    const struct sw_thread *t)
{
	struct sw_frame *f =
		mem_alloc(mem, t->nframes * sizeof(*f), DUMP_ALIGN);

	if (!f)
		return NULL;
	memcpy(f, t->frames, t->nframes * sizeof(*f));
	for (size_t i = 0; i < t->nframes; i++) {
		if (f[i].function &&
		    !(f[i].function = mem_strdup(mem, f[i].function)))
			return NULL;
		if (f[i].file && !(f[i].file = mem_strdup(mem, f[i].file)))
			return NULL;
	}
	return f;
}

/*
 * The bytes copy_frames() takes for the representatives of d's groups:
 * what a compacted dump keeps, in one block of that size rather than in
 * the blocks of DUMP_CHUNK_MIN and up that mem_alloc() starts with (16 KiB
 * for every sample of a small process, most of it empty).
 */
static size_t compact_size(const struct sw_dump *d)
{
	size_t n = 0;

	for (size_t g = 0; g < d->ngroups; g++) {
		const struct sw_thread *t;

		if (d->groups[g].rep >= d->nthreads)
			continue;
		t = &d->threads[d->groups[g].rep];
		n += t->nframes * sizeof(*t->frames) + DUMP_ALIGN;
		for (size_t i = 0; i < t->nframes; i++) {
			if (t->frames[i].function)
				n += strlen(t->frames[i].function) + 1;
			if (t->frames[i].file)
				n += strlen(t->frames[i].file) + 1;
		}
	}
	return n;
}

void dump_compact(struct sw_dump *d)
{
	/* NOLINTNEXTLINE(bugprone-sizeof-expression): pointers */
	struct sw_frame **kept = calloc(d->nthreads ? d->nthreads : 1,
					sizeof(struct sw_frame *));
	struct dump_chunk *mem = NULL;
	size_t need = compact_size(d);

	if (!kept)
		return; /* keeping everything is correct, only larger */
	/* One block of the size needed; should it fall short, mem_alloc()
	 * adds blocks as usual. */
	mem = need ? malloc(sizeof(*mem) + need) : NULL;
	if (mem) {
		mem->used = 0;
		mem->size = need;
		mem->next = NULL;
	}
	for (size_t g = 0; g < d->ngroups; g++) {
		size_t rep = d->groups[g].rep;

		if (rep >= d->nthreads || kept[rep] || !d->threads[rep].nframes)
			continue;
		kept[rep] = copy_frames(&mem, &d->threads[rep]);
		if (!kept[rep])
			goto out_free;
	}
	for (size_t i = 0; i < d->nthreads; i++) {
		d->threads[i].frames = kept[i];
		if (!kept[i])
			d->threads[i].nframes = 0;
	}
	dump_release_mem(d);
	d->mem = mem;
	mem = NULL;
out_free:
	mem_free(mem);
	free(kept);
}

/* A copy of d's lock names into c. 0 or -ENOMEM. */
static int clone_addr_names(const struct sw_dump *d, struct sw_dump *c)
{
	bool oom = false;

	if (!d->naddr_names)
		return 0;
	c->addr_names = calloc(d->naddr_names, sizeof(*c->addr_names));
	if (!c->addr_names)
		return -ENOMEM;
	c->naddr_names = d->naddr_names;
	for (size_t i = 0; i < d->naddr_names; i++) {
		c->addr_names[i] = d->addr_names[i];
		c->addr_names[i].name =
			dup_or_null(d->addr_names[i].name, &oom);
	}
	return oom ? -ENOMEM : 0;
}

/*
 * The thread whose frames stand for d's thread i: itself, or in a
 * compacted dump its group's representative; *g gets its group (-1).
 */
static const struct sw_thread *frames_of(const struct sw_dump *d, size_t i,
					 int *g)
{
	const struct sw_thread *t = &d->threads[i];

	*g = t->group >= 0 && (size_t)t->group < d->ngroups &&
			     d->groups[t->group].rep < d->nthreads
		     ? t->group
		     : -1;
	if (!t->nframes && *g >= 0)
		return &d->threads[d->groups[*g].rep];
	return t;
}

int dump_clone_some(const struct sw_dump *d, const bool *keep,
		    struct sw_dump **out)
{
	/* NOLINTNEXTLINE(bugprone-sizeof-expression): pointers */
	struct sw_frame **shared =
		calloc(d->ngroups ? d->ngroups : 1, sizeof(struct sw_frame *));
	size_t *src = calloc(d->nthreads ? d->nthreads : 1, sizeof(*src));
	struct sw_dump *c = NULL;
	bool oom = false;
	size_t k = 0;

	if (!shared || !src || dump_clone_raw(d, &c) < 0)
		goto fail;
	/* The threads left out go first: c then holds only the rest. */
	for (size_t i = 0; i < d->nthreads; i++) {
		struct sw_thread *u = &c->threads[i];

		if (!keep[i]) {
			free(u->ips);
			free(u->error);
			free(u->wait);
			continue;
		}
		src[k] = i;
		c->threads[k++] = *u;
	}
	c->nthreads = k;
	c->symbolized = d->symbolized;
	c->symbols_partial = d->symbols_partial;
	c->jit_map_refused = dup_or_null(d->jit_map_refused, &oom);
	c->glibc_minor = d->glibc_minor;
	c->glibc_static = d->glibc_static;
	if (oom || clone_addr_names(d, c) < 0)
		goto fail;
	/* One copy of each group's frames, shared by its members. */
	for (size_t j = 0; j < k; j++) {
		struct sw_thread *u = &c->threads[j];
		int g;
		const struct sw_thread *from = frames_of(d, src[j], &g);
		bool rep = g >= 0 && from == &d->threads[d->groups[g].rep];

		if (!from->nframes)
			continue;
		if (rep && shared[g]) {
			u->frames = shared[g];
		} else {
			u->frames = copy_frames(&c->mem, from);
			if (!u->frames)
				goto fail;
			if (rep)
				shared[g] = u->frames;
		}
		u->nframes = from->nframes;
	}
	free(shared);
	free(src);
	*out = c;
	return 0;
fail:
	sw_dump_free(c);
	free(shared);
	free(src);
	return -ENOMEM;
}

/* A frames array and what it holds once stripped. */
struct stripped {
	const struct sw_frame *at;
	size_t n;
};

static int cmp_stripped(const void *a, const void *b)
{
	const struct sw_frame *x = ((const struct stripped *)a)->at;
	const struct sw_frame *y = ((const struct stripped *)b)->at;

	return (x > y) - (x < y);
}

/* Strips frames f (n of them) in place; how many are left. */
static size_t strip_frames(struct sw_frame *f, size_t n,
			   const struct sw_dump *d, const bool *hide)
{
	size_t k = 0;

	for (size_t i = 0; i < n; i++) {
		int m = f[i].module;
		bool hidden = m >= 0 && (size_t)m < d->nmodules && hide[m];

		if (hidden && f[i].inlined)
			continue;
		f[k] = f[i];
		if (hidden) {
			f[k].function = NULL;
			f[k].file = NULL;
			f[k].line = 0;
		}
		k++;
	}
	return k;
}

int dump_strip_modules(struct sw_dump *d, const bool *hide)
{
	struct stripped *arr =
		calloc(d->nthreads ? d->nthreads : 1, sizeof(*arr));
	size_t n = 0, k = 0;

	if (!arr)
		return -ENOMEM;
	/* Each frames array once: threads of one group share theirs. */
	for (size_t i = 0; i < d->nthreads; i++)
		if (d->threads[i].frames && d->threads[i].nframes) {
			arr[n].at = d->threads[i].frames;
			arr[n++].n = d->threads[i].nframes;
		}
	qsort(arr, n, sizeof(*arr), cmp_stripped);
	for (size_t i = 0; i < n; i++) {
		if (k && arr[k - 1].at == arr[i].at)
			continue;
		arr[k] = arr[i];
		arr[k].n = strip_frames((struct sw_frame *)arr[i].at, arr[i].n,
					d, hide);
		k++;
	}
	for (size_t i = 0; i < d->nthreads; i++) {
		struct sw_thread *t = &d->threads[i];
		struct stripped key = { t->frames, 0 }, *hit;

		if (!t->frames || !t->nframes)
			continue;
		hit = bsearch(&key, arr, k, sizeof(*arr), cmp_stripped);
		if (hit)
			t->nframes = hit->n;
	}
	free(arr);
	return 0;
}

void sw_dump_free(struct sw_dump *d)
{
	if (!d)
		return;
	for (size_t i = 0; i < d->nthreads; i++) {
		struct sw_thread *t = &d->threads[i];
		dump_thread_release_frames(t);
		free(t->ips);
		free(t->error);
		free(t->wait);
	}
	free(d->threads);
	for (size_t i = 0; i < d->nmodules; i++) {
		free(d->modules[i].path);
		free(d->modules[i].symbols_error);
	}
	free(d->modules);
	for (size_t i = 0; i < d->ngroups; i++)
		free(d->groups[i].tids);
	free(d->groups);
	dump_release_mem(d);
	dump_release_addr_names(d);
	free(d->cmdline);
	free(d->jit_map_refused);
	free(d);
}

bool *dump_modules_used(const struct sw_dump *d)
{
	bool *used = d->nmodules ? calloc(d->nmodules, sizeof(*used)) : NULL;

	for (size_t i = 0; used && i < d->nthreads; i++)
		for (size_t k = 0; k < d->threads[i].nframes; k++) {
			int m = d->threads[i].frames[k].module;

			if (m >= 0 && (size_t)m < d->nmodules)
				used[m] = true;
		}
	return used;
}
