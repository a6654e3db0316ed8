/*
 * stacks.c - dump, symbolize, group and count (stacks.h).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "model/clock.h"
#include "model/procfs.h"
#include "render/group.h"
#include "render/locks.h"
#include "cond.h"
#include "log.h"
#include "modfile.h"
#include "privsep/parsers.h"
#include "symbols/jitcache.h"
#include "symbols/jitmap.h"
#include "symbols/vdso.h"
#include "spin.h"
#include "stacks.h"
#include "symmemo.h"

const double stacks_buckets[STACKS_NBUCKETS] = {
	0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5,
};

/* The process a dump being symbolized is of, for its files. */
struct symreq {
	pid_t pid;
	int pidfd; /* -1: the daemon itself */
	int mm_rc; /* 1: its mappings not read yet */
	struct modfile_maps mm;
};

/*
 * The file the process maps at a module's start, for a parser worker:
 * its mappings read once a file is wanted (a warm cache wants none),
 * unless the unwinder of this dump read them already.
 */
static int open_module(void *arg, const struct sw_module *m)
{
	struct symreq *q = arg;

	if (q->mm_rc == 1 && modfile_pass_take(q->pid, q->pidfd, &q->mm) == 0)
		q->mm_rc = 0;
	if (q->mm_rc == 1)
		q->mm_rc = modfile_maps_read(q->pid, q->pidfd, &q->mm);
	return q->mm_rc == 0 ? modfile_open(&q->mm, m) : -ESRCH;
}

/*
 * The vDSO's image, read from the target's memory and kept only if the
 * process pinned at registration is still the one read.
 */
static int image_module(void *arg, const struct sw_module *m, void **image,
			size_t *size)
{
	struct symreq *q = arg;
	int r = vdso_read_live(q->pid, m->start, m->end, image, size);

	if (r == 0 && !modfile_still_there(q->pidfd)) {
		free(*image);
		*image = NULL;
		r = -ESRCH;
	}
	return r;
}

int stacks_init(struct stacks *s, struct registry *reg, int max_dump_rate,
		int history, int stuck_after_s)
{
	memset(s, 0, sizeof(*s));
	s->reg = reg;
	s->min_interval_ns = 1000000000ull / (uint64_t)max_dump_rate;
	s->history = history > 0 ? (size_t)history : 0;
	s->history_ns = 900 * 1000000000ull;
	s->spacing_ns = 750 * 1000000ull; /* 3/4 of the default interval */
	s->stuck_after_s = stuck_after_s;
	s->sym_budget_ns = 500 * 1000000ull;
	s->max_history_bytes = (size_t)256 << 20;
	pthread_mutex_init(&s->sym_lock, NULL);
	pthread_mutex_init(&s->use_lock, NULL);
	if (jitcache_new(STACKS_DEFAULT_JIT_BYTES, &s->jit) < 0)
		return -ENOMEM;
	/* Perf maps are the target's text: parsed by a worker too. */
	jitcache_set_reader(s->jit, parsers_perfmap);
	/* Frames without symbols only: it opens and parses nothing. */
	if (sym_new(NULL, NULL, &s->sym) != 0)
		return -ENOMEM;
	return 0;
}

void stacks_release(struct stacks *s)
{
	sym_free(s->sym);
	s->sym = NULL;
	jitcache_free(s->jit);
	s->jit = NULL;
	free(s->use);
	s->use = NULL;
	pthread_mutex_destroy(&s->use_lock);
	pthread_mutex_destroy(&s->sym_lock);
}

void stacks_set_limits(struct stacks *s, int symbolize_budget_ms,
		       size_t max_history_bytes)
{
	s->sym_budget_ns = (uint64_t)symbolize_budget_ms * 1000000ull;
	s->max_history_bytes = max_history_bytes;
}

void stacks_set_history(struct stacks *s, const struct stacks_history_opts *o)
{
	s->history_ns =
		(uint64_t)(o->seconds > 0 ? o->seconds : 1) * 1000000000ull;
	/* 3/4 of an interval: a sample a little early is still kept. */
	s->spacing_ns =
		(uint64_t)(o->sample_interval_ms > 0 ? o->sample_interval_ms
						     : 0) *
		750000ull;
	s->ptrace_spacing_ns =
		(uint64_t)(o->ptrace_interval_ms > 0 ? o->ptrace_interval_ms
						     : 0) *
		750000ull;
}

bool stacks_sampled(const struct stacks *s, const struct target *t)
{
	return (t->ptrace ? s->ptrace_spacing_ns : s->spacing_ns) != 0;
}

void stacks_set_jit_limit(struct stacks *s, size_t max_jit_bytes)
{
	jitcache_set_limit(s->jit, max_jit_bytes);
}

bool stacks_sym_stuck(struct stacks *s, uint64_t now_ns, uint64_t limit_ns)
{
	uint64_t since = atomic_load(&s->sym_busy_since_ns);

	return since && now_ns > since && now_ns - since > limit_ns;
}

/* uid's entry of s->use, made if need be; NULL on out of memory. */
static struct stacks_use *use_entry(struct stacks *s, uid_t uid)
{
	struct stacks_use *u;

	for (size_t i = 0; i < s->nuse; i++)
		if (s->use[i].uid == uid)
			return &s->use[i];
	u = realloc(s->use, (s->nuse + 1) * sizeof(*u));
	if (!u)
		return NULL;
	s->use = u;
	u = &s->use[s->nuse++];
	u->uid = uid;
	u->bytes = 0;
	return u;
}

