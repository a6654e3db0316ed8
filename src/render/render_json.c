/*
 * render_json.c - the JSON of one process, exactly the HTTP schema of
 * INTERFACE.md (keys in its order), built as a cJSON tree that the caller
 * prints or nests in a larger document.
 *
 * Strings from the target (thread names, the command line) and from debug
 * info (functions, files) may hold any bytes; cJSON escapes control
 * characters but passes other bytes through, so invalid UTF-8 is replaced
 * with '?' first and the document is always valid JSON.
 *
 * A dump of a thousand threads makes a tree of some ten thousand items,
 * so the tree is built to be cheap to make, print and free: keys are the
 * literals of this file, kept by reference (cJSON_AddItemToObjectCS);
 * fixed strings such as a status are referenced, not copied; and integers
 * are raw items this file formats itself, the very text cJSON would print
 * for them (cJSON prints every number through "%1.15g" and reads it back
 * with sscanf to check it). Numbers outside the range where that text is
 * plain digits go through cJSON_CreateNumber as before. A group's "tids"
 * is one raw array of such integers, in cJSON's unformatted layout.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "model/buf.h"
#include "model/utf8.h"
#include "coresig.h"
#include "locks.h"
#include "render.h"

/*
 * Integers below this print as plain digits in cJSON ("%d", or "%1.15g"
 * of an integral double with fewer than 16 digits); from 1e15 on "%1.15g"
 * switches to an exponent.
 */
#define JSON_PLAIN_MAX 1000000000000000LL
/* unchanged_s in milliseconds below this has at most 12 digits. */
#define JSON_MS_MAX 1e12

/*
 * Adds item (NULL: out of memory) to o under key, a string literal that
 * the tree refers to instead of copying. Returns item, or NULL with item
 * freed.
 */
static cJSON *add_item(cJSON *o, const char *key, cJSON *item)
{
	if (!item)
		return NULL;
	if (!cJSON_AddItemToObjectCS(o, key, item)) {
		cJSON_Delete(item);
		return NULL;
	}
	return item;
}

/* Writes v in decimal ending just before end; returns where it starts. */
static char *fmt_u64(char *end, uint64_t v)
{
	*--end = '\0';
	do
		*--end = (char)('0' + v % 10);
	while (v /= 10);
	return end;
}

/*
 * A number item for v, printed exactly as cJSON_CreateNumber((double)v)
 * would print: pre-formatted digits where those are what cJSON writes,
 * else a cJSON number. NULL on out of memory.
 */
static cJSON *int_item(int64_t v)
{
	char s[24], *p;

	if (v <= -JSON_PLAIN_MAX || v >= JSON_PLAIN_MAX)
		return cJSON_CreateNumber((double)v);
	p = fmt_u64(s + sizeof(s), v < 0 ? (uint64_t)-v : (uint64_t)v);
	if (v < 0)
		*--p = '-';
	return cJSON_CreateRaw(p);
}

/* int_item() for an unsigned value. */
static cJSON *uint_item(uint64_t v)
{
	char s[24];

	if (v >= (uint64_t)JSON_PLAIN_MAX)
		return cJSON_CreateNumber((double)v);
	return cJSON_CreateRaw(fmt_u64(s + sizeof(s), v));
}

/*
 * The text of a duration in seconds rounded to milliseconds (s >= 0), as
 * cJSON prints the double k / 1000 for k = s * 1000 rounded: k has at most
 * 12 digits here, so "%1.15g" gives back exactly the decimal k / 1000,
 * without trailing zeros (DBL_DIG is 15). It is written at the end of
 * buf (32 bytes at least); NULL when k is too large for that (then
 * ms_item() lets cJSON print it).
 */
static const char *ms_text(double s, char *buf, size_t size)
{
	double x = s * 1000 + 0.5;
	char *p;
	long long k;
	int frac, n;

	if (!(x < JSON_MS_MAX) || size < 32)
		return NULL;
	k = (long long)x;
	frac = (int)(k % 1000);
	p = fmt_u64(buf + size - 4, (uint64_t)(k / 1000));
	if (frac) {
		char *q = buf + size - 5;

		*q++ = '.';
		n = frac % 10 ? 3 : frac % 100 ? 2 : 1;
		for (int i = 0, div = 100; i < n; i++, div /= 10)
			*q++ = (char)('0' + frac / div % 10);
		*q = '\0';
	}
	return p;
}

