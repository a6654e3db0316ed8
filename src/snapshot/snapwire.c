/*
 * snapwire.c - a snapshot as bytes between the daemon's helper and the
 * daemon (snapshot.h): a header, then per thread a record and its stack.
 * A thread's further stack regions (struct snap_region) follow its stack,
 * each a wire_region and its bytes.
 * Both ends are the same build on the same host, so records are the
 * structs below in host order; the reader still checks every count and
 * length, because a broken helper must not break the daemon.
 */
#include "snapshot.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "model/clock.h"
#include "stackwatch.h"

#define SNAP_MAGIC 0x4e535753u /* "SWSN" */
#define SNAP_VERSION 3u

struct wire_hdr {
	uint32_t magic, version;
	int32_t err;
	uint32_t nthreads;
	int32_t pid, tracer;
	uint32_t stopped;
	char comm[SW_COMM_MAX];
	uint64_t started_ns, elapsed_ns, paused_max_ns, paused_total_ns;
};

struct wire_thread {
	int32_t tid;
	uint32_t status;
	int32_t err;
	uint32_t stack_len;
	char name[SW_COMM_MAX];
	char state;
	uint8_t method;
	uint8_t reused;
	uint8_t cut;
	uint32_t paused_ns;
	uint64_t utime_ms, stime_ms, captured_ns, sp;
	uint64_t regs[SNAP_NREGS];
	uint32_t waits, nmore;
	uint64_t nvcsw, nivcsw;
	struct sw_wait wait;
};

struct wire_region {
	uint64_t at;
	uint32_t len, pad;
};

static int write_all(int fd, const void *p, size_t n)
{
	const char *c = p;

	while (n) {
		ssize_t w = write(fd, c, n);

		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		c += w;
		n -= (size_t)w;
	}
	return 0;
}

/*
 * The records go out through a buffer and come in through one: a
 * thousand threads are a thousand small records, and one write and one
 * read (with its poll) each would cost more than the rest of a warm dump.
 */
#define WIRE_BUF (64u * 1024)

struct wbuf {
	int fd, err;
	size_t n;
	char b[WIRE_BUF];
};

static void wbuf_flush(struct wbuf *w)
{
	if (!w->err && w->n)
		w->err = write_all(w->fd, w->b, w->n);
	w->n = 0;
}

static void wbuf_put(struct wbuf *w, const void *p, size_t n)
{
	if (w->n + n > sizeof(w->b))
		wbuf_flush(w);
	if (n > sizeof(w->b)) {
		if (!w->err)
			w->err = write_all(w->fd, p, n);
		return;
	}
	memcpy(w->b + w->n, p, n);
	w->n += n;
}

int snap_write(int fd, int err, const struct snap *s)
{
	struct wire_hdr h;
	struct wbuf *b;
	int r;

	b = malloc(sizeof(*b));
	if (!b)
		return -ENOMEM;
	b->fd = fd;
	b->err = 0;
	b->n = 0;
	memset(&h, 0, sizeof(h));
	h.magic = SNAP_MAGIC;
	h.version = SNAP_VERSION;
	h.err = err;
	if (s) {
		h.nthreads = err ? 0 : (uint32_t)s->nthreads;
		h.pid = s->pid;
		h.tracer = s->tracer;
		h.stopped = s->stopped;
		memcpy(h.comm, s->comm, sizeof(h.comm));
		h.started_ns = s->started_ns;
		h.elapsed_ns = s->elapsed_ns;
		h.paused_max_ns = s->paused_max_ns;
		h.paused_total_ns = s->paused_total_ns;
	}
	wbuf_put(b, &h, sizeof(h));
	for (uint32_t i = 0; !b->err && i < h.nthreads; i++) {
		const struct snap_thread *t = &s->threads[i];
		struct wire_thread w;

		memset(&w, 0, sizeof(w));
		w.tid = t->tid;
		w.status = (uint32_t)t->status;
		w.err = t->err;
		w.stack_len = t->stack ? t->stack_len : 0;
		memcpy(w.name, t->name, sizeof(w.name));
		w.state = t->state;
		w.method = t->method;
		w.reused = t->reused;
		w.cut = t->cut;
		w.nvcsw = t->nvcsw;
		w.nivcsw = t->nivcsw;
		w.paused_ns = t->paused_ns;
		w.utime_ms = t->utime_ms;
		w.stime_ms = t->stime_ms;
		w.captured_ns = t->captured_ns;
		w.sp = t->sp;
		memcpy(w.regs, t->regs, sizeof(w.regs));
		w.waits = t->waits;
		if (t->waits)
			w.wait = t->wait;
		w.nmore = w.stack_len ? t->nmore : 0;
		wbuf_put(b, &w, sizeof(w));
		if (w.stack_len)
			wbuf_put(b, t->stack, w.stack_len);
		for (uint32_t k = 0; k < w.nmore; k++) {
			struct wire_region g = { .at = t->more[k].at,
						 .len = t->more[k].len };

			wbuf_put(b, &g, sizeof(g));
			wbuf_put(b, t->more[k].bytes, g.len);
		}
	}
	wbuf_flush(b);
	r = b->err;
	free(b);
	return r;
}

