/*
 * wire.c - encoders and defensive decoders of the agent protocol (wire.h).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "wire.h"

void wire_out_init(struct wire_out *o)
{
	memset(o, 0, sizeof(*o));
}

void wire_out_release(struct wire_out *o)
{
	free(o->data);
	wire_out_init(o);
}

static void put(struct wire_out *o, const void *p, size_t n)
{
	if (o->err || n == 0)
		return;
	if (n > WIRE_HDR_SIZE + WIRE_MAX_PAYLOAD - o->len) {
		o->err = SW_ETOOBIG;
		return;
	}
	if (o->len + n > o->cap) {
		size_t cap = o->cap ? o->cap : 4096;
		uint8_t *bigger;

		while (cap < o->len + n)
			cap *= 2;
		bigger = realloc(o->data, cap);
		if (!bigger) {
			o->err = -ENOMEM;
			return;
		}
		o->data = bigger;
		o->cap = cap;
	}
	memcpy(o->data + o->len, p, n);
	o->len += n;
}

static void le32(uint8_t *b, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		b[i] = (uint8_t)(v >> (8 * i));
}

void wire_put_u32(struct wire_out *o, uint32_t v)
{
	uint8_t b[4];

	le32(b, v);
	put(o, b, 4);
}

void wire_put_u64(struct wire_out *o, uint64_t v)
{
	wire_put_u32(o, (uint32_t)v);
	wire_put_u32(o, (uint32_t)(v >> 32));
}

void wire_put_bytes(struct wire_out *o, const void *p, size_t n)
{
	put(o, p, n);
}

void wire_put_str(struct wire_out *o, const char *s, size_t max)
{
	size_t n = s ? strnlen(s, max) : 0;

	wire_put_u32(o, (uint32_t)n);
	put(o, s, n);
}

void wire_begin(struct wire_out *o, enum wire_type type, uint32_t seq)
{
	uint8_t h[WIRE_HDR_SIZE];

	o->len = 0;
	le32(h, WIRE_MAGIC);
	h[4] = WIRE_VERSION & 0xff;
	h[5] = WIRE_VERSION >> 8;
	h[6] = (uint8_t)type;
	h[7] = (uint8_t)((unsigned)type >> 8);
	le32(h + 8, 0);
	le32(h + 12, seq);
	put(o, h, sizeof(h));
}

int wire_finish(struct wire_out *o)
{
	if (o->err)
		return o->err;
	le32(o->data + 8, (uint32_t)(o->len - WIRE_HDR_SIZE));
	return 0;
}

static uint32_t get_le32(const uint8_t *b)
{
	return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 |
	       (uint32_t)b[3] << 24;
}

int wire_parse_hdr(const uint8_t buf[WIRE_HDR_SIZE], struct wire_hdr *h)
{
	h->magic = get_le32(buf);
	h->version = (uint16_t)(buf[4] | buf[5] << 8);
	h->type = (uint16_t)(buf[6] | buf[7] << 8);
	h->length = get_le32(buf + 8);
	h->seq = get_le32(buf + 12);
	if (h->magic != WIRE_MAGIC || h->version != WIRE_VERSION ||
	    h->length > WIRE_MAX_PAYLOAD)
		return SW_EFORMAT;
	if (h->type < WIRE_HELLO || h->type > WIRE_SIGNAL)
		return SW_EFORMAT;
	return 0;
}

void wire_in_init(struct wire_in *in, const void *p, size_t len)
{
	in->p = p;
	in->left = len;
	in->err = 0;
}

static const uint8_t *take(struct wire_in *in, size_t n)
{
	const uint8_t *p = in->p;

	if (in->err || n > in->left) {
		in->err = SW_EFORMAT;
		return NULL;
	}
	in->p += n;
	in->left -= n;
	return p;
}

const void *wire_get_bytes(struct wire_in *in, size_t n)
{
	return take(in, n);
}

uint32_t wire_get_u32(struct wire_in *in)
{
	const uint8_t *p = take(in, 4);

	return p ? get_le32(p) : 0;
}

uint64_t wire_get_u64(struct wire_in *in)
{
	uint64_t lo = wire_get_u32(in);

	return lo | (uint64_t)wire_get_u32(in) << 32;
}

void wire_get_str(struct wire_in *in, char *dst, size_t max)
{
	uint32_t n = wire_get_u32(in);
	const uint8_t *p;

	dst[0] = '\0';
	if (n > max) {
		in->err = SW_EFORMAT;
		return;
	}
	p = take(in, n);
	if (!p)
		return;
	memcpy(dst, p, n);
	dst[n] = '\0';
	/* An embedded NUL would let two views of one string disagree. */
	if (strlen(dst) != n)
		in->err = SW_EFORMAT;
}