static cJSON *ms_item(double s)
{
	char buf[32];
	const char *p = ms_text(s, buf, sizeof(buf));

	if (!p)
		return cJSON_CreateNumber((double)(long long)(s * 1000 + 0.5) /
					  1000);
	return cJSON_CreateRaw(p);
}

/* Adds a number under key, as int_item(). NULL on out of memory. */
static cJSON *add_int(cJSON *o, const char *key, int64_t v)
{
	return add_item(o, key, int_item(v));
}

static cJSON *add_uint(cJSON *o, const char *key, uint64_t v)
{
	return add_item(o, key, uint_item(v));
}

/* Adds a string that outlives the tree (a literal) without a copy. */
static cJSON *add_const_str(cJSON *o, const char *key, const char *s)
{
	return add_item(o, key, cJSON_CreateStringReference(s));
}

/*
 * The array of n tids as one raw item, "[1,2,3]" as cJSON prints an array
 * of those numbers unformatted. NULL on out of memory.
 */
static cJSON *tids_item(const pid_t *tids, size_t n)
{
	char num[24], *buf, *p;
	cJSON *item;

	/* "-2147483648," is the longest element. */
	if (n > (SIZE_MAX - 3) / 12)
		return NULL;
	buf = malloc(n * 12 + 3);
	if (!buf)
		return NULL;
	p = buf;
	*p++ = '[';
	for (size_t i = 0; i < n; i++) {
		uint64_t v =
			tids[i] < 0 ? -(uint64_t)tids[i] : (uint64_t)tids[i];
		char *q = fmt_u64(num + sizeof(num), v);

		if (i)
			*p++ = ',';
		if (tids[i] < 0)
			*p++ = '-';
		while (*q)
			*p++ = *q++;
	}
	*p++ = ']';
	*p = '\0';
	item = cJSON_CreateRaw(buf);
	free(buf);
	return item;
}

/*
 * Adds s (NULL: "") under key as a string, with invalid UTF-8 bytes
 * replaced by '?'. Returns the new item, or NULL on out of memory.
 */
static cJSON *add_str(cJSON *o, const char *key, const char *s)
{
	const unsigned char *p = (const unsigned char *)(s ? s : "");
	uint32_t cp;
	cJSON *item;
	char *copy;
	size_t i, n;

	for (i = 0; p[i]; i += n)
		if (!(n = utf8_seq(p + i, &cp)))
			break;
	if (!p[i])
		return add_item(o, key, cJSON_CreateString((const char *)p));
	copy = strdup((const char *)p);
	if (!copy)
		return NULL;
	for (; copy[i]; i += n) {
		n = utf8_seq((unsigned char *)copy + i, &cp);
		if (!n) {
			copy[i] = '?';
			n = 1;
		}
	}
	item = add_item(o, key, cJSON_CreateString(copy));
	free(copy);
	return item;
}

/* Adds "0x..." under key. Returns the item or NULL. */
static cJSON *add_hex(cJSON *o, const char *key, uint64_t v)
{
	char s[24];

	(void)snprintf(s, sizeof(s), "0x%" PRIx64, v);
	return add_item(o, key, cJSON_CreateString(s));
}

/* One frame: ip, module, offset, [function, file, line,] inlined. */
static cJSON *frame_json(const struct sw_dump *d, const struct sw_frame *f)
{
	cJSON *o = cJSON_CreateObject();
	bool ok;

	if (!o)
		return NULL;
	ok = add_hex(o, "ip", f->ip);
	if (f->module >= 0 && (size_t)f->module < d->nmodules)
		ok = ok && add_str(o, "module", d->modules[f->module].path);
	else
		ok = ok && add_item(o, "module", cJSON_CreateNull());
	ok = ok && add_hex(o, "offset", f->offset);
	if (f->function)
		ok = ok && add_str(o, "function", f->function);
	if (f->file)
		ok = ok && add_str(o, "file", f->file);
	if (f->file && f->line > 0)
		ok = ok && add_int(o, "line", f->line);
	ok = ok && add_item(o, "inlined", cJSON_CreateBool(f->inlined));
	if (!ok) {
		cJSON_Delete(o);
		return NULL;
	}
	return o;
}

