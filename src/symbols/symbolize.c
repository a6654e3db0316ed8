/*
 * symbolize.c - the symbolizer of symbolize.h: raw instruction pointers to
 * frames with function, source file:line and inlined frames, through
 * elfutils libdwfl.
 *
 * Each file gets its own libdwfl session, reported at address 0, so that
 * the module's addresses are its link-time addresses and a lookup is done
 * by offset (ip minus load bias) whatever the process it came from: one
 * session serves every process that maps the same file. Sessions are
 * keyed by the identity of the file actually opened through the caller's
 * open function (device, inode, size, mtime and ctime, from fstat), never
 * by what a module claims: a file that merely claims another's build-id
 * gets a session of its own, and a module whose claimed build-id is not
 * its file's gets no symbols. The session holds the file open, so its
 * inode cannot be reused while it lives.
 *
 * The file is handed to libdwfl as an Elf read with pread (ELF_C_READ),
 * never mmapped, so a file truncated under us cannot SIGBUS the daemon.
 * The files may be a hostile user's, so before libdwfl sees one it is
 * checked for what would make libdw allocate without bound (compressed
 * sections, MiniDebugInfo), and libdw never opens a path the file names:
 * separate debug info and DWZ alternate files are found by build-id in
 * the system's debug directory only, and a file with split DWARF units
 * (whose .dwo paths libdw would open blindly) is used for its symbol
 * table only.
 *
 * Sessions are kept least-recently-used, at most SYM_MODS_MAX; files
 * that are no module we can read are remembered apart, at most
 * SYM_FAILED_MAX, so that junk never pushes a good session out.
 *
 * Frames and their strings live in the dump's memory (dump_alloc()).
 * Within one dump each distinct ip is expanded once (its strings copied
 * into the dump once) and its frames copied wherever it occurs, and threads
 * with the very same ips share one frame array: a thousand threads in a
 * few stacks cost a few dozen string copies and a few blocks of memory,
 * not tens of thousands of allocations.
 *
 * A lookup (symrec.c, with the symbol index of symtab.c) gives a record of
 * the frames one address expands to. Records are cached per session by
 * looked-up offset in an open addressing hash table; the cache is bounded:
 * past SYM_CACHE_MAX records in all, the session holding the most is
 * emptied.
 */
#define _GNU_SOURCE
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwelf.h>
#include <elfutils/libdwfl.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <inttypes.h>
#include <libelf.h>
#include <lzma.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "modopen.h"
#include "parsenote.h"
#include "symbolize.h"
#include "symrec.h"
#include "symtab.h"
#include "vdso.h"

#define SYM_MAX_INFLATED (512ULL << 20) /* compressed sections, inflated */
#define SYM_MAX_MINIDEBUG (64ULL << 20) /* .gnu_debugdata, inflated */
#define SYM_DEBUG_DIR "/usr/lib/debug"	/* separate debug info, by build-id */
#define SYM_CACHE_MAX (1u << 18)	/* cached records, all sessions */
#define SYM_CACHE_MIN_SLOTS 64u		/* power of two */
#define SYM_MODS_MAX 256		/* sessions kept */
#define SYM_FAILED_MAX 256		/* unreadable files remembered */
#define SYM_MOD_BUCKETS 512		/* power of two */

static const char in_loader[] = "[in dynamic loader]";
static const char low_stack[] = "[stack nearly exhausted]";
static const char no_room[] = "[stack of unknown size: not unwound]";
static const char busy[] = "[not unwound: too many handlers at once]";
static const char cut[] = "[unwinding stopped: memory not known to be mapped]";

struct slot {
	uint64_t off;
	struct symrec *rec; /* NULL marks an empty slot */
};

/*
 * What tells one file from another, as fstat says; for an image (the
 * vDSO's, which has no file) its size and a hash of its bytes, which
 * are compared whole besides.
 */
struct fileid {
	bool image;
	dev_t dev;
	ino_t ino;
	off_t size;
	struct timespec mtime;
	struct timespec ctime;
};

/* One file's libdwfl session, or the memory that it is none we can read. */
struct symmod {
	struct symmod *next;	      /* hash chain */
	struct symmod *newer, *older; /* its list, most recently used first */
	struct fileid fid;
	uint64_t gen; /* the last dump that used it */
	Dwfl *dwfl;   /* NULL when the file is no module we can read */
	Dwfl_Module *mod;
	bool dwarf;		   /* its DWARF may be used */
	struct symrec_guard guard; /* what of its DWARF libdw is given */
	/* It has an .eh_frame section: libdw finds its CFI without
	 * elf_rawfile(), which with ELF_C_READ leaks the section data read
	 * before it (libelf 0.188) when it must find it by the segment. */
	bool eh_frame;
	Dwarf *alt;	    /* its DWZ alternate file, ours; or NULL */
	int alt_fd;	    /* -1 without */
	struct symtab *tab; /* sorted symbols, built on the first lookup */
	uint8_t build_id[SW_BUILD_ID_MAX]; /* read from the file */
	uint32_t build_id_len;
	unsigned glibc_minor; /* N of its newest GLIBC_2.N: glibc itself */
	bool glibc_static;    /* a program with glibc linked in statically */
	struct slot *slots;   /* cached records by looked-up offset */
	size_t nslots;	      /* power of two, or 0 before the first insert */
	size_t nused;
	/* Handed over to libdwfl by find_elf while the session opens. */
	int fd;
	Elf *elf;
	void *image; /* an image without a file, ours; or NULL */
	/* (kept while the session lives: its identity is its bytes) */
	size_t image_size;
	char name[64]; /* libdwfl's name of the module: no path */
};

/* Sessions (or failures) from the most to the least recently used. */
struct modlist {
	struct symmod *newest, *oldest;
	size_t n;
};

struct sym {
	sym_open_fn open_fn;
	void *open_arg;
	sym_image_fn image_fn; /* NULL: only our own vDSO's image */
	void *image_arg;
	struct symmod *buckets[SYM_MOD_BUCKETS];
	struct modlist live;   /* sessions */
	struct modlist failed; /* files that are no module we can read */
	uint64_t gen;	       /* dumps so far */
	size_t nrecs;	       /* records cached in all sessions */
	uint64_t hits;
	uint64_t misses;
};

/* A module range of the dump being symbolized, for binary search. */
struct modrange {
	uint64_t start;
	uint64_t end;
	int idx;
};

/* -------------------------------------------------------------- cache */

static uint64_t mix64(uint64_t x)
{
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ULL;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebULL;
	x ^= x >> 31;
	return x;
}

/* The cached record of offset off in sm, or NULL. */
static struct symrec *cache_get(const struct symmod *sm, uint64_t off)
{
	size_t i;

	if (!sm->nslots)
		return NULL;
	for (i = (size_t)mix64(off) & (sm->nslots - 1);;
	     i = (i + 1) & (sm->nslots - 1)) {
		const struct slot *e = &sm->slots[i];

		if (!e->rec)
			return NULL;
		if (e->off == off)
			return e->rec;
	}
}

/* Frees sm's records; keeps the table's allocation. */
static void cache_clear(struct sym *s, struct symmod *sm)
{
	for (size_t i = 0; i < sm->nslots; i++) {
		free(sm->slots[i].rec);
		sm->slots[i].rec = NULL;
	}
	s->nrecs -= sm->nused;
	sm->nused = 0;
}