char *wire_get_strdup(struct wire_in *in, size_t max)
{
	uint32_t n = wire_get_u32(in);
	const uint8_t *p;
	char *s;

	if (n > max) {
		in->err = SW_EFORMAT;
		return NULL;
	}
	p = take(in, n);
	if (!p)
		return NULL;
	if (memchr(p, '\0', n)) {
		in->err = SW_EFORMAT;
		return NULL;
	}
	s = malloc((size_t)n + 1);
	if (!s) {
		in->err = -ENOMEM;
		return NULL;
	}
	memcpy(s, p, n);
	s[n] = '\0';
	return s;
}

int wire_encode_hello(struct wire_out *o, uint32_t seq,
		      const struct wire_hello *h)
{
	wire_begin(o, WIRE_HELLO, seq);
	wire_put_u32(o, (uint32_t)h->pid);
	wire_put_u32(o, (uint32_t)h->signo);
	wire_put_str(o, h->comm, SW_COMM_MAX - 1);
	wire_put_str(o, h->cmdline, WIRE_MAX_STRING);
	if (h->features)
		wire_put_u32(o, h->features);
	return wire_finish(o);
}

int wire_decode_hello(const void *p, size_t len, struct wire_hello *h)
{
	struct wire_in in;

	wire_in_init(&in, p, len);
	h->pid = (int32_t)wire_get_u32(&in);
	h->signo = (int32_t)wire_get_u32(&in);
	wire_get_str(&in, h->comm, SW_COMM_MAX - 1);
	wire_get_str(&in, h->cmdline, WIRE_MAX_STRING);
	/* The features are optional: an agent of the first form has none. */
	h->features = in.left ? wire_get_u32(&in) : 0;
	if (in.err || in.left)
		return SW_EFORMAT;
	return 0;
}

/* Whether tids[0..n) is a skip set: strictly ascending, each > 0. */
static bool skip_set_valid(const pid_t *tids, size_t n)
{
	if (n > SW_MAX_THREADS || (n && !tids))
		return false;
	for (size_t i = 0; i < n; i++)
		if (tids[i] <= 0 || (i && tids[i] <= tids[i - 1]))
			return false;
	return true;
}

int wire_encode_dump_req(struct wire_out *o, uint32_t seq,
			 const struct wire_dump_req *r)
{
	if (!skip_set_valid(r->skip, r->nskip))
		return -EINVAL;
	wire_begin(o, WIRE_DUMP_REQ, seq);
	wire_put_u32(o, r->timeout_ms);
	wire_put_u32(o, r->window);
	/* No skip set: the first form's bytes, for any agent. */
	if (r->nskip) {
		wire_put_u32(o, r->nskip);
		for (uint32_t i = 0; i < r->nskip; i++)
			wire_put_u32(o, (uint32_t)r->skip[i]);
	}
	return wire_finish(o);
}

/* The skip set that may end a DUMP_REQ: count, then ascending tids. */
static int get_skip(struct wire_in *in, struct wire_dump_req *r)
{
	uint32_t n = wire_get_u32(in);

	if (in->err || n == 0 || n > SW_MAX_THREADS || n > in->left / 4)
		return SW_EFORMAT;
	r->skip = malloc(n * sizeof(*r->skip));
	if (!r->skip)
		return -ENOMEM;
	r->nskip = n;
	for (uint32_t i = 0; i < n; i++)
		r->skip[i] = (pid_t)wire_get_u32(in);
	if (in->err || !skip_set_valid(r->skip, r->nskip))
		return SW_EFORMAT;
	return 0;
}

