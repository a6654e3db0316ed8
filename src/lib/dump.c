/*
 * dump.c - allocation and small queries of the dump structure (dump.h).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "dump.h"

static const char *const status_names[SW_ST_COUNT] = {
	[SW_ST_OK] = "ok",	     [SW_ST_TIMEOUT] = "timeout",
	[SW_ST_EXITED] = "exited",   [SW_ST_BLOCKED] = "blocked-signal",
	[SW_ST_SKIPPED] = "skipped", [SW_ST_ERROR] = "error",
};

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
	for (size_t i = 0; i < t->nframes; i++) {
		free(t->frames[i].function);
		free(t->frames[i].file);
	}
	free(t->frames);
	t->frames = NULL;
	t->nframes = 0;
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
	c->threads = calloc(d->nthreads ? d->nthreads : 1, sizeof(*c->threads));
	c->modules = calloc(d->nmodules ? d->nmodules : 1, sizeof(*c->modules));
	if (!c->threads || !c->modules)
		goto fail;
	c->nthreads = d->nthreads;
	for (size_t i = 0; i < d->nthreads; i++) {
		const struct sw_thread *t = &d->threads[i];
		struct sw_thread *u = &c->threads[i];

		*u = *t;
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
	}
	c->nmodules = d->nmodules;
	for (size_t i = 0; i < d->nmodules; i++) {
		c->modules[i] = d->modules[i];
		c->modules[i].path = dup_or_null(d->modules[i].path, &oom);
	}
	if (oom)
		goto fail;
	*out = c;
	return 0;
fail:
	sw_dump_free(c);
	return -ENOMEM;
}

void dump_compact(struct sw_dump *d)
{
	bool *keep = calloc(d->nthreads ? d->nthreads : 1, sizeof(*keep));

	if (!keep)
		return; /* keeping everything is correct, only larger */
	for (size_t g = 0; g < d->ngroups; g++)
		if (d->groups[g].rep < d->nthreads)
			keep[d->groups[g].rep] = true;
	for (size_t i = 0; i < d->nthreads; i++)
		if (!keep[i])
			dump_thread_release_frames(&d->threads[i]);
	free(keep);
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
	}
	free(d->threads);
	for (size_t i = 0; i < d->nmodules; i++)
		free(d->modules[i].path);
	free(d->modules);
	for (size_t i = 0; i < d->ngroups; i++)
		free(d->groups[i].tids);
	free(d->groups);
	free(d->cmdline);
	free(d);
}
