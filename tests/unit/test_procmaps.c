/*
 * test_procmaps.c - the file mappings of a process (src/model/procmaps.c):
 * the line parser on lines as the kernel writes them and on broken ones,
 * and a live process read both ways, through the kernel's PROCMAP_QUERY
 * (where it has one) and from the text, which must agree mapping by
 * mapping: a file mapped twice at different offsets, a deleted file, a
 * memfd, hundreds of anonymous mappings between them, and the vDSO.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include "model/procmaps.h"
#include "stackwatch.h"
#include "tap.h"

static void test_lines(void)
{
	char lib[] = "7f0a12345000-7f0a12367000 r-xp 00022000 fd:01 1234567    "
		     "          /usr/lib/x86_64-linux-gnu/libc.so.6\n";
	char anon[] = "7ffc1000-7ffc2000 rw-p 00000000 00:00 0 \n";
	char stack[] = "7ffd0000-7ffd2000 rw-p 00000000 00:00 0   [stack]\n";
	char del[] = "1000-2000 r--s 00001000 00:05 77  /memfd:a b (deleted)\n";
	char big[] = "10000000000000000-2 r--p 0 0:0 0 /x\n";
	char wrap[] = "2000-1000 r--p 0 0:0 5 /x\n";
	const char *bad[] = { "",
			      "1000",
			      "1000-",
			      "1000-2000",
			      "1000-2000 r--p",
			      "1000-2000 r--p 0",
			      "1000-2000 r--p 0 fd",
			      "x-2 r 0 0:0 0",
			      "1000-2000 r--p 0 100000000:0 1 /x",
			      "1000-2000 r--p 0 0:0 99999999999999999999 /x" };
	struct procmaps_line l;
	bool ok = procmaps_parse_line(lib, &l);

	TAP_OK(ok && l.start == 0x7f0a12345000 && l.end == 0x7f0a12367000 &&
		       l.offset == 0x22000 && l.dev == makedev(0xfd, 1) &&
		       l.ino == 1234567 &&
		       !strcmp(l.name, "/usr/lib/x86_64-linux-gnu/libc.so.6"),
	       "a library's line: range, offset, device, inode, path (%s)",
	       ok ? l.name : "none");
	TAP_OK(procmaps_is_file(&l), "... a file mapping");
	TAP_OK(procmaps_parse_line(anon, &l) && l.name[0] == '\0' &&
		       !procmaps_is_file(&l),
	       "an anonymous mapping: no name, no file");
	TAP_OK(procmaps_parse_line(stack, &l) && !strcmp(l.name, "[stack]") &&
		       !procmaps_is_file(&l),
	       "[stack]: named, no file");
	TAP_OK(procmaps_parse_line(del, &l) &&
		       !strcmp(l.name, "/memfd:a b (deleted)") &&
		       procmaps_is_file(&l) && l.offset == 0x1000,
	       "a deleted memfd keeps its blanks and its suffix");
	TAP_OK(!procmaps_parse_line(big, &l), "17 hex digits fail");
	TAP_OK(!procmaps_parse_line(wrap, &l), "an end below the start fails");
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char *c = strdup(bad[i]);

		TAP_OK(c && !procmaps_parse_line(c, &l), "malformed: \"%s\"",
		       bad[i]);
		free(c);
	}
}

static bool same_maps(const struct procmaps *a, const struct procmaps *b)
{
	if (a->n != b->n || a->vdso_start != b->vdso_start ||
	    a->vdso_end != b->vdso_end) {
		TAP_NOTE("%zu and %zu mappings, vDSO %llx and %llx", a->n, b->n,
			 (unsigned long long)a->vdso_start,
			 (unsigned long long)b->vdso_start);
		return false;
	}
	for (size_t i = 0; i < a->n; i++) {
		const struct procmap *x = &a->v[i], *y = &b->v[i];

		if (x->start != y->start || x->end != y->end ||
		    x->offset != y->offset || x->dev != y->dev ||
		    x->ino != y->ino || strcmp(x->path, y->path)) {
			TAP_NOTE("mapping %zu: %llx %s and %llx %s", i,
				 (unsigned long long)x->start, x->path,
				 (unsigned long long)y->start, y->path);
			return false;
		}
	}
	return true;
}

/* The mappings of pm that map ino, counted. */
static size_t count_ino(const struct procmaps *pm, uint64_t ino)
{
	size_t n = 0;

	for (size_t i = 0; i < pm->n; i++)
		n += pm->v[i].ino == ino;
	return n;
}