int wire_decode_dump_req(const void *p, size_t len, struct wire_dump_req *r)
{
	struct wire_in in;
	int rc = 0;

	wire_in_init(&in, p, len);
	r->nskip = 0;
	r->skip = NULL;
	r->timeout_ms = wire_get_u32(&in);
	r->window = wire_get_u32(&in);
	if (!in.err && in.left)
		rc = get_skip(&in, r);
	if (rc == 0 &&
	    (in.err || in.left || r->timeout_ms < 1 || r->timeout_ms > 600000 ||
	     r->window < 1 || r->window > 64))
		rc = SW_EFORMAT;
	if (rc < 0)
		wire_dump_req_release(r);
	return rc;
}

void wire_dump_req_release(struct wire_dump_req *r)
{
	if (!r)
		return;
	free(r->skip);
	r->skip = NULL;
	r->nskip = 0;
}

int wire_encode_signal(struct wire_out *o, uint32_t seq, int signo)
{
	wire_begin(o, WIRE_SIGNAL, seq);
	wire_put_u32(o, (uint32_t)signo);
	return wire_finish(o);
}

int wire_decode_signal(const void *p, size_t len, int *signo)
{
	struct wire_in in;
	uint32_t v;

	wire_in_init(&in, p, len);
	v = wire_get_u32(&in);
	if (in.err || in.left || v > 64)
		return SW_EFORMAT;
	*signo = (int)v;
	return 0;
}

static void put_thread(struct wire_out *o, const struct sw_thread *t)
{
	wire_put_u32(o, (uint32_t)t->tid);
	wire_put_str(o, t->name, SW_COMM_MAX - 1);
	wire_put_u32(o, (uint32_t)(unsigned char)t->state);
	wire_put_u32(o, (uint32_t)t->status);
	wire_put_str(o, t->error, WIRE_MAX_ERROR);
	wire_put_u32(o, t->flags);
	wire_put_u64(o, t->utime_ms);
	wire_put_u64(o, t->stime_ms);
	wire_put_u64(o, t->captured_ns);
	wire_put_u32(o, (uint32_t)t->nips);
	for (size_t i = 0; i < t->nips; i++)
		wire_put_u64(o, t->ips[i]);
}

static void put_module(struct wire_out *o, const struct sw_module *m)
{
	wire_put_str(o, m->path, WIRE_MAX_STRING);
	wire_put_u64(o, m->bias);
	wire_put_u64(o, m->start);
	wire_put_u64(o, m->end);
	wire_put_u32(o, m->build_id_len);
	wire_put_bytes(o, m->build_id, m->build_id_len);
}

/*
 * The futex waits, after the modules, only when some thread has one (a
 * dump without them ends where version 1 always did): u32 count, then
 * each: u32 thread index, u64 word address, u32 operation, u64 address
 * of the copy, u32 bytes copied, the bytes.
 */
static void put_waits(struct wire_out *o, const struct sw_dump *d)
{
	uint32_t n = 0;

	for (size_t i = 0; i < d->nthreads; i++)
		n += d->threads[i].wait != NULL;
	if (!n)
		return;
	wire_put_u32(o, n);
	for (size_t i = 0; i < d->nthreads; i++) {
		const struct sw_wait *w = d->threads[i].wait;
		uint32_t len;

		if (!w)
			continue;
		len = w->nmem <= SW_WAIT_MEM ? w->nmem : SW_WAIT_MEM;
		wire_put_u32(o, (uint32_t)i);
		wire_put_u64(o, w->addr);
		wire_put_u32(o, w->op);
		wire_put_u64(o, w->mem_at);
		wire_put_u32(o, len);
		wire_put_bytes(o, w->mem, len);
	}
}