size_t stacks_use_of(struct stacks *s, uid_t uid)
{
	size_t n = 0;

	pthread_mutex_lock(&s->use_lock);
	for (size_t i = 0; i < s->nuse; i++)
		if (s->use[i].uid == uid)
			n = s->use[i].bytes;
	pthread_mutex_unlock(&s->use_lock);
	return n;
}

/* Gives back bytes that uid's samples no longer take. */
static void use_refund(struct stacks *s, uid_t uid, size_t bytes)
{
	struct stacks_use *u;

	pthread_mutex_lock(&s->use_lock);
	u = use_entry(s, uid);
	if (u)
		u->bytes = u->bytes > bytes ? u->bytes - bytes : 0;
	pthread_mutex_unlock(&s->use_lock);
}

static void count(struct stacks *s, int rc, const struct sw_dump *d,
		  uint64_t us)
{
	enum stacks_result res = rc == 0	    ? RESULT_OK
				 : rc == -ETIMEDOUT ? RESULT_TIMEOUT
						    : RESULT_ERROR;

	atomic_fetch_add(&s->m.dumps[res], 1);
	for (int b = 0; b < STACKS_NBUCKETS; b++)
		if ((double)us / 1e6 <= stacks_buckets[b])
			atomic_fetch_add(&s->m.duration_buckets[b], 1);
	atomic_fetch_add(&s->m.duration_count, 1);
	atomic_fetch_add(&s->m.duration_sum_us, us);
	if (!d)
		return;
	if (d->method == SW_METHOD_PTRACE)
		atomic_fetch_add(&s->m.snapshots, 1);
	for (size_t i = 0; i < d->nthreads; i++) {
		enum sw_status st = d->threads[i].status;

		atomic_fetch_add(&s->m.threads[st], 1);
		if (st == SW_ST_OK &&
		    (unsigned)d->threads[i].read < SW_READ_COUNT)
			atomic_fetch_add(&s->m.reads[d->threads[i].read], 1);
		if (st == SW_ST_OK && (d->threads[i].flags & SW_TF_REUSED))
			atomic_fetch_add(&s->m.reused, 1);
		/* Exactly the ok-by-signal and timed-out threads were
		 * signalled, but for those whose last read was reused. */
		if (d->method == SW_METHOD_AGENT &&
		    ((st == SW_ST_OK && d->threads[i].read == SW_READ_SIGNAL &&
		      !(d->threads[i].flags & SW_TF_REUSED)) ||
		     st == SW_ST_TIMEOUT))
			atomic_fetch_add(&s->m.signals_sent, 1);
	}
}

static void name_jit_frames(struct stacks *s, struct target *t,
			    struct sw_dump *d);

/*
 * Cuts every thread of d to max frames (those unwound here are already;
 * an agent's come as its slot holds them), saying so where it had more.
 */
static void cut_frames(struct sw_dump *d, unsigned max)
{
	for (size_t i = 0; i < d->nthreads; i++) {
		struct sw_thread *t = &d->threads[i];

		if (t->nips > max) {
			t->nips = max;
			t->flags |= SW_TF_TRUNCATED;
		}
	}
}

/*
 * Names the frames of d, a raw dump of t: from the symbols of t's last
 * dumps when they know every stack of it, else by a parser worker, with
 * the files of the process's own mappings, read now and kept only if the
 * process pinned at registration is still there. No lock is held while
 * the worker works.
 */
static int symbolized(struct stacks *s, struct target *t, struct sw_dump *d,
		      uint64_t deadline_ns)
{
	struct symreq q = { .pid = t->pid,
			    .pidfd = t->self ? -1 : t->pidfd,
			    .mm_rc = 1 };
	struct parse_files files = { .arg = &q,
				     .open_module = open_module,
				     .image = image_module };
	uint64_t hits = 0;
	int rc;

	pthread_mutex_lock(&t->memo_lock);
	rc = symmemo_fill(t->memo, d, &hits);
	pthread_mutex_unlock(&t->memo_lock);
	if (rc != 0) {
		if (rc > 0) {
			atomic_fetch_add(&s->m.memo_dumps, 1);
			atomic_fetch_add(&s->m.memo_hits, hits);
		}
		return rc < 0 ? rc : 0;
	}
	atomic_store(&s->sym_busy_since_ns, clock_now_ns());
	rc = parsers_symbolize(d, deadline_ns, &files);
	atomic_store(&s->sym_busy_since_ns, 0);
	if (q.mm_rc == 0)
		modfile_maps_release(&q.mm);
	if (rc == 0) {
		pthread_mutex_lock(&t->memo_lock);
		symmemo_update(&t->memo, d);
		pthread_mutex_unlock(&t->memo_lock);
	}
	return rc;
}

/*
 * stacks_dump(); sample: a periodic sample's (target_dump_raw_sample());
 * max_frames: as stacks_dump_frames(), 0 the usual.
 */
static int dump_symbolized(struct stacks *s, struct target *t,
			   const struct asker *who, int timeout_ms,
			   bool symbols, bool sample, unsigned max_frames,
			   struct sw_dump **out)
{
	uint64_t start = clock_now_ns(), sym_start;
	struct sw_dump *d = NULL;
	int rc;

