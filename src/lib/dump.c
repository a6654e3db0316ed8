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