/* Rehashes sm's records into nslots (a power of two). 0 or -ENOMEM. */
static int cache_resize(struct symmod *sm, size_t nslots)
{
	struct slot *t = calloc(nslots, sizeof(*t));

	if (!t)
		return -ENOMEM;
	for (size_t i = 0; i < sm->nslots; i++) {
		const struct slot *e = &sm->slots[i];
		size_t j;

		if (!e->rec)
			continue;
		j = (size_t)mix64(e->off) & (nslots - 1);
		while (t[j].rec)
			j = (j + 1) & (nslots - 1);
		t[j] = *e;
	}
	free(sm->slots);
	sm->slots = t;
	sm->nslots = nslots;
	return 0;
}

/* The session holding the most records: the first to give them up. */
static struct symmod *cache_biggest(const struct sym *s)
{
	struct symmod *big = s->live.newest;

	for (struct symmod *sm = big; sm; sm = sm->older)
		if (sm->nused > big->nused)
			big = sm;
	return big;
}

/*
 * Inserts rec (not yet present) into sm's records and takes it over. At
 * SYM_CACHE_MAX records in all, the session that holds the most is
 * emptied first (records of sm may be freed then, never rec), so one
 * module with endless distinct addresses costs its own cache only.
 * Returns 0, or -ENOMEM with rec freed.
 */
static int cache_put(struct sym *s, struct symmod *sm, uint64_t off,
		     struct symrec *rec)
{
	size_t i;

	if (s->nrecs >= SYM_CACHE_MAX)
		cache_clear(s, cache_biggest(s));
	/* Load factor at most 1/2 keeps probe runs short. */
	if (2 * (sm->nused + 1) > sm->nslots) {
		size_t n = sm->nslots ? 2 * sm->nslots : SYM_CACHE_MIN_SLOTS;

		if (cache_resize(sm, n)) {
			free(rec);
			return -ENOMEM;
		}
	}
	i = (size_t)mix64(off) & (sm->nslots - 1);
	while (sm->slots[i].rec)
		i = (i + 1) & (sm->nslots - 1);
	sm->slots[i].off = off;
	sm->slots[i].rec = rec;
	sm->nused++;
	s->nrecs++;
	return 0;
}

/* ------------------------------------------------------- opening files */

/*
 * The default sym_open_fn, for in-process use where module paths come
 * from our own loader: m->path by the module file rule, through the
 * symlinks loader names often are (libz.so.1 -> libz.so.1.2.13)
 * (modopen_resolved()). Returns the fd or a negative errno.
 */
static int default_open(void *arg, const struct sw_module *m)
{
	(void)arg;
	return modopen_resolved(m->path, NULL);
}

/*
 * Opens the system's separate debug file for a build-id
 * (/usr/lib/debug/.build-id/xx/rest.debug, as Debian's -dbgsym packages
 * install it, DWZ alternate files included), or returns -1. Never by a
 * path a module names, which a hostile user could point into a directory
 * of its own holding a FIFO (a symbolizer blocked for good) or a symlink
 * to a file only root may read: the name must resolve inside the debug
 * directory, and the file is opened by the module file rule (modopen.h:
 * a regular file only, never blocking). On success *real is its resolved path
 * (malloc'd) when real is not NULL.
 */
static int (*debug_fn)(const uint8_t *id, size_t n);

void sym_set_debug_fn(int (*fn)(const uint8_t *id, size_t n))
{
	debug_fn = fn;
}

static int open_debug_default(const uint8_t *id, size_t n, char **real)
{
	static const char dir[] = SYM_DEBUG_DIR "/.build-id/";
	char path[sizeof(dir) + 2 * SW_BUILD_ID_MAX + 16], *res, *p;
	int fd = -1;

	if (n < 2 || n > SW_BUILD_ID_MAX)
		return -1;
	p = path + snprintf(path, sizeof(path), "%s%02x/", dir, id[0]);
	for (size_t i = 1; i < n; i++)
		p += snprintf(p, 3, "%02x", id[i]);
	snprintf(p, 7, ".debug");
	res = realpath(path, NULL);
	if (!res || strncmp(res, SYM_DEBUG_DIR "/", sizeof(SYM_DEBUG_DIR)) != 0)
		goto out;
	fd = modopen_file(res, 0);
	if (fd < 0) {
		fd = -1;
		goto out;
	}
	if (real) {
		*real = res;
		res = NULL;
	}
out:
	free(res);
	return fd;
}

void sym_prepare(void)
{
	symrec_prepare();
}

int sym_open_debug(const uint8_t *id, size_t n)
{
	int fd = open_debug_default(id, n, NULL);

	return fd < 0 ? -ENOENT : fd;
}

static int open_debug_by_id(const uint8_t *id, size_t n, char **real)
{
	int fd;

	if (n < 2 || n > SW_BUILD_ID_MAX)
		return -1;
	if (!debug_fn)
		return open_debug_default(id, n, real);
	fd = debug_fn(id, n);
	return fd < 0 ? -1 : fd;
}

/*
 * libdwfl's find_elf callback: hands over the Elf and fd that
 * module_open() prepared (libdwfl owns them from here), under our name
 * for the module, which is no path.
 */
static int find_elf(Dwfl_Module *mod, void **userdata, const char *modname,
		    Dwarf_Addr base, char **file_name, Elf **elfp)
{
	struct symmod *sm = *userdata;
	int fd;

	(void)mod;
	(void)modname;
	(void)base;
	if (!sm || !sm->elf || (sm->fd < 0 && !sm->image))
		return -1;
	*file_name = strdup(sm->name);
	if (!*file_name)
		return -1;
	*elfp = sm->elf;
	fd = sm->fd;
	sm->elf = NULL;
	sm->fd = -1;
	return fd;
}

/*
 * libdwfl's find_debuginfo callback: separate debug information only by
 * the build-id read from the module's own file, from the system's debug
 * directory (open_debug_by_id()), never by a path or debuglink.
 */
static int find_debuginfo(Dwfl_Module *mod, void **userdata,
			  const char *modname, Dwarf_Addr base,
			  const char *file_name, const char *debuglink_file,
			  GElf_Word debuglink_crc, char **debuginfo_file_name)
{
	const unsigned char *bits;
	GElf_Addr vaddr;
	int n;

	(void)userdata;
	(void)modname;
	(void)base;
	(void)file_name;
	(void)debuglink_file;
	(void)debuglink_crc;
	n = dwfl_module_build_id(mod, &bits, &vaddr);
	if (n <= 0)
		return -1;
	return open_debug_by_id(bits, (size_t)n, debuginfo_file_name);
}

static const Dwfl_Callbacks dwfl_callbacks = {
	.find_elf = find_elf,
	.find_debuginfo = find_debuginfo,
	.section_address = dwfl_offline_section_address,
	.debuginfo_path = NULL,
};

/*
 * The link-time range of an ET_EXEC or ET_DYN file's PT_LOAD segments.
 * lo is computed exactly as libdwfl computes a file's base (the first
 * PT_LOAD's p_vaddr rounded down to its alignment), so a module reported
 * at [lo, hi) gets a bias of 0. Returns 0 or -EINVAL.
 */
static int elf_range(Elf *elf, uint64_t *lo, uint64_t *hi)
{
	GElf_Ehdr eh;
	size_t phnum;
	bool first = true;

	if (elf_kind(elf) != ELF_K_ELF || !gelf_getehdr(elf, &eh) ||
	    (eh.e_type != ET_EXEC && eh.e_type != ET_DYN) ||
	    elf_getphdrnum(elf, &phnum))
		return -EINVAL;
	*lo = *hi = 0;
	for (size_t i = 0; i < phnum; i++) {
		GElf_Phdr ph;

		if (!gelf_getphdr(elf, (int)i, &ph) || ph.p_type != PT_LOAD)
			continue;
		if (first)
			*lo = ph.p_vaddr & -ph.p_align;
		first = false;
		if (ph.p_vaddr + ph.p_memsz > *hi)
			*hi = ph.p_vaddr + ph.p_memsz;
	}
	if (first)
		return -EINVAL;
	if (*hi <= *lo)
		*hi = *lo + 1;
	return 0;
}