/*
 * Waits for fd until deadline_ns, then reads what has come, at most n
 * bytes: their count, or -errno (-EPIPE at the end of the stream).
 */
static ssize_t read_some(int fd, void *p, size_t n, uint64_t deadline_ns)
{
	for (;;) {
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		uint64_t now = clock_now_ns();
		ssize_t got;
		int pr;

		if (now >= deadline_ns)
			return -ETIMEDOUT;
		pr = poll(&pfd, 1, (int)((deadline_ns - now) / 1000000 + 1));
		if (pr < 0 && errno != EINTR)
			return -errno;
		if (pr <= 0)
			continue;
		got = read(fd, p, n);
		if (got < 0) {
			if (errno == EINTR || errno == EAGAIN)
				continue;
			return -errno;
		}
		return got ? got : -EPIPE;
	}
}

struct rbuf {
	int fd;
	uint64_t deadline_ns;
	size_t at, len;
	char b[WIRE_BUF];
};

/*
 * n bytes from r: what its buffer holds, then a large piece straight into
 * p, a small one through the buffer, reading whatever has come (the
 * socket carries this snapshot alone, so reading ahead loses nothing).
 */
static int rbuf_get(struct rbuf *r, void *p, size_t n)
{
	char *c = p;

	while (n) {
		size_t k = r->len - r->at;
		ssize_t got;

		if (k) {
			if (k > n)
				k = n;
			memcpy(c, r->b + r->at, k);
			r->at += k;
			c += k;
			n -= k;
			continue;
		}
		if (n >= sizeof(r->b)) {
			got = read_some(r->fd, c, n, r->deadline_ns);
			if (got < 0)
				return (int)got;
			c += got;
			n -= (size_t)got;
			continue;
		}
		got = read_some(r->fd, r->b, sizeof(r->b), r->deadline_ns);
		if (got < 0)
			return (int)got;
		r->at = 0;
		r->len = (size_t)got;
	}
	return 0;
}

static bool valid_status(uint32_t st)
{
	return st == SW_ST_OK || st == SW_ST_TIMEOUT || st == SW_ST_EXITED ||
	       st == SW_ST_ERROR || st == SW_ST_SKIPPED;
}

/* A copy of at most SW_WAIT_MEM bytes that holds the word, or none. */
static bool valid_wait(const struct sw_wait *w)
{
	if (w->nmem == 0)
		return true;
	return w->nmem >= 4 && w->nmem <= SW_WAIT_MEM && w->addr >= w->mem_at &&
	       w->addr - w->mem_at <= w->nmem - 4;
}

/*
 * A thread's n further regions, after its stack: each within what one
 * thread may hold in all (SNAP_STACK_HARD, its stack included).
 */
static int read_regions(struct rbuf *rb, struct snap_thread *t, uint32_t n)
{
	uint64_t total = t->stack_len;

	for (uint32_t k = 0; k < n; k++) {
		struct wire_region g;
		struct snap_region *m = &t->more[k];
		int r = rbuf_get(rb, &g, sizeof(g));

		if (r != 0)
			return r;
		total += g.len;
		if (!g.len || total > SNAP_STACK_HARD ||
		    g.at > UINT64_MAX - g.len)
			return SW_EFORMAT;
		m->bytes = malloc(g.len);
		if (!m->bytes)
			return -ENOMEM;
		m->at = g.at;
		m->len = g.len;
		t->nmore = k + 1;
		r = rbuf_get(rb, m->bytes, g.len);
		if (r != 0)
			return r;
	}
	return 0;
}

