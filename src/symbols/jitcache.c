/*
 * jitcache.c - perf maps parsed once per file, shared and charged to their
 * owner (jitcache.h).
 *
 * The maps held are a list (there are no more of them than targets, and
 * one dump looks once); so are their owners, each with the bytes its maps
 * take. A parse in progress is a map not yet done: others that want the
 * same file wait on the cache's condition for it.
 */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "jitcache.h"
#include "perfmap.h"

/* What tells one content of a file from another. */
struct jit_key {
	dev_t dev;
	ino_t ino;
	off_t size;
	struct timespec mtime;
	struct timespec ctime; /* no one can set it back: a rewrite moves it */
	uid_t uid;
};

struct jitcache_map {
	struct jit_key key;
	int refs;  /* under the cache's lock */
	bool done; /* parsed, or failed (rc) */
	int rc;
	struct perfmap *pm; /* once done with rc 0 */
	size_t charged;	    /* to key.uid */
	struct jitcache *cache;
	struct jitcache_map *next; /* the cache's list; only while listed */
};

struct jit_user {
	uid_t uid;
	size_t bytes;
};

struct jitcache {
	pthread_mutex_t lock;
	pthread_cond_t parsed; /* a parse ended */
	size_t max_user_bytes;
	struct jitcache_map *maps;
	struct jit_user *users;
	size_t nusers;
	jitcache_reader_fn reader; /* perfmap_read(), or a worker's */
};

int jitcache_new(size_t max_user_bytes, struct jitcache **out)
{
	struct jitcache *c = calloc(1, sizeof(*c));

	*out = NULL;
	if (!c)
		return -ENOMEM;
	pthread_mutex_init(&c->lock, NULL);
	pthread_cond_init(&c->parsed, NULL);
	c->max_user_bytes = max_user_bytes;
	c->reader = perfmap_read;
	*out = c;
	return 0;
}

void jitcache_set_reader(struct jitcache *c, jitcache_reader_fn fn)
{
	c->reader = fn ? fn : perfmap_read;
}

void jitcache_free(struct jitcache *c)
{
	struct jitcache_map *m, *next;

	if (!c)
		return;
	for (m = c->maps; m; m = next) { /* none, when every map came back */
		next = m->next;
		perfmap_free(m->pm);
		free(m);
	}
	free(c->users);
	pthread_cond_destroy(&c->parsed);
	pthread_mutex_destroy(&c->lock);
	free(c);
}

void jitcache_set_limit(struct jitcache *c, size_t max_user_bytes)
{
	pthread_mutex_lock(&c->lock);
	c->max_user_bytes = max_user_bytes;
	pthread_mutex_unlock(&c->lock);
}

size_t jitcache_limit(struct jitcache *c)
{
	size_t n;

	pthread_mutex_lock(&c->lock);
	n = c->max_user_bytes;
	pthread_mutex_unlock(&c->lock);
	return n;
}

/* uid's entry, made when make is true; NULL: none, or out of memory. */
static struct jit_user *user(struct jitcache *c, uid_t uid, bool make)
{
	struct jit_user *u;

	for (size_t i = 0; i < c->nusers; i++)
		if (c->users[i].uid == uid)
			return &c->users[i];
	if (!make)
		return NULL;
	u = realloc(c->users, (c->nusers + 1) * sizeof(*u));
	if (!u)
		return NULL;
	c->users = u;
	u = &c->users[c->nusers++];
	u->uid = uid;
	u->bytes = 0;
	return u;
}

size_t jitcache_use_of(struct jitcache *c, uid_t uid)
{
	struct jit_user *u;
	size_t n;

	pthread_mutex_lock(&c->lock);
	u = user(c, uid, false);
	n = u ? u->bytes : 0;
	pthread_mutex_unlock(&c->lock);
	return n;
}

/* Gives bytes of m's charge back to its owner; under the lock. */
static void refund(struct jitcache *c, struct jitcache_map *m, size_t bytes)
{
	struct jit_user *u = user(c, m->key.uid, false);

	if (bytes > m->charged)
		bytes = m->charged;
	m->charged -= bytes;
	if (!u)
		return;
	u->bytes = u->bytes > bytes ? u->bytes - bytes : 0;
	if (!u->bytes) /* owners without maps are forgotten */
		*u = c->users[--c->nusers];
}

/* The parse's budget (perfmap_budget): charges m's owner, up to the limit. */
static int take(void *arg, size_t more)
{
	struct jitcache_map *m = arg;
	struct jitcache *c = m->cache;
	struct jit_user *u;
	int rc = 0;

	pthread_mutex_lock(&c->lock);
	u = user(c, m->key.uid, true);
	if (!u)
		rc = -ENOMEM;
	else if (u->bytes > c->max_user_bytes ||
		 more > c->max_user_bytes - u->bytes)
		rc = -EFBIG;
	else {
		u->bytes += more;
		m->charged += more;
	}
	pthread_mutex_unlock(&c->lock);
	return rc;
}

