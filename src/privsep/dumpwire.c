/*
 * dumpwire.c - a dump between the service and a parser worker
 * (dumpwire.h).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "dumpwire.h"
#include "stackwatch.h"

#define MAX_STR 4096	     /* paths, command lines, names of functions */
#define MAX_ERR 256	     /* a thread's error, a module's */
#define MAX_FRAMES_ONE 65536 /* frames of one thread, inlined ones too */

static void put_str_or_null(struct wire_out *o, const char *s, size_t max)
{
	wire_put_u32(o, s != NULL);
	if (s)
		wire_put_str(o, s, max);
}

static char *get_str_or_null(struct wire_in *in, size_t max)
{
	return wire_get_u32(in) ? wire_get_strdup(in, max) : NULL;
}

static void put_double(struct wire_out *o, double v)
{
	uint64_t u;

	memcpy(&u, &v, sizeof(u));
	wire_put_u64(o, u);
}

static double get_double(struct wire_in *in)
{
	uint64_t u = wire_get_u64(in);
	double v;

	memcpy(&v, &u, sizeof(v));
	return v;
}

static void put_thread(struct wire_out *o, const struct sw_thread *t)
{
	wire_put_u32(o, (uint32_t)t->tid);
	wire_put_u32(o, (uint32_t)t->ns_tid);
	wire_put_str(o, t->name, SW_COMM_MAX - 1);
	wire_put_u32(o, (uint8_t)t->state);
	wire_put_u64(o, t->utime_ms);
	wire_put_u64(o, t->stime_ms);
	wire_put_u32(o, (uint32_t)t->status);
	put_str_or_null(o, t->error, MAX_ERR);
	wire_put_u32(o, t->flags);
	wire_put_u32(o, (uint32_t)t->read);
	wire_put_u64(o, t->nvcsw);
	wire_put_u64(o, t->nivcsw);
	wire_put_u64(o, t->captured_ns);
	wire_put_u32(o, (uint32_t)t->nips);
	for (size_t i = 0; i < t->nips; i++)
		wire_put_u64(o, t->ips[i]);
	for (size_t i = 0; i < SW_MAX_FRAMES / 64; i++)
		wire_put_u64(o, t->exact[i]);
	wire_put_u32(o, t->wait != NULL);
	if (t->wait) {
		wire_put_u64(o, t->wait->addr);
		wire_put_u32(o, t->wait->op);
		wire_put_u32(o, t->wait->nmem);
		wire_put_u64(o, t->wait->mem_at);
		wire_put_bytes(o, t->wait->mem, SW_WAIT_MEM);
		wire_put_u32(o, t->wait->unsure);
	}
	put_double(o, t->unchanged_s);
	wire_put_u64(o, t->run_ns);
	wire_put_u64(o, t->wait_ns);
}

static void put_module(struct wire_out *o, const struct sw_module *m)
{
	put_str_or_null(o, m->path, MAX_STR);
	wire_put_u64(o, m->bias);
	wire_put_u64(o, m->start);
	wire_put_u64(o, m->end);
	wire_put_u32(o, m->build_id_len);
	wire_put_bytes(o, m->build_id, m->build_id_len);
	put_str_or_null(o, m->symbols_error, MAX_ERR);
}

