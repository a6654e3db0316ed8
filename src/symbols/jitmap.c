/*
 * jitmap.c - perf maps of targets, found, checked and cached (jitmap.h).
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
#include "jitmap.h"
#include "perfmap.h"

/* Reads the last PERFMAP_MAX_BYTES of fd (size bytes) into *out. */
static int read_tail(int fd, off_t size, char **out, size_t *len)
{
	off_t from = size > (off_t)PERFMAP_MAX_BYTES
			     ? size - (off_t)PERFMAP_MAX_BYTES
			     : 0;
	size_t want = (size_t)(size - from), got = 0;
	char *buf = malloc(want + 1);

	if (!buf)
		return -ENOMEM;
	while (got < want) {
		ssize_t r = pread(fd, buf + got, want - got, from + (off_t)got);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		got += (size_t)r;
	}
	if (from > 0) { /* cut in a line: start at the next one */
		char *nl = memchr(buf, '\n', got);
		size_t skip = nl ? (size_t)(nl + 1 - buf) : got;

		memmove(buf, buf + skip, got - skip);
		got -= skip;
	}
	*out = buf;
	*len = got;
	return 0;
}

/* Makes jm hold the target's current map (or none). */
static void refresh(struct jitmap *jm, pid_t pid, uid_t uid)
{
	struct perfmap *pm;
	char path[96], *buf;
	struct stat st;
	size_t len;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/root/tmp/perf-%d.map", (int)pid,
		 (int)procfs_inner_pid(pid));
	fd = open(path,
		  O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
	if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) ||
	    st.st_uid != uid) {
		jm->refused = fd >= 0;
		if (fd >= 0)
			close(fd);
		perfmap_free(jm->pm);
		jm->pm = NULL;
		return;
	}
	if (jm->pm && jm->dev == st.st_dev && jm->ino == st.st_ino &&
	    jm->size == st.st_size && jm->mtime.tv_sec == st.st_mtim.tv_sec &&
	    jm->mtime.tv_nsec == st.st_mtim.tv_nsec) {
		jm->refused = false;
		close(fd);
		return;
	}
	jm->refused = false;
	if (read_tail(fd, st.st_size, &buf, &len) == 0) {
		if (perfmap_parse(buf, len, &pm) == 0) {
			perfmap_free(jm->pm);
			jm->pm = pm;
			jm->dev = st.st_dev;
			jm->ino = st.st_ino;
			jm->size = st.st_size;
			jm->mtime = st.st_mtim;
		}
		free(buf);
	}
	close(fd);
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

/* Appends the module "[jit]" spanning jm's map. Its index, or -1. */
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

size_t jitmap_apply(struct jitmap *jm, pid_t pid, uid_t uid, struct sw_dump *d)
{
	size_t named = 0;
	int jit = -1;

	if (!d->symbolized || !needs_names(d))
		return 0;
	refresh(jm, pid, uid);
	if (!jm->pm)
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
			name = perfmap_lookup(jm->pm, f->ip, NULL);
			if (!name)
				continue;
			if (jit < 0 && (jit = add_module(d, jm->pm)) < 0)
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
	perfmap_free(jm->pm);
	jm->pm = NULL;
}