static void key_of(const struct stat *st, struct jit_key *k)
{
	memset(k, 0, sizeof(*k));
	k->dev = st->st_dev;
	k->ino = st->st_ino;
	k->size = st->st_size;
	k->mtime = st->st_mtim;
	k->ctime = st->st_ctim;
	k->uid = st->st_uid;
}

static bool same_key(const struct jit_key *a, const struct jit_key *b)
{
	return a->dev == b->dev && a->ino == b->ino && a->size == b->size &&
	       a->mtime.tv_sec == b->mtime.tv_sec &&
	       a->mtime.tv_nsec == b->mtime.tv_nsec &&
	       a->ctime.tv_sec == b->ctime.tv_sec &&
	       a->ctime.tv_nsec == b->ctime.tv_nsec && a->uid == b->uid;
}

bool jitcache_same(const struct jitcache_map *m, const struct stat *st)
{
	struct jit_key k;

	key_of(st, &k);
	return m && same_key(&m->key, &k);
}

/* Takes m off the list; under the lock. */
static void unlist(struct jitcache *c, struct jitcache_map *m)
{
	for (struct jitcache_map **p = &c->maps; *p; p = &(*p)->next)
		if (*p == m) {
			*p = m->next;
			m->next = NULL;
			return;
		}
}

/* Drops a reference to m; the last frees it. Under the lock. */
static void unref(struct jitcache *c, struct jitcache_map *m)
{
	if (--m->refs > 0)
		return;
	unlist(c, m);
	refund(c, m, m->charged);
	perfmap_free(m->pm);
	free(m);
}

/* Waits for m's parse (m referenced by us). Its result; under the lock. */
static int wait_parsed(struct jitcache *c, struct jitcache_map *m)
{
	int rc;

	while (!m->done)
		pthread_cond_wait(&c->parsed, &c->lock);
	rc = m->rc;
	if (rc < 0)
		unref(c, m);
	return rc;
}

/* Parses fd into m, listed and not done; with the lock free. */
static void parse_into(struct jitcache *c, struct jitcache_map *m, int fd,
		       const struct stat *st)
{
	struct perfmap_budget b = { take, m };
	struct perfmap *pm = NULL;
	int rc = c->reader(fd, st->st_size, &b, &pm);

	pthread_mutex_lock(&c->lock);
	if (rc == 0) { /* what the parse took beyond what it keeps */
		refund(c, m, m->charged - perfmap_bytes(pm));
	} else { /* nothing kept; the next look tries again */
		refund(c, m, m->charged);
		unlist(c, m);
	}
	m->pm = pm;
	m->rc = rc;
	m->done = true;
	pthread_cond_broadcast(&c->parsed);
	pthread_mutex_unlock(&c->lock);
}

int jitcache_get(struct jitcache *c, int fd, const struct stat *st, bool parse,
		 struct jitcache_map **out)
{
	struct jitcache_map *m;
	struct jit_key k;
	int rc;

	*out = NULL;
	key_of(st, &k);
	pthread_mutex_lock(&c->lock);
	for (m = c->maps; m; m = m->next)
		if (same_key(&m->key, &k))
			break;
	if (m) {
		m->refs++;
		rc = wait_parsed(c, m);
		pthread_mutex_unlock(&c->lock);
		if (rc == 0)
			*out = m;
		return rc;
	}
	m = parse ? calloc(1, sizeof(*m)) : NULL;
	if (!m) {
		pthread_mutex_unlock(&c->lock);
		return parse ? -ENOMEM : -ENOENT;
	}
	m->key = k;
	m->refs = 1;
	m->cache = c;
	m->next = c->maps;
	c->maps = m;
	pthread_mutex_unlock(&c->lock);
	parse_into(c, m, fd, st);
	pthread_mutex_lock(&c->lock);
	rc = m->rc;
	if (rc < 0)
		unref(c, m);
	pthread_mutex_unlock(&c->lock);
	if (rc == 0)
		*out = m;
	return rc;
}

const struct perfmap *jitcache_perfmap(const struct jitcache_map *m)
{
	return m ? m->pm : NULL;
}

void jitcache_put(struct jitcache *c, struct jitcache_map *m)
{
	if (!m)
		return;
	pthread_mutex_lock(&c->lock);
	unref(c, m);
	pthread_mutex_unlock(&c->lock);
}
