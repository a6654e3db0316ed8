/*
 * render_json.c - the JSON of one process, exactly the HTTP schema of
 * INTERFACE.md (keys in its order), built as a cJSON tree that the caller
 * prints or nests in a larger document.
 *
 * Strings from the target (thread names, the command line) and from debug
 * info (functions, files) may hold any bytes; cJSON escapes control
 * characters but passes other bytes through, so invalid UTF-8 is replaced
 * with '?' first and the document is always valid JSON.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "render.h"

/* Length of the valid UTF-8 sequence at s, or 0 when it is not one. */
static size_t utf8_seq(const unsigned char *s)
{
	size_t n;
	uint32_t cp;

	if (s[0] < 0x80)
		return 1;
	if (s[0] >= 0xc2 && s[0] <= 0xdf)
		n = 2, cp = s[0] & 0x1f;
	else if (s[0] >= 0xe0 && s[0] <= 0xef)
		n = 3, cp = s[0] & 0x0f;
	else if (s[0] >= 0xf0 && s[0] <= 0xf4)
		n = 4, cp = s[0] & 0x07;
	else
		return 0;
	for (size_t i = 1; i < n; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = (cp << 6) | (s[i] & 0x3f);
	}
	if ((n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) ||
	    cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return n;
}

/*
 * Adds s (NULL: "") under key as a string, with invalid UTF-8 bytes
 * replaced by '?'. Returns the new item, or NULL on out of memory.
 */
static cJSON *add_str(cJSON *o, const char *key, const char *s)
{
	const unsigned char *p = (const unsigned char *)(s ? s : "");
	cJSON *item;
	char *copy;
	size_t i, n;

	for (i = 0; p[i]; i += n)
		if (!(n = utf8_seq(p + i)))
			break;
	if (!p[i])
		return cJSON_AddStringToObject(o, key, (const char *)p);
	copy = strdup((const char *)p);
	if (!copy)
		return NULL;
	for (; copy[i]; i += n) {
		n = utf8_seq((unsigned char *)copy + i);
		if (!n) {
			copy[i] = '?';
			n = 1;
		}
	}
	item = cJSON_AddStringToObject(o, key, copy);
	free(copy);
	return item;
}

/* Adds "0x..." under key. Returns the item or NULL. */
static cJSON *add_hex(cJSON *o, const char *key, uint64_t v)
{
	char s[24];

	(void)snprintf(s, sizeof(s), "0x%" PRIx64, v);
	return cJSON_AddStringToObject(o, key, s);
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
		ok = ok && cJSON_AddNullToObject(o, "module");
	ok = ok && add_hex(o, "offset", f->offset);
	if (f->function)
		ok = ok && add_str(o, "function", f->function);
	if (f->file)
		ok = ok && add_str(o, "file", f->file);
	if (f->file && f->line > 0)
		ok = ok && cJSON_AddNumberToObject(o, "line", f->line);
	ok = ok && cJSON_AddBoolToObject(o, "inlined", f->inlined);
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
	default:
		return "the thread could not be dumped";
	}
}

/* One entry of "threads". */
static cJSON *thread_json(const struct sw_dump *d, const struct sw_thread *t)
{
	cJSON *o = cJSON_CreateObject();
	char state[2] = { '?', '\0' }, reason[64];
	bool ok;

	if (!o)
		return NULL;
	if (t->state > 0x20 && t->state < 0x7f)
		state[0] = t->state;
	ok = cJSON_AddNumberToObject(o, "tid", t->tid) &&
	     add_str(o, "name", t->name) &&
	     cJSON_AddStringToObject(o, "state", state) &&
	     cJSON_AddNumberToObject(o, "utime_ms", (double)t->utime_ms) &&
	     cJSON_AddNumberToObject(o, "stime_ms", (double)t->stime_ms) &&
	     cJSON_AddStringToObject(o, "status", dump_status_name(t->status));
	if (t->status != SW_ST_OK)
		ok = ok && add_str(o, "error",
				   t->error ? t->error
					    : default_reason(d, t, reason,
							     sizeof(reason)));
	if (t->status == SW_ST_OK && t->group >= 0)
		ok = ok && cJSON_AddNumberToObject(o, "group", t->group);
	else
		ok = ok && cJSON_AddNullToObject(o, "group");
	/* Milliseconds are all the samples can tell. */
	if (t->unchanged_s >= 0)
		ok = ok &&
		     cJSON_AddNumberToObject(
			     o, "unchanged_s",
			     (double)(long long)(t->unchanged_s * 1000 + 0.5) /
				     1000);
	if (!ok) {
		cJSON_Delete(o);
		return NULL;
	}
	return o;
}