/* See render.h. NULL on out of memory. */
cJSON *render_json_frames(const struct sw_dump *d, const struct sw_thread *t)
{
	cJSON *a = cJSON_CreateArray();

	if (!a)
		return NULL;
	for (size_t i = 0; i < t->nframes; i++) {
		cJSON *f = frame_json(d, &t->frames[i]);

		if (!f || !cJSON_AddItemToArray(a, f)) {
			cJSON_Delete(f);
			cJSON_Delete(a);
			return NULL;
		}
	}
	return a;
}

/* The reason for a thread's status when the collector gave none. */
static const char *default_reason(const struct sw_dump *d,
				  const struct sw_thread *t, char *buf,
				  size_t size)
{
	switch (t->status) {
	case SW_ST_TIMEOUT:
		(void)snprintf(buf, size, "no answer within %d ms",
			       d->timeout_ms);
		return buf;
	case SW_ST_EXITED:
		return "the thread exited";
	case SW_ST_BLOCKED:
		return "the thread blocks the dump signal";
	case SW_ST_SKIPPED:
		return "the thread was skipped";
	case SW_ST_SECCOMP:
		return "the thread runs under seccomp and is never signalled";
	case SW_ST_LOWSTACK:
		return "the thread's stack has no room for the dump signal";
	default:
		return "the thread could not be dumped";
	}
}

/*
 * "symbol": the global variable a lock is, "g_lock" or "g_pool+0x8",
 * when it lies in one. False on out of memory.
 */
static bool add_symbol(cJSON *o, const struct sw_dump *d, uint64_t addr)
{
	uint64_t off = 0;
	const char *sym = dump_addr_name(d, addr, &off);
	char *text;
	bool ok;

	if (!sym)
		return true;
	if (!off)
		return add_str(o, "symbol", sym);
	if (asprintf(&text, "%s+0x%" PRIx64, sym, off) < 0)
		return false;
	ok = add_str(o, "symbol", text);
	free(text);
	return ok;
}

/*
 * "waiting_for" of a thread that sleeps on a lock (locks.h): the lock,
 * its recorded owner and what is known of it.
 */
static cJSON *waiting_for_json(const struct sw_dump *d,
			       const struct lock_wait *w)
{
	cJSON *o = cJSON_CreateObject();
	bool ok;

	if (!o)
		return NULL;
	ok = add_const_str(o, "kind", locks_kind_name(w->kind)) &&
	     add_hex(o, "address", w->addr);
	ok = ok && add_symbol(o, d, w->addr);
	if (w->kind == LOCK_RWLOCK)
		ok = ok &&
		     add_const_str(o, "mode", w->write ? "write" : "read");
	if (w->owner_index >= 0) {
		const struct sw_thread *t = &d->threads[w->owner_index];

		ok = ok && add_int(o, "owner_tid", t->tid) &&
		     add_str(o, "owner_name", t->name);
	} else if (w->owner > 0) {
		/* Recorded, but no thread of the process: it exited. */
		ok = ok && add_int(o, "owner_tid", w->owner) &&
		     add_item(o, "owner_exited", cJSON_CreateTrue());
	} else {
		ok = ok && add_item(o, "owner_tid", cJSON_CreateNull());
	}
	if (w->held > 1)
		ok = ok && add_uint(o, "held", w->held);
	if (w->owner_died)
		ok = ok && add_item(o, "owner_died", cJSON_CreateTrue());
	if (w->cycle >= 0)
		ok = ok && add_item(o, "deadlock", cJSON_CreateTrue());
	if (!ok) {
		cJSON_Delete(o);
		return NULL;
	}
	return o;
}

/* "deadlocks": each cycle's threads in waits-for order, and its locks. */
static cJSON *deadlocks_json(const struct sw_dump *d, const struct locks *l)
{
	cJSON *a = cJSON_CreateArray();

	for (size_t c = 0; a && c < l->ncycles; c++) {
		const struct lock_cycle *cy = &l->cycles[c];
		cJSON *o = cJSON_CreateObject(), *tids, *locks;

		if (!o || !cJSON_AddItemToArray(a, o)) {
			cJSON_Delete(o);
			goto fail;
		}
		tids = add_item(o, "threads", cJSON_CreateArray());
		locks = add_item(o, "locks", cJSON_CreateArray());
		if (!tids || !locks)
			goto fail;
		for (size_t k = 0; k < cy->n; k++) {
			const struct lock_wait *w = &l->w[cy->threads[k]];
			char hex[24];

			snprintf(hex, sizeof(hex), "0x%llx",
				 (unsigned long long)w->addr);
			if (!cJSON_AddItemToArray(
				    tids,
				    int_item(d->threads[cy->threads[k]].tid)) ||
			    !cJSON_AddItemToArray(locks,
						  cJSON_CreateString(hex)))
				goto fail;
		}
	}
	return a;
fail:
	cJSON_Delete(a);
	return NULL;
}

