/*
 * profile.c - one wall-clock profile run (profile.h).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/clock.h"
#include "profile.h"
#include "render/pprof.h"

/* Threads whose CPU time a run remembers: beyond, CPU counts as 0. */
#define PROFILE_MAX_THREADS (1u << 20)

struct cpu_seen {
	uint64_t key; /* pid << 32 | tid; 0: empty */
	uint64_t cpu_ms;
};

static uint64_t mix(uint64_t k)
{
	k ^= k >> 33;
	k *= 0xff51afd7ed558ccdull;
	k ^= k >> 33;
	return k;
}

/*
 * The CPU time (ns) of thread key since its last sample in r, which is
 * now cpu_ms; 0 for a thread not seen before (or that cannot be kept).
 */
static uint64_t cpu_delta_ns(struct profile_run *r, uint64_t key,
			     uint64_t cpu_ms)
{
	struct cpu_seen *e;
	uint64_t d;

	if ((r->ncpu + 1) * 2 > r->cpu_cap) {
		size_t cap = r->cpu_cap ? r->cpu_cap * 2 : 1024;
		struct cpu_seen *nt = r->ncpu < PROFILE_MAX_THREADS
					      ? calloc(cap, sizeof(*nt))
					      : NULL;

		/* Full: new threads count no CPU, the table stays usable. */
		if (!nt && (r->ncpu + 1) * 4 > r->cpu_cap * 3)
			return 0;
		if (!nt)
			goto lookup;
		for (size_t i = 0; i < r->cpu_cap; i++) {
			size_t j;

			if (!r->cpu[i].key)
				continue;
			for (j = mix(r->cpu[i].key) & (cap - 1); nt[j].key;
			     j = (j + 1) & (cap - 1))
				;
			nt[j] = r->cpu[i];
		}
		free(r->cpu);
		r->cpu = nt;
		r->cpu_cap = cap;
	}
lookup:
	for (size_t j = mix(key) & (r->cpu_cap - 1);;
	     j = (j + 1) & (r->cpu_cap - 1)) {
		e = &r->cpu[j];
		if (!e->key || e->key == key)
			break;
	}
	if (!e->key) {
		e->key = key;
		e->cpu_ms = cpu_ms;
		r->ncpu++;
		return 0;
	}
	d = cpu_ms > e->cpu_ms ? cpu_ms - e->cpu_ms : 0;
	e->cpu_ms = cpu_ms;
	return d * 1000000ull;
}

struct profile_run *profile_new(struct target **ts, size_t n, int seconds,
				uint64_t period_ns)
{
	static const char *const types[3][2] = {
		{ "samples", "count" },
		{ "wall", "nanoseconds" },
		{ "cpu", "nanoseconds" },
	};
	static const char *const period[2] = { "wall", "nanoseconds" };
	struct profile_run *r = calloc(1, sizeof(*r));

	if (!r)
		return NULL;
	r->ts = ts;
	r->n = n;
	r->fd = -1;
	r->last_ns = calloc(n ? n : 1, sizeof(*r->last_ns));
	r->b = pprof_new(types, 3, period, (int64_t)period_ns);
	if (!r->last_ns || !r->b) {
		pprof_free(r->b);
		free(r->last_ns);
		free(r);
		return NULL;
	}
	pprof_set_default_type(r->b, 1); /* wall */
	pthread_mutex_init(&r->lock, NULL);
	r->period_ns = period_ns;
	r->start_ns = clock_now_ns();
	r->end_ns = r->start_ns + (uint64_t)seconds * 1000000000ull;
	clock_gettime(CLOCK_REALTIME, &r->started_at);
	return r;
}

void profile_feed(struct profile_run *r, const struct target *t,
		  struct sdump *sd)
{
	const struct sw_dump *d;
	struct sdump *view;
	char pid[16];
	size_t i;

	for (i = 0; i < r->n && r->ts[i] != t; i++)
		;
	if (i == r->n)
		return;
	/*
	 * What its requester may read of the dump (access.h). As a past
	 * sample: a thread of credentials of its own is left out without
	 * asking the kernel, which would hold the scheduler's lock.
	 */
	view = access_view(&r->acc, sd, true);
	pthread_mutex_lock(&r->lock);
	if (!view && r->rc == 0)
		r->rc = -ENOMEM;
	/* Each dump once, and none taken before the run began. */
	if (!view || r->finished || r->rc < 0 || sd->mono_ns <= r->last_ns[i] ||
	    sd->mono_ns + r->period_ns < r->start_ns ||
	    sd->mono_ns > r->end_ns) {
		pthread_mutex_unlock(&r->lock);
		sdump_put(view);
		return;
	}
	d = view->d;
	{
		uint64_t wall = r->last_ns[i] ? sd->mono_ns - r->last_ns[i]
					      : r->period_ns;

		r->last_ns[i] = sd->mono_ns;
		r->dumps++;
		snprintf(pid, sizeof(pid), "%d", (int)d->pid);
		for (size_t k = 0; r->rc == 0 && k < d->nthreads; k++) {
			const struct sw_thread *th = &d->threads[k];
			struct pprof_label labs[3] = {
				{ "pid", pid },
				{ "comm", d->comm },
				{ "thread", th->name },
			};
			int64_t v[3];
			uint64_t key = (uint64_t)(uint32_t)d->pid << 32 |
				       (uint32_t)th->tid;

			if (th->status != SW_ST_OK || th->group < 0 ||
			    (size_t)th->group >= d->ngroups ||
			    d->groups[th->group].rep >= d->nthreads)
				continue;
			v[0] = 1;
			v[1] = (int64_t)wall;
			v[2] = (int64_t)cpu_delta_ns(
				r, key, th->utime_ms + th->stime_ms);
			r->rc = pprof_add(r->b, d,
					  &d->threads[d->groups[th->group].rep],
					  v, labs, 3);
		}
	}
	pthread_mutex_unlock(&r->lock);
	sdump_put(view);
}

void profile_finish(struct profile_run *r)
{
	uint64_t now = clock_now_ns();

	pthread_mutex_lock(&r->lock);
	pprof_set_time(
		r->b,
		(int64_t)r->started_at.tv_sec * 1000000000 +
			r->started_at.tv_nsec,
		(int64_t)((now < r->end_ns ? now : r->end_ns) - r->start_ns));
	if (r->rc == 0 && r->abandoned)
		r->rc = -ECONNABORTED;
	if (r->rc == 0)
		r->rc = pprof_finish(r->b, &r->out, &r->len);
	r->finished = true;
	pthread_mutex_unlock(&r->lock);
	if (r->done)
		r->done(r->arg);
}

void profile_free(struct profile_run *r)
{
	if (!r)
		return;
	registry_put_all(r->ts, r->n);
	pprof_free(r->b);
	free(r->last_ns);
	free(r->cpu);
	free(r->out);
	pthread_mutex_destroy(&r->lock);
	free(r);
}