	*out = NULL;
	modfile_pass_begin();
	rc = sample	  ? target_dump_raw_sample(t, who, timeout_ms, &d)
	     : max_frames ? target_dump_raw_frames(t, who, timeout_ms,
						   max_frames, &d)
			  : target_dump_raw(t, who, timeout_ms, &d);
	count(s, rc, d, (clock_now_ns() - start) / 1000);
	if (rc < 0) {
		/* An agent's part failed after the kernel's was unwound:
		 * what the unwinder handed on is of no use now. */
		modfile_pass_begin();
		/* A changed process: target_unchanged() said so already. */
		if (rc != REGISTRY_ECHANGED)
			log_info("dump of pid %d failed: %s", (int)t->pid,
				 sw_strerror(rc));
		return rc;
	}
	/* The pid as the daemon sees it, whatever the agent said. */
	d->pid = t->pid;
	if (max_frames)
		cut_frames(d, max_frames);
	atomic_store(&t->last_threads, (uint32_t)d->nthreads);
	atomic_store(&t->last_sample_ms,
		     (uint64_t)d->collected_at.tv_sec * 1000 +
			     (uint64_t)d->collected_at.tv_nsec / 1000000);
	sym_start = clock_now_ns();
	if (symbols) {
		rc = symbolized(s, t, d, sym_start + s->sym_budget_ns);
	} else {
		pthread_mutex_lock(&s->sym_lock);
		rc = sym_dump(s->sym, d, false);
		pthread_mutex_unlock(&s->sym_lock);
	}
	modfile_pass_begin(); /* none left over when it had no use */
	if (rc == 0 && symbols)
		name_jit_frames(s, t, d);
	if (rc == 0)
		rc = group_dump(d);
	if (rc < 0) {
		sw_dump_free(d);
		return rc;
	}
	*out = d;
	return 0;
}

int stacks_dump(struct stacks *s, struct target *t, const struct asker *who,
		int timeout_ms, bool symbols, struct sw_dump **out)
{
	return dump_symbolized(s, t, who, timeout_ms, symbols, false, 0, out);
}

void stacks_dump_frames_many(struct stacks *s, struct target **ts, size_t n,
			     const struct asker *who, int timeout_ms,
			     bool symbols, unsigned max_frames,
			     struct sdump **sds, int *rcs)
{
	uint64_t until = clock_now_ns() + (uint64_t)timeout_ms * 1000000u;

	for (size_t i = 0; i < n; i++) {
		uint64_t now = clock_now_ns();
		struct sw_dump *d = NULL;

		sds[i] = calloc(1, sizeof(*sds[i]));
		if (!sds[i]) {
			rcs[i] = -ENOMEM;
			continue;
		}
		atomic_init(&sds[i]->refs, 1);
		rcs[i] = now >= until
				 ? -ETIMEDOUT
				 : stacks_dump_frames(
					   s, ts[i], who,
					   (int)((until - now) / 1000000u) + 1,
					   symbols, max_frames, &d);
		sds[i]->d = d;
		sds[i]->mono_ns = now;
	}
}

void stacks_sym_stats(struct stacks *s, uint64_t *hits, uint64_t *misses)
{
	struct parsers_stats ps;

	parsers_stats(&ps);
	*hits = ps.cache_hits + atomic_load(&s->m.memo_hits);
	*misses = ps.cache_misses;
}

#define GRACE_NS 500000000ull /* as the registry's wait for an agent */

/* What the dump service keeps per target, under dump_lock. */
struct target_svc {
	pthread_mutex_t dump_lock;
	pthread_cond_t dump_cond;
	bool dumping;		  /* a dump is in flight: others wait for it */
	uint64_t dump_gen;	  /* bumped when a dump ends */
	uint64_t last_attempt_ns; /* CLOCK_MONOTONIC start of the newest */
	int last_rc;		  /* its result */
	struct sdump *last;	  /* its dump, NULL after an error */
	/* A dump of another depth (stacks_dump_frames()): in flight, and
	 * when the newest began. Neither cached nor waited on by others. */
	bool frames_busy;
	uint64_t frames_last_ns;
	struct history hist; /* the samples kept, oldest first */
	/* The newest sample is kept only until the next one: a dump asked
	 * for between two periodic samples, or one too near the last. */
	bool spare_tail;
	pid_t agent_tid;      /* the agent's thread, once a dump marked it */
	size_t hist_bytes;    /* what hist takes, charged to uid */
	struct stacks *owner; /* whose use hist_bytes is in; NULL: none */
	uid_t uid;
	struct jitmap jit; /* its perf map; used by the one dump in flight */
};

/*
 * JIT frames named from t's perf map (jitmap.h), from the maps shared by
 * all targets. A map past its owner's limit leaves them unnamed and says
 * so in d, and in the log when a target first finds itself so.
 */
static void name_jit_frames(struct stacks *s, struct target *t,
			    struct sw_dump *d)
{
	struct jitmap *jm;
	bool refused, over;
	char why[192];

	if (!t->svc || t->self)
		return;
	jm = &t->svc->jit;
	refused = jm->refused;
	over = jm->over_limit;
	jitmap_apply(jm, s->jit, t->pid, t->uid, d);
	if (jm->refused && !refused)
		log_debug("pid %d: its perf map is not a regular file of uid "
			  "%u: not read",
			  (int)t->pid, (unsigned)t->uid);
	if (!jm->over_limit)
		return;
	snprintf(why, sizeof(why),
		 "perf map /tmp/perf-%d.map not used: it does not fit in "
		 "the %zu MiB that the perf maps of uid %u may take "
		 "(--max-jit-mib)",
		 (int)procfs_inner_pid(t->pid), jitcache_limit(s->jit) >> 20,
		 (unsigned)t->uid);
	free(d->jit_map_refused);
	d->jit_map_refused = strdup(why);
	if (!over)
		log_notice("pid %d of uid %u: %s", (int)t->pid,
			   (unsigned)t->uid, why);
}

