/*
 * watch.c - the documents of /api/v1/stuck and /api/v1/diff (watch.h),
 * built from the targets' sample histories.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collector/signal/handler.h"
#include "model/procfs.h"
#include "render/render.h"
#include "access.h"
#include "watch.h"

/* The realtime instant of a sample taken ago_s before now. */
static void when(const struct sw_dump *d, double ago_s, char *buf, size_t size)
{
	struct timespec ts = d->collected_at;
	double t = (double)ts.tv_sec + (double)ts.tv_nsec / 1e9 - ago_s;

	ts.tv_sec = (time_t)t;
	ts.tv_nsec = (long)((t - (double)ts.tv_sec) * 1e9);
	render_iso_time(&ts, buf, size);
}

/* The frames of thread th of d (its group's), as a JSON array. */
static cJSON *frames_of(const struct sw_dump *d, const struct sw_thread *th)
{
	if (th->status != SW_ST_OK || th->group < 0 ||
	    (size_t)th->group >= d->ngroups)
		return cJSON_CreateArray();
	return render_json_frames(d, &d->threads[d->groups[th->group].rep]);
}

/*
 * The kernel's stack of a thread, from /proc/PID/task/TID/stack (root
 * only): function names without offsets. NULL when unreadable.
 */
static cJSON *kernel_frames(pid_t pid, pid_t tid)
{
	char path[64], buf[8192], *line, *save = NULL;
	cJSON *arr;
	ssize_t n;

	snprintf(path, sizeof(path), "/proc/%d/task/%d/stack", (int)pid,
		 (int)tid);
	n = procfs_read_at(AT_FDCWD, path, buf, sizeof(buf));
	if (n <= 0)
		return NULL;
	arr = cJSON_CreateArray();
	for (line = strtok_r(buf, "\n", &save); arr && line;
	     line = strtok_r(NULL, "\n", &save)) {
		/* "[<0>] schedule+0x27/0x80" */
		char *fn = strchr(line, ' '), *plus;

		if (!fn)
			continue;
		fn++;
		plus = strchr(fn, '+');
		if (plus)
			*plus = '\0';
		cJSON_AddItemToArray(arr, cJSON_CreateString(fn));
	}
	return arr;
}

static void add_stuck(cJSON *arr, const struct target *t,
		      const struct sw_dump *d, const struct stuck *st)
{
	const struct sw_thread *th = &d->threads[st->thread];
	cJSON *o = cJSON_CreateObject(), *k;
	char since[40], state[2] = { th->state, '\0' };

	if (!o)
		return;
	when(d, th->unchanged_s, since, sizeof(since));
	cJSON_AddNumberToObject(o, "pid", t->pid);
	cJSON_AddNumberToObject(o, "tid", th->tid);
	cJSON_AddStringToObject(o, "name", th->name);
	cJSON_AddStringToObject(o, "state", state);
	cJSON_AddStringToObject(o, "since", since);
	cJSON_AddNumberToObject(o, "unchanged_s",
				(double)(long)(th->unchanged_s * 10) / 10);
	cJSON_AddStringToObject(o, "reason", st->reason);
	cJSON_AddItemToObject(o, "frames", frames_of(d, th));
	if (th->state == 'D') {
		k = kernel_frames(t->pid, th->tid);
		if (k)
			cJSON_AddItemToObject(o, "kernel_frames", k);
	}
	cJSON_AddItemToArray(arr, o);
}

/* Adds the stuck threads of the n targets ts to arr; how many. */
static size_t stuck_of(struct stacks *s, struct target **ts, size_t n,
		       cJSON *arr)
{
	size_t total = 0;

	for (size_t i = 0; i < n; i++) {
		struct sdump *sd;
		struct stuck *st;
		size_t k;

		if (stacks_stuck(s, ts[i], &sd, &st, &k) < 0)
			continue;
		for (size_t j = 0; j < k; j++)
			add_stuck(arr, ts[i], sd->d, &st[j]);
		total += k;
		free(st);
		sdump_put(sd);
	}
	return total;
}