int wire_encode_dump_resp(struct wire_out *o, uint32_t seq, int status,
			  const struct sw_dump *d)
{
	wire_begin(o, WIRE_DUMP_RESP, seq);
	wire_put_u32(o, (uint32_t)status);
	if (status == 0 && d) {
		wire_put_u32(o, (uint32_t)d->pid);
		wire_put_str(o, d->comm, SW_COMM_MAX - 1);
		wire_put_str(o, d->cmdline, WIRE_MAX_STRING);
		wire_put_u64(o, (uint64_t)d->collected_at.tv_sec);
		wire_put_u32(o, (uint32_t)d->collected_at.tv_nsec);
		wire_put_u64(o, d->elapsed_us);
		wire_put_u64(o, d->skew_us);
		wire_put_u32(o, (uint32_t)d->timeout_ms);
		wire_put_u32(o, (uint32_t)d->nthreads);
		for (size_t i = 0; i < d->nthreads; i++)
			put_thread(o, &d->threads[i]);
		wire_put_u32(o, (uint32_t)d->nmodules);
		for (size_t i = 0; i < d->nmodules; i++)
			put_module(o, &d->modules[i]);
		put_waits(o, d);
	}
	return wire_finish(o);
}

static int get_thread(struct wire_in *in, struct sw_thread *t)
{
	uint32_t state, status, nips;

	t->group = -1;
	t->unchanged_s = -1;
	t->tid = (pid_t)wire_get_u32(in);
	wire_get_str(in, t->name, SW_COMM_MAX - 1);
	state = wire_get_u32(in);
	status = wire_get_u32(in);
	t->error = wire_get_strdup(in, WIRE_MAX_ERROR);
	t->flags = wire_get_u32(in) &
		   (SW_TF_FIRST_EXACT | SW_TF_IN_LOADER | SW_TF_TRUNCATED |
		    SW_TF_LOW_STACK | SW_TF_CUT | SW_TF_NO_ROOM | SW_TF_BUSY |
		    SW_TF_DUMPER);
	t->utime_ms = wire_get_u64(in);
	t->stime_ms = wire_get_u64(in);
	t->captured_ns = wire_get_u64(in);
	nips = wire_get_u32(in);
	if (in->err)
		return in->err;
	if (t->tid <= 0 || state < 0x20 || state > 0x7e ||
	    status >= SW_ST_COUNT || nips > SW_MAX_FRAMES ||
	    (status == SW_ST_OK) != (nips > 0))
		return SW_EFORMAT;
	t->state = (char)state;
	t->status = (enum sw_status)status;
	/* An agent's threads answered its handler (or are the dumper). */
	t->read = status == SW_ST_OK ? SW_READ_SIGNAL : SW_READ_NONE;
	if (nips > in->left / 8)
		return SW_EFORMAT;
	t->ips = malloc((nips ? nips : 1) * sizeof(uint64_t));
	if (!t->ips)
		return -ENOMEM;
	t->nips = nips;
	for (uint32_t i = 0; i < nips; i++)
		t->ips[i] = wire_get_u64(in);
	return in->err;
}

static int get_module(struct wire_in *in, struct sw_module *m)
{
	const uint8_t *id;

	m->path = wire_get_strdup(in, WIRE_MAX_STRING);
	m->bias = wire_get_u64(in);
	m->start = wire_get_u64(in);
	m->end = wire_get_u64(in);
	m->build_id_len = wire_get_u32(in);
	if (in->err)
		return in->err;
	if (m->build_id_len > SW_BUILD_ID_MAX || m->start >= m->end ||
	    m->path[0] == '\0')
		return SW_EFORMAT;
	id = take(in, m->build_id_len);
	if (!id)
		return SW_EFORMAT;
	memcpy(m->build_id, id, m->build_id_len);
	return 0;
}

/* Reads the count of an array of elements at least min_size bytes each. */
static size_t get_count(struct wire_in *in, size_t max, size_t min_size)
{
	uint32_t n = wire_get_u32(in);

	if (in->err || n > max || n > in->left / min_size) {
		in->err = SW_EFORMAT;
		return 0;
	}
	return n;
}

/*
 * The waits (put_waits): each names an answered thread once, its copy
 * holds at most SW_WAIT_MEM bytes and covers the word.
 */