static struct target_svc *svc_new(void)
{
	struct target_svc *svc = calloc(1, sizeof(*svc));

	if (!svc)
		return NULL;
	pthread_mutex_init(&svc->dump_lock, NULL);
	/* Waits on it have deadlines on the monotonic clock. */
	cond_init_monotonic(&svc->dump_cond);
	return svc;
}

static void svc_free(struct target_svc *svc)
{
	if (svc->owner)
		use_refund(svc->owner, svc->uid, svc->hist_bytes);
	sdump_put(svc->last);
	history_release(&svc->hist);
	jitmap_release(&svc->jit);
	pthread_mutex_destroy(&svc->dump_lock);
	pthread_cond_destroy(&svc->dump_cond);
	free(svc);
}

const struct registry_hooks stacks_hooks = { svc_new, svc_free };

static int cmp_index_by_tid(const void *a, const void *b, void *arg)
{
	const struct sw_dump *d = arg;
	pid_t x = d->threads[*(const size_t *)a].tid;
	pid_t y = d->threads[*(const size_t *)b].tid;

	return (x > y) - (x < y);
}

/* The position of tid in by_tid (d's indices sorted by tid), or SIZE_MAX. */
static size_t tid_pos(const struct sw_dump *d, const size_t *by_tid, pid_t tid)
{
	size_t lo = 0, hi = d->nthreads;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		pid_t m = d->threads[by_tid[mid]].tid;

		if (m == tid)
			return mid;
		if (m < tid)
			lo = mid + 1;
		else
			hi = mid;
	}
	return SIZE_MAX;
}

const struct sw_thread *stacks_find_tid(const struct sw_dump *d,
					const size_t *by_tid, pid_t tid)
{
	size_t k = tid_pos(d, by_tid, tid);

	return k == SIZE_MAX ? NULL : &d->threads[by_tid[k]];
}

/*
 * stacks_find_tid(), trying position *next first: two samples mostly list the
 * same threads in the same order. The guess is taken only where the tid
 * is unique there, so the answer is stacks_find_tid()'s. Sets *next past the
 * thread found.
 */
static const struct sw_thread *find_tid_near(const struct sw_dump *d,
					     const size_t *by_tid, pid_t tid,
					     size_t *next)
{
	size_t k = *next, n = d->nthreads;

	if (!(k < n && d->threads[by_tid[k]].tid == tid &&
	      (k + 1 == n || d->threads[by_tid[k + 1]].tid != tid) &&
	      (k == 0 || d->threads[by_tid[k - 1]].tid != tid)))
		k = tid_pos(d, by_tid, tid);
	if (k == SIZE_MAX)
		return NULL;
	*next = k + 1;
	return &d->threads[by_tid[k]];
}

size_t *stacks_index_by_tid(const struct sw_dump *d)
{
	size_t *idx = malloc((d->nthreads ? d->nthreads : 1) * sizeof(*idx));
	bool sorted = true;

	if (!idx)
		return NULL;
	for (size_t i = 0; i < d->nthreads; i++) {
		idx[i] = i;
		sorted = sorted &&
			 (!i || d->threads[i - 1].tid < d->threads[i].tid);
	}
	/* The collector lists /proc in tid order: usually sorted already. */
	if (!sorted)
		qsort_r(idx, d->nthreads, sizeof(*idx), cmp_index_by_tid,
			(void *)d);
	return idx;
}

/* The thread whose frames stand for t's stack (its group's), or NULL. */
static const struct sw_thread *stack_of(const struct sw_dump *d,
					const struct sw_thread *t)
{
	if (t->status != SW_ST_OK || t->group < 0 ||
	    (size_t)t->group >= d->ngroups)
		return NULL;
	return &d->threads[d->groups[t->group].rep];
}

bool stacks_same_thread_stack(const struct sw_dump *da,
			      const struct sw_thread *a,
			      const struct sw_dump *db,
			      const struct sw_thread *b)
{
	const struct sw_thread *ra = stack_of(da, a), *rb = stack_of(db, b);

	/* No stack on either side: the same when the reason is the same. */
	if (!ra || !rb)
		return !ra && !rb && a->status == b->status;
	return group_same_stack(da, ra, db, rb);
}

/* The last comparison of a group of d with one of the sample before. */
struct group_memo {
	int prev_group; /* + 1; 0: none yet */
	bool same;
};

/*
 * stacks_same_thread_stack(pd, p, d, t), remembering per group of d the
 * answer for the last group of pd it was compared with: threads of one
 * group were mostly in one group before too, so a dump of a thousand
 * threads compares a few stacks, not a thousand. memo (d->ngroups
 * entries) may be NULL.
 */
static bool same_stack_memo(const struct sw_dump *pd, const struct sw_thread *p,
			    const struct sw_dump *d, const struct sw_thread *t,
			    struct group_memo *memo)
{
	struct group_memo *m;

	if (!memo || !stack_of(pd, p) || !stack_of(d, t))
		return stacks_same_thread_stack(pd, p, d, t);
	m = &memo[t->group];
	if (m->prev_group != p->group + 1) {
		m->prev_group = p->group + 1;
		m->same = stacks_same_thread_stack(pd, p, d, t);
	}
	return m->same;
}

