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
#include "render/locks.h"
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
	n = procfs_read_checked(AT_FDCWD, path, buf, sizeof(buf));
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

/*
 * The one name /proc/PID/task/TID/wchan gives for a thread asleep in the
 * kernel: what anyone who may read the thread may know of where (the
 * kernel's own stack is CAP_SYS_ADMIN's). NULL when there is none.
 */
static cJSON *wait_channel(pid_t pid, pid_t tid)
{
	char path[64], buf[128];
	ssize_t n;

	snprintf(path, sizeof(path), "/proc/%d/task/%d/wchan", (int)pid,
		 (int)tid);
	n = procfs_read_checked(AT_FDCWD, path, buf, sizeof(buf));
	if (n <= 0 || (n == 1 && buf[0] == '0'))
		return NULL;
	buf[strcspn(buf, "\n")] = '\0';
	for (char *p = buf; *p; p++)
		if ((unsigned char)*p < 0x20 || (unsigned char)*p > 0x7e)
			*p = '?';
	return cJSON_CreateString(buf);
}

static void add_stuck(cJSON *arr, const struct target *t,
		      const struct sw_dump *d, const struct stuck *st,
		      const struct locks *l, const struct access *a)
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
	if (l->w && l->w[st->thread].cycle >= 0) {
		const struct lock_cycle *c = &l->cycles[l->w[st->thread].cycle];
		cJSON *dl = cJSON_AddObjectToObject(o, "deadlock");
		cJSON *tids = dl ? cJSON_AddArrayToObject(dl, "threads") : NULL;
		cJSON *locks = dl ? cJSON_AddArrayToObject(dl, "locks") : NULL;

		for (size_t j = 0; tids && locks && j < c->n; j++) {
			char hex[24];

			snprintf(hex, sizeof(hex), "0x%llx",
				 (unsigned long long)l->w[c->threads[j]].addr);
			cJSON_AddItemToArray(
				tids, cJSON_CreateNumber(
					      d->threads[c->threads[j]].tid));
			cJSON_AddItemToArray(locks, cJSON_CreateString(hex));
		}
	}
	cJSON_AddItemToObject(o, "frames", frames_of(d, th));
	if (th->state == 'D') {
		k = wait_channel(t->pid, th->tid);
		if (k)
			cJSON_AddItemToObject(o, "wchan", k);
		k = !a || access_kernel_stacks(a)
			    ? kernel_frames(t->pid, th->tid)
			    : NULL;
		if (k)
			cJSON_AddItemToObject(o, "kernel_frames", k);
	}
	cJSON_AddItemToArray(arr, o);
}

/* {"tid", "name"} of thread i of d. */
static cJSON *who(const struct sw_dump *d, size_t i)
{
	cJSON *o = cJSON_CreateObject();

	if (o) {
		cJSON_AddNumberToObject(o, "tid", d->threads[i].tid);
		cJSON_AddStringToObject(o, "name", d->threads[i].name);
	}
	return o;
}

/*
 * A cycle of l: {"pid", "comm", "threads": [{"tid", "name", "waits_for":
 * {"kind", "address", "owner_tid"}}], "locks": ["0x..."]}, the threads in
 * waits-for order.
 */
static cJSON *cycle_json(const struct target *t, const struct sw_dump *d,
			 const struct locks *l, const struct lock_cycle *c)
{
	cJSON *o = cJSON_CreateObject(), *threads, *locks;

	if (!o)
		return NULL;
	cJSON_AddNumberToObject(o, "pid", t->pid);
	cJSON_AddStringToObject(o, "comm", d->comm);
	threads = cJSON_AddArrayToObject(o, "threads");
	locks = cJSON_AddArrayToObject(o, "locks");
	for (size_t k = 0; threads && locks && k < c->n; k++) {
		const struct lock_wait *w = &l->w[c->threads[k]];
		cJSON *th = who(d, c->threads[k]), *wf;
		char hex[24];

		snprintf(hex, sizeof(hex), "0x%llx",
			 (unsigned long long)w->addr);
		cJSON_AddItemToArray(locks, cJSON_CreateString(hex));
		if (!th)
			continue;
		wf = cJSON_AddObjectToObject(th, "waiting_for");
		if (wf) {
			cJSON_AddStringToObject(wf, "kind",
						locks_kind_name(w->kind));
			cJSON_AddStringToObject(wf, "address", hex);
			cJSON_AddNumberToObject(wf, "owner_tid",
						d->threads[w->owner_index].tid);
		}
		cJSON_AddItemToArray(threads, th);
	}
	return o;
}

/*
 * Adds the stuck threads of the n targets ts to arr, and their deadlocks
 * to cycles; how many threads.
 */
