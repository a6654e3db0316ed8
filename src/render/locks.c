/*
 * locks.c - lock owners, waits-for chains and deadlocks (locks.h).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "locks.h"

/* The futex operations a lock's waiter sleeps in (linux/futex.h). */
#define OP_WAIT 0
#define OP_LOCK_PI 6
#define OP_WAIT_BITSET 9
#define OP_LOCK_PI2 13
#define OP_CMD(op) ((op) & ~(128u | 256u)) /* less PRIVATE, CLOCK_REALTIME */

/* glibc's pthread_mutex_t (x86-64): __lock, __count, __owner, __kind. */
#define MUTEX_LOCK 0
#define MUTEX_COUNT 4
#define MUTEX_OWNER 8
#define MUTEX_KIND 16
#define MUTEX_SIZE 20
#define KIND_TYPE 3u	  /* normal, recursive, error-checking, adaptive */
#define KIND_ROBUST 16u	  /* the owner's tid is in __lock */
#define KIND_PI 32u	  /* the same */
#define KIND_KNOWN 0x3f3u /* type, robust, PI, PP, pshared, elision bits */
#define KIND_RECURSIVE 1u
#define TID_MASK 0x3fffffffu
#define OWNER_DIED 0x40000000u
#define INCONSISTENT 0x7fffffff /* __owner after EOWNERDEAD */
#define NOTRECOVERABLE 0x7ffffffe

/* glibc's pthread_rwlock_t (2.25 and later, x86-64). */
#define RW_READERS 0
#define RW_WRPHASE 8  /* readers, and writers waiting for readers */
#define RW_WRITERS 12 /* writers waiting for a writer */
#define RW_PAD3 16
#define RW_PAD4 20
#define RW_CUR_WRITER 24
#define RW_SHARED 28
#define RW_SIZE 32
#define RW_WRLOCKED 2u

/* What the functions a thread sleeps in say of the word. */
enum what { W_PLUMBING, W_MUTEX, W_RDLOCK, W_WRLOCK, W_NONE };

static bool has(const char *s, const char *part)
{
	return strstr(s, part) != NULL;
}

static enum what what_of(const char *fn)
{
	if (!fn)
		return W_PLUMBING; /* libc without symbols for its insides */
	if (has(fn, "rwlock_rdlock") || has(fn, "rwlock_timedrdlock") ||
	    has(fn, "rwlock_clockrdlock"))
		return W_RDLOCK;
	if (has(fn, "rwlock_wrlock") || has(fn, "rwlock_timedwrlock") ||
	    has(fn, "rwlock_clockwrlock"))
		return W_WRLOCK;
	if (has(fn, "pthread_mutex_lock") || has(fn, "mutex_lock_full") ||
	    has(fn, "mutex_lock_optimized") ||
	    has(fn, "pthread_mutex_timedlock") ||
	    has(fn, "pthread_mutex_clocklock") ||
	    has(fn, "mutex_clocklock_common"))
		return W_MUTEX;
	if (has(fn, "futex") || has(fn, "lll_lock_wait") ||
	    strcmp(fn, "syscall") == 0)
		return W_PLUMBING;
	return W_NONE; /* a condition variable, a semaphore, the caller */
}

/*
 * The lock function t sleeps in, from its innermost frames (those of its
 * group's representative when a kept sample shares them: dump_compact()).
 */
static enum what classify(const struct sw_dump *d, const struct sw_thread *t)
{
	if (!t->nframes && t->group >= 0 && (size_t)t->group < d->ngroups &&
	    d->groups[t->group].rep < d->nthreads)
		t = &d->threads[d->groups[t->group].rep];
	for (size_t k = 0; k < t->nframes && k < 12; k++) {
		enum what w = what_of(t->frames[k].function);

		if (w != W_PLUMBING)
			return w;
	}
	return W_NONE;
}

