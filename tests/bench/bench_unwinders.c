/*
 * bench_unwinders.c - libunwind's remote API against our libdwfl unwinder
 * (symbols/unwind.h), on one and the same ptrace snapshot: which is
 * faster, and do they find the same stacks.
 *
 *	bench_unwinders PID ROUNDS
 *
 * Takes one snapshot of PID (snapshot/snapshot.h), then ROUNDS times
 * unwinds every thread of it with unwind_snapshot() and with libunwind.
 * Both read nothing but the copies: libunwind's registers come from the
 * copied ones, its memory from the thread's stack copy or, for code and
 * unwind tables, from the module file mapped at the address (read-only
 * segments only, whose bytes are the file's). libunwind-ptrace finds the
 * unwind tables: _UPT_find_proc_info() reads /proc/PID/maps and the ELF
 * headers from disk and searches .eh_frame_hdr through our access_mem,
 * without ptrace. Each round starts both cold: a new Dwfl inside
 * unwind_snapshot(), a new address space here (with libunwind's global
 * cache, which a remote address space does not have by default). The
 * map of file mappings is read once, before the rounds.
 *
 * Both keep raw pcs: the first frame's (and a signal frame's) exact pc,
 * the return address for the frames above, so the lists compare as they
 * are. Prints:
 *	threads N frames_dwfl F1 frames_libunwind F2 same S prefix P differ D
 *	dwfl_us_min A dwfl_us_median B libunwind_us_min C libunwind_us_median E
 *	reads_stack R reads_file F reads_refused X	(one libunwind round)
 * and a note with both lists for each of the first NOTES_MAX threads
 * that differ.
 */
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <libunwind-ptrace.h>
#include <libunwind.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "model/clock.h"
#include "model/dump.h"
#include "snapshot/snapshot.h"
#include "stackwatch.h"
#include "symbols/unwind.h"

#define NOTES_MAX 3
#define FILE_RO_MAX 16 /* read-only PT_LOAD segments kept per file */
#define FILE_PH_MAX 64 /* program headers read per file */

/* libunwind's x86-64 register numbers are the DWARF ones of snap.regs. */
_Static_assert(UNW_X86_64_RAX == 0 && UNW_X86_64_RDX == 1 &&
		       UNW_X86_64_RCX == 2 && UNW_X86_64_RBX == 3 &&
		       UNW_X86_64_RSI == 4 && UNW_X86_64_RDI == 5 &&
		       UNW_X86_64_RBP == 6 && UNW_X86_64_RSP == 7 &&
		       UNW_X86_64_R8 == 8 && UNW_X86_64_R15 == 15 &&
		       UNW_X86_64_RIP == 16 && SNAP_NREGS == 17,
	       "UNW_X86_64_* in DWARF order");

/* One mapped file: its fd and the file ranges that are never written. */
struct modfile {
	unsigned int major, minor;
	uint64_t inode;
	int fd;
	size_t nro;
	struct {
		uint64_t lo, hi;
	} ro[FILE_RO_MAX];
};

/* One file-backed, non-writable mapping, sorted by start. */
struct region {
	uint64_t start, end, offset;
	size_t file; /* index into target.files */
};

struct target {
	struct region *regions;
	size_t nregions;
	struct modfile *files;
	size_t nfiles;
};

/*
 * What the accessors read from: _UPT_find_proc_info() hands them its own
 * argument (the UPT_info), so the thread being unwound is here. The bench
 * is single-threaded.
 */
static struct {
	const struct target *tg;
	const struct snap_thread *cur;
	uint64_t reads_stack, reads_file, reads_refused;
} ctx;

/*
 * The file ranges of f's PT_LOAD segments without PF_W: bytes that the
 * loader maps as they are (RELRO lies inside a writable segment and is
 * left out). A file that is not 64-bit ELF keeps none.
 */