/* One entry of "groups": id, count, tids, frames of its representative. */
static cJSON *group_json(const struct sw_dump *d, size_t gi)
{
	const struct sw_group *g = &d->groups[gi];
	cJSON *o = cJSON_CreateObject(), *tids, *frames = NULL;

	if (!o)
		return NULL;
	if (!cJSON_AddNumberToObject(o, "id", (double)gi) ||
	    !cJSON_AddNumberToObject(o, "count", (double)g->count))
		goto out_delete;
	tids = cJSON_AddArrayToObject(o, "tids");
	if (!tids)
		goto out_delete;
	for (size_t i = 0; i < g->count; i++) {
		cJSON *n = cJSON_CreateNumber(g->tids[i]);

		if (!n || !cJSON_AddItemToArray(tids, n)) {
			cJSON_Delete(n);
			goto out_delete;
		}
	}
	if (g->rep < d->nthreads)
		frames = render_json_frames(d, &d->threads[g->rep]);
	else
		frames = cJSON_CreateArray();
	if (!frames || !cJSON_AddItemToObject(o, "frames", frames)) {
		cJSON_Delete(frames);
		goto out_delete;
	}
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

/* Adds the process fields before "threads". Returns false on no memory. */
static bool add_header(cJSON *o, const struct sw_dump *d)
{
	char when[48];
	size_t nok = 0;

	for (size_t i = 0; i < d->nthreads; i++)
		nok += d->threads[i].status == SW_ST_OK;
	render_iso_time(&d->collected_at, when, sizeof(when));
	return cJSON_AddNumberToObject(o, "pid", d->pid) &&
	       add_str(o, "comm", d->comm) &&
	       add_str(o, "cmdline", d->cmdline) &&
	       cJSON_AddStringToObject(o, "collected_at", when) &&
	       cJSON_AddNumberToObject(o, "elapsed_us",
				       (double)d->elapsed_us) &&
	       cJSON_AddNumberToObject(o, "skew_us", (double)d->skew_us) &&
	       cJSON_AddNumberToObject(o, "timeout_ms", d->timeout_ms) &&
	       cJSON_AddNumberToObject(o, "threads_total",
				       (double)d->nthreads) &&
	       cJSON_AddNumberToObject(o, "threads_ok", (double)nok);
}

/*
 * See render.h. Reads d only; on failure *out is NULL and nothing leaks.
 */
int render_json(const struct sw_dump *d, cJSON **out)
{
	cJSON *o = cJSON_CreateObject(), *threads, *groups;

	*out = NULL;
	if (!o || !add_header(o, d))
		goto out_delete;
	threads = cJSON_AddArrayToObject(o, "threads");
	if (!threads)
		goto out_delete;
	for (size_t i = 0; i < d->nthreads; i++) {
		cJSON *t = thread_json(d, &d->threads[i]);

		if (!t || !cJSON_AddItemToArray(threads, t)) {
			cJSON_Delete(t);
			goto out_delete;
		}
	}
	groups = cJSON_AddArrayToObject(o, "groups");
	if (!groups)
		goto out_delete;
	for (size_t i = 0; i < d->ngroups; i++) {
		cJSON *g = group_json(d, i);

		if (!g || !cJSON_AddItemToArray(groups, g)) {
			cJSON_Delete(g);
			goto out_delete;
		}
	}
	*out = o;
	return 0;

out_delete:
	cJSON_Delete(o);
	return -ENOMEM;
}