static bool get32(const struct sw_wait *w, uint64_t at, uint32_t *v)
{
	uint64_t off;

	if (at < w->mem_at || at - w->mem_at > (uint64_t)w->nmem ||
	    w->nmem - (at - w->mem_at) < 4)
		return false;
	off = at - w->mem_at;
	*v = (uint32_t)w->mem[off] | (uint32_t)w->mem[off + 1] << 8 |
	     (uint32_t)w->mem[off + 2] << 16 | (uint32_t)w->mem[off + 3] << 24;
	return true;
}

/* Whether the copy holds n bytes from at. */
static bool covers(const struct sw_wait *w, uint64_t at, size_t n)
{
	return at >= w->mem_at && at - w->mem_at <= w->nmem &&
	       w->nmem - (at - w->mem_at) >= n;
}

/* A mutex whose __lock is the word: its owner as it records it. */
static bool read_mutex(const struct sw_wait *w, struct lock_wait *out)
{
	uint32_t lock, count, owner, kind;
	uint64_t m = w->addr - MUTEX_LOCK;

	if (OP_CMD(w->op) != OP_WAIT && OP_CMD(w->op) != OP_WAIT_BITSET &&
	    OP_CMD(w->op) != OP_LOCK_PI && OP_CMD(w->op) != OP_LOCK_PI2)
		return false;
	if (!covers(w, m, MUTEX_SIZE) || !get32(w, m + MUTEX_LOCK, &lock) ||
	    !get32(w, m + MUTEX_COUNT, &count) ||
	    !get32(w, m + MUTEX_OWNER, &owner) ||
	    !get32(w, m + MUTEX_KIND, &kind) || (kind & ~KIND_KNOWN))
		return false;
	out->kind = LOCK_MUTEX;
	out->addr = m;
	if (kind & (KIND_ROBUST | KIND_PI)) {
		out->owner = (pid_t)(lock & TID_MASK);
		out->owner_died = (lock & OWNER_DIED) ||
				  (int)owner == INCONSISTENT ||
				  (int)owner == NOTRECOVERABLE;
	} else if (lock != 0) {
		out->owner = (pid_t)owner; /* 0 for a moment after the lock */
	}
	if (out->owner < 0)
		out->owner = 0;
	if ((kind & KIND_TYPE) == KIND_RECURSIVE && out->owner)
		out->held = count;
	return true;
}

/* Whether the rwlock at rw looks like one: its padding is zero. */
static bool rwlock_at(const struct sw_wait *w, uint64_t rw)
{
	uint32_t pad3, pad4, shared;

	return covers(w, rw, RW_SIZE) && get32(w, rw + RW_PAD3, &pad3) &&
	       get32(w, rw + RW_PAD4, &pad4) &&
	       get32(w, rw + RW_SHARED, &shared) && pad3 == 0 && pad4 == 0 &&
	       shared <= 1;
}

/*
 * An rwlock whose word is __wrphase_futex (readers; writers waiting for
 * readers to leave) or __writers_futex (writers waiting for a writer).
 */
static bool read_rwlock(const struct sw_wait *w, bool write,
			struct lock_wait *out)
{
	uint64_t rw = w->addr - RW_WRPHASE;
	uint32_t readers, writer;

	if (OP_CMD(w->op) != OP_WAIT && OP_CMD(w->op) != OP_WAIT_BITSET)
		return false;
	if (write && w->addr >= RW_WRITERS &&
	    rwlock_at(w, w->addr - RW_WRITERS))
		rw = w->addr - RW_WRITERS;
	else if (w->addr < RW_WRPHASE || !rwlock_at(w, rw))
		return false;
	if (!get32(w, rw + RW_READERS, &readers) ||
	    !get32(w, rw + RW_CUR_WRITER, &writer))
		return false;
	out->kind = LOCK_RWLOCK;
	out->write = write;
	out->addr = rw;
	if ((readers & RW_WRLOCKED) && (int32_t)writer > 0)
		out->owner = (pid_t)writer;
	return true;
}

/* A thread's tid as its process names it, and its index. */
struct named {
	pid_t tid;
	int index;
};

static int cmp_named(const void *a, const void *b)
{
	pid_t x = ((const struct named *)a)->tid;
	pid_t y = ((const struct named *)b)->tid;

	return (x > y) - (x < y);
}