void dumpwire_put(struct wire_out *o, const struct sw_dump *d)
{
	wire_put_u32(o, (uint32_t)d->pid);
	wire_put_str(o, d->comm, SW_COMM_MAX - 1);
	put_str_or_null(o, d->cmdline, MAX_STR);
	wire_put_u64(o, (uint64_t)d->collected_at.tv_sec);
	wire_put_u64(o, (uint64_t)d->collected_at.tv_nsec);
	wire_put_u64(o, d->elapsed_us);
	wire_put_u64(o, d->skew_us);
	wire_put_u32(o, (uint32_t)d->timeout_ms);
	wire_put_u32(o, (uint32_t)d->method);
	wire_put_u64(o, d->paused_us_max);
	wire_put_u64(o, d->paused_us_total);
	wire_put_u32(o, d->symbolized);
	wire_put_u32(o, d->symbols_partial);
	put_str_or_null(o, d->jit_map_refused, MAX_ERR);
	wire_put_u32(o, d->glibc_minor);
	wire_put_u32(o, d->glibc_static);
	wire_put_u32(o, (uint32_t)d->core_signal.number);
	wire_put_u32(o, (uint32_t)d->core_signal.code);
	wire_put_u32(o, d->core_signal.has_addr);
	wire_put_u64(o, d->core_signal.addr);
	wire_put_u32(o, (uint32_t)d->core_signal.tid);
	wire_put_u64(o, d->core_cut_size);
	wire_put_u64(o, d->core_cut_need);
	wire_put_u64(o, d->hidden_threads);
	wire_put_u32(o, (uint32_t)d->nthreads);
	for (size_t i = 0; i < d->nthreads; i++)
		put_thread(o, &d->threads[i]);
	wire_put_u32(o, (uint32_t)d->nmodules);
	for (size_t i = 0; i < d->nmodules; i++)
		put_module(o, &d->modules[i]);
}

static int get_thread(struct wire_in *in, struct sw_thread *t)
{
	uint32_t state, status, read, nips;

	t->group = -1;
	t->tid = (pid_t)wire_get_u32(in);
	t->ns_tid = (pid_t)wire_get_u32(in);
	wire_get_str(in, t->name, SW_COMM_MAX - 1);
	state = wire_get_u32(in);
	t->utime_ms = wire_get_u64(in);
	t->stime_ms = wire_get_u64(in);
	status = wire_get_u32(in);
	t->error = get_str_or_null(in, MAX_ERR);
	t->flags = wire_get_u32(in);
	read = wire_get_u32(in);
	t->nvcsw = wire_get_u64(in);
	t->nivcsw = wire_get_u64(in);
	t->captured_ns = wire_get_u64(in);
	nips = wire_get_u32(in);
	if (in->err)
		return in->err;
	/* 0: not known (a thread skipped before it was read). */
	if (t->tid <= 0 || (state != 0 && (state < 0x20 || state > 0x7e)) ||
	    status >= SW_ST_COUNT || read >= SW_READ_COUNT ||
	    nips > SW_MAX_FRAMES_HARD || nips > in->left / 8)
		return SW_EFORMAT;
	t->state = (char)state;
	t->status = (enum sw_status)status;
	t->read = (enum sw_read)read;
	t->ips = malloc((nips ? nips : 1) * sizeof(uint64_t));
	if (!t->ips)
		return -ENOMEM;
	t->nips = nips;
	for (uint32_t i = 0; i < nips; i++)
		t->ips[i] = wire_get_u64(in);
	for (size_t i = 0; i < SW_MAX_FRAMES / 64; i++)
		t->exact[i] = wire_get_u64(in);
	if (wire_get_u32(in)) {
		const void *mem;

		t->wait = calloc(1, sizeof(*t->wait));
		if (!t->wait)
			return -ENOMEM;
		t->wait->addr = wire_get_u64(in);
		t->wait->op = wire_get_u32(in);
		t->wait->nmem = wire_get_u32(in);
		t->wait->mem_at = wire_get_u64(in);
		mem = wire_get_bytes(in, SW_WAIT_MEM);
		if (mem)
			memcpy(t->wait->mem, mem, SW_WAIT_MEM);
		t->wait->unsure = wire_get_u32(in) != 0;
		if (t->wait->nmem > SW_WAIT_MEM)
			return SW_EFORMAT;
	}
	t->unchanged_s = get_double(in);
	t->run_ns = wire_get_u64(in);
	t->wait_ns = wire_get_u64(in);
	return in->err;
}