int snap_read(int fd, uint64_t deadline_ns, struct snap **out)
{
	struct wire_hdr h = { 0 };
	struct rbuf *rb;
	struct snap *s;
	int r;

	*out = NULL;
	rb = malloc(sizeof(*rb));
	if (!rb)
		return -ENOMEM;
	rb->fd = fd;
	rb->deadline_ns = deadline_ns;
	rb->at = rb->len = 0;
	r = rbuf_get(rb, &h, sizeof(h));
	if (r == 0 &&
	    (h.magic != SNAP_MAGIC || h.version != SNAP_VERSION ||
	     h.nthreads > SW_MAX_THREADS || h.err > 0 || (h.err && h.nthreads)))
		r = SW_EFORMAT;
	s = r == 0 ? calloc(1, sizeof(*s)) : NULL;
	if (r == 0 && !s)
		r = -ENOMEM;
	if (r != 0) {
		free(rb);
		return r;
	}
	s->pid = h.pid;
	s->tracer = h.tracer;
	s->stopped = h.stopped != 0;
	memcpy(s->comm, h.comm, sizeof(s->comm));
	s->comm[SW_COMM_MAX - 1] = '\0';
	s->started_ns = h.started_ns;
	s->elapsed_ns = h.elapsed_ns;
	s->paused_max_ns = h.paused_max_ns;
	s->paused_total_ns = h.paused_total_ns;
	s->threads = calloc(h.nthreads ? h.nthreads : 1, sizeof(*s->threads));
	if (!s->threads) {
		free(rb);
		free(s);
		return -ENOMEM;
	}
	for (uint32_t i = 0; i < h.nthreads; i++) {
		struct snap_thread *t = &s->threads[i];
		struct wire_thread w = { 0 };

		r = rbuf_get(rb, &w, sizeof(w));
		if (r == 0 &&
		    (w.stack_len > SNAP_STACK_HARD || w.tid <= 0 ||
		     w.nmore > SNAP_MORE_MAX || (w.nmore && !w.stack_len) ||
		     !valid_status(w.status) || w.method >= SNAP_M_COUNT ||
		     w.reused > 1 || w.cut > 1 || (w.reused && w.stack_len) ||
		     (i && w.tid <= s->threads[i - 1].tid) ||
		     (w.waits && !valid_wait(&w.wait))))
			r = SW_EFORMAT;
		if (r != 0)
			break;
		s->nthreads = i + 1;
		t->tid = w.tid;
		t->status = (enum sw_status)w.status;
		t->err = w.err;
		memcpy(t->name, w.name, sizeof(t->name));
		t->name[SW_COMM_MAX - 1] = '\0';
		t->state = w.state;
		t->method = w.method;
		t->reused = w.reused != 0;
		t->cut = w.cut != 0;
		t->nvcsw = w.nvcsw;
		t->nivcsw = w.nivcsw;
		t->paused_ns = w.paused_ns;
		t->utime_ms = w.utime_ms;
		t->stime_ms = w.stime_ms;
		t->captured_ns = w.captured_ns;
		t->sp = w.sp;
		memcpy(t->regs, w.regs, sizeof(t->regs));
		t->waits = w.waits != 0;
		if (t->waits)
			t->wait = w.wait;
		if (w.stack_len) {
			t->stack = malloc(w.stack_len);
			if (!t->stack) {
				r = -ENOMEM;
				break;
			}
			t->stack_len = w.stack_len;
			r = rbuf_get(rb, t->stack, w.stack_len);
			if (r != 0)
				break;
		}
		r = read_regions(rb, t, w.nmore);
		if (r != 0)
			break;
	}
	free(rb);
	if (r != 0) {
		snap_free(s);
		return r;
	}
	if (h.err) {
		*out = s;
		return h.err;
	}
	*out = s;
	return 0;
}