static pid_t own_tid(const struct sw_thread *t)
{
	return t->ns_tid ? t->ns_tid : t->tid;
}

/* The index of the thread the process calls tid (in by, sorted); -1. */
static int thread_named(const struct named *by, size_t n, pid_t tid)
{
	struct named key = { .tid = tid };
	const struct named *hit;

	if (tid <= 0)
		return -1;
	hit = bsearch(&key, by, n, sizeof(*by), cmp_named);
	return hit ? hit->index : -1;
}

int locks_next(const struct locks *l, size_t i)
{
	if (!l->w || i >= l->nthreads || l->w[i].kind == LOCK_NONE)
		return -1;
	return l->w[i].owner_index;
}

/* Finds the cycles: every thread has at most one edge out. */
static int find_cycles(struct locks *l)
{
	unsigned char *state = calloc(l->nthreads, 1); /* 1 on path, 2 done */
	size_t *path = malloc(l->nthreads * sizeof(*path));
	int rc = 0;

	if (!state || !path) {
		rc = -ENOMEM;
		goto out;
	}
	for (size_t s = 0; s < l->nthreads && rc == 0; s++) {
		size_t n = 0;
		int i = (int)s;

		while (i >= 0 && (size_t)i < l->nthreads && state[i] == 0) {
			state[i] = 1;
			path[n++] = (size_t)i;
			i = locks_next(l, (size_t)i);
		}
		if (i >= 0 && (size_t)i < l->nthreads &&
		    state[i] == 1) { /* back on this path: a cycle */
			size_t from = 0;
			struct lock_cycle *c, *nc;

			while (from < n && path[from] != (size_t)i)
				from++;
			if (from == n)
				goto settled; /* cannot be: i is on the path */
			nc = realloc(l->cycles,
				     (l->ncycles + 1) * sizeof(*l->cycles));
			if (!nc) {
				rc = -ENOMEM;
				break;
			}
			l->cycles = nc;
			c = &l->cycles[l->ncycles];
			c->n = n - from;
			c->threads = malloc(c->n * sizeof(*c->threads));
			if (!c->threads) {
				rc = -ENOMEM;
				break;
			}
			memcpy(c->threads, path + from,
			       c->n * sizeof(*c->threads));
			for (size_t k = 0; k < c->n; k++)
				l->w[c->threads[k]].cycle = (int)l->ncycles;
			l->ncycles++;
		}
	settled:
		for (size_t k = 0; k < n; k++)
			state[path[k]] = 2;
	}
out:
	free(state);
	free(path);
	return rc;
}

/* Why d's lock words cannot be read as glibc's; NULL when they can. */
static const char *unsupported(const struct sw_dump *d)
{
	for (size_t i = 0; i < d->nmodules; i++) {
		const char *p = d->modules[i].path;
		const char *base = p ? strrchr(p, '/') : NULL;

		base = base ? base + 1 : p;
		/* ld-musl-x86_64.so.1, or the libc.so it links to in a
		 * directory of musl's (Debian: /usr/lib/x86_64-linux-musl). */
		if (base &&
		    (strncmp(base, "ld-musl", 7) == 0 ||
		     strncmp(base, "libc.musl", 9) == 0 ||
		     (strncmp(base, "libc.so", 7) == 0 && strstr(p, "musl"))))
			return "lock owners are read from glibc's locks; this "
			       "process uses musl";
	}
	if (d->glibc_minor == 0 && d->glibc_static)
		return "lock owners are read from glibc's locks; this "
		       "program has glibc linked in statically, and which "
		       "release it is (their lock layouts differ) cannot be "
		       "told without its shared libc";
	if (d->glibc_minor == 0)
		return "lock owners are read from glibc's locks; no glibc "
		       "was found in this process";
	if (d->glibc_minor < LOCKS_GLIBC_MIN)
		return "lock owners are read from glibc 2.25 or later; this "
		       "process has an older one";
	return NULL;
}