/* "methods": how many threads each way of reading took. */
static cJSON *methods_json(const struct sw_dump *d)
{
	size_t n[SW_READ_COUNT] = { 0 };
	cJSON *o = cJSON_CreateObject();

	if (!o)
		return NULL;
	for (size_t i = 0; i < d->nthreads; i++)
		if (d->threads[i].status == SW_ST_OK &&
		    (unsigned)d->threads[i].read < SW_READ_COUNT)
			n[d->threads[i].read]++;
	for (int r = 0; r < SW_READ_COUNT; r++)
		if (n[r] && dump_read_name((enum sw_read)r) &&
		    !add_uint(o, dump_read_name((enum sw_read)r), n[r])) {
			cJSON_Delete(o);
			return NULL;
		}
	return o;
}

/* One entry of "threads". */
/*
 * An object written as text, the very text cJSON prints unformatted, and
 * handed over as one raw item: a thousand threads are a thousand items
 * instead of ten thousand to make, print and free.
 */
struct rawobj {
	struct buf b;
	bool ok, first;
};

/* Appends n bytes: a copy where there is room, else through buf_add(). */
static void ro_add(struct rawobj *r, const char *p, size_t n)
{
	if (!r->ok)
		return;
	if (r->b.data && r->b.len + n < r->b.cap) {
		memcpy(r->b.data + r->b.len, p, n);
		r->b.len += n;
		r->b.data[r->b.len] = '\0';
		return;
	}
	r->ok = buf_add(&r->b, p, n) == 0;
}

static void ro_adds(struct rawobj *r, const char *s)
{
	ro_add(r, s, strlen(s));
}

static void ro_key(struct rawobj *r, const char *key)
{
	ro_add(r, r->first ? "\"" : ",\"", r->first ? 1 : 2);
	ro_adds(r, key);
	ro_add(r, "\":", 2);
	r->first = false;
}

/* Adds item's text (item is freed; NULL: out of memory). */
static void ro_item(struct rawobj *r, const char *key, cJSON *item)
{
	char *text;

	ro_key(r, key);
	if (!item) {
		r->ok = false;
		return;
	}
	if (cJSON_IsRaw(item)) {
		ro_adds(r, item->valuestring);
	} else {
		text = cJSON_PrintUnformatted(item);
		r->ok = r->ok && text;
		if (text)
			ro_adds(r, text);
		cJSON_free(text);
	}
	cJSON_Delete(item);
}

static void ro_int(struct rawobj *r, const char *key, int64_t v)
{
	char s[24], *p;

	if (v <= -JSON_PLAIN_MAX || v >= JSON_PLAIN_MAX) {
		ro_item(r, key, int_item(v));
		return;
	}
	p = fmt_u64(s + sizeof(s), v < 0 ? (uint64_t)-v : (uint64_t)v);
	if (v < 0)
		*--p = '-';
	ro_key(r, key);
	ro_adds(r, p);
}

static void ro_uint(struct rawobj *r, const char *key, uint64_t v)
{
	char s[24];

	if (v >= (uint64_t)JSON_PLAIN_MAX) {
		ro_item(r, key, uint_item(v));
		return;
	}
	ro_key(r, key);
	ro_adds(r, fmt_u64(s + sizeof(s), v));
}

/*
 * Adds s as a JSON string, escaped as cJSON escapes it: '"', '\\', the
 * short escapes, \u00XX for the other control characters, every other
 * byte as it is. s must be valid UTF-8 already (or a literal of ours).
 */
