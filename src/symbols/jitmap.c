/*
 * jitmap.c - perf maps of targets, found, checked and cached (jitmap.h).
 *
 * A target holds a reference to the map of the file it last read; a look
 * that finds the file changed gives the old map back before it asks for
 * the new one, so that a map growing close to its owner's limit is not
 * refused for what its old version took.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "model/procfs.h"
#include "jitcache.h"
#include "jitmap.h"
#include "modopen.h"
#include "perfmap.h"

/* Gives the map held back; the target holds none after. */
static void drop(struct jitmap *jm)
{
	jitcache_put(jm->cache, jm->map);
	jm->map = NULL;
}

/* Whether st is the file last found over its owner's limit, no shorter,
 * while its owner's maps take no less than then: it would not fit now. */
static bool still_too_big(const struct jitmap *jm, const struct stat *st)
{
	return jm->over_limit && jm->big_dev == st->st_dev &&
	       jm->big_ino == st->st_ino && st->st_size >= jm->big_size &&
	       jitcache_use_of(jm->cache, st->st_uid) >= jm->big_use;
}

/* Makes jm hold the target's current map (or none, and say why). */
static void refresh(struct jitmap *jm, pid_t pid, uid_t uid)
{
	char root[48], path[48];
	struct stat st;
	bool too_big;
	int fd, rc;

	/*
	 * The target's own /tmp, through no symlink, and opened only once
	 * it is known to be a regular file (modopen.h): a device bound over
	 * the map's name in the target's mount namespace is never opened.
	 */
	snprintf(root, sizeof(root), "/proc/%d/root", (int)pid);
	snprintf(path, sizeof(path), "tmp/perf-%d.map",
		 (int)procfs_inner_pid(pid));
	memset(&st, 0, sizeof(st));
	fd = modopen_in_root(root, path, &st);
	if (fd < 0 || st.st_uid != uid) {
		jm->refused = fd >= 0 || (fd != -ENOENT && st.st_mode);
		jm->over_limit = false;
		if (fd >= 0)
			close(fd);
		drop(jm);
		return;
	}
	jm->refused = false;
	if (jm->map && jitcache_same(jm->map, &st)) {
		close(fd);
		return;
	}
	/* The old version first: the new one may need its room. */
	drop(jm);
	/* A file too big to parse again may be held for another target. */
	too_big = still_too_big(jm, &st);
	rc = jitcache_get(jm->cache, fd, &st, !too_big, &jm->map);
	close(fd);
	if (too_big && rc == -ENOENT)
		return;
	jm->over_limit = rc == -EFBIG;
	if (jm->over_limit) {
		jm->big_dev = st.st_dev;
		jm->big_ino = st.st_ino;
		jm->big_size = st.st_size;
		jm->big_use = jitcache_use_of(jm->cache, uid);
	}
}

/* Whether some frame of d has no function. */
static bool needs_names(const struct sw_dump *d)
{
	for (size_t i = 0; i < d->nthreads; i++)
		for (size_t k = 0; k < d->threads[i].nframes; k++)
			if (!d->threads[i].frames[k].function)
				return true;
	return false;
}

/* Appends the module "[jit]" spanning pm. Its index, or -1. */
static int add_module(struct sw_dump *d, const struct perfmap *pm)
{
	struct sw_module *m;
	void *nm;

	nm = realloc(d->modules, (d->nmodules + 1) * sizeof(*d->modules));
	if (!nm)
		return -1;
	d->modules = nm;
	m = &d->modules[d->nmodules];
	memset(m, 0, sizeof(*m));
	m->path = strdup("[jit]");
	if (!m->path)
		return -1;
	perfmap_range(pm, &m->start, &m->end);
	return (int)d->nmodules++;
}

size_t jitmap_apply(struct jitmap *jm, struct jitcache *cache, pid_t pid,
		    uid_t uid, struct sw_dump *d)
{
	const struct perfmap *pm;
	size_t named = 0;
	int jit = -1;

	if (!d->symbolized || !needs_names(d))
		return 0;
	if (jm->cache != cache) {
		drop(jm);
		jm->cache = cache;
	}
	refresh(jm, pid, uid);
	pm = jitcache_perfmap(jm->map);
	if (!pm)
		return 0;
	for (size_t i = 0; i < d->nthreads; i++) {
		struct sw_thread *t = &d->threads[i];

		for (size_t k = 0; k < t->nframes; k++) {
			struct sw_frame *f = &t->frames[k];
			const char *name;

			/*
			 * Frames may be shared: one already named is done.
			 * One in a module without a name may be JIT code
			 * too: libdwfl spans a module from its lowest to
			 * its highest mapping (node maps part of its text
			 * high up), and anonymous code between is inside.
			 */
			if (f->function)
				continue;
			name = perfmap_lookup(pm, f->ip, NULL);
			if (!name)
				continue;
			if (jit < 0 && (jit = add_module(d, pm)) < 0)
				return named;
			f->function = dump_strdup(d, name);
			if (!f->function)
				return named;
			f->module = jit;
			f->offset = f->ip; /* its bias is 0 */
			named++;
		}
	}
	return named;
}

void jitmap_release(struct jitmap *jm)
{
	drop(jm);
}