/*
 * The stuck threads of st (k of them, of sd) as a may read them (NULL:
 * all): of v, what access_view() leaves a of sd, each thread found there
 * by its tid (k updated). v is a new reference; NULL on no memory.
 */
static struct sdump *seen_stuck(const struct access *a, struct sdump *sd,
				struct stuck *st, size_t *k)
{
	struct sdump *v = a ? access_view(a, sd, false) : sd;
	size_t n = 0;

	if (!a)
		sdump_get(sd);
	if (!v || v == sd)
		return v;
	for (size_t j = 0; j < *k; j++) {
		pid_t tid = sd->d->threads[st[j].thread].tid;

		for (size_t i = 0; i < v->d->nthreads; i++)
			if (v->d->threads[i].tid == tid) {
				st[n] = st[j];
				st[n++].thread = i;
				break;
			}
	}
	*k = n;
	return v;
}

/*
 * Adds the stuck threads of the n targets ts that a may read (NULL: all)
 * to arr, and their deadlocks to cycles; how many threads.
 */
static size_t stuck_of(struct stacks *s, struct target **ts, size_t n,
		       const struct access *a, cJSON *arr, cJSON *cycles)
{
	size_t total = 0;

	for (size_t i = 0; i < n; i++) {
		struct sdump *sd, *v;
		struct stuck *st;
		struct locks l = { 0 };
		bool dead = false;
		size_t k;

		if (stacks_stuck(s, ts[i], &sd, &st, &k) < 0)
			continue;
		v = sd ? seen_stuck(a, sd, st, &k) : NULL;
		sdump_put(sd);
		if (!v) {
			free(st);
			continue;
		}
		for (size_t j = 0; j < k; j++)
			dead = dead || strcmp(st[j].reason, "deadlock") == 0;
		if (dead && locks_analyze(v->d, &l) == 0)
			for (size_t c = 0; c < l.ncycles; c++)
				cJSON_AddItemToArray(cycles,
						     cycle_json(ts[i], v->d, &l,
								&l.cycles[c]));
		for (size_t j = 0; j < k; j++)
			add_stuck(arr, ts[i], v->d, &st[j], &l, a);
		total += k;
		locks_release(&l);
		free(st);
		sdump_put(v);
	}
	return total;
}