static void ro_text(struct rawobj *r, const char *s)
{
	const unsigned char *p = (const unsigned char *)s;

	ro_add(r, "\"", 1);
	while (r->ok && *p) {
		const unsigned char *q = p;
		char esc[8];

		while (*q >= 32 && *q != '"' && *q != '\\')
			q++;
		if (q > p)
			ro_add(r, (const char *)p, (size_t)(q - p));
		if (!*q || !r->ok)
			break;
		switch (*q) {
		case '"':
			strcpy(esc, "\\\"");
			break;
		case '\\':
			strcpy(esc, "\\\\");
			break;
		case '\b':
			strcpy(esc, "\\b");
			break;
		case '\f':
			strcpy(esc, "\\f");
			break;
		case '\n':
			strcpy(esc, "\\n");
			break;
		case '\r':
			strcpy(esc, "\\r");
			break;
		case '\t':
			strcpy(esc, "\\t");
			break;
		default:
			(void)snprintf(esc, sizeof(esc), "\\u%04x", *q);
		}
		ro_adds(r, esc);
		p = q + 1;
	}
	ro_add(r, "\"", 1);
}

/* A string of ours (a literal) under key. */
static void ro_const(struct rawobj *r, const char *key, const char *s)
{
	ro_key(r, key);
	ro_text(r, s);
}

/* A string from outside under key, invalid UTF-8 bytes made '?'. */
static void ro_str(struct rawobj *r, const char *key, const char *s)
{
	const unsigned char *p = (const unsigned char *)(s ? s : "");
	uint32_t cp;
	char *copy;
	size_t i, n;

	ro_key(r, key);
	for (i = 0; p[i]; i += n)
		if (!(n = utf8_seq(p + i, &cp)))
			break;
	if (!p[i]) {
		ro_text(r, (const char *)p);
		return;
	}
	copy = strdup((const char *)p);
	if (!copy) {
		r->ok = false;
		return;
	}
	for (; copy[i]; i += n) {
		n = utf8_seq((unsigned char *)copy + i, &cp);
		if (!n) {
			copy[i] = '?';
			n = 1;
		}
	}
	ro_text(r, copy);
	free(copy);
}

/*
 * "holds" of a thread others wait for: each lock it holds, as jstack's
 * "- locked <0x...>", with the threads of the dump waiting for it.
 */
static cJSON *holds_json(const struct sw_dump *d, const struct locks *l,
			 size_t ti)
{
	struct lock_held held[LOCKS_HELD_MAX];
	size_t n = locks_held(l, ti, held, LOCKS_HELD_MAX);
	cJSON *a = cJSON_CreateArray();

	for (size_t k = 0; a && k < n; k++) {
		cJSON *o = cJSON_CreateObject();

		if (!o || !cJSON_AddItemToArray(a, o) ||
		    !add_const_str(o, "kind", locks_kind_name(held[k].kind)) ||
		    !add_hex(o, "address", held[k].addr) ||
		    !add_symbol(o, d, held[k].addr) ||
		    !add_uint(o, "waiters", held[k].waiters)) {
			cJSON_Delete(a);
			return NULL;
		}
	}
	return a;
}

/* A thread's object, written in scratch (emptied first, kept for the next). */
static cJSON *thread_json(const struct sw_dump *d, const struct sw_thread *t,
			  const struct locks *l, struct buf *scratch)
{
	size_t ti = (size_t)(t - d->threads);
	const struct lock_wait *w = l->w ? &l->w[ti] : NULL;
	struct rawobj r = { .b = *scratch, .ok = true, .first = true };
	char reason[64], ms[32], state[2] = { '?', '\0' };
	const char *p;
	cJSON *item = NULL;

	r.b.len = 0;
	ro_add(&r, "{", 1);
	ro_int(&r, "tid", t->tid);
	ro_str(&r, "name", t->name);
	if (t->state > 0x20 && t->state < 0x7f)
		state[0] = t->state; /* the letter itself, or '?' */
	ro_const(&r, "state", state);
	ro_uint(&r, "utime_ms", t->utime_ms);
	ro_uint(&r, "stime_ms", t->stime_ms);
	ro_const(&r, "status", dump_status_name(t->status));
	if (t->status == SW_ST_OK && dump_read_name(t->read))
		ro_const(&r, "method", dump_read_name(t->read));
	/* Not read again: it had not run since the read whose stack this is. */
	if (t->status == SW_ST_OK && (t->flags & SW_TF_REUSED)) {
		ro_key(&r, "reused");
		ro_add(&r, "true", 4);
	}
	/* Cut short: by the frame cap, or where its stack copy ended. */
	if (t->status == SW_ST_OK && (t->flags & SW_TF_TRUNCATED))
		ro_const(&r, "truncated", "frames");
	else if (t->status == SW_ST_OK && (t->flags & SW_TF_STACK_CUT))
		ro_const(&r, "truncated", "stack");
	if (t->status != SW_ST_OK)
		ro_str(&r, "error",
		       t->error ? t->error
				: default_reason(d, t, reason, sizeof(reason)));
	if (t->status == SW_ST_OK && t->group >= 0) {
		ro_int(&r, "group", t->group);
	} else {
		ro_key(&r, "group");
		ro_adds(&r, "null");
	}
	/* Milliseconds are all the samples can tell. */
	if (t->unchanged_s >= 0) {
		p = ms_text(t->unchanged_s, ms, sizeof(ms));
		if (p) {
			ro_key(&r, "unchanged_s");
			ro_adds(&r, p);
		} else {
			ro_item(&r, "unchanged_s", ms_item(t->unchanged_s));
		}
	}
	if (w && w->kind != LOCK_NONE)
		ro_item(&r, "waiting_for", waiting_for_json(d, w));
	if (w && w->waiters)
		ro_item(&r, "holds", holds_json(d, l, ti));
	ro_add(&r, "}", 1);
	if (r.ok)
		item = cJSON_CreateRaw(r.b.data);
	*scratch = r.b;
	return item;
}