/*
 * Sets unchanged_s of every thread of d (taken at now) from prev, the
 * sample before it (or none): the same stack as in prev adds the time in
 * between, anything else starts from 0.
 */
static void apply_history(struct sw_dump *d, uint64_t now,
			  const struct sdump *prev)
{
	size_t *idx = prev ? stacks_index_by_tid(prev->d) : NULL;
	struct group_memo *memo =
		idx ? calloc(d->ngroups ? d->ngroups : 1, sizeof(*memo)) : NULL;
	size_t next = 0;

	for (size_t i = 0; i < d->nthreads; i++) {
		struct sw_thread *t = &d->threads[i];
		const struct sw_thread *p =
			idx ? find_tid_near(prev->d, idx, t->tid, &next) : NULL;

		t->unchanged_s = 0;
		if (p && p->unchanged_s >= 0 &&
		    same_stack_memo(prev->d, p, d, t, memo))
			t->unchanged_s = p->unchanged_s +
					 (double)(now - prev->mono_ns) / 1e9;
	}
	free(memo);
	free(idx);
}

/* Gives back what sd, dropped from t's history, took. */
static void forget(struct stacks *s, struct target *t, struct sdump *sd)
{
	t->svc->hist_bytes -= sd->bytes;
	use_refund(s, t->uid, sd->bytes);
	sdump_put(sd);
}

/* The least time between two samples t keeps; 0: keeps every one. */
static uint64_t spacing_of(const struct stacks *s, const struct target *t)
{
	return t->ptrace ? s->ptrace_spacing_ns : s->spacing_ns;
}

/*
 * Appends sd (periodic: a sampler's) to t's history, first dropping a
 * spare newest sample (the one before sd came only to link it with its
 * predecessor), then what is older than the history's reach, past its
 * count, and past t's share of what its user may keep (max_history_bytes
 * over the user's targets). sd is itself spare when t is sampled and sd
 * is no periodic sample, or comes within the spacing of the sample
 * before. t keeps at least sd while the user's total allows; else sd is
 * not kept and STACKS_EHISTORY returned. Called under dump_lock with
 * nsame, the user's target count.
 */
static int remember(struct stacks *s, struct target *t, struct sdump *sd,
		    size_t nsame, bool periodic)
{
	struct target_svc *svc = t->svc;
	size_t share = s->max_history_bytes / (nsame ? nsame : 1);
	uint64_t spacing = spacing_of(s, t);
	struct history *h = &svc->hist;
	struct stacks_use *u;
	struct sdump *prev;
	bool spare;
	int rc = 0;

	if (!svc->owner) {
		svc->owner = s;
		svc->uid = t->uid;
	}
	if (svc->spare_tail && h->n)
		forget(s, t, history_pop_newest(h));
	svc->spare_tail = false;
	prev = history_newest(h);
	spare = prev && spacing &&
		(!periodic || sd->mono_ns - prev->mono_ns < spacing);
	while (h->n && sd->mono_ns - history_at(h, 0)->mono_ns > s->history_ns)
		forget(s, t, history_pop_oldest(h));
	while (h->n && s->history && h->n >= s->history)
		forget(s, t, history_pop_oldest(h));
	while (h->n && svc->hist_bytes + sd->bytes > share)
		forget(s, t, history_pop_oldest(h));
	pthread_mutex_lock(&s->use_lock);
	u = use_entry(s, t->uid);
	if (!u)
		rc = -ENOMEM;
	else if (u->bytes + sd->bytes > s->max_history_bytes)
		rc = STACKS_EHISTORY;
	else
		u->bytes += sd->bytes;
	pthread_mutex_unlock(&s->use_lock);
	if (rc)
		return rc;
	sdump_get(sd);
	if (history_push(h, sd) < 0) {
		sdump_put(sd);
		use_refund(s, t->uid, sd->bytes);
		return -ENOMEM;
	}
	svc->hist_bytes += sd->bytes;
	svc->spare_tail = spare;
	return 0;
}

/*
 * Takes a fresh dump of t (a periodic sample's with STACKS_SAMPLE in
 * flags) and publishes it; called with dump_lock free.
 */
static int fresh_dump(struct stacks *s, struct target *t,
		      const struct asker *who, int timeout_ms, int flags,
		      struct sdump **out)
{
	struct sw_dump *d = NULL;
	struct sdump *sd = NULL;
	uint64_t now = clock_now_ns();
	size_t nsame = registry_count_uid(s->reg, t->uid);
	int rc;

	rc = dump_symbolized(s, t, who, timeout_ms, true,
			     (flags & STACKS_SAMPLE) != 0, 0, &d);
	if (rc == 0) {
		sd = calloc(1, sizeof(*sd));
		if (!sd) {
			sw_dump_free(d);
			rc = -ENOMEM;
		}
	}
	if (rc == 0) {
		/* The daemon's own threads are never flagged: no need. */
		if (!t->self)
			spin_read(t->pid, d);
		sd->sched_ns = clock_now_ns();
	}
	pthread_mutex_lock(&t->svc->dump_lock);
	if (rc == 0) {
		pid_t dumper = spin_dumper(d);

		if (dumper)
			t->svc->agent_tid = dumper;
		sd->refs = 1;
		sd->d = d;
		sd->mono_ns = now;
		apply_history(d, now, history_newest(&t->svc->hist));
		dump_compact(d);
		sd->bytes = dump_bytes(d) + sizeof(*sd);
		rc = remember(s, t, sd, nsame, (flags & STACKS_SAMPLE) != 0);
		if (rc < 0) {
			if (rc == STACKS_EHISTORY)
				log_info("pid %d of uid %d: its dump of %zu "
					 "KiB is not kept: the user's "
					 "samples take %zu MiB already "
					 "(--max-history-mib)",
					 (int)t->pid, (int)t->uid,
					 sd->bytes >> 10,
					 stacks_use_of(s, t->uid) >> 20);
			sdump_put(sd);
			sd = NULL;
		}
	}
	if (rc == 0) {
		sdump_put(t->svc->last);
		t->svc->last = sd;
		sdump_get(sd);
		*out = sd;
	} else {
		sdump_put(t->svc->last);
		t->svc->last = NULL;
	}
	t->svc->last_rc = rc;
	t->svc->dumping = false;
	t->svc->dump_gen++;
	pthread_cond_broadcast(&t->svc->dump_cond);
	pthread_mutex_unlock(&t->svc->dump_lock);
	return rc;
}