static int get_module(struct wire_in *in, struct sw_module *m)
{
	const void *id;

	m->path = get_str_or_null(in, MAX_STR);
	m->bias = wire_get_u64(in);
	m->start = wire_get_u64(in);
	m->end = wire_get_u64(in);
	m->build_id_len = wire_get_u32(in);
	if (in->err)
		return in->err;
	if (!m->path || m->build_id_len > SW_BUILD_ID_MAX)
		return SW_EFORMAT;
	id = wire_get_bytes(in, m->build_id_len);
	if (!id)
		return SW_EFORMAT;
	memcpy(m->build_id, id, m->build_id_len);
	m->symbols_error = get_str_or_null(in, MAX_ERR);
	return in->err;
}

int dumpwire_get(struct wire_in *in, struct sw_dump **out)
{
	struct sw_dump *d = dump_new();
	uint32_t n, method;
	int rc = -ENOMEM;

	*out = NULL;
	if (!d)
		return -ENOMEM;
	d->pid = (pid_t)wire_get_u32(in);
	wire_get_str(in, d->comm, SW_COMM_MAX - 1);
	d->cmdline = get_str_or_null(in, MAX_STR);
	d->collected_at.tv_sec = (time_t)wire_get_u64(in);
	d->collected_at.tv_nsec = (long)wire_get_u64(in);
	d->elapsed_us = wire_get_u64(in);
	d->skew_us = wire_get_u64(in);
	d->timeout_ms = (int)wire_get_u32(in);
	method = wire_get_u32(in);
	d->paused_us_max = wire_get_u64(in);
	d->paused_us_total = wire_get_u64(in);
	d->symbolized = wire_get_u32(in) != 0;
	d->symbols_partial = wire_get_u32(in) != 0;
	d->jit_map_refused = get_str_or_null(in, MAX_ERR);
	d->glibc_minor = wire_get_u32(in);
	d->glibc_static = wire_get_u32(in) != 0;
	d->core_signal.number = (int)wire_get_u32(in);
	d->core_signal.code = (int)wire_get_u32(in);
	d->core_signal.has_addr = wire_get_u32(in) != 0;
	d->core_signal.addr = wire_get_u64(in);
	d->core_signal.tid = (pid_t)wire_get_u32(in);
	d->core_cut_size = wire_get_u64(in);
	d->core_cut_need = wire_get_u64(in);
	d->hidden_threads = wire_get_u64(in);
	n = wire_get_u32(in);
	if (in->err || method > SW_METHOD_CORE || n > SW_MAX_THREADS ||
	    d->collected_at.tv_nsec >= 1000000000L)
		goto bad;
	d->method = (enum sw_method)method;
	d->threads = calloc(n ? n : 1, sizeof(*d->threads));
	if (!d->threads)
		goto fail;
	for (uint32_t i = 0; i < n; i++) {
		d->nthreads++;
		rc = get_thread(in, &d->threads[i]);
		if (rc)
			goto fail;
	}
	n = wire_get_u32(in);
	if (in->err || n > SW_MAX_MODULES)
		goto bad;
	d->modules = calloc(n ? n : 1, sizeof(*d->modules));
	if (!d->modules) {
		rc = -ENOMEM;
		goto fail;
	}
	for (uint32_t i = 0; i < n; i++) {
		d->nmodules++;
		rc = get_module(in, &d->modules[i]);
		if (rc)
			goto fail;
	}
	if (in->err)
		goto bad;
	*out = d;
	return 0;
bad:
	rc = SW_EFORMAT;
fail:
	sw_dump_free(d);
	return rc == -ENOMEM ? rc : SW_EFORMAT;
}

/* ------------------------------------------------------------ symbols */