/* One entry of "groups": id, count, tids, frames of its representative. */
static cJSON *group_json(const struct sw_dump *d, size_t gi)
{
	const struct sw_group *g = &d->groups[gi];
	cJSON *o = cJSON_CreateObject(), *frames = NULL;

	if (!o)
		return NULL;
	if (!add_uint(o, "id", gi) || !add_uint(o, "count", g->count) ||
	    !add_item(o, "tids", tids_item(g->tids, g->count)))
		goto out_delete;
	if (g->rep < d->nthreads)
		frames = render_json_frames(d, &d->threads[g->rep]);
	else
		frames = cJSON_CreateArray();
	if (!add_item(o, "frames", frames))
		goto out_delete;
	return o;

out_delete:
	cJSON_Delete(o);
	return NULL;
}

/* "2026-11-30T02:30:00.123Z": UTC with milliseconds. */
void render_iso_time(const struct timespec *ts, char *buf, size_t size)
{
	struct tm tm;
	time_t sec = ts->tv_sec;

	if (!gmtime_r(&sec, &tm)) {
		(void)snprintf(buf, size, "1970-01-01T00:00:00.000Z");
		return;
	}
	(void)snprintf(buf, size, "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ",
		       tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
		       tm.tm_min, tm.tm_sec,
		       (long)(ts->tv_nsec / 1000000) % 1000);
}

/*
 * A core's "signal": {"number", "name", "code", "code_name", "address"}
 * of its crash (names and address null when unknown), or null for a core
 * taken of a running process.
 */
static cJSON *signal_json(const struct sw_dump *d)
{
	const struct sw_core_signal *cs = &d->core_signal;
	const char *name = coresig_name(cs->number);
	const char *code = coresig_code_name(cs->number, cs->code);
	cJSON *o;

	if (!cs->number)
		return cJSON_CreateNull();
	o = cJSON_CreateObject();
	if (o && add_int(o, "number", cs->number) &&
	    add_item(o, "name",
		     name ? cJSON_CreateStringReference(name)
			  : cJSON_CreateNull()) &&
	    add_int(o, "code", cs->code) &&
	    add_item(o, "code_name",
		     code ? cJSON_CreateStringReference(code)
			  : cJSON_CreateNull()) &&
	    (cs->has_addr ? add_hex(o, "address", cs->addr) != NULL
			  : add_item(o, "address", cJSON_CreateNull()) != NULL))
		return o;
	cJSON_Delete(o);
	return NULL;
}

/*
 * A core's own fields: its crash's "signal" and "crashed_tid" (both null
 * for a core of a running process), and "core_truncated": {"file_size",
 * "needed"} when the file was cut short.
 */
static bool add_core(cJSON *o, const struct sw_dump *d)
{
	cJSON *cut;

	if (!add_item(o, "signal", signal_json(d)) ||
	    !add_item(o, "crashed_tid",
		      d->core_signal.number && d->core_signal.tid
			      ? int_item(d->core_signal.tid)
			      : cJSON_CreateNull()))
		return false;
	if (!d->core_cut_need)
		return true;
	cut = add_item(o, "core_truncated", cJSON_CreateObject());
	return cut && add_uint(cut, "file_size", d->core_cut_size) &&
	       add_uint(cut, "needed", d->core_cut_need);
}