/*
 * A sampler served the published dump (one asked for a moment before, or
 * in flight): that dump is its sample, so when the history keeps it only
 * as spare and it is spaced from the sample before, it stays. Else a
 * client asking 30 times a second would leave the history without a
 * sample. Called under dump_lock.
 */
static void promote(const struct stacks *s, struct target *t)
{
	const struct history *h = &t->svc->hist;
	const struct sdump *sd = history_newest(h);

	if (!t->svc->spare_tail || !sd || sd != t->svc->last)
		return;
	if (h->n < 2 ||
	    sd->mono_ns - history_at(h, h->n - 2)->mono_ns >= spacing_of(s, t))
		t->svc->spare_tail = false;
}

/*
 * The published result, with a reference (a sampler's with sample);
 * called under dump_lock.
 */
static int published(const struct stacks *s, struct target *t, bool sample,
		     struct sdump **out)
{
	if (t->svc->last_rc < 0 || !t->svc->last)
		return t->svc->last_rc < 0 ? t->svc->last_rc : -EAGAIN;
	if (sample)
		promote(s, t);
	sdump_get(t->svc->last);
	*out = t->svc->last;
	return 0;
}

int stacks_get(struct stacks *s, struct target *t, const struct asker *who,
	       int timeout_ms, struct sdump **out)
{
	return stacks_get_flags(s, t, who, timeout_ms, 0, out);
}

/*
 * A turn of t for a dump of another depth (stacks_dump_frames()): one
 * at a time, and none sooner than 1/max_dump_rate s after the last dump
 * of t of any depth began (waited for, not served from the cache: that
 * one is of the usual depth). The registry reads one target once at a
 * time whatever asks. Returns 0 with the turn taken (frames_done() ends
 * it), or -ETIMEDOUT when it does not come by deadline (CLOCK_MONOTONIC
 * ns).
 */
static int frames_turn(struct stacks *s, struct target *t, uint64_t deadline)
{
	struct timespec ts = { .tv_sec = (time_t)(deadline / 1000000000ull),
			       .tv_nsec = (long)(deadline % 1000000000ull) };
	int rc = 0;

	pthread_mutex_lock(&t->svc->dump_lock);
	for (;;) {
		uint64_t now = clock_now_ns(), next;

		if (now >= deadline) {
			rc = -ETIMEDOUT;
			break;
		}
		next = (t->svc->last_attempt_ns > t->svc->frames_last_ns
				? t->svc->last_attempt_ns
				: t->svc->frames_last_ns) +
		       s->min_interval_ns;
		if (!t->svc->frames_busy && now >= next)
			break;
		if (t->svc->frames_busy) {
			pthread_cond_timedwait(&t->svc->dump_cond,
					       &t->svc->dump_lock, &ts);
		} else {
			struct timespec until = {
				.tv_sec = (time_t)(next / 1000000000ull),
				.tv_nsec = (long)(next % 1000000000ull)
			};

			pthread_cond_timedwait(&t->svc->dump_cond,
					       &t->svc->dump_lock,
					       next < deadline ? &until : &ts);
		}
	}
	if (rc == 0) {
		t->svc->frames_busy = true;
		t->svc->frames_last_ns = clock_now_ns();
	}
	pthread_mutex_unlock(&t->svc->dump_lock);
	return rc;
}

/* Ends frames_turn()'s turn: the next one waiting goes on. */
static void frames_done(struct target *t)
{
	pthread_mutex_lock(&t->svc->dump_lock);
	t->svc->frames_busy = false;
	pthread_cond_broadcast(&t->svc->dump_cond);
	pthread_mutex_unlock(&t->svc->dump_lock);
}

int stacks_dump_frames(struct stacks *s, struct target *t,
		       const struct asker *who, int timeout_ms, bool symbols,
		       unsigned max_frames, struct sw_dump **out)
{
	uint64_t start = clock_now_ns();
	uint64_t deadline = start + (uint64_t)timeout_ms * 1000000ull;
	int rc;

	*out = NULL;
	if (max_frames == 0 || max_frames > SW_MAX_FRAMES_HARD)
		max_frames = SW_MAX_FRAMES_HARD;
	rc = frames_turn(s, t, deadline);
	if (rc < 0)
		return rc;
	/* What the wait for the turn took comes off the dump's time. */
	timeout_ms = (int)((deadline - clock_now_ns()) / 1000000ull);
	rc = dump_symbolized(s, t, who, timeout_ms > 0 ? timeout_ms : 1,
			     symbols, false, max_frames, out);
	frames_done(t);
	return rc;
}