static void load_ro_ranges(struct modfile *f)
{
	Elf64_Ehdr eh;
	Elf64_Phdr ph[FILE_PH_MAX];
	size_t n;

	f->nro = 0;
	if (pread(f->fd, &eh, sizeof(eh), 0) != (ssize_t)sizeof(eh) ||
	    memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 ||
	    eh.e_ident[EI_CLASS] != ELFCLASS64 ||
	    eh.e_phentsize != sizeof(Elf64_Phdr))
		return;
	n = eh.e_phnum < FILE_PH_MAX ? eh.e_phnum : FILE_PH_MAX;
	if (pread(f->fd, ph, n * sizeof(*ph), (off_t)eh.e_phoff) !=
	    (ssize_t)(n * sizeof(*ph)))
		return;
	for (size_t i = 0; i < n && f->nro < FILE_RO_MAX; i++) {
		if (ph[i].p_type != PT_LOAD || (ph[i].p_flags & PF_W))
			continue;
		f->ro[f->nro].lo = ph[i].p_offset;
		f->ro[f->nro].hi = ph[i].p_offset + ph[i].p_filesz;
		f->nro++;
	}
}

/*
 * Opens the file mapped at [start, end): the mapped inode itself through
 * map_files (needs CAP_SYS_ADMIN), else the path in the process's root.
 * Returns an fd or -errno.
 */
static int open_mapped(pid_t pid, uint64_t start, uint64_t end,
		       const char *path)
{
	char name[4096];
	int fd;

	snprintf(name, sizeof(name), "/proc/%d/map_files/%" PRIx64 "-%" PRIx64,
		 (int)pid, start, end);
	fd = open(name, O_RDONLY | O_CLOEXEC);
	if (fd >= 0)
		return fd;
	snprintf(name, sizeof(name), "/proc/%d/root%s", (int)pid, path);
	fd = open(name, O_RDONLY | O_CLOEXEC);
	return fd >= 0 ? fd : -errno;
}

/*
 * The index in tg->files of the file (major:minor, inode), opened and
 * read on first sight through the mapping [start, end). Returns the
 * index, or -errno when it cannot be opened or the table not grown.
 */
static long file_index(struct target *tg, pid_t pid, unsigned int major,
		       unsigned int minor, uint64_t inode, uint64_t start,
		       uint64_t end, const char *path)
{
	struct modfile *f, *nv;
	int fd;

	for (size_t i = 0; i < tg->nfiles; i++) {
		f = &tg->files[i];
		if (f->inode == inode && f->major == major && f->minor == minor)
			return (long)i;
	}
	fd = open_mapped(pid, start, end, path);
	if (fd < 0)
		return fd;
	nv = realloc(tg->files, (tg->nfiles + 1) * sizeof(*nv));
	if (!nv) {
		close(fd);
		return -ENOMEM;
	}
	tg->files = nv;
	f = &tg->files[tg->nfiles];
	f->major = major;
	f->minor = minor;
	f->inode = inode;
	f->fd = fd;
	load_ro_ranges(f);
	return (long)tg->nfiles++;
}

static void target_release(struct target *tg)
{
	for (size_t i = 0; i < tg->nfiles; i++)
		close(tg->files[i].fd);
	free(tg->files);
	free(tg->regions);
	memset(tg, 0, sizeof(*tg));
}

/*
 * Reads /proc/PID/maps into tg: every non-writable mapping of a file,
 * with its file opened once. Mappings whose file cannot be opened are
 * left out (reads there are refused). Returns 0 or -errno; on error tg
 * holds nothing.
 */