/*
 * "symbols_errors": why the symbols of modules that frames are in could
 * not be read, [{"module", "symbols_error"}]; absent when none. False on no
 * memory.
 */
static bool add_symbols_errors(cJSON *o, const struct sw_dump *d)
{
	bool *used = dump_modules_used(d), ok = true;
	cJSON *arr = NULL;

	for (size_t i = 0; ok && used && i < d->nmodules; i++) {
		cJSON *e;

		if (!used[i] || !d->modules[i].symbols_error)
			continue;
		if (!arr)
			arr = add_item(o, "symbols_errors",
				       cJSON_CreateArray());
		e = arr ? cJSON_CreateObject() : NULL;
		ok = e && cJSON_AddItemToArray(arr, e) &&
		     add_str(e, "module", d->modules[i].path) &&
		     add_str(e, "symbols_error", d->modules[i].symbols_error);
	}
	free(used);
	return ok;
}

/* Adds the process fields before "threads". Returns false on no memory. */
static bool add_header(cJSON *o, const struct sw_dump *d)
{
	char when[48];
	size_t nok = 0;

	for (size_t i = 0; i < d->nthreads; i++)
		nok += d->threads[i].status == SW_ST_OK;
	render_iso_time(&d->collected_at, when, sizeof(when));
	return add_int(o, "pid", d->pid) && add_str(o, "comm", d->comm) &&
	       add_str(o, "cmdline", d->cmdline) &&
	       add_item(o, "collected_at", cJSON_CreateString(when)) &&
	       add_uint(o, "elapsed_us", d->elapsed_us) &&
	       add_uint(o, "skew_us", d->skew_us) &&
	       add_int(o, "timeout_ms", d->timeout_ms) &&
	       add_uint(o, "threads_total", d->nthreads) &&
	       add_uint(o, "threads_ok", nok) &&
	       (!d->hidden_threads ||
		add_uint(o, "hidden_threads", d->hidden_threads)) &&
	       add_str(o, "method", dump_method_name(d->method)) &&
	       add_item(o, "methods", methods_json(d)) &&
	       (d->method != SW_METHOD_PTRACE ||
		(add_uint(o, "paused_us_max", d->paused_us_max) &&
		 add_uint(o, "paused_us_total", d->paused_us_total))) &&
	       (d->method != SW_METHOD_CORE || add_core(o, d)) &&
	       (!d->symbols_partial ||
		add_item(o, "symbols_partial", cJSON_CreateTrue())) &&
	       add_symbols_errors(o, d) &&
	       (!d->jit_map_refused ||
		add_str(o, "jit_map_refused", d->jit_map_refused));
}

/*
 * See render.h. Reads d only; on failure *out is NULL and nothing leaks.
 */
int render_json(const struct sw_dump *d, cJSON **out)
{
	cJSON *o = cJSON_CreateObject(), *threads, *groups;
	struct buf scratch;
	struct locks l;

	*out = NULL;
	if (locks_analyze(d, &l) < 0) {
		cJSON_Delete(o);
		return -ENOMEM;
	}
	if (!o || !add_header(o, d))
		goto out_delete;
	if (l.unsupported &&
	    !add_const_str(o, "lock_owners_unsupported", l.unsupported))
		goto out_delete;
	if (l.ncycles && !add_item(o, "deadlocks", deadlocks_json(d, &l)))
		goto out_delete;
	threads = add_item(o, "threads", cJSON_CreateArray());
	if (!threads)
		goto out_delete;
	buf_init(&scratch, (size_t)1 << 20);
	for (size_t i = 0; i < d->nthreads; i++) {
		cJSON *t = thread_json(d, &d->threads[i], &l, &scratch);

		if (!t || !cJSON_AddItemToArray(threads, t)) {
			cJSON_Delete(t);
			buf_release(&scratch);
			goto out_delete;
		}
	}
	buf_release(&scratch);
	groups = add_item(o, "groups", cJSON_CreateArray());
	if (!groups)
		goto out_delete;
	for (size_t i = 0; i < d->ngroups; i++) {
		cJSON *g = group_json(d, i);

		if (!g || !cJSON_AddItemToArray(groups, g)) {
			cJSON_Delete(g);
			goto out_delete;
		}
	}
	locks_release(&l);
	*out = o;
	return 0;

out_delete:
	locks_release(&l);
	cJSON_Delete(o);
	return -ENOMEM;
}