/*
 * How many bytes an xz stream inflates to, decoded into a scratch buffer
 * and given up past cap (then more than cap is returned). Costs up to
 * about a second of CPU for a stream that reaches cap.
 */
static uint64_t xz_size(const void *p, size_t n, uint64_t cap)
{
	lzma_stream z = LZMA_STREAM_INIT;
	static uint8_t out[1 << 16]; /* contents unused; callers serialize */
	uint64_t total = 0;

	if (lzma_stream_decoder(&z, 64u << 20, LZMA_CONCATENATED) != LZMA_OK)
		return cap + 1;
	z.next_in = p;
	z.avail_in = n;
	for (;;) {
		lzma_ret r;

		z.next_out = out;
		z.avail_out = sizeof(out);
		r = lzma_code(&z, LZMA_FINISH);
		total += sizeof(out) - z.avail_out;
		if (r == LZMA_STREAM_END)
			break;
		if (r != LZMA_OK || total > cap) {
			total = cap + 1;
			break;
		}
	}
	lzma_end(&z);
	return total;
}

/* Whether elf has a section named name (of data, not SHT_NOBITS). */
static bool has_section(Elf *elf, const char *name)
{
	Elf_Scn *scn = NULL;
	size_t shstrndx;

	if (elf_getshdrstrndx(elf, &shstrndx))
		return false;
	while ((scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;
		const char *n;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type == SHT_NOBITS)
			continue;
		n = elf_strptr(elf, shstrndx, sh.sh_name);
		if (n && strcmp(n, name) == 0)
			return true;
	}
	return false;
}

/*
 * Whether what libelf and libdwfl would inflate from elf stays bounded:
 * compressed sections (SHF_COMPRESSED, or the old .zdebug ones) declare
 * their size and are allocated at it, at most SYM_MAX_INFLATED in all;
 * MiniDebugInfo (.gnu_debugdata, xz) declares nothing trustworthy and is
 * inflated without a bound by libdwfl, so it is measured here first, at
 * most SYM_MAX_MINIDEBUG.
 */
static bool inflation_bounded(Elf *elf)
{
	uint64_t total = 0;
	size_t shstrndx;
	Elf_Scn *scn = NULL;

	if (elf_getshdrstrndx(elf, &shstrndx))
		return true; /* no section names: nothing libdw will use */
	while ((scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;
		const char *name;
		Elf_Data *raw;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type == SHT_NOBITS)
			continue;
		name = elf_strptr(elf, shstrndx, sh.sh_name);
		if (sh.sh_flags & SHF_COMPRESSED) {
			GElf_Chdr ch;

			if (!gelf_getchdr(scn, &ch) ||
			    ch.ch_size > SYM_MAX_INFLATED)
				return false;
			total += ch.ch_size;
		} else if (name && !strncmp(name, ".zdebug", 7)) {
			const unsigned char *b;
			uint64_t z = 0;

			raw = elf_rawdata(scn, NULL);
			if (!raw || raw->d_size < 12)
				continue;
			b = raw->d_buf;
			if (memcmp(b, "ZLIB", 4) != 0)
				continue;
			for (int i = 4; i < 12; i++)
				z = z << 8 | b[i];
			if (z > SYM_MAX_INFLATED)
				return false;
			total += z;
		} else if (name && !strcmp(name, ".gnu_debugdata")) {
			raw = elf_rawdata(scn, NULL);
			if (raw &&
			    xz_size(raw->d_buf, raw->d_size,
				    SYM_MAX_MINIDEBUG) > SYM_MAX_MINIDEBUG)
				return false;
		}
		if (total > SYM_MAX_INFLATED)
			return false;
	}
	return true;
}

/*
 * Readies the module's DWARF so that libdw never opens a path the file
 * names: its DWZ alternate file, if it has one, is found by build-id in
 * the system's debug directory and set here (without it, DWARF is not
 * used: libdw would try the path the file gives); a file with split
 * DWARF skeleton units (libdw opens their .dwo paths as it meets them)
 * is not used for DWARF either. Without usable DWARF the module still
 * has its symbol table. Sets sm->dwarf. May block on file I/O.
 */
static void dwarf_prepare(struct symmod *sm)
{
	const char *altname;
	const void *id;
	Dwarf_Addr bias;
	Dwarf_CU *cu = NULL;
	Dwarf *dw;
	ssize_t n;
	uint8_t type;

	sm->dwarf = false;
	dw = dwfl_module_getdwarf(sm->mod, &bias);
	if (!dw)
		return;
	n = dwelf_dwarf_gnu_debugaltlink(dw, &altname, &id);
	if (n < 0)
		return;
	if (n > 0) {
		sm->alt_fd = open_debug_by_id(id, (size_t)n, NULL);
		if (sm->alt_fd < 0)
			return;
		sm->alt = dwarf_begin(sm->alt_fd, DWARF_C_READ);
		if (!sm->alt)
			return;
		dwarf_setalt(dw, sm->alt);
	}
	while (dwarf_get_units(dw, cu, &cu, NULL, &type, NULL, NULL) == 0)
		if (type == DW_UT_skeleton)
			return;
	sm->dwarf = true;
}

/* Ends sm's session, if any, and frees what find_elf did not take. */
static void module_close(struct sym *s, struct symmod *sm)
{
	cache_clear(s, sm);
	free(sm->slots);
	sm->slots = NULL;
	sm->nslots = 0;
	if (sm->dwfl)
		dwfl_end(sm->dwfl);
	sm->dwfl = NULL;
	sm->mod = NULL;
	if (sm->alt)
		dwarf_end(sm->alt);
	sm->alt = NULL;
	if (sm->alt_fd >= 0)
		close(sm->alt_fd);
	sm->alt_fd = -1;
	symtab_free(sm->tab);
	sm->tab = NULL;
	if (sm->elf)
		elf_end(sm->elf);
	sm->elf = NULL;
	if (sm->fd >= 0)
		close(sm->fd);
	sm->fd = -1;
}

/*
 * N of the newest symbol version GLIBC_2.N that elf defines (not merely
 * needs): glibc's own libc defines one for each release that added
 * symbols, so this bounds its release from below. 0 for any other file.
 */
static unsigned glibc_minor(Elf *elf)
{
	Elf_Scn *scn = NULL;
	unsigned best = 0;

	while ((scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;
		Elf_Data *data;
		size_t off = 0;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_GNU_verdef)
			continue;
		data = elf_getdata(scn, NULL);
		for (size_t k = 0; data && k < sh.sh_info && k < 4096; k++) {
			GElf_Verdef vd;
			GElf_Verdaux va;
			const char *name;
			char *end;
			unsigned long n;

			if (!gelf_getverdef(data, (int)off, &vd) ||
			    !gelf_getverdaux(data, (int)(off + vd.vd_aux), &va))
				break;
			name = elf_strptr(elf, sh.sh_link, va.vda_name);
			if (name && strncmp(name, "GLIBC_2.", 8) == 0) {
				n = strtoul(name + 8, &end, 10);
				if (end != name + 8 && *end == '\0' &&
				    n < 1000 && n > best)
					best = (unsigned)n;
			}
			if (!vd.vd_next)
				break;
			off += vd.vd_next;
		}
	}
	return best;
}