static int target_load(pid_t pid, struct target *tg)
{
	char name[64], line[4096 + 128];
	size_t cap = 0;
	FILE *f;
	int r = 0;

	memset(tg, 0, sizeof(*tg));
	snprintf(name, sizeof(name), "/proc/%d/maps", (int)pid);
	f = fopen(name, "re");
	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f)) {
		uint64_t start, end, offset, inode;
		unsigned int major, minor;
		char perms[5], *path;
		struct region *nv;
		int pos = 0;
		long fi;

		if (sscanf(line,
			   "%" SCNx64 "-%" SCNx64 " %4s %" SCNx64
			   " %x:%x %" SCNu64 " %n",
			   &start, &end, perms, &offset, &major, &minor, &inode,
			   &pos) < 7 ||
		    !pos)
			continue;
		path = line + pos;
		path[strcspn(path, "\n")] = '\0';
		if (inode == 0 || path[0] != '/' || perms[1] == 'w')
			continue;
		fi = file_index(tg, pid, major, minor, inode, start, end, path);
		if (fi == -ENOMEM) {
			r = -ENOMEM;
			goto out_release;
		}
		if (fi < 0)
			continue;
		if (tg->nregions == cap) {
			cap = cap ? cap * 2 : 64;
			nv = realloc(tg->regions, cap * sizeof(*nv));
			if (!nv) {
				r = -ENOMEM;
				goto out_release;
			}
			tg->regions = nv;
		}
		tg->regions[tg->nregions++] = (struct region){
			.start = start,
			.end = end,
			.offset = offset,
			.file = (size_t)fi,
		};
	}
	fclose(f);
	return 0;
out_release:
	fclose(f);
	target_release(tg);
	return r;
}

/* The region holding [addr, addr + 8), or NULL. */
static const struct region *region_at(const struct target *tg, uint64_t addr)
{
	size_t lo = 0, hi = tg->nregions;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		const struct region *g = &tg->regions[mid];

		if (addr < g->start)
			hi = mid;
		else if (addr >= g->end)
			lo = mid + 1;
		else
			return g->end - addr >= 8 ? g : NULL;
	}
	return NULL;
}

/* A word of a read-only file mapping, from the file. 0 or -1. */
static int read_file_word(const struct target *tg, uint64_t addr,
			  unw_word_t *val)
{
	const struct region *g = region_at(tg, addr);
	const struct modfile *f;
	uint64_t off;

	if (!g)
		return -1;
	f = &tg->files[g->file];
	off = g->offset + (addr - g->start);
	for (size_t i = 0; i < f->nro; i++) {
		if (off >= f->ro[i].lo && f->ro[i].hi - off >= sizeof(*val))
			return pread(f->fd, val, sizeof(*val), (off_t)off) ==
					       (ssize_t)sizeof(*val)
				       ? 0
				       : -1;
	}
	return -1;
}

/* unw_accessors_t.access_mem: the stack copy, else the module's file. */
static int acc_access_mem(unw_addr_space_t as, unw_word_t addr, unw_word_t *val,
			  int write, void *arg)
{
	const struct snap_thread *t = ctx.cur;

	(void)as;
	(void)arg;
	if (write)
		return -UNW_EINVAL;
	if (t && addr >= t->sp && t->stack_len >= sizeof(*val) &&
	    addr - t->sp <= t->stack_len - sizeof(*val)) {
		memcpy(val, t->stack + (addr - t->sp), sizeof(*val));
		ctx.reads_stack++;
		return 0;
	}
	if (read_file_word(ctx.tg, addr, val) == 0) {
		ctx.reads_file++;
		return 0;
	}
	ctx.reads_refused++;
	return -UNW_EINVAL;
}

/* unw_accessors_t.access_reg: the copied registers, read-only. */
static int acc_access_reg(unw_addr_space_t as, unw_regnum_t reg,
			  unw_word_t *val, int write, void *arg)
{
	(void)as;
	(void)arg;
	if (write)
		return -UNW_EREADONLYREG;
	if (!ctx.cur || reg < 0 || reg >= SNAP_NREGS)
		return -UNW_EBADREG;
	*val = ctx.cur->regs[reg];
	return 0;
}

static int acc_access_fpreg(unw_addr_space_t as, unw_regnum_t reg,
			    unw_fpreg_t *val, int write, void *arg)
{
	(void)as;
	(void)reg;
	(void)val;
	(void)write;
	(void)arg;
	return -UNW_EBADREG;
}