int stacks_get_flags(struct stacks *s, struct target *t,
		     const struct asker *who, int timeout_ms, int flags,
		     struct sdump **out)
{
	uint64_t now = clock_now_ns();
	uint64_t deadline = now + (uint64_t)timeout_ms * 1000000ull + GRACE_NS;
	struct timespec ts = { .tv_sec = (time_t)(deadline / 1000000000ull),
			       .tv_nsec = (long)(deadline % 1000000000ull) };
	int rc;

	*out = NULL;
	pthread_mutex_lock(&t->svc->dump_lock);
	if (t->svc->dumping && (flags & STACKS_NOWAIT)) {
		pthread_mutex_unlock(&t->svc->dump_lock);
		return -EBUSY;
	}
	if (t->svc->dumping) {
		uint64_t gen = t->svc->dump_gen;

		atomic_fetch_add(&s->m.coalesced, 1);
		while (t->svc->dump_gen == gen) {
			if (pthread_cond_timedwait(&t->svc->dump_cond,
						   &t->svc->dump_lock,
						   &ts) == ETIMEDOUT &&
			    t->svc->dump_gen == gen) {
				pthread_mutex_unlock(&t->svc->dump_lock);
				return -ETIMEDOUT;
			}
		}
		rc = published(s, t, (flags & STACKS_SAMPLE) != 0, out);
		pthread_mutex_unlock(&t->svc->dump_lock);
		return rc;
	}
	if (t->svc->last_attempt_ns &&
	    now - t->svc->last_attempt_ns < s->min_interval_ns) {
		atomic_fetch_add(&s->m.cached, 1);
		rc = published(s, t, (flags & STACKS_SAMPLE) != 0, out);
		pthread_mutex_unlock(&t->svc->dump_lock);
		return rc;
	}
	t->svc->dumping = true;
	t->svc->last_attempt_ns = now;
	pthread_mutex_unlock(&t->svc->dump_lock);
	return fresh_dump(s, t, who, timeout_ms, flags, out);
}

#define MANY_HELPERS 63	     /* threads of one all-target dump, its own aside */
#define MANY_HELPERS_ALL 256 /* of all of them together */

/* One all-target dump: its targets, taken in turn by its threads. */
struct many {
	struct stacks *s;
	const struct asker *who;
	struct target **ts;
	size_t n;
	_Atomic size_t next;
	uint64_t deadline_ns; /* CLOCK_MONOTONIC: the agents' deadline */
	struct sdump **sds;
	int *rcs;
};

static void *many_main(void *arg)
{
	struct many *m = arg;
	size_t i;

	while ((i = atomic_fetch_add(&m->next, 1)) < m->n) {
		uint64_t now = clock_now_ns();
		int left_ms = now < m->deadline_ns
				      ? (int)((m->deadline_ns - now) / 1000000u)
				      : 0;

		m->sds[i] = NULL;
		m->rcs[i] = left_ms > 0 ? stacks_get(m->s, m->ts[i], m->who,
						     left_ms, &m->sds[i])
					: -ETIMEDOUT;
	}
	return NULL;
}

void stacks_get_many(struct stacks *s, struct target **ts, size_t n,
		     const struct asker *who, int timeout_ms,
		     struct sdump **sds, int *rcs)
{
	struct many m = {
		.s = s,
		.who = who,
		.ts = ts,
		.n = n,
		.deadline_ns = clock_now_ns() + (uint64_t)timeout_ms * 1000000u,
		.sds = sds,
		.rcs = rcs,
	};
	pthread_t helpers[MANY_HELPERS];
	size_t want = n > 1 ? n - 1 : 0, started = 0;

	atomic_init(&m.next, 0);
	if (want > MANY_HELPERS)
		want = MANY_HELPERS;
	/* Helpers beyond the common cap are not made: fewer share them. */
	while (started < want) {
		if (atomic_fetch_add(&s->helpers, 1) >= MANY_HELPERS_ALL ||
		    pthread_create(&helpers[started], NULL, many_main, &m)) {
			atomic_fetch_sub(&s->helpers, 1);
			break;
		}
		started++;
	}
	many_main(&m);
	for (size_t i = 0; i < started; i++)
		pthread_join(helpers[i], NULL);
	atomic_fetch_sub(&s->helpers, (int)started);
}

int stacks_unsymbolized(struct stacks *s, const struct sw_dump *d,
			struct sw_dump **out)
{
	struct sw_dump *c;
	int rc = dump_clone_raw(d, &c);

	if (rc < 0)
		return rc;
	pthread_mutex_lock(&s->sym_lock);
	rc = sym_dump(s->sym, c, false);
	pthread_mutex_unlock(&s->sym_lock);
	if (rc == 0)
		rc = group_dump(c);
	if (rc < 0) {
		sw_dump_free(c);
		return rc;
	}
	*out = c;
	return 0;
}

struct sdump *stacks_sample_before(struct target *t, uint64_t now_ns,
				   double age_s)
{
	struct sdump *found = NULL;
	uint64_t age_ns = (uint64_t)(age_s * 1e9);
	size_t i;

	if (age_ns > now_ns)
		return NULL;
	pthread_mutex_lock(&t->svc->dump_lock);
	i = history_find(&t->svc->hist, now_ns - age_ns);
	if (i != SIZE_MAX) {
		found = history_at(&t->svc->hist, i);
		sdump_get(found);
	}
	pthread_mutex_unlock(&t->svc->dump_lock);
	return found;
}