int locks_analyze(const struct sw_dump *d, struct locks *out)
{
	const char *why = NULL;
	unsigned char *gwhat; /* per group: 1 + its what, 0: not yet */
	struct named *by;
	bool any = false;

	memset(out, 0, sizeof(*out));
	if (!d->symbolized)
		return 0;
	/* Any futex sleeper: where we cannot read the locks, say so. */
	for (size_t i = 0; i < d->nthreads && !any; i++)
		any = d->threads[i].wait && d->threads[i].status == SW_ST_OK;
	if (!any)
		return 0;
	why = unsupported(d);
	if (why) {
		out->unsupported = why;
		return 0;
	}
	out->w = calloc(d->nthreads, sizeof(*out->w));
	by = malloc(d->nthreads * sizeof(*by));
	if (!out->w || !by) {
		free(by);
		locks_release(out);
		return -ENOMEM;
	}
	for (size_t i = 0; i < d->nthreads; i++) {
		by[i].tid = own_tid(&d->threads[i]);
		by[i].index = (int)i;
	}
	qsort(by, d->nthreads, sizeof(*by), cmp_named);
	/* A group's threads share their frames: each group is classified
	 * once (a thousand waiters in a few stacks, a few classifications). */
	gwhat = d->ngroups ? calloc(d->ngroups, sizeof(*gwhat)) : NULL;
	out->nthreads = d->nthreads;
	for (size_t i = 0; i < d->nthreads; i++) {
		const struct sw_thread *t = &d->threads[i];
		struct lock_wait *lw = &out->w[i];
		enum what what;
		bool ok = false;

		lw->owner_index = -1;
		lw->cycle = -1;
		if (!t->wait || t->status != SW_ST_OK || !t->wait->nmem)
			continue;
		if (gwhat && t->group >= 0 && (size_t)t->group < d->ngroups) {
			if (!gwhat[t->group])
				gwhat[t->group] =
					(unsigned char)(1 + classify(d, t));
			what = (enum what)(gwhat[t->group] - 1);
		} else {
			what = classify(d, t);
		}
		if (what == W_MUTEX)
			ok = read_mutex(t->wait, lw);
		else if (what == W_RDLOCK || what == W_WRLOCK)
			ok = read_rwlock(t->wait, what == W_WRLOCK, lw);
		if (!ok) {
			memset(lw, 0, sizeof(*lw));
			lw->owner_index = -1;
			lw->cycle = -1;
			continue;
		}
		/* Its own owner (a relock of a normal mutex) is a cycle too. */
		lw->owner_index = thread_named(by, d->nthreads, lw->owner);
		out->nwaiting++;
	}
	free(gwhat);
	free(by);
	for (size_t i = 0; i < d->nthreads; i++)
		if (out->w[i].kind != LOCK_NONE && out->w[i].owner_index >= 0)
			out->w[out->w[i].owner_index].waiters++;
	if (find_cycles(out) < 0) {
		locks_release(out);
		return -ENOMEM;
	}
	return 0;
}

void locks_release(struct locks *l)
{
	for (size_t i = 0; i < l->ncycles; i++)
		free(l->cycles[i].threads);
	free(l->cycles);
	free(l->w);
	memset(l, 0, sizeof(*l));
}

size_t locks_held(const struct locks *l, size_t owner, struct lock_held *out,
		  size_t max)
{
	size_t n = 0;

	if (!l->w || owner >= l->nthreads || !l->w[owner].waiters)
		return 0;
	for (size_t i = 0; i < l->nthreads; i++) {
		const struct lock_wait *w = &l->w[i];
		size_t k;

		if (w->kind == LOCK_NONE || w->owner_index != (int)owner)
			continue;
		for (k = 0; k < n && out[k].addr != w->addr; k++)
			;
		if (k < n) {
			out[k].waiters++;
			continue;
		}
		if (n == max)
			continue;
		out[n++] = (struct lock_held){ .kind = w->kind,
					       .addr = w->addr,
					       .waiters = 1 };
	}
	return n;
}

const char *locks_kind_name(enum lock_kind k)
{
	return k == LOCK_RWLOCK ? "rwlock" : "mutex";
}