static void put_frames(struct wire_out *o, const struct sw_frame *f, size_t n)
{
	wire_put_u32(o, (uint32_t)n);
	for (size_t i = 0; i < n; i++) {
		wire_put_u64(o, f[i].ip);
		wire_put_u32(o, (uint32_t)f[i].module);
		wire_put_u64(o, f[i].offset);
		put_str_or_null(o, f[i].function, MAX_STR);
		put_str_or_null(o, f[i].file, MAX_STR);
		wire_put_u32(o, (uint32_t)f[i].line);
		wire_put_u32(o, f[i].inlined);
	}
}

/* A thread's frames array and its index. */
struct shared {
	const struct sw_frame *frames;
	size_t nframes;
	size_t i;
};

static int cmp_shared(const void *a, const void *b)
{
	const struct shared *x = a, *y = b;

	if (x->frames != y->frames)
		return x->frames < y->frames ? -1 : 1;
	if (x->nframes != y->nframes)
		return x->nframes < y->nframes ? -1 : 1;
	return (x->i > y->i) - (x->i < y->i);
}

/*
 * For each thread of d, the first thread with the very same frames (the
 * symbolizer shares one array among threads that stopped at the same
 * addresses): malloc'd, NULL on no memory (then each is its own).
 */
static size_t *first_of_frames(const struct sw_dump *d)
{
	struct shared *v = calloc(d->nthreads ? d->nthreads : 1, sizeof(*v));
	size_t *firsts =
		malloc((d->nthreads ? d->nthreads : 1) * sizeof(*firsts));

	if (!v || !firsts) {
		free(v);
		free(firsts);
		return NULL;
	}
	for (size_t i = 0; i < d->nthreads; i++) {
		v[i].frames = d->threads[i].frames;
		v[i].nframes = d->threads[i].nframes;
		v[i].i = i;
	}
	qsort(v, d->nthreads, sizeof(*v), cmp_shared);
	for (size_t k = 0; k < d->nthreads; k++) {
		bool same = k && v[k].frames &&
			    v[k].frames == v[k - 1].frames &&
			    v[k].nframes == v[k - 1].nframes;

		firsts[v[k].i] = same ? firsts[v[k - 1].i] : v[k].i;
	}
	free(v);
	return firsts;
}

void dumpwire_put_symbols(struct wire_out *o, const struct sw_dump *d)
{
	size_t *firsts;

	wire_put_u32(o, d->symbolized);
	wire_put_u32(o, d->symbols_partial);
	wire_put_u32(o, d->glibc_minor);
	wire_put_u32(o, d->glibc_static);
	wire_put_u32(o, (uint32_t)d->nmodules);
	for (size_t i = 0; i < d->nmodules; i++)
		put_str_or_null(o, d->modules[i].symbols_error, MAX_ERR);
	wire_put_u32(o, (uint32_t)d->naddr_names);
	for (size_t i = 0; i < d->naddr_names; i++) {
		wire_put_u64(o, d->addr_names[i].start);
		wire_put_u64(o, d->addr_names[i].size);
		wire_put_str(o, d->addr_names[i].name, MAX_STR);
	}
	/* A thread whose frames are those of an earlier one says which. */
	firsts = first_of_frames(d);
	wire_put_u32(o, (uint32_t)d->nthreads);
	for (size_t i = 0; i < d->nthreads; i++) {
		const struct sw_thread *t = &d->threads[i];
		size_t same = firsts ? firsts[i] : i;

		wire_put_u32(o, (uint32_t)same);
		if (same == i)
			put_frames(o, t->frames, t->nframes);
	}
	free(firsts);
}

/* A copy of a string from in, in d's memory; NULL for none. */
static int get_dump_str(struct wire_in *in, struct sw_dump *d, const char **s)
{
	char *tmp = get_str_or_null(in, MAX_STR);

	*s = NULL;
	if (in->err)
		return in->err;
	if (!tmp)
		return 0;
	*s = dump_strdup(d, tmp);
	free(tmp);
	return *s ? 0 : -ENOMEM;
}