static void test_live(void)
{
	char path[] = "/tmp/test_procmaps.XXXXXX",
	     gone[] = "/tmp/test_procmaps_gone.XXXXXX";
	long page = sysconf(_SC_PAGESIZE);
	struct procmaps q = { 0 }, t = { 0 };
	const struct procmap *m;
	struct stat st, gst;
	void *anon[300], *a, *b, *g, *mf;
	int fd, gfd, mfd, r;

	fd = mkstemp(path);
	gfd = mkstemp(gone);
	mfd = memfd_create("test procmaps", MFD_CLOEXEC);
	if (fd < 0 || gfd < 0 || mfd < 0 || ftruncate(fd, 4 * page) ||
	    ftruncate(gfd, page) || ftruncate(mfd, page) || fstat(fd, &st) ||
	    fstat(gfd, &gst)) {
		TAP_OK(0, "temporary files: %s", strerror(errno));
		return;
	}
	a = mmap(NULL, (size_t)page, PROT_READ, MAP_SHARED, fd, 0);
	b = mmap(NULL, (size_t)page, PROT_READ, MAP_SHARED, fd, 3 * page);
	g = mmap(NULL, (size_t)page, PROT_READ, MAP_SHARED, gfd, 0);
	mf = mmap(NULL, (size_t)page, PROT_READ, MAP_SHARED, mfd, 0);
	unlink(gone);
	/* Anonymous mappings that do not merge: alternate protections. */
	for (size_t i = 0; i < 300; i++)
		anon[i] = mmap(NULL, (size_t)page,
			       i % 2 ? PROT_READ : PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	r = procmaps_read(getpid(), &q);
	TAP_OK(r == 0, "read: %s", r ? sw_strerror(r) : "ok");
	r = procmaps_read_text(getpid(), &t);
	TAP_OK(r == 0, "read from the text: %s", r ? sw_strerror(r) : "ok");
	TAP_OK(same_maps(&q, &t),
	       "both ways give the same %zu file mappings and vDSO", q.n);
	TAP_OK(count_ino(&q, st.st_ino) == 2,
	       "the file mapped twice is there twice");
	m = procmaps_find(&q, (uint64_t)(uintptr_t)b + 10);
	TAP_OK(m && m->ino == st.st_ino && m->dev == st.st_dev &&
		       m->offset == (uint64_t)(3 * page) &&
		       !strcmp(m->path, path),
	       "the second mapping: its file, offset and path (%s)",
	       m ? m->path : "none");
	m = procmaps_find(&q, (uint64_t)(uintptr_t)g);
	TAP_OK(m && m->ino == gst.st_ino && strstr(m->path, " (deleted)"),
	       "a deleted file is named as deleted (%s)", m ? m->path : "none");
	m = procmaps_find(&q, (uint64_t)(uintptr_t)mf);
	TAP_OK(m && !strncmp(m->path, "/memfd:test procmaps", 20),
	       "a memfd (%s)", m ? m->path : "none");
	TAP_OK(!procmaps_find(&q, (uint64_t)(uintptr_t)anon[7]),
	       "an anonymous mapping is none");
	TAP_OK(q.vdso_start && q.vdso_start == getauxval(AT_SYSINFO_EHDR) &&
		       q.vdso_end > q.vdso_start,
	       "the vDSO where the auxiliary vector says (%llx)",
	       (unsigned long long)q.vdso_start);
	for (size_t i = 1; i < q.n; i++)
		if (q.v[i].start < q.v[i - 1].end) {
			TAP_OK(0, "ascending: mapping %zu", i);
			break;
		}
	procmaps_release(&q);
	procmaps_release(&t);
	for (size_t i = 0; i < 300; i++)
		munmap(anon[i], (size_t)page);
	munmap(a, (size_t)page);
	munmap(b, (size_t)page);
	munmap(g, (size_t)page);
	munmap(mf, (size_t)page);
	close(fd);
	close(gfd);
	close(mfd);
	unlink(path);
}

static void test_gone(void)
{
	struct procmaps pm;
	pid_t pid = fork();
	int r;

	if (pid == 0)
		_exit(0);
	waitpid(pid, NULL, 0);
	r = procmaps_read(pid, &pm);
	TAP_OK(r == -ENOENT || r == -ESRCH, "a reaped process: %s",
	       sw_strerror(r));
}

int main(void)
{
	test_lines();
	test_live();
	test_gone();
	return tap_done();
}