int watch_stuck(struct stacks *s, struct registry *reg, const struct access *a,
		cJSON **out, size_t *count)
{
	cJSON *doc = cJSON_CreateObject(), *arr;
	struct target **ts;
	size_t n, total = 0;
	int rc;

	arr = doc ? cJSON_AddArrayToObject(doc, "threads") : NULL;
	if (!arr) {
		cJSON_Delete(doc);
		return -ENOMEM;
	}
	rc = a ? access_list(reg, a, &ts, &n) : registry_list(reg, &ts, &n);
	if (rc < 0) {
		cJSON_Delete(doc);
		return rc;
	}
	total += stuck_of(s, ts, n, arr);
	registry_put_all(ts, n);
	/* Sampled processes without the agent (--sample-ptrace) too. */
	if (registry_list_ptraced(reg, &ts, &n) == 0) {
		size_t k = 0;

		for (size_t i = 0; i < n; i++) {
			if (!a || access_sees(a, ts[i]))
				ts[k++] = ts[i];
			else
				target_put(ts[i]);
		}
		total += stuck_of(s, ts, k, arr);
		registry_put_all(ts, k);
	}
	if (count)
		*count = total;
	*out = doc;
	return 0;
}

static cJSON *thread_entry(const struct sw_thread *th)
{
	cJSON *o = cJSON_CreateObject();

	if (o) {
		cJSON_AddNumberToObject(o, "tid", th->tid);
		cJSON_AddStringToObject(o, "name", th->name);
	}
	return o;
}

/* Walks both samples in tid order and fills the diff's lists. */
static size_t compare(const struct sw_dump *a, const struct sw_dump *b,
		      cJSON *changed, cJSON *appeared, cJSON *gone)
{
	size_t *ia = stacks_index_by_tid(a), *ib = stacks_index_by_tid(b);
	size_t i = 0, j = 0, same = 0;

	while (ia && ib && (i < a->nthreads || j < b->nthreads)) {
		const struct sw_thread *x =
			i < a->nthreads ? &a->threads[ia[i]] : NULL;
		const struct sw_thread *y =
			j < b->nthreads ? &b->threads[ib[j]] : NULL;
		cJSON *o;

		if (x && (!y || x->tid < y->tid)) {
			cJSON_AddItemToArray(gone, thread_entry(x));
			i++;
		} else if (y && (!x || y->tid < x->tid)) {
			o = thread_entry(y);
			if (o)
				cJSON_AddItemToObject(o, "frames",
						      frames_of(b, y));
			cJSON_AddItemToArray(appeared, o);
			j++;
		} else if (x && y) { /* the same tid in both */
			if (stacks_same_thread_stack(a, x, b, y)) {
				same++;
			} else {
				o = thread_entry(y);
				if (o) {
					cJSON_AddItemToObject(o, "before",
							      frames_of(a, x));
					cJSON_AddItemToObject(o, "after",
							      frames_of(b, y));
				}
				cJSON_AddItemToArray(changed, o);
			}
			i++;
			j++;
		}
	}
	free(ia);
	free(ib);
	return same;
}

int watch_diff(struct stacks *s, struct target *t, double since_s,
	       int timeout_ms, cJSON **out)
{
	struct sdump *now = NULL, *before;
	cJSON *doc, *changed, *appeared, *gone;
	char from[40], to[40];
	size_t same;
	int rc;

	rc = stacks_get(s, t, timeout_ms, &now);
	if (rc < 0)
		return rc;
	before = stacks_sample_before(t, now->mono_ns, since_s);
	if (!before) {
		sdump_put(now);
		return -ENOENT;
	}
	doc = cJSON_CreateObject();
	if (!doc) {
		rc = -ENOMEM;
		goto out;
	}
	render_iso_time(&before->d->collected_at, from, sizeof(from));
	render_iso_time(&now->d->collected_at, to, sizeof(to));
	cJSON_AddNumberToObject(doc, "pid", t->pid);
	cJSON_AddStringToObject(doc, "from", from);
	cJSON_AddStringToObject(doc, "to", to);
	changed = cJSON_AddArrayToObject(doc, "changed");
	appeared = cJSON_AddArrayToObject(doc, "appeared");
	gone = cJSON_AddArrayToObject(doc, "gone");
	if (!changed || !appeared || !gone) {
		cJSON_Delete(doc);
		rc = -ENOMEM;
		goto out;
	}
	same = compare(before->d, now->d, changed, appeared, gone);
	cJSON_AddNumberToObject(doc, "unchanged", (double)same);
	*out = doc;
out:
	sdump_put(before);
	sdump_put(now);
	return rc;
}