/*
 * Whether elf is a program linked statically with glibc: no program
 * interpreter and no dynamic section (so no libc.so of its own to tell
 * the release by), and glibc's static start-up (__libc_setup_tls, which
 * neither musl nor Go has) in its symbol table.
 */
static bool glibc_static(Dwfl_Module *mod, Elf *elf)
{
	size_t nph;
	int n;

	if (elf_getphdrnum(elf, &nph) != 0)
		return false;
	for (size_t i = 0; i < nph; i++) {
		GElf_Phdr ph;

		if (gelf_getphdr(elf, (int)i, &ph) &&
		    (ph.p_type == PT_INTERP || ph.p_type == PT_DYNAMIC))
			return false;
	}
	n = dwfl_module_getsymtab(mod);
	for (int i = 1; i < n; i++) {
		GElf_Sym sym;
		const char *name = dwfl_module_getsym(mod, i, &sym, NULL);

		if (name && GELF_ST_TYPE(sym.st_info) == STT_FUNC &&
		    sym.st_shndx != SHN_UNDEF &&
		    strcmp(name, "__libc_setup_tls") == 0)
			return true;
	}
	return false;
}

/*
 * Starts the libdwfl session of the file open in sm->fd (or of the image
 * in sm->image; either taken over), which must be an ELF executable or shared
 * object whose inflated sections stay bounded. Reads its build-id. Returns 0 or
 * a negative errno (then sm has no session). May block on file I/O.
 */
static int module_open(struct sym *s, struct symmod *sm)
{
	const unsigned char *bits;
	Elf *elf;
	GElf_Addr vaddr, bias;
	uint64_t lo, hi;
	void **ud;
	int rc, n;

	rc = -EINVAL;
	symrec_guard_init(&sm->guard);
	sm->elf = sm->image ? elf_memory(sm->image, sm->image_size)
			    : elf_begin(sm->fd, ELF_C_READ, NULL);
	if (!sm->elf || elf_range(sm->elf, &lo, &hi) ||
	    !inflation_bounded(sm->elf))
		goto out_close;
	sm->eh_frame = has_section(sm->elf, ".eh_frame");
	rc = -ENOMEM;
	sm->dwfl = dwfl_begin(&dwfl_callbacks);
	if (!sm->dwfl)
		goto out_close;
	dwfl_report_begin(sm->dwfl);
	snprintf(sm->name, sizeof(sm->name), "[%s %llu:%llu]",
		 sm->image ? "image" : "file", (unsigned long long)sm->fid.dev,
		 (unsigned long long)sm->fid.ino);
	sm->mod = dwfl_report_module(sm->dwfl, sm->name, lo, hi);
	if (!sm->mod || dwfl_report_end(sm->dwfl, NULL, NULL))
		goto out_close;
	dwfl_module_info(sm->mod, &ud, NULL, NULL, NULL, NULL, NULL, NULL);
	*ud = sm;
	rc = -EINVAL;
	elf = dwfl_module_getelf(sm->mod, &bias);
	if (!elf || bias != 0)
		goto out_close;
	n = dwfl_module_build_id(sm->mod, &bits, &vaddr);
	if (n > 0 && n <= SW_BUILD_ID_MAX) {
		memcpy(sm->build_id, bits, (size_t)n);
		sm->build_id_len = (uint32_t)n;
	}
	sm->glibc_minor = glibc_minor(elf);
	sm->glibc_static = !sm->glibc_minor && glibc_static(sm->mod, elf);
	dwarf_prepare(sm);
	return 0;

out_close:
	module_close(s, sm);
	return rc;
}

static void fileid_of(const struct stat *st, struct fileid *fid)
{
	memset(fid, 0, sizeof(*fid));
	fid->dev = st->st_dev;
	fid->ino = st->st_ino;
	fid->size = st->st_size;
	fid->mtime = st->st_mtim;
	fid->ctime = st->st_ctim;
}

/* An image's identity: its size and a hash of its bytes. */
static void fileid_of_image(const void *image, size_t size, struct fileid *fid)
{
	const unsigned char *p = image;
	uint64_t h = size;

	memset(fid, 0, sizeof(*fid));
	for (size_t i = 0; i < size; i += 8) {
		uint64_t w = 0;

		memcpy(&w, p + i, size - i < 8 ? size - i : 8);
		h = mix64(h ^ w);
	}
	fid->image = true;
	fid->ino = (ino_t)h;
	fid->size = (off_t)size;
}

static bool fileid_eq(const struct fileid *a, const struct fileid *b)
{
	return a->image == b->image && a->dev == b->dev && a->ino == b->ino &&
	       a->size == b->size && a->mtime.tv_sec == b->mtime.tv_sec &&
	       a->mtime.tv_nsec == b->mtime.tv_nsec &&
	       a->ctime.tv_sec == b->ctime.tv_sec &&
	       a->ctime.tv_nsec == b->ctime.tv_nsec;
}

static size_t fileid_bucket(const struct fileid *fid)
{
	uint64_t h = mix64((uint64_t)fid->dev ^ mix64((uint64_t)fid->ino));

	h = mix64(h ^ (uint64_t)fid->size ^ (uint64_t)fid->mtime.tv_nsec);
	return (size_t)mix64(h ^ (uint64_t)fid->ctime.tv_nsec) &
	       (SYM_MOD_BUCKETS - 1);
}

static void list_unlink(struct modlist *l, struct symmod *sm)
{
	if (sm->newer)
		sm->newer->older = sm->older;
	else
		l->newest = sm->older;
	if (sm->older)
		sm->older->newer = sm->newer;
	else
		l->oldest = sm->newer;
	sm->newer = sm->older = NULL;
	l->n--;
}

static void list_push(struct modlist *l, struct symmod *sm)
{
	sm->newer = NULL;
	sm->older = l->newest;
	if (l->newest)
		l->newest->newer = sm;
	else
		l->oldest = sm;
	l->newest = sm;
	l->n++;
}

/* Ends sm, which is in list l, and forgets it. */
static void module_evict(struct sym *s, struct modlist *l, struct symmod *sm)
{
	struct symmod **pp = &s->buckets[fileid_bucket(&sm->fid)];

	while (*pp != sm)
		pp = &(*pp)->next;
	*pp = sm->next;
	list_unlink(l, sm);
	module_close(s, sm);
	free(sm->image); /* after libdwfl's Elf on it */
	free(sm);
}

/*
 * Evicts the least recently used entries of l beyond max, but none that
 * the dump in progress uses (its modules point to them).
 */
static void list_trim(struct sym *s, struct modlist *l, size_t max)
{
	while (l->n > max && l->oldest->gen != s->gen)
		module_evict(s, l, l->oldest);
}

/*
 * The session of module m for the dump in progress: its file is opened
 * through the open function, found by identity or given a session now;
 * a failed file is remembered as such. *out is NULL when the file cannot
 * be opened or read as a module, or when m claims a build-id that is not
 * its file's. Returns 0 or -ENOMEM. Blocks on file I/O.
 */
/*
 * The image of m, a module without a file (the vDSO): from the caller's
 * image function, else our own when m claims its build-id. 0, or a
 * negative errno (none to be had).
 */