static int acc_resume(unw_addr_space_t as, unw_cursor_t *c, void *arg)
{
	(void)as;
	(void)c;
	(void)arg;
	return -UNW_EINVAL;
}

static int acc_get_proc_name(unw_addr_space_t as, unw_word_t addr, char *buf,
			     size_t len, unw_word_t *off, void *arg)
{
	(void)as;
	(void)addr;
	(void)buf;
	(void)len;
	(void)off;
	(void)arg;
	return -UNW_ENOINFO;
}

static unw_accessors_t accessors = {
	.find_proc_info = _UPT_find_proc_info,
	.put_unwind_info = _UPT_put_unwind_info,
	.get_dyn_info_list_addr = _UPT_get_dyn_info_list_addr,
	.access_mem = acc_access_mem,
	.access_reg = acc_access_reg,
	.access_fpreg = acc_access_fpreg,
	.resume = acc_resume,
	.get_proc_name = acc_get_proc_name,
};

/* t's pcs into ips (SW_MAX_FRAMES of room), innermost first: how many. */
static size_t unwind_thread(unw_addr_space_t as, void *upt,
			    const struct snap_thread *t, uint64_t *ips)
{
	unw_cursor_t c;
	unw_word_t ip;
	size_t n = 0;

	ctx.cur = t;
	if (unw_init_remote(&c, as, upt) < 0)
		goto out;
	do {
		if (unw_get_reg(&c, UNW_REG_IP, &ip) < 0 || n == SW_MAX_FRAMES)
			break;
		ips[n++] = ip;
	} while (unw_step(&c) > 0);
out:
	ctx.cur = NULL;
	return n;
}

/*
 * One libunwind round over every ok thread of s, in a new address space:
 * thread i's pcs into ips[i * SW_MAX_FRAMES...], their count into
 * nips[i]. Returns 0, or -ENOMEM.
 */
static int libunwind_round(const struct snap *s, uint64_t *ips, size_t *nips)
{
	unw_addr_space_t as = unw_create_addr_space(&accessors, 0);
	void *upt = _UPT_create(s->pid);
	int r = 0;

	if (!as || !upt) {
		r = -ENOMEM;
		goto out;
	}
	unw_set_caching_policy(as, UNW_CACHE_GLOBAL);
	ctx.reads_stack = ctx.reads_file = ctx.reads_refused = 0;
	for (size_t i = 0; i < s->nthreads; i++) {
		const struct snap_thread *t = &s->threads[i];

		nips[i] = t->status == SW_ST_OK
				  ? unwind_thread(as, upt, t,
						  ips + i * SW_MAX_FRAMES)
				  : 0;
	}
out:
	if (upt)
		_UPT_destroy(upt);
	if (as)
		unw_destroy_addr_space(as);
	return r;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return (x > y) - (x < y);
}

/* The median of the n sorted values, in microseconds. */
static double median_us(const uint64_t *v, size_t n)
{
	if (!n)
		return 0.0;
	if (n % 2)
		return (double)v[n / 2] / 1000.0;
	return (double)(v[n / 2 - 1] + v[n / 2]) / 2000.0;
}

static void print_ips(const char *who, const uint64_t *ips, size_t n)
{
	printf(" %s", who);
	for (size_t i = 0; i < n; i++)
		printf("%s%" PRIx64, i ? "," : " 0x", ips[i]);
	if (!n)
		printf(" -");
}

