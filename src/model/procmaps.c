/*
 * procmaps.c - the file mappings of a process (procmaps.h).
 *
 * Linux 6.11 answers "the next file mapping from this address" on an fd
 * of /proc/PID/maps (PROCMAP_QUERY); older kernels answer ENOTTY, once,
 * and from then on the text is read. The ioctl's argument is declared
 * here, as the kernel's uapi header has it, because the C library's
 * kernel headers may predate it; the kernel checks its size field.
 */
#define _GNU_SOURCE
#include "procmaps.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "procfs.h"
#include "stackwatch.h"

struct sw_procmap_query {
	uint64_t size;
	uint64_t query_flags;
	uint64_t query_addr;
	uint64_t vma_start;
	uint64_t vma_end;
	uint64_t vma_flags;
	uint64_t vma_page_size;
	uint64_t vma_offset;
	uint64_t inode;
	uint32_t dev_major;
	uint32_t dev_minor;
	uint32_t vma_name_size;
	uint32_t build_id_size;
	uint64_t vma_name_addr;
	uint64_t build_id_addr;
};

#define SW_PROCMAP_QUERY _IOWR('f', 17, struct sw_procmap_query)
#define SW_QUERY_COVERING_OR_NEXT 0x10u
#define SW_QUERY_FILE_BACKED 0x20u

#define MAPS_TEXT_MAX (8u << 20) /* bytes of text read, at most */
#define AUXV_MAX 4096u

/* 1 once the kernel said it has no PROCMAP_QUERY: the text from then on. */
static atomic_int no_query;

static const char *hex_field(const char *p, uint64_t *out)
{
	uint64_t v = 0;
	int n = 0;

	for (;; p++, n++) {
		unsigned d;

		if (*p >= '0' && *p <= '9')
			d = (unsigned)(*p - '0');
		else if (*p >= 'a' && *p <= 'f')
			d = (unsigned)(*p - 'a' + 10);
		else if (*p >= 'A' && *p <= 'F')
			d = (unsigned)(*p - 'A' + 10);
		else
			break;
		if (n == 16)
			return NULL;
		v = v << 4 | d;
	}
	if (!n)
		return NULL;
	*out = v;
	return p;
}

static const char *dec_field(const char *p, uint64_t *out)
{
	uint64_t v = 0;
	int n = 0;

	for (; *p >= '0' && *p <= '9'; p++, n++) {
		unsigned d = (unsigned)(*p - '0');

		if (v > (UINT64_MAX - d) / 10)
			return NULL;
		v = v * 10 + d;
	}
	if (!n)
		return NULL;
	*out = v;
	return p;
}

static const char *blanks(const char *p)
{
	while (*p == ' ' || *p == '\t')
		p++;
	return p;
}

bool procmaps_parse_line(char *line, struct procmaps_line *l)
{
	const char *p = line;
	uint64_t maj, min;
	char *nl;

	if (!(p = hex_field(p, &l->start)) || *p++ != '-' ||
	    !(p = hex_field(p, &l->end)) || *p++ != ' ')
		return false;
	while (*p && *p != ' ' && *p != '\n') /* the permissions */
		p++;
	p = blanks(p);
	if (!(p = hex_field(p, &l->offset)))
		return false;
	p = blanks(p);
	if (!(p = hex_field(p, &maj)) || *p++ != ':' ||
	    !(p = hex_field(p, &min)) || maj > UINT32_MAX || min > UINT32_MAX)
		return false;
	p = blanks(p);
	if (!(p = dec_field(p, &l->ino)))
		return false;
	l->dev = makedev((unsigned)maj, (unsigned)min);
	l->name = line + (blanks(p) - line);
	nl = strchr(l->name, '\n');
	if (nl)
		*nl = '\0';
	return l->start < l->end;
}

bool procmaps_is_file(const struct procmaps_line *l)
{
	return l->name[0] == '/' && (l->ino || l->dev);
}

void procmaps_release(struct procmaps *pm)
{
	for (size_t i = 0; i < pm->n; i++)
		free(pm->v[i].path);
	free(pm->v);
	pm->v = NULL;
	pm->n = pm->cap = 0;
}

int procmaps_copy(const struct procmaps *pm, struct procmaps *out)
{
	memset(out, 0, sizeof(*out));
	out->vdso_start = pm->vdso_start;
	out->vdso_end = pm->vdso_end;
	if (!pm->n)
		return 0;
	out->v = calloc(pm->n, sizeof(*out->v));
	if (!out->v)
		return -ENOMEM;
	out->cap = pm->n;
	for (size_t i = 0; i < pm->n; i++) {
		out->v[i] = pm->v[i];
		out->v[i].path = strdup(pm->v[i].path);
		out->n = i + 1;
		if (!out->v[i].path) {
			procmaps_release(out);
			return -ENOMEM;
		}
	}
	return 0;
}