static int get_frames(struct wire_in *in, struct sw_dump *d,
		      struct sw_thread *t)
{
	uint32_t n = wire_get_u32(in);
	struct sw_frame *f;
	int rc;

	if (in->err || n > MAX_FRAMES_ONE || n > in->left / 24)
		return SW_EFORMAT;
	if (!n)
		return 0;
	f = dump_alloc(d, n * sizeof(*f));
	if (!f)
		return -ENOMEM;
	for (uint32_t i = 0; i < n; i++) {
		int32_t module;

		f[i].ip = wire_get_u64(in);
		module = (int32_t)wire_get_u32(in);
		f[i].offset = wire_get_u64(in);
		rc = get_dump_str(in, d, &f[i].function);
		if (rc == 0)
			rc = get_dump_str(in, d, &f[i].file);
		if (rc)
			return rc;
		f[i].line = (int)wire_get_u32(in);
		f[i].inlined = wire_get_u32(in) != 0;
		if (in->err || module < -1 || module >= (int32_t)d->nmodules ||
		    f[i].line < 0)
			return SW_EFORMAT;
		f[i].module = module;
	}
	t->frames = f;
	t->nframes = n;
	return 0;
}

static int take_symbols(struct wire_in *in, struct sw_dump *d)
{
	uint32_t n;
	int rc;

	d->symbolized = wire_get_u32(in) != 0;
	d->symbols_partial = wire_get_u32(in) != 0;
	d->glibc_minor = wire_get_u32(in);
	d->glibc_static = wire_get_u32(in) != 0;
	n = wire_get_u32(in);
	if (in->err || n != d->nmodules)
		return SW_EFORMAT;
	for (size_t i = 0; i < n; i++) {
		char *e = get_str_or_null(in, MAX_ERR);

		if (in->err)
			return in->err;
		/* One the service set itself stays. */
		if (!e)
			continue;
		free(d->modules[i].symbols_error);
		d->modules[i].symbols_error = e;
	}
	n = wire_get_u32(in);
	if (in->err || n > SW_ADDR_NAMES_MAX)
		return SW_EFORMAT;
	dump_release_addr_names(d);
	d->addr_names = calloc(n ? n : 1, sizeof(*d->addr_names));
	if (!d->addr_names)
		return -ENOMEM;
	for (uint32_t i = 0; i < n; i++) {
		struct sw_addr_name *a = &d->addr_names[i];

		a->start = wire_get_u64(in);
		a->size = wire_get_u64(in);
		a->name = wire_get_strdup(in, MAX_STR);
		if (in->err)
			return in->err;
		d->naddr_names++;
		if (i && a->start < d->addr_names[i - 1].start +
					    d->addr_names[i - 1].size)
			return SW_EFORMAT; /* sorted, none overlapping */
	}
	n = wire_get_u32(in);
	if (in->err || n != d->nthreads)
		return SW_EFORMAT;
	for (size_t i = 0; i < n; i++) {
		uint32_t same = wire_get_u32(in);

		if (in->err || same > i)
			return SW_EFORMAT;
		if (same < i) {
			d->threads[i].frames = d->threads[same].frames;
			d->threads[i].nframes = d->threads[same].nframes;
			continue;
		}
		rc = get_frames(in, d, &d->threads[i]);
		if (rc)
			return rc;
	}
	return in->err ? in->err : (in->left ? SW_EFORMAT : 0);
}

int dumpwire_take_symbols(struct wire_in *in, struct sw_dump *d)
{
	int rc;

	for (size_t i = 0; i < d->nthreads; i++)
		dump_thread_release_frames(&d->threads[i]);
	rc = take_symbols(in, d);
	if (rc) {
		for (size_t i = 0; i < d->nthreads; i++)
			dump_thread_release_frames(&d->threads[i]);
		dump_release_addr_names(d);
		d->symbolized = false;
	}
	return rc == -ENOMEM ? rc : (rc ? SW_EFORMAT : 0);
}