static int get_waits(struct wire_in *in, struct sw_dump *d)
{
	/* A wait is at least 28 bytes on the wire. */
	size_t n = get_count(in, d->nthreads, 28);

	if (in->err || n == 0)
		return SW_EFORMAT;
	for (size_t k = 0; k < n; k++) {
		uint32_t i = wire_get_u32(in);
		struct sw_wait w = { 0 };
		const uint8_t *mem;
		struct sw_thread *t;

		w.addr = wire_get_u64(in);
		w.op = wire_get_u32(in);
		w.mem_at = wire_get_u64(in);
		w.nmem = wire_get_u32(in);
		if (in->err || i >= d->nthreads || w.nmem > SW_WAIT_MEM)
			return SW_EFORMAT;
		t = &d->threads[i];
		if (t->wait || t->status != SW_ST_OK ||
		    (w.nmem && (w.nmem < 4 || w.addr < w.mem_at ||
				w.addr - w.mem_at > w.nmem - 4)))
			return SW_EFORMAT;
		mem = take(in, w.nmem);
		if (!mem)
			return SW_EFORMAT;
		memcpy(w.mem, mem, w.nmem);
		t->wait = malloc(sizeof(*t->wait));
		if (!t->wait)
			return -ENOMEM;
		*t->wait = w;
	}
	return 0;
}

static int get_dump(struct wire_in *in, struct sw_dump *d)
{
	int rc;

	d->pid = (pid_t)wire_get_u32(in);
	wire_get_str(in, d->comm, SW_COMM_MAX - 1);
	d->cmdline = wire_get_strdup(in, WIRE_MAX_STRING);
	d->collected_at.tv_sec = (time_t)wire_get_u64(in);
	d->collected_at.tv_nsec = (long)wire_get_u32(in);
	d->elapsed_us = wire_get_u64(in);
	d->skew_us = wire_get_u64(in);
	d->timeout_ms = (int)wire_get_u32(in);
	if (in->err)
		return in->err;
	if (d->collected_at.tv_nsec >= 1000000000L ||
	    d->collected_at.tv_sec < 0 || d->timeout_ms < 1 ||
	    d->timeout_ms > 600000)
		return SW_EFORMAT;
	/* A thread is at least 52 bytes on the wire, a module 33. */
	d->nthreads = get_count(in, SW_MAX_THREADS, 52);
	if (in->err)
		return in->err;
	d->threads = calloc(d->nthreads ? d->nthreads : 1, sizeof(*d->threads));
	if (!d->threads) {
		d->nthreads = 0;
		return -ENOMEM;
	}
	for (size_t i = 0; i < d->nthreads; i++) {
		rc = get_thread(in, &d->threads[i]);
		if (rc < 0)
			return rc;
	}
	d->nmodules = get_count(in, SW_MAX_MODULES, 33);
	if (in->err)
		return in->err;
	d->modules = calloc(d->nmodules ? d->nmodules : 1, sizeof(*d->modules));
	if (!d->modules) {
		d->nmodules = 0;
		return -ENOMEM;
	}
	for (size_t i = 0; i < d->nmodules; i++) {
		rc = get_module(in, &d->modules[i]);
		if (rc < 0)
			return rc;
	}
	if (in->left) {
		rc = get_waits(in, d);
		if (rc < 0)
			return rc;
	}
	return in->left ? SW_EFORMAT : 0;
}

int wire_decode_dump_resp(const void *p, size_t len, int *status,
			  struct sw_dump **out)
{
	struct wire_in in;
	struct sw_dump *d;
	int rc;

	*out = NULL;
	wire_in_init(&in, p, len);
	*status = (int)wire_get_u32(&in);
	if (in.err)
		return SW_EFORMAT;
	if (*status != 0)
		return (*status < 0 && !in.left) ? 0 : SW_EFORMAT;
	d = dump_new();
	if (!d)
		return -ENOMEM;
	rc = get_dump(&in, d);
	if (rc < 0) {
		sw_dump_free(d);
		return rc == -ENOMEM ? rc : SW_EFORMAT;
	}
	*out = d;
	return 0;
}