static int image_get(struct sym *s, const struct sw_module *m, void **image,
		     size_t *size)
{
	int r = -ENOENT;

	*image = NULL;
	if (s->image_fn)
		r = s->image_fn(s->image_arg, m, image, size);
	if (r == 0 && *image && *size > 0 && *size <= VDSO_MAX)
		return 0;
	free(*image);
	*image = NULL;
	return vdso_own(m->build_id, m->build_id_len, image, size);
}

/*
 * What m's session is found by: its file, opened through the open
 * function, into *fd; or for the vDSO its image, into *image. 0, or a
 * negative errno when there is neither.
 */
static int module_find(struct sym *s, const struct sw_module *m, int *fd,
		       void **image, size_t *size, struct fileid *fid)
{
	struct stat st;

	*fd = -1;
	*image = NULL;
	if (vdso_is_module(m->path)) {
		if (image_get(s, m, image, size) != 0)
			return -ENOENT;
		fileid_of_image(*image, *size, fid);
		return 0;
	}
	*fd = s->open_fn(s->open_arg, m);
	if (*fd < 0)
		return *fd;
	if (fstat(*fd, &st) < 0) {
		close(*fd);
		*fd = -1;
		return -EBADF;
	}
	fileid_of(&st, fid);
	return 0;
}

/*
 * The session of module m for the dump in progress: its file is opened
 * through the open function (or its image taken), found by identity or
 * given a session now; a failed file is remembered as such. *out is NULL
 * when the file cannot be opened or read as a module, or when m claims a
 * build-id that is not its file's. Returns 0 or -ENOMEM. Blocks on file
 * I/O.
 */
static int module_get(struct sym *s, const struct sw_module *m,
		      struct symmod **out)
{
	struct fileid fid;
	struct symmod *sm;
	void *image;
	size_t b, size = 0;
	int fd;

	*out = NULL;
	if (module_find(s, m, &fd, &image, &size, &fid) != 0)
		return 0;
	b = fileid_bucket(&fid);
	for (sm = s->buckets[b]; sm; sm = sm->next)
		if (fileid_eq(&sm->fid, &fid) &&
		    (!fid.image || memcmp(sm->image, image, size) == 0))
			break;
	if (sm) {
		struct modlist *l = sm->dwfl ? &s->live : &s->failed;

		if (fd >= 0)
			close(fd);
		free(image);
		list_unlink(l, sm);
		list_push(l, sm);
		sm->gen = s->gen;
	} else {
		sm = calloc(1, sizeof(*sm));
		if (!sm) {
			if (fd >= 0)
				close(fd);
			free(image);
			return -ENOMEM;
		}
		sm->fid = fid;
		sm->fd = fd;
		sm->image = image;
		sm->image_size = size;
		sm->alt_fd = -1;
		sm->gen = s->gen;
		module_open(s, sm);
		sm->next = s->buckets[b];
		s->buckets[b] = sm;
		if (sm->dwfl) {
			list_push(&s->live, sm);
			list_trim(s, &s->live, SYM_MODS_MAX);
		} else {
			list_push(&s->failed, sm);
			list_trim(s, &s->failed, SYM_FAILED_MAX);
		}
	}
	if (!sm->dwfl)
		return 0;
	if (m->build_id_len &&
	    (m->build_id_len != sm->build_id_len ||
	     memcmp(m->build_id, sm->build_id, sm->build_id_len) != 0))
		return 0;
	*out = sm;
	return 0;
}

/* --------------------------------------------------------------- dump */

int sym_new(sym_open_fn open_fn, void *open_arg, struct sym **out)
{
	struct sym *s = calloc(1, sizeof(*s));

	*out = NULL;
	if (!s)
		return -ENOMEM;
	elf_version(EV_CURRENT);
	s->open_fn = open_fn ? open_fn : default_open;
	s->open_arg = open_arg;
	*out = s;
	return 0;
}

void sym_set_image_fn(struct sym *s, sym_image_fn fn, void *arg)
{
	s->image_fn = fn;
	s->image_arg = arg;
}

void sym_free(struct sym *s)
{
	if (!s)
		return;
	s->gen++;
	while (s->live.oldest)
		module_evict(s, &s->live, s->live.oldest);
	while (s->failed.oldest)
		module_evict(s, &s->failed, s->failed.oldest);
	free(s);
}

uint64_t sym_cache_hits(const struct sym *s)
{
	return s->hits;
}

uint64_t sym_cache_misses(const struct sym *s)
{
	return s->misses;
}

size_t sym_sessions(const struct sym *s)
{
	return s->live.n;
}

size_t sym_failed_files(const struct sym *s)
{
	return s->failed.n;
}

static int range_cmp(const void *a, const void *b)
{
	const struct modrange *x = a, *y = b;

	if (x->start != y->start)
		return x->start < y->start ? -1 : 1;
	return x->idx - y->idx;
}

/* Index of the module holding ip in the sorted ranges, or -1. */
static int range_find(const struct modrange *r, size_t n, uint64_t ip)
{
	size_t lo = 0, hi = n;

	/* The last range starting at or below ip. */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (r[mid].start <= ip)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == 0 || ip >= r[lo - 1].end)
		return -1;
	return r[lo - 1].idx;
}

/* A growable array of frames. */
struct fvec {
	struct sw_frame *f;
	size_t n;
	size_t cap;
};

/* Room for k more frames. 0 or -ENOMEM. */
static int fvec_reserve(struct fvec *v, size_t k)
{
	struct sw_frame *f;
	size_t cap;

	if (v->n + k <= v->cap)
		return 0;
	cap = v->cap ? v->cap : 16;
	while (cap < v->n + k)
		cap *= 2;
	f = realloc(v->f, cap * sizeof(*f));
	if (!f)
		return -ENOMEM;
	v->f = f;
	v->cap = cap;
	return 0;
}

/*
 * Appends one frame. Its strings are not copied: they must be the dump's
 * (dump_strdup()) or literals. 0 or -ENOMEM.
 */
static int fvec_push(struct fvec *v, uint64_t ip, int module, uint64_t offset,
		     const char *function, const char *file, int line,
		     bool inlined)
{
	if (fvec_reserve(v, 1))
		return -ENOMEM;
	v->f[v->n++] = (struct sw_frame){
		.ip = ip,
		.module = module,
		.offset = offset,
		.function = function,
		.file = file,
		.line = line,
		.inlined = inlined,
	};
	return 0;
}

/* Appends n frames copied from f (not NULL unless n is 0). 0 or -ENOMEM. */
static int fvec_append(struct fvec *v, const struct sw_frame *f, size_t n)
{
	if (!n)
		return 0;
	if (fvec_reserve(v, n))
		return -ENOMEM;
	/* NOLINTNEXTLINE(clang-analyzer-core.NonNullParamChecker): n > 0 */
	memcpy(v->f + v->n, f, n * sizeof(*f));
	v->n += n;
	return 0;
}

/*
 * Within one dump an ip always expands to the same frames, so each ip is
 * worked out once, its frames kept in symctx.runs (with strings copied into
 * the dump once), and every later thread copies them. This is the frames
 * runs[start, start + n) of one ip.
 */
struct ipmemo {
	uint64_t ip;
	uint32_t start;
	uint32_t n;
	bool exact;	/* ip was looked up as is, not as ip - 1 */
	bool used;	/* false: an empty slot */
	bool looked_up; /* from a symbol lookup: each reuse is a cache hit */
};

#define MEMO_MIN_SLOTS 256u	  /* power of two */
#define MEMO_MAX_SLOTS (1u << 17) /* then ips are no longer memoized */

/*
 * A thread whose frames later threads with the same ips (and flags) share:
 * most threads of a big process wait in a handful of places.
 */