int watch_stuck(struct stacks *s, struct registry *reg, const struct access *a,
		cJSON **out, size_t *count)
{
	cJSON *doc = cJSON_CreateObject(), *arr, *cycles;
	struct target **ts;
	size_t n, total = 0;
	int rc;

	arr = doc ? cJSON_AddArrayToObject(doc, "threads") : NULL;
	cycles = doc ? cJSON_AddArrayToObject(doc, "deadlocks") : NULL;
	if (!arr || !cycles) {
		cJSON_Delete(doc);
		return -ENOMEM;
	}
	rc = a ? access_list(reg, a, &ts, &n) : registry_list(reg, &ts, &n);
	if (rc < 0) {
		cJSON_Delete(doc);
		return rc;
	}
	total += stuck_of(s, ts, n, a, arr, cycles);
	registry_put_all(ts, n);
	/* Sampled processes without the agent (--sample-ptrace) too. */
	if (registry_list_ptraced(reg, &ts, &n) == 0) {
		bool *ok = calloc(n ? n : 1, sizeof(*ok));
		size_t k = 0;

		if (ok && a)
			access_sees_all(a, ts, n, ok);
		for (size_t i = 0; i < n; i++) {
			if (ok && (!a || ok[i]))
				ts[k++] = ts[i];
			else
				target_put(ts[i]);
		}
		free(ok);
		total += stuck_of(s, ts, k, a, arr, cycles);
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

/* {"before", "after", "frames", "threads": [{"tid", "name"}]}. */
static cJSON *group_change(const struct sw_dump *d, size_t g, size_t before,
			   size_t after)
{
	cJSON *o = cJSON_CreateObject(), *threads;

	if (!o)
		return NULL;
	cJSON_AddNumberToObject(o, "before", (double)before);
	cJSON_AddNumberToObject(o, "after", (double)after);
	cJSON_AddItemToObject(
		o, "frames",
		render_json_frames(d, &d->threads[d->groups[g].rep]));
	threads = cJSON_AddArrayToObject(o, "threads");
	for (size_t i = 0; threads && i < d->nthreads; i++)
		if (d->threads[i].status == SW_ST_OK &&
		    d->threads[i].group == (int)g)
			cJSON_AddItemToArray(threads, who(d, i));
	return o;
}

/*
 * The groups of identical stacks whose count differs between sample a
 * and b, into arr: those b has (the frames and threads of b; before 0
 * for a group that appeared), then those only a had (after 0). Stacks
 * compare by the rule of stacks_same_thread_stack(). false, and arr left
 * as it is, past DIFF_GROUP_PAIRS comparisons: a dump of thousands of
 * different stacks on each side is not compared group by group.
 */
#define DIFF_GROUP_PAIRS ((size_t)1 << 22)
static bool diff_groups(const struct sw_dump *a, const struct sw_dump *b,
			cJSON *arr)
{
	bool *matched;

	if (a->ngroups && b->ngroups > DIFF_GROUP_PAIRS / a->ngroups)
		return false;
	matched = calloc(a->ngroups ? a->ngroups : 1, sizeof(*matched));
	if (!matched)
		return false;
	for (size_t j = 0; j < b->ngroups; j++) {
		const struct sw_thread *y = &b->threads[b->groups[j].rep];
		size_t before = 0;

		for (size_t i = 0; i < a->ngroups; i++) {
			if (matched[i] ||
			    !stacks_same_thread_stack(
				    a, &a->threads[a->groups[i].rep], b, y))
				continue;
			matched[i] = true;
			before = a->groups[i].count;
			break;
		}
		if (before != b->groups[j].count)
			cJSON_AddItemToArray(
				arr,
				group_change(b, j, before, b->groups[j].count));
	}
	for (size_t i = 0; i < a->ngroups; i++)
		if (!matched[i])
			cJSON_AddItemToArray(
				arr, group_change(a, i, a->groups[i].count, 0));
	free(matched);
	return true;
}

/* *sd replaced by what a may read of it (access_view()). */
static int view(const struct access *a, struct sdump **sd, bool past)
{
	struct sdump *v = access_view(a, *sd, past);

	sdump_put(*sd);
	*sd = v;
	return v ? 0 : -ENOMEM;
}

int watch_diff(struct stacks *s, struct target *t, const struct access *a,
	       double since_s, int timeout_ms, cJSON **out)
{
	struct sdump *now = NULL, *before;
	cJSON *doc, *changed, *appeared, *gone, *groups;
	char from[40], to[40];
	size_t same;
	int rc;

	rc = stacks_get(s, t, &a->who, timeout_ms, &now);
	if (rc < 0)
		return rc;
	before = stacks_sample_before(t, now->mono_ns, since_s);
	if (!before) {
		sdump_put(now);
		return -ENOENT;
	}
	if (view(a, &now, false) < 0 || view(a, &before, true) < 0) {
		rc = -ENOMEM;
		goto out;
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
	groups = cJSON_CreateArray();
	if (groups && diff_groups(before->d, now->d, groups))
		cJSON_AddItemToObject(doc, "groups", groups);
	else
		cJSON_Delete(groups);
	*out = doc;
out:
	sdump_put(before);
	sdump_put(now);
	return rc;
}

void watch_diff_why(struct stacks *s, struct target *t, double since_s,
		    int sample_ms, char *why, size_t size, double *retry_s)
{
	struct sdump **list = NULL;
	struct timespec ts;
	double oldest_s = 0, reach_s;
	uint64_t now;
	size_t n = 0;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	now = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
	*retry_s = -1;
	if (stacks_history(t, 0, now, &list, &n) == 0 && n)
		oldest_s = (double)(now - list[0]->mono_ns) / 1e9;
	for (size_t i = 0; i < n; i++)
		sdump_put(list[i]);
	free(list);
	/*
	 * The history keeps --history-seconds; --history N, when given,
	 * caps it at N samples, which periodic sampling spaces an interval
	 * apart; requests alone keep their oldest until the cap is full.
	 */
	reach_s = (double)s->history_ns / 1e9;
	if (s->history && sample_ms > 0 &&
	    (double)s->history * sample_ms / 1000.0 < reach_s)
		reach_s = (double)s->history * sample_ms / 1000.0;
	else if (s->history && sample_ms <= 0 && n >= s->history)
		reach_s = oldest_s;
	if (reach_s < since_s) {
		snprintf(why, size,
			 "no sample of pid %d is %g s old: the history "
			 "reaches back about %.0f s (--history-seconds, "
			 "--history); ask for less, or raise them",
			 (int)t->pid, since_s, reach_s);
		return;
	}
	*retry_s = (double)(long)(since_s - oldest_s + 0.999);
	if (*retry_s < 1)
		*retry_s = 1;
	snprintf(why, size,
		 "no sample of pid %d is %g s old yet: the oldest kept is "
		 "%.1f s old, so one will be in %.0f s",
		 (int)t->pid, since_s, oldest_s, *retry_s);
}