int stacks_history(struct target *t, uint64_t from_ns, uint64_t to_ns,
		   struct sdump ***out, size_t *n)
{
	const struct history *h = &t->svc->hist;
	struct sdump **list;
	size_t k = 0, i;

	*out = NULL;
	*n = 0;
	pthread_mutex_lock(&t->svc->dump_lock);
	/* The first sample at or after from_ns, then on to to_ns. */
	i = from_ns ? history_find(h, from_ns - 1) : SIZE_MAX;
	i = i == SIZE_MAX ? 0 : i + 1;
	/* NOLINTNEXTLINE(bugprone-sizeof-expression): pointers */
	list = calloc(h->n > i ? h->n - i : 1, sizeof(*list));
	if (!list) {
		pthread_mutex_unlock(&t->svc->dump_lock);
		return -ENOMEM;
	}
	for (; i < h->n; i++) {
		struct sdump *sd = history_at(h, i);

		if (sd->mono_ns > to_ns)
			break;
		sdump_get(sd);
		list[k++] = sd;
	}
	pthread_mutex_unlock(&t->svc->dump_lock);
	*out = list;
	*n = k;
	return 0;
}

void stacks_history_span(struct target *t, size_t *samples,
			 struct timespec *from, size_t *bytes)
{
	const struct history *h = &t->svc->hist;

	pthread_mutex_lock(&t->svc->dump_lock);
	*samples = h->n;
	*bytes = t->svc->hist_bytes;
	if (h->n)
		*from = history_at(h, 0)->d->collected_at;
	else
		*from = (struct timespec){ 0 };
	pthread_mutex_unlock(&t->svc->dump_lock);
}

/*
 * The reason thread th of now (t's newest sample) is stuck, or NULL. win
 * is the newest sample at least stuck_after old (or NULL), widx its
 * threads by tid.
 */
static const char *stuck_reason(const struct stacks *s, const struct sdump *now,
				const struct sw_thread *th,
				const struct sdump *win, const size_t *widx)
{
	const struct sw_thread *p;
	uint64_t began;

	if (th->unchanged_s < (double)s->stuck_after_s)
		return NULL;
	/* A thread in D cannot run our handler: it times out. */
	if (th->state == 'D' &&
	    (th->status == SW_ST_OK || th->status == SW_ST_TIMEOUT))
		return "blocked-in-kernel";
	if (th->status != SW_ST_OK || th->state != 'R' || !win || !widx)
		return NULL;
	/* The window opens in the same stack (1 ms for the rounding of
	 * unchanged_s), and the thread wanted the CPU over all of it. */
	began = now->mono_ns - (uint64_t)(th->unchanged_s * 1e9);
	if (win->mono_ns + 1000000ull < began)
		return NULL;
	p = stacks_find_tid(win->d, widx, th->tid);
	if (!p || p->status != SW_ST_OK ||
	    !spin_wanted_cpu(p, win->sched_ns, th, now->sched_ns))
		return NULL;
	return "spinning";
}

/* Whether th, a thread of t's sample d, is one of ours. */
static bool ours(const struct target *t, const struct sw_dump *d,
		 const struct sw_thread *th, pid_t agent_tid)
{
	if (t->self)
		return true;
	return !t->ptrace && spin_is_agent(d, th, agent_tid);
}

int stacks_stuck(struct stacks *s, struct target *t, struct sdump **sd,
		 struct stuck **out, size_t *n)
{
	uint64_t after_ns = (uint64_t)s->stuck_after_s * 1000000000ull;
	struct sdump *now = NULL, *win = NULL;
	struct stuck *list = NULL;
	struct locks locks;
	size_t *idx = NULL, cnt = 0, w;
	pid_t agent_tid;
	int rc = -ENOMEM;

	*sd = NULL;
	*out = NULL;
	*n = 0;
	pthread_mutex_lock(&t->svc->dump_lock);
	now = history_newest(&t->svc->hist);
	if (now) {
		sdump_get(now);
		w = now->mono_ns > after_ns
			    ? history_find(&t->svc->hist,
					   now->mono_ns - after_ns)
			    : SIZE_MAX;
		if (w != SIZE_MAX) {
			win = history_at(&t->svc->hist, w);
			sdump_get(win);
		}
	}
	agent_tid = t->svc->agent_tid;
	pthread_mutex_unlock(&t->svc->dump_lock);
	if (!now)
		return 0;
	list = calloc(now->d->nthreads ? now->d->nthreads : 1, sizeof(*list));
	idx = win ? stacks_index_by_tid(win->d) : NULL;
	if (!list || (win && !idx))
		goto fail;
	/* A deadlock does not pass: flagged at the first sample that shows
	 * it, with no --stuck-after wait. */
	if (locks_analyze(now->d, &locks) < 0)
		goto fail;
	for (size_t i = 0; i < now->d->nthreads; i++) {
		const struct sw_thread *th = &now->d->threads[i];
		const char *why;

		if (ours(t, now->d, th, agent_tid))
			continue;
		why = locks.w && locks.w[i].cycle >= 0
			      ? "deadlock"
			      : stuck_reason(s, now, th, win, idx);
		if (why) {
			list[cnt].thread = i;
			list[cnt++].reason = why;
		}
	}
	locks_release(&locks);
	free(idx);
	sdump_put(win);
	*sd = now;
	*out = list;
	*n = cnt;
	return 0;
fail:
	free(list);
	free(idx);
	sdump_put(now);
	sdump_put(win);
	return rc;
}