struct tslot {
	uint64_t hash;
	size_t thread;	  /* its index + 1; 0 marks an empty slot */
	uint32_t lookups; /* how many of its ips were looked up */
};

/* The flags that change what a thread's ips symbolize to. */
#define SAME_IPS_FLAGS                                                       \
	(SW_TF_FIRST_EXACT | SW_TF_IN_LOADER | SW_TF_LOW_STACK | SW_TF_CUT | \
	 SW_TF_NO_ROOM | SW_TF_BUSY)

/* Per-dump state of sym_dump(). */
struct symctx {
	struct sym *s;
	struct sw_dump *d;
	bool symbols;
	uint64_t deadline_ns;	 /* CLOCK_MONOTONIC; 0: none */
	bool cut;		 /* the deadline passed: no more lookups */
	struct modrange *ranges; /* sorted by start */
	size_t nranges;
	struct symmod **mods; /* per dump module, resolved on first use */
	bool *resolved;	      /* per dump module: mods[i] is known */
	struct fvec runs;     /* the frames of the memoized ips */
	struct ipmemo *memo;  /* open addressing, load at most 1/2 */
	size_t nmemo;	      /* slots: 0 or a power of two */
	size_t nused;
	struct tslot *tslots; /* NULL: no memory, nothing is shared */
	size_t ntslots;	      /* at least twice the threads; a power of two */
	struct fvec scratch;  /* one thread's frames while they are built */
};

/*
 * Whether the dump's time budget is spent; from then on, frames that
 * would need a lookup or a file opened get module and offset only.
 */