static int push(struct procmaps *pm, const struct procmaps_line *l)
{
	struct procmap *m;

	if (pm->n == PROCMAPS_MAX)
		return SW_ETOOBIG;
	if (pm->n == pm->cap) {
		size_t ncap = pm->cap ? 2 * pm->cap : 64;
		struct procmap *v = realloc(pm->v, ncap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		pm->v = v;
		pm->cap = ncap;
	}
	m = &pm->v[pm->n];
	m->start = l->start;
	m->end = l->end;
	m->offset = l->offset;
	m->dev = l->dev;
	m->ino = l->ino;
	m->path = strdup(l->name);
	if (!m->path)
		return -ENOMEM;
	pm->n++;
	return 0;
}

/*
 * The vDSO's address of the processes read lately, by pid and start
 * time: it is set at exec, and auxv may be a privileged reader's to open
 * (procfs.h's broker), so it is read once per process, not per dump.
 */
#define EHDR_KEPT 64
static struct {
	pid_t pid;
	uint64_t start; /* procfs_start_time() */
	uint64_t at;
} ehdr_kept[EHDR_KEPT];
static unsigned ehdr_next;
static pthread_mutex_t ehdr_lock = PTHREAD_MUTEX_INITIALIZER;

static uint64_t read_sysinfo_ehdr(pid_t pid);
static uint64_t sysinfo_ehdr(pid_t pid);

/* Forgets what was kept of pid (it ran exec) and reads it again. */
static uint64_t sysinfo_ehdr_again(pid_t pid)
{
	pthread_mutex_lock(&ehdr_lock);
	for (unsigned i = 0; i < EHDR_KEPT; i++)
		if (ehdr_kept[i].pid == pid)
			ehdr_kept[i].pid = 0;
	pthread_mutex_unlock(&ehdr_lock);
	return sysinfo_ehdr(pid);
}

/* The process's AT_SYSINFO_EHDR (its vDSO's address), or 0. */
static uint64_t sysinfo_ehdr(pid_t pid)
{
	uint64_t start = 0, at = 0;
	bool found = false;

	if (procfs_start_time(pid, &start) != 0)
		return read_sysinfo_ehdr(pid);
	pthread_mutex_lock(&ehdr_lock);
	for (unsigned i = 0; i < EHDR_KEPT && !found; i++)
		if (ehdr_kept[i].pid == pid && ehdr_kept[i].start == start) {
			at = ehdr_kept[i].at;
			found = true;
		}
	pthread_mutex_unlock(&ehdr_lock);
	if (found)
		return at;
	at = read_sysinfo_ehdr(pid);
	if (!at)
		return 0;
	pthread_mutex_lock(&ehdr_lock);
	ehdr_kept[ehdr_next % EHDR_KEPT].pid = pid;
	ehdr_kept[ehdr_next % EHDR_KEPT].start = start;
	ehdr_kept[ehdr_next % EHDR_KEPT].at = at;
	ehdr_next++;
	pthread_mutex_unlock(&ehdr_lock);
	return at;
}

static uint64_t read_sysinfo_ehdr(pid_t pid)
{
	char fname[64];
	Elf64_auxv_t *a;
	ssize_t got;
	uint64_t at = 0;
	int fd;

	snprintf(fname, sizeof(fname), "/proc/%d/auxv", (int)pid);
	fd = procfs_open(fname);
	if (fd < 0)
		return 0;
	a = malloc(AUXV_MAX);
	got = a ? read(fd, a, AUXV_MAX) : -1;
	close(fd);
	for (size_t i = 0; got > 0 && i < (size_t)got / sizeof(*a); i++) {
		if (a[i].a_type == AT_NULL)
			break;
		if (a[i].a_type == AT_SYSINFO_EHDR)
			at = a[i].a_un.a_val;
	}
	free(a);
	return at;
}

/* The file mappings through PROCMAP_QUERY, named in name (PATH_MAX). */
static int query_files(int fd, char *name, struct procmaps *pm)
{
	struct sw_procmap_query q;
	uint64_t addr = 0;
	int r;

	for (;;) {
		struct procmaps_line l;

		memset(&q, 0, sizeof(q));
		q.size = sizeof(q);
		q.query_flags =
			SW_QUERY_COVERING_OR_NEXT | SW_QUERY_FILE_BACKED;
		q.query_addr = addr;
		q.vma_name_addr = (uint64_t)(uintptr_t)name;
		q.vma_name_size = PATH_MAX;
		if (ioctl(fd, SW_PROCMAP_QUERY, &q) < 0) {
			if (errno == ENOENT)
				break; /* no file mapping past addr */
			if (errno == EINTR)
				continue;
			if (errno != ENAMETOOLONG)
				return -errno;
			/* A name past PATH_MAX: no file we could open. */
			q.vma_name_addr = 0;
			q.vma_name_size = 0;
			if (ioctl(fd, SW_PROCMAP_QUERY, &q) < 0)
				return errno == ENOENT ? 0 : -errno;
			name[0] = '\0';
		}
		if (q.vma_end <= q.vma_start || q.vma_end <= addr)
			return SW_EFORMAT;
		addr = q.vma_end;
		name[PATH_MAX - 1] = '\0';
		l.start = q.vma_start;
		l.end = q.vma_end;
		l.offset = q.vma_offset;
		l.dev = makedev(q.dev_major, q.dev_minor);
		l.ino = q.inode;
		l.name = name;
		if (procmaps_is_file(&l) && (r = push(pm, &l)) != 0)
			return r;
	}
	return 0;
}

/* The mappings through PROCMAP_QUERY; -ENOTTY where the kernel has none. */
static int read_query(int fd, pid_t pid, struct procmaps *pm)
{
	struct sw_procmap_query q;
	uint64_t vdso;
	char *name;
	int r;

	name = malloc(PATH_MAX);
	if (!name)
		return -ENOMEM;
	r = query_files(fd, name, pm);
	vdso = r == 0 ? sysinfo_ehdr(pid) : 0;
	/* Kept from before an exec (same pid, same start): read again. */
	for (int fresh = 0; vdso && fresh < 2; fresh++) {
		memset(&q, 0, sizeof(q));
		q.size = sizeof(q);
		q.query_addr = vdso;
		q.vma_name_addr = (uint64_t)(uintptr_t)name;
		q.vma_name_size = PATH_MAX;
		if (ioctl(fd, SW_PROCMAP_QUERY, &q) == 0 &&
		    q.vma_start == vdso && q.vma_end > vdso &&
		    strcmp(name, "[vdso]") == 0) {
			pm->vdso_start = q.vma_start;
			pm->vdso_end = q.vma_end;
			break;
		}
		vdso = fresh ? 0 : sysinfo_ehdr_again(pid);
	}
	free(name);
	return r;
}

/* The mappings from the text of the file open at fd (taken). */
static int read_text(int fd, struct procmaps *pm)
{
	char *line = NULL;
	size_t cap = 0, total = 0;
	ssize_t len;
	int r = 0;
	FILE *f;

	f = fdopen(fd, "re");
	if (!f) {
		r = -errno;
		close(fd);
		return r;
	}
	while ((len = getline(&line, &cap, f)) > 0) {
		struct procmaps_line l;

		total += (size_t)len;
		if (total > MAPS_TEXT_MAX) {
			r = SW_ETOOBIG;
			break;
		}
		if (!procmaps_parse_line(line, &l))
			continue;
		if (strcmp(l.name, "[vdso]") == 0) {
			pm->vdso_start = l.start;
			pm->vdso_end = l.end;
		} else if (procmaps_is_file(&l) && (r = push(pm, &l)) != 0) {
			break;
		}
	}
	if (!r && ferror(f))
		r = -EIO;
	free(line);
	fclose(f);
	return r;
}

/* procmaps_read(), through the ioctl unless text_only or none is known. */
static int read_maps(pid_t pid, bool text_only, struct procmaps *out)
{
	char fname[64];
	int fd, r;

	memset(out, 0, sizeof(*out));
	snprintf(fname, sizeof(fname), "/proc/%d/maps", (int)pid);
	fd = procfs_open(fname);
	if (fd < 0)
		return fd;
	r = -ENOTTY;
	if (!text_only &&
	    !atomic_load_explicit(&no_query, memory_order_relaxed)) {
		r = read_query(fd, pid, out);
		if (r == -ENOTTY || r == -EINVAL) {
			/* No such ioctl here (EINVAL: one that knows no
			 * such size): the text from now on. */
			atomic_store_explicit(&no_query, 1,
					      memory_order_relaxed);
			procmaps_release(out);
			memset(out, 0, sizeof(*out));
			r = -ENOTTY;
		}
	}
	if (r == -ENOTTY)
		r = read_text(fd, out);
	else
		close(fd);
	if (r)
		procmaps_release(out);
	return r;
}

int procmaps_read(pid_t pid, struct procmaps *out)
{
	return read_maps(pid, false, out);
}

int procmaps_read_text(pid_t pid, struct procmaps *out)
{
	return read_maps(pid, true, out);
}

const struct procmap *procmaps_find(const struct procmaps *pm, uint64_t addr)
{
	size_t lo = 0, hi = pm->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (addr < pm->v[mid].start)
			hi = mid;
		else if (addr >= pm->v[mid].end)
			lo = mid + 1;
		else
			return &pm->v[mid];
	}
	return NULL;
}