/* Compares d's threads with libunwind's pcs and prints the counts. */
static void compare(const struct snap *s, const struct sw_dump *d,
		    const uint64_t *ips, const size_t *nips)
{
	size_t n = 0, f1 = 0, f2 = 0, same = 0, prefix = 0, differ = 0;
	size_t notes = 0;

	for (size_t i = 0; i < s->nthreads && i < d->nthreads; i++) {
		const struct sw_thread *t = &d->threads[i];
		const uint64_t *u = ips + i * SW_MAX_FRAMES;
		size_t common = t->nips < nips[i] ? t->nips : nips[i];

		if (s->threads[i].status != SW_ST_OK)
			continue;
		n++;
		f1 += t->nips;
		f2 += nips[i];
		if (memcmp(t->ips, u, common * sizeof(*u)) != 0) {
			differ++;
			if (notes++ < NOTES_MAX) {
				printf("note tid %d", (int)t->tid);
				print_ips("dwfl", t->ips, t->nips);
				print_ips("libunwind", u, nips[i]);
				printf("\n");
			}
		} else if (t->nips == nips[i]) {
			same++;
		} else {
			prefix++;
		}
	}
	printf("threads %zu frames_dwfl %zu frames_libunwind %zu same %zu "
	       "prefix %zu differ %zu\n",
	       n, f1, f2, same, prefix, differ);
}

int main(int argc, char **argv)
{
	struct target tg;
	struct snap *s = NULL;
	struct sw_dump *d = NULL;
	uint64_t *ips = NULL, *t_dwfl = NULL, *t_unw = NULL;
	size_t *nips = NULL;
	int rounds, rc, ret = 1;
	pid_t pid;

	if (argc != 3 || (pid = (pid_t)atoi(argv[1])) <= 0 ||
	    (rounds = atoi(argv[2])) <= 0) {
		fprintf(stderr, "usage: bench_unwinders PID ROUNDS\n");
		return 2;
	}
	rc = snap_take(pid, 5000, &s);
	if (rc != 0) {
		fprintf(stderr, "snapshot: %s\n", sw_strerror(rc));
		return 1;
	}
	rc = target_load(pid, &tg);
	if (rc != 0) {
		fprintf(stderr, "maps: %s\n", sw_strerror(rc));
		goto out_snap;
	}
	ctx.tg = &tg;
	ips = malloc((s->nthreads ? s->nthreads : 1) * SW_MAX_FRAMES *
		     sizeof(*ips));
	nips = calloc(s->nthreads ? s->nthreads : 1, sizeof(*nips));
	t_dwfl = calloc((size_t)rounds, sizeof(*t_dwfl));
	t_unw = calloc((size_t)rounds, sizeof(*t_unw));
	if (!ips || !nips || !t_dwfl || !t_unw) {
		fprintf(stderr, "out of memory\n");
		goto out_free;
	}
	for (int r = 0; r < rounds; r++) {
		uint64_t t0;

		sw_dump_free(d);
		d = NULL;
		t0 = clock_now_ns();
		rc = unwind_snapshot(s, NULL, NULL, NULL, &d);
		t_dwfl[r] = clock_now_ns() - t0;
		if (rc != 0) {
			fprintf(stderr, "unwind_snapshot: %s\n",
				sw_strerror(rc));
			goto out_free;
		}
		t0 = clock_now_ns();
		rc = libunwind_round(s, ips, nips);
		t_unw[r] = clock_now_ns() - t0;
		if (rc != 0) {
			fprintf(stderr, "libunwind: %s\n", sw_strerror(rc));
			goto out_free;
		}
	}
	compare(s, d, ips, nips);
	qsort(t_dwfl, (size_t)rounds, sizeof(*t_dwfl), cmp_u64);
	qsort(t_unw, (size_t)rounds, sizeof(*t_unw), cmp_u64);
	printf("dwfl_us_min %.1f dwfl_us_median %.1f libunwind_us_min %.1f "
	       "libunwind_us_median %.1f\n",
	       (double)t_dwfl[0] / 1000.0, median_us(t_dwfl, (size_t)rounds),
	       (double)t_unw[0] / 1000.0, median_us(t_unw, (size_t)rounds));
	printf("reads_stack %" PRIu64 " reads_file %" PRIu64
	       " reads_refused %" PRIu64 "\n",
	       ctx.reads_stack, ctx.reads_file, ctx.reads_refused);
	ret = 0;
out_free:
	free(t_unw);
	free(t_dwfl);
	free(nips);
	free(ips);
	sw_dump_free(d);
	target_release(&tg);
out_snap:
	snap_free(s);
	return ret;
}