static bool past_deadline(struct symctx *c)
{
	struct timespec ts;

	if (c->cut)
		return true;
	if (!c->deadline_ns)
		return false;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	c->cut = (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec >=
		 c->deadline_ns;
	return c->cut;
}

/*
 * Appends the frames of one ip: those of its cached record (looked up and
 * cached on a miss) or, when the module is unknown or unreadable or
 * symbols are off, one frame with module and offset only. The record's
 * strings are copied into the dump. *looked_up tells whether symbols were
 * looked up (in the cache or libdwfl). Returns 0 or -ENOMEM.
 */
static int expand_ip(struct symctx *c, struct fvec *v, uint64_t ip, bool exact,
		     bool *looked_up)
{
	struct sym *s = c->s;
	struct symmod *sm;
	struct symrec *rec;
	uint64_t off, addr;
	int mi, rc;

	*looked_up = false;
	mi = range_find(c->ranges, c->nranges, ip);
	if (mi < 0)
		return fvec_push(v, ip, -1, ip, NULL, NULL, 0, false);
	off = ip - c->d->modules[mi].bias;
	if (!c->symbols)
		return fvec_push(v, ip, mi, off, NULL, NULL, 0, false);
	if (!c->resolved[mi] && past_deadline(c))
		return fvec_push(v, ip, mi, off, NULL, NULL, 0, false);
	if (!c->resolved[mi]) {
		parsenote(c->d->modules[mi].start);
		rc = module_get(s, &c->d->modules[mi], &c->mods[mi]);
		if (rc)
			return rc;
		c->resolved[mi] = true;
	}
	sm = c->mods[mi];
	if (!sm)
		return fvec_push(v, ip, mi, off, NULL, NULL, 0, false);
	/* A return address points after the call: look the call up. */
	addr = exact ? off : off - 1;
	*looked_up = true;
	rec = cache_get(sm, addr);
	if (rec) {
		s->hits++;
	} else if (past_deadline(c)) {
		*looked_up = false;
		return fvec_push(v, ip, mi, off, NULL, NULL, 0, false);
	} else {
		s->misses++;
		parsenote(c->d->modules[mi].start);
		if (!sm->tab)
			sm->tab = symtab_build(sm->mod); /* NULL: slow path */
		rec = symrec_lookup(sm->mod, sm->dwarf,
				    symtab_name_at(sm->tab, sm->mod, addr),
				    addr, &sm->guard);
		if (!rec)
			return -ENOMEM;
		rc = cache_put(s, sm, addr, rec);
		if (rc)
			return rc;
	}
	rc = fvec_reserve(v, rec->n);
	for (uint32_t i = 0; !rc && i < rec->n; i++) {
		const struct symfr *f = &rec->fr[i];
		const char *function = NULL, *file = NULL;

		if (f->function && !(function = dump_strdup(c->d, f->function)))
			return -ENOMEM;
		if (f->file && !(file = dump_strdup(c->d, f->file)))
			return -ENOMEM;
		rc = fvec_push(v, ip, mi, off, function, file, f->line,
			       f->inlined);
	}
	return rc;
}

static size_t memo_first(uint64_t ip, bool exact, size_t nslots)
{
	return (size_t)mix64(ip ^ exact) & (nslots - 1);
}

/* Rehashes the memo into nslots (a power of two). 0 or -ENOMEM. */
static int memo_resize(struct symctx *c, size_t nslots)
{
	struct ipmemo *t = calloc(nslots, sizeof(*t));

	if (!t)
		return -ENOMEM;
	for (size_t i = 0; i < c->nmemo; i++) {
		const struct ipmemo *e = &c->memo[i];
		size_t j;

		if (!e->used)
			continue;
		j = memo_first(e->ip, e->exact, nslots);
		while (t[j].used)
			j = (j + 1) & (nslots - 1);
		t[j] = *e;
	}
	free(c->memo);
	c->memo = t;
	c->nmemo = nslots;
	return 0;
}

/* The slot of (ip, exact) in the memo, or NULL when there is none. */
static struct ipmemo *memo_probe(const struct symctx *c, uint64_t ip,
				 bool exact)
{
	size_t i;

	if (!c->nmemo)
		return NULL;
	for (i = memo_first(ip, exact, c->nmemo);;
	     i = (i + 1) & (c->nmemo - 1)) {
		struct ipmemo *e = &c->memo[i];

		if (!e->used || (e->ip == ip && e->exact == exact))
			return e;
	}
}

/*
 * The memo entry of (ip, exact): a used one when the ip was seen before,
 * an empty slot to fill, or NULL when the memo is full (or could not
 * grow): then the ip is worked out without it.
 */
static struct ipmemo *memo_slot(struct symctx *c, uint64_t ip, bool exact)
{
	struct ipmemo *e = memo_probe(c, ip, exact);

	if (e && (e->used || 2 * (c->nused + 1) <= c->nmemo))
		return e;
	if (c->nmemo >= MEMO_MAX_SLOTS ||
	    memo_resize(c, c->nmemo ? 2 * c->nmemo : MEMO_MIN_SLOTS))
		return NULL;
	return memo_probe(c, ip, exact);
}

/*
 * Appends the frames of one ip, from the memo when it can, and counts in
 * *lookups whether symbols were looked up for it. 0 or -ENOMEM.
 */
static int add_ip(struct symctx *c, struct fvec *v, uint64_t ip, bool exact,
		  uint32_t *lookups)
{
	struct ipmemo *e = memo_slot(c, ip, exact);
	size_t start = c->runs.n;
	bool looked_up;
	int rc;

	if (!e) {
		rc = expand_ip(c, v, ip, exact, &looked_up);
		*lookups += looked_up;
		return rc;
	}
	if (e->used) {
		if (e->looked_up)
			c->s->hits++;
		*lookups += e->looked_up;
		return fvec_append(v, c->runs.f + e->start, e->n);
	}
	rc = expand_ip(c, &c->runs, ip, exact, &looked_up);
	*lookups += looked_up;
	if (rc)
		return rc;
	*e = (struct ipmemo){
		.ip = ip,
		.start = (uint32_t)start,
		.n = (uint32_t)(c->runs.n - start),
		.exact = exact,
		.used = true,
		.looked_up = looked_up,
	};
	c->nused++;
	return fvec_append(v, c->runs.f + start, e->n);
}

static uint64_t ips_hash(const struct sw_thread *t)
{
	uint64_t h =
		mix64(t->nips ^ ((uint64_t)(t->flags & SAME_IPS_FLAGS) << 32));

	for (size_t k = 0; k < t->nips; k++)
		h = mix64(h ^ t->ips[k]);
	return h;
}

static bool same_ips(const struct sw_thread *a, const struct sw_thread *b)
{
	return a->nips == b->nips &&
	       (a->flags & SAME_IPS_FLAGS) == (b->flags & SAME_IPS_FLAGS) &&
	       memcmp(a->ips, b->ips, a->nips * sizeof(*a->ips)) == 0 &&
	       memcmp(a->exact, b->exact, sizeof(a->exact)) == 0;
}

/*
 * The slot of t's ips in c->tslots: the one of an earlier thread with the
 * same ips, or the empty one to take. NULL without the table.
 */
static struct tslot *tslot_of(const struct symctx *c, const struct sw_thread *t,
			      uint64_t h)
{
	size_t i;

	if (!c->tslots)
		return NULL;
	for (i = (size_t)h & (c->ntslots - 1);;
	     i = (i + 1) & (c->ntslots - 1)) {
		struct tslot *e = &c->tslots[i];

		if (!e->thread || (e->hash == h &&
				   same_ips(&c->d->threads[e->thread - 1], t)))
			return e;
	}
}

/*
 * Whether ip, taken as an exact pc, lies in a signal trampoline: code
 * whose call frame information says so (the 'S' augmentation), as
 * libdwfl's unwinder tells. Only for modules already resolved.
 */
static bool in_trampoline(const struct symctx *c, uint64_t ip)
{
	int mi = range_find(c->ranges, c->nranges, ip);
	const struct symmod *sm;
	Dwarf_Frame *fr = NULL;
	Dwarf_Addr bias, start, end;
	Dwarf_CFI *cfi;
	bool signalp = false;

	if (mi < 0 || !c->symbols || !c->resolved[mi] || !c->mods[mi])
		return false;
	sm = c->mods[mi];
	cfi = sm->eh_frame ? dwfl_module_eh_cfi(sm->mod, &bias) : NULL;
	if (!cfi)
		cfi = dwfl_module_dwarf_cfi(sm->mod, &bias);
	if (!cfi || dwarf_cfi_addrframe(cfi, ip - c->d->modules[mi].bias - bias,
					&fr) != 0)
		return false;
	dwarf_frame_info(fr, &start, &end, &signalp);
	free(fr);
	return signalp;
}

/*
 * Builds the frames of t from its ips in c->scratch; *lookups counts the
 * ips whose symbols were looked up. 0 or -ENOMEM.
 */
static int build_frames(struct symctx *c, const struct sw_thread *t,
			uint32_t *lookups)
{
	struct fvec *v = &c->scratch;
	int rc = 0;

	v->n = 0;
	if (t->flags &
	    (SW_TF_IN_LOADER | SW_TF_LOW_STACK | SW_TF_NO_ROOM | SW_TF_BUSY)) {
		uint64_t ip = t->nips ? t->ips[0] : 0;
		int mi = t->nips ? range_find(c->ranges, c->nranges, ip) : -1;
		uint64_t off = mi < 0 ? ip : ip - c->d->modules[mi].bias;
		const char *why = t->flags & SW_TF_IN_LOADER   ? in_loader
				  : t->flags & SW_TF_LOW_STACK ? low_stack
				  : t->flags & SW_TF_BUSY      ? busy
							       : no_room;

		return fvec_push(v, ip, mi, off, why, NULL, 0, false);
	}
	for (size_t k = 0, after_trampoline = 0; !rc && k < t->nips; k++) {
		/* Past SW_MAX_FRAMES no bit is kept: a return address. */
		bool exact = k == 0 ? (t->flags & SW_TF_FIRST_EXACT) != 0
				    : (k < SW_MAX_FRAMES &&
				       ((t->exact[k / 64] >> (k % 64)) & 1)) ||
					      after_trampoline == k;
		size_t at = v->n;

		rc = add_ip(c, v, t->ips[k], exact, lookups);
		/*
		 * A frame named by nothing, looked up as a return address,
		 * may be a signal trampoline: its address is where a handler
		 * returns to, itself exact, and so is the interrupted pc in
		 * the frame after it. Agents mark only their first frame.
		 */
		if (!rc && !exact && v->n == at + 1 && !v->f[at].function &&
		    in_trampoline(c, t->ips[k])) {
			v->n = at;
			rc = add_ip(c, v, t->ips[k], true, lookups);
			after_trampoline = k + 1;
		}
	}
	/* Where libunwind was refused a read: said as a last frame. */
	if (!rc && (t->flags & SW_TF_CUT))
		rc = fvec_push(v, 0, -1, 0, cut, NULL, 0, false);
	return rc;
}

/*
 * Fills the frames of thread ti from its ips, or shares those of an
 * earlier thread with the same ips (counting the lookups that saves as
 * cache hits). 0 or -ENOMEM (then the thread has no frames).
 */
static int thread_frames(struct symctx *c, size_t ti)
{
	struct sw_thread *t = &c->d->threads[ti];
	uint64_t h = ips_hash(t);
	struct tslot *e = tslot_of(c, t, h);
	uint32_t lookups = 0;
	int rc;

	if (e && e->thread) {
		const struct sw_thread *same = &c->d->threads[e->thread - 1];

		t->frames = same->frames;
		t->nframes = same->nframes;
		c->s->hits += e->lookups;
		return 0;
	}
	rc = build_frames(c, t, &lookups);
	if (rc)
		return rc;
	t->frames = dump_alloc(c->d, c->scratch.n * sizeof(*t->frames));
	if (!t->frames)
		return -ENOMEM;
	t->nframes = c->scratch.n;
	if (t->nframes)
		memcpy(t->frames, c->scratch.f,
		       t->nframes * sizeof(*t->frames));
	if (e)
		*e = (struct tslot){ h, ti + 1, lookups };
	return 0;
}

/* Allocates c->tslots for n threads; without memory, nothing is shared. */
static void tslots_init(struct symctx *c, size_t n)
{
	size_t nslots = 16;

	while (nslots < 2 * n)
		nslots *= 2;
	c->tslots = calloc(nslots, sizeof(*c->tslots));
	c->ntslots = c->tslots ? nslots : 0;
}

static int addr_name_cmp(const void *a, const void *b)
{
	uint64_t x = ((const struct sw_addr_name *)a)->start;
	uint64_t y = ((const struct sw_addr_name *)b)->start;

	return (x > y) - (x < y);
}

/*
 * The module whose data holds addr: the one whose range does, or else
 * the nearest below it when addr lies in its .bss past what the file
 * maps (a range from the process's file mappings ends there; the
 * module's own segments say how far its memory goes). -1 for none.
 */
static int data_module(const struct symctx *c, uint64_t addr)
{
	size_t lo = 0, hi = c->nranges;
	Dwarf_Addr low = 0, high = 0;
	int mi = range_find(c->ranges, c->nranges, addr);

	if (mi >= 0)
		return mi;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (c->ranges[mid].start <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (!lo)
		return -1;
	mi = c->ranges[lo - 1].idx;
	if (!c->resolved[mi] || !c->mods[mi] ||
	    !dwfl_module_info(c->mods[mi]->mod, NULL, &low, &high, NULL, NULL,
			      NULL, NULL))
		return -1;
	addr -= c->d->modules[mi].bias;
	return addr >= low && addr < high ? mi : -1;
}

/*
 * The global variable (an object symbol with a size) that holds addr,
 * into *out with its name malloc'd; false when none does or out of
 * memory. Only modules the frames already opened are asked: a lock word
 * lies in the data of a module its waiter's code runs in.
 */
static bool global_at(struct symctx *c, uint64_t addr, struct sw_addr_name *out)
{
	int mi = data_module(c, addr);
	const struct symmod *sm;
	GElf_Off symoff = 0;
	GElf_Sym sym;
	GElf_Word shndx;
	Elf *elf;
	Dwarf_Addr bias;
	const char *raw;

	if (mi < 0 || !c->resolved[mi] || !(sm = c->mods[mi]))
		return false;
	raw = dwfl_module_addrinfo(sm->mod, addr - c->d->modules[mi].bias,
				   &symoff, &sym, &shndx, &elf, &bias);
	if (!raw || GELF_ST_TYPE(sym.st_info) != STT_OBJECT ||
	    symoff >= sym.st_size)
		return false;
	out->start = addr - symoff;
	out->size = sym.st_size;
	out->name = symrec_clean_name(raw);
	return out->name != NULL;
}

/*
 * Names the global variables that hold the futex words the dump's
 * threads wait on (d->addr_names): the lock a thread waits for, by the
 * name the program gave it. Each variable is looked up once, at most
 * SW_ADDR_NAMES_MAX of them. 0 or -ENOMEM.
 */
static int name_waits(struct symctx *c)
{
	struct sw_dump *d = c->d;
	struct sw_addr_name *v = NULL;
	size_t n = 0;

	for (size_t i = 0; i < d->nthreads && n < SW_ADDR_NAMES_MAX; i++) {
		const struct sw_wait *w = d->threads[i].wait;
		bool seen = false;

		if (!w || d->threads[i].status != SW_ST_OK)
			continue;
		for (size_t k = 0; k < n && !seen; k++)
			seen = w->addr - v[k].start < v[k].size;
		if (seen)
			continue;
		if (!v && !(v = calloc(SW_ADDR_NAMES_MAX, sizeof(*v))))
			return -ENOMEM;
		if (global_at(c, w->addr, &v[n]))
			n++;
	}
	if (n)
		qsort(v, n, sizeof(*v), addr_name_cmp);
	d->addr_names = v;
	d->naddr_names = n;
	return 0;
}

/*
 * Whether path's file name is glibc's shared libc: libc.so.6, or the
 * libc-2.N.so it was before 2.34.
 */
static bool libc_name(const char *path)
{
	const char *base = strrchr(path, '/');

	base = base ? base + 1 : path;
	return strncmp(base, "libc.so", 7) == 0 ||
	       (strncmp(base, "libc-2.", 7) == 0 && strstr(base, ".so"));
}

/*
 * Opens the process's libc when no frame did, so that its release is
 * known when a thread waits on a futex (locks.h reads lock owners by
 * it): a Go program's threads, say, map glibc through cgo but sleep in
 * the Go runtime, never in libc. 0 or -ENOMEM.
 */
static int resolve_libc(struct symctx *c)
{
	bool waits = false;

	/* Only the lock owners of futex waits want the release. */
	for (size_t i = 0; i < c->d->nthreads && !waits; i++)
		waits = c->d->threads[i].wait &&
			c->d->threads[i].status == SW_ST_OK;
	for (size_t i = 0; waits && i < c->d->nmodules; i++) {
		const struct sw_module *m = &c->d->modules[i];
		int rc;

		if (c->resolved[i] && c->mods[i] && c->mods[i]->glibc_minor)
			return 0;
		if (c->resolved[i] || !m->path || !libc_name(m->path) ||
		    past_deadline(c))
			continue;
		rc = module_get(c->s, m, &c->mods[i]);
		if (rc)
			return rc;
		c->resolved[i] = true;
	}
	return 0;
}

/*
 * See symbolize.h. Module ranges are sorted once per dump for a binary
 * search per ip; modules are resolved to sessions on first use, so an
 * unused module is never opened. The hot path per ip is one lookup in the
 * dump's memo and a copy of a few frames; strings are copied once per
 * distinct ip.
 */
int sym_dump(struct sym *s, struct sw_dump *d, bool symbols)
{
	return sym_dump_until(s, d, symbols, 0);
}

int sym_dump_until(struct sym *s, struct sw_dump *d, bool symbols,
		   uint64_t deadline_ns)
{
	struct symctx c = {
		.s = s, .d = d, .symbols = symbols, .deadline_ns = deadline_ns
	};
	int rc = -ENOMEM;

	/* Sessions the last dumps used beyond the bounds go now. */
	s->gen++;
	list_trim(s, &s->live, SYM_MODS_MAX);
	list_trim(s, &s->failed, SYM_FAILED_MAX);
	for (size_t i = 0; i < d->nthreads; i++)
		dump_thread_release_frames(&d->threads[i]);
	dump_release_mem(d);
	dump_release_addr_names(d);
	if (d->nmodules) {
		c.ranges = malloc(d->nmodules * sizeof(*c.ranges));
		/* NOLINTNEXTLINE(bugprone-sizeof-expression): pointers */
		c.mods = calloc(d->nmodules, sizeof(struct symmod *));
		c.resolved = calloc(d->nmodules, sizeof(bool));
		if (!c.ranges || !c.mods || !c.resolved)
			goto out_free;
	}
	for (size_t i = 0; i < d->nmodules; i++) {
		const struct sw_module *m = &d->modules[i];

		if (m->end <= m->start)
			continue;
		c.ranges[c.nranges].start = m->start;
		c.ranges[c.nranges].end = m->end;
		c.ranges[c.nranges].idx = (int)i;
		c.nranges++;
	}
	if (c.nranges)
		qsort(c.ranges, c.nranges, sizeof(*c.ranges), range_cmp);

	tslots_init(&c, d->nthreads);
	rc = 0;
	for (size_t i = 0; i < d->nthreads; i++) {
		if (d->threads[i].status != SW_ST_OK)
			continue;
		rc = thread_frames(&c, i);
		if (rc)
			break;
	}
	if (!rc && symbols)
		rc = resolve_libc(&c);
	if (!rc && symbols)
		rc = name_waits(&c);
	if (!rc) {
		d->symbolized = symbols;
		d->symbols_partial = c.cut;
		for (size_t i = 0; c.resolved && i < d->nmodules; i++)
			if (c.resolved[i] && c.mods[i]) {
				/* A bound kept part of its DWARF out. */
				if (c.mods[i]->guard.why &&
				    !d->modules[i].symbols_error) {
					d->modules[i].symbols_error =
						strdup(c.mods[i]->guard.why);
					d->symbols_partial = true;
				}
				if (c.mods[i]->glibc_minor > d->glibc_minor)
					d->glibc_minor = c.mods[i]->glibc_minor;
				d->glibc_static |= c.mods[i]->glibc_static;
			}
	}
out_free:
	free(c.scratch.f);
	free(c.tslots);
	free(c.runs.f);
	free(c.memo);
	free(c.resolved);
	free(c.mods);
	free(c.ranges);
	return rc;
}
