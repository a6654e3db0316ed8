/*
 * corefile.c - the notes, memory and modules of a core file
 * (corefile.h).
 *
 * elfutils' dwfl_core_file_report() finds a core's modules by opening,
 * with a plain blocking open(), every path of the core's file note and
 * link map, and the executable it is given: a path that has become a
 * FIFO since the core was made blocks it for good, and a device is
 * opened. So the modules are found here from the core alone. Each file
 * that the NT_FILE note shows mapped from its offset 0 is a module when
 * the core's copy of that first page holds an ELF header (the kernel
 * and gcore keep it); its program headers there give its layout and load
 * bias, and its notes, read from the core's memory too, its build-id.
 * Only when the core has no copy of the page is the file itself read,
 * opened by modopen_resolved() like any module file. The vDSO is found
 * by the auxiliary vector and read from the core.
 *
 * A module's file is opened when libdwfl asks for it (find_elf), by
 * modopen_resolved(), and used only if it is an ELF file whose build-id
 * is the one the core holds. A module whose file cannot be opened or is
 * not the core's stays a module without a file: its frames are shown as
 * its path and offset, and the unwinder goes on through it with frame
 * pointers.
 */
#define _GNU_SOURCE
#include "corefile.h"

#include <elf.h>
#include <elfutils/libdwelf.h>
#include <errno.h>
#include <gelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "model/dump.h"
#include "model/limits.h"
#include "modopen.h"

#define CORE_PAGE 4096u		   /* a module's headers are read from here */
#define CORE_MAX_PHDRS 128	   /* program headers of a module, at most */
#define CORE_MAX_NOTES 4096u	   /* bytes of a module's note segment read */
#define CORE_MAX_VDSO (1u << 20)   /* the vDSO's image, at most */
#define CORE_MAX_SPAN (1ull << 40) /* a module's address range, at most */

/* One module of the core, as reported to libdwfl (its userdata). */
struct coremod {
	char *path;	    /* absolute, or "[vdso]"; owned */
	uint64_t low, high; /* its address range as reported */
	uint64_t bias;	    /* load bias, known without the file */
	uint8_t build_id[SW_BUILD_ID_MAX];
	uint32_t build_id_len; /* 0: the core holds none */
	uint64_t build_id_vaddr;
	void *image; /* the vDSO's copy, owned; NULL for files */
	size_t image_size;
	int fd;	  /* its file, opened already but not yet handed over; -1 */
	Elf *elf; /* on fd */
};

struct corefile {
	struct coremod *v;
	size_t n, cap;
};

/* An ELF header and program headers, from the core or from a file. */
struct hdrs {
	GElf_Ehdr eh;
	GElf_Phdr ph[CORE_MAX_PHDRS];
	size_t nph;
};

/* What the walk over the core's notes collects. */
struct scan {
	struct corefile *cf;
	Elf *core;
	int fd;
	bool is64;
	uint64_t entry;	  /* AT_ENTRY, or 0 */
	uint64_t sysinfo; /* AT_SYSINFO_EHDR: the vDSO, or 0 */
	uint64_t page;	  /* the NT_FILE note's page size */
	int err;	  /* -ENOMEM once memory ran out */
};

int corefile_notes(Elf *core, uint32_t type, size_t size,
		   int (*fn)(const void *desc, size_t descsz, void *arg),
		   void *arg)
{
	size_t nph;

	if (elf_getphdrnum(core, &nph) != 0)
		return 0;
	for (size_t i = 0; i < nph; i++) {
		GElf_Phdr ph;
		Elf_Data *data;
		GElf_Nhdr nh;
		size_t off = 0, name_off, desc_off;
		int r;

		if (!gelf_getphdr(core, (int)i, &ph) || ph.p_type != PT_NOTE)
			continue;
		data = elf_getdata_rawchunk(core, (int64_t)ph.p_offset,
					    ph.p_filesz, ELF_T_NHDR);
		while (data && off < data->d_size &&
		       (off = gelf_getnote(data, off, &nh, &name_off,
					   &desc_off)) > 0) {
			if (nh.n_type != type || nh.n_descsz < size)
				continue;
			r = fn((const char *)data->d_buf + desc_off,
			       nh.n_descsz, arg);
			if (r)
				return r;
		}
	}
	return 0;
}

int corefile_read(Elf *core, int fd, uint64_t addr, void *buf, size_t len)
{
	size_t nph;

	if (elf_getphdrnum(core, &nph) != 0)
		return -ENOENT;
	for (size_t i = 0; i < nph; i++) {
		GElf_Phdr ph;

		if (!gelf_getphdr(core, (int)i, &ph) || ph.p_type != PT_LOAD ||
		    addr < ph.p_vaddr || addr - ph.p_vaddr > ph.p_filesz ||
		    ph.p_filesz - (addr - ph.p_vaddr) < len)
			continue;
		if (pread(fd, buf, len,
			  (off_t)(ph.p_offset + (addr - ph.p_vaddr))) ==
		    (ssize_t)len)
			return 0;
		return -ENOENT;
	}
	return -ENOENT;
}

/* A word of the core's class at p (the core is the machine's own). */
static uint64_t word(const unsigned char *p, bool is64)
{
	uint64_t v64;
	uint32_t v32;

	if (is64) {
		memcpy(&v64, p, sizeof(v64));
		return v64;
	}
	memcpy(&v32, p, sizeof(v32));
	return v32;
}

/* AT_ENTRY and AT_SYSINFO_EHDR from the NT_AUXV note. */
static int auxv_note(const void *desc, size_t size, void *arg)
{
	struct scan *sc = arg;
	size_t w = sc->is64 ? 8 : 4;

	for (size_t off = 0; size - off >= 2 * w; off += 2 * w) {
		uint64_t type =
			word((const unsigned char *)desc + off, sc->is64);
		uint64_t val =
			word((const unsigned char *)desc + off + w, sc->is64);

		if (type == AT_ENTRY)
			sc->entry = val;
		else if (type == AT_SYSINFO_EHDR)
			sc->sysinfo = val;
		else if (type == AT_NULL)
			break;
	}
	return 1;
}

/*
 * The ELF header and program headers in buf (n bytes: a copy of a
 * module's first page from the core). Returns 0, or -ENOEXEC when buf
 * holds no ELF header of the machine's byte order with all its program
 * headers.
 */
static int mem_hdrs(const unsigned char *buf, size_t n, struct hdrs *h)
{
	static const union {
		uint16_t v;
		uint8_t b[2];
	} order = { 1 };
	const uint8_t data = order.b[0] ? ELFDATA2LSB : ELFDATA2MSB;

	if (n < EI_NIDENT || memcmp(buf, ELFMAG, SELFMAG) != 0 ||
	    buf[EI_DATA] != data)
		return -ENOEXEC;
	if (buf[EI_CLASS] == ELFCLASS64) {
		Elf64_Ehdr e;

		if (n < sizeof(e))
			return -ENOEXEC;
		memcpy(&e, buf, sizeof(e));
		if (e.e_phentsize != sizeof(Elf64_Phdr) ||
		    e.e_phnum > CORE_MAX_PHDRS || e.e_phoff > n ||
		    (n - e.e_phoff) / sizeof(Elf64_Phdr) < e.e_phnum)
			return -ENOEXEC;
		h->eh = e;
		h->nph = e.e_phnum;
		memcpy(h->ph, buf + e.e_phoff, h->nph * sizeof(Elf64_Phdr));
		return 0;
	}
	if (buf[EI_CLASS] == ELFCLASS32) {
		Elf32_Ehdr e;

		if (n < sizeof(e))
			return -ENOEXEC;
		memcpy(&e, buf, sizeof(e));
		if (e.e_phentsize != sizeof(Elf32_Phdr) ||
		    e.e_phnum > CORE_MAX_PHDRS || e.e_phoff > n ||
		    (n - e.e_phoff) / sizeof(Elf32_Phdr) < e.e_phnum)
			return -ENOEXEC;
		memset(&h->eh, 0, sizeof(h->eh));
		h->eh.e_type = e.e_type;
		h->eh.e_entry = e.e_entry;
		h->nph = e.e_phnum;
		for (size_t i = 0; i < h->nph; i++) {
			Elf32_Phdr p;

			memcpy(&p, buf + e.e_phoff + i * sizeof(p), sizeof(p));
			h->ph[i] = (GElf_Phdr){
				.p_type = p.p_type,
				.p_offset = p.p_offset,
				.p_vaddr = p.p_vaddr,
				.p_filesz = p.p_filesz,
				.p_memsz = p.p_memsz,
				.p_align = p.p_align,
			};
		}
		return 0;
	}
	return -ENOEXEC;
}

/* The ELF header and program headers of a file. 0 or -ENOEXEC. */
static int file_hdrs(Elf *elf, struct hdrs *h)
{
	size_t n;

	if (elf_kind(elf) != ELF_K_ELF || !gelf_getehdr(elf, &h->eh) ||
	    elf_getphdrnum(elf, &n) != 0 || n > CORE_MAX_PHDRS)
		return -ENOEXEC;
	for (h->nph = 0; h->nph < n; h->nph++)
		if (!gelf_getphdr(elf, (int)h->nph, &h->ph[h->nph]))
			return -ENOEXEC;
	return 0;
}

/* The first PT_LOAD of h, or NULL. */
static const GElf_Phdr *first_load(const struct hdrs *h)
{
	for (size_t i = 0; i < h->nph; i++)
		if (h->ph[i].p_type == PT_LOAD)
			return &h->ph[i];
	return NULL;
}

/*
 * The load bias of a module whose file offset 0 the core shows mapped
 * at start (in pages of page bytes): the first PT_LOAD maps the file from
 * its own offset.
 */
static int bias_at(const struct hdrs *h, uint64_t start, uint64_t page,
		   uint64_t *bias)
{
	const GElf_Phdr *p = first_load(h);

	if (!p || p->p_offset > p->p_vaddr)
		return -ENOEXEC;
	if (page < CORE_PAGE || (page & (page - 1)) != 0)
		page = CORE_PAGE;
	*bias = start - ((p->p_vaddr - p->p_offset) & ~(page - 1));
	return 0;
}

/*
 * cm's range with load bias bias: from the first PT_LOAD's address
 * aligned as libdwfl aligns it (so that libdwfl, given the file, finds
 * the same bias) to the end of the last segment.
 */
static int layout(const struct hdrs *h, uint64_t bias, struct coremod *cm)
{
	const GElf_Phdr *p = first_load(h);
	uint64_t hi = 0;

	if (!p || (h->eh.e_type != ET_EXEC && h->eh.e_type != ET_DYN))
		return -ENOEXEC;
	for (size_t i = 0; i < h->nph; i++)
		if (h->ph[i].p_type == PT_LOAD &&
		    h->ph[i].p_vaddr + h->ph[i].p_memsz > hi)
			hi = h->ph[i].p_vaddr + h->ph[i].p_memsz;
	cm->bias = bias;
	cm->low = bias + (p->p_vaddr & -p->p_align);
	cm->high = bias + hi;
	if (cm->high <= cm->low || cm->high - cm->low > CORE_MAX_SPAN)
		return -ENOEXEC;
	return 0;
}

/* The GNU build-id among the notes in buf (n bytes at vaddr), into cm. */
static void build_id_in(const unsigned char *buf, size_t n, uint64_t vaddr,
			uint64_t align, struct coremod *cm)
{
	size_t off = 0;

	align = align == 8 ? 8 : 4;
	while (n - off >= 12) {
		uint32_t nh[3]; /* namesz, descsz, type */
		size_t name = off + 12, desc;

		memcpy(nh, buf + off, sizeof(nh));
		if (nh[0] > n - name)
			return;
		desc = (name + nh[0] + align - 1) & ~(align - 1);
		if (desc > n || nh[1] > n - desc)
			return;
		if (nh[2] == NT_GNU_BUILD_ID && nh[0] == 4 &&
		    memcmp(buf + name, "GNU", 4) == 0 && nh[1] > 0 &&
		    nh[1] <= SW_BUILD_ID_MAX) {
			memcpy(cm->build_id, buf + desc, nh[1]);
			cm->build_id_len = nh[1];
			cm->build_id_vaddr = vaddr + desc;
			return;
		}
		off = (desc + nh[1] + align - 1) & ~(align - 1);
		if (off > n)
			return;
	}
}

/* The build-id in the module's notes in the core's memory, if there. */
static void build_id_from_core(const struct scan *sc, const struct hdrs *h,
			       struct coremod *cm)
{
	unsigned char buf[CORE_MAX_NOTES];

	for (size_t i = 0; i < h->nph && !cm->build_id_len; i++) {
		const GElf_Phdr *p = &h->ph[i];
		size_t n = p->p_filesz < sizeof(buf) ? (size_t)p->p_filesz
						     : sizeof(buf);

		if (p->p_type != PT_NOTE ||
		    corefile_read(sc->core, sc->fd, cm->bias + p->p_vaddr, buf,
				  n) != 0)
			continue;
		build_id_in(buf, n, cm->bias + p->p_vaddr, p->p_align, cm);
	}
}

/* Releases what cm holds. */
static void coremod_release(struct coremod *cm)
{
	free(cm->path);
	free(cm->image);
	if (cm->elf)
		elf_end(cm->elf);
	if (cm->fd >= 0)
		close(cm->fd);
}

/*
 * Adds cm (taken over, released on any failure) unless it overlaps a
 * module already there: the first found stands. 0 or -ENOMEM.
 */
static int add_mod(struct scan *sc, struct coremod *cm)
{
	struct corefile *cf = sc->cf;

	for (size_t i = 0; i < cf->n; i++)
		if (cm->low < cf->v[i].high && cf->v[i].low < cm->high) {
			coremod_release(cm);
			return 0;
		}
	if (cf->n == SW_MAX_MODULES) {
		coremod_release(cm);
		return 0;
	}
	if (cf->n == cf->cap) {
		size_t nc = cf->cap ? 2 * cf->cap : 32;
		struct coremod *nv = realloc(cf->v, nc * sizeof(*nv));

		if (!nv) {
			coremod_release(cm);
			return -ENOMEM;
		}
		cf->v = nv;
		cf->cap = nc;
	}
	cf->v[cf->n++] = *cm;
	return 0;
}

/*
 * Opens the file at path by the module file rule as an ELF file: fd and
 * *elf (ELF_C_READ: read, never mapped, so a file truncated meanwhile
 * cannot fault), and *real, its resolved path, when real is not NULL.
 * Returns the fd or a negative errno (-ENOEXEC: not an ELF file).
 */
static int open_elf(const char *path, Elf **elf, char **real)
{
	int fd = modopen_resolved(path, real);

	if (fd < 0)
		return fd;
	*elf = elf_begin(fd, ELF_C_READ, NULL);
	if (!*elf || elf_kind(*elf) != ELF_K_ELF) {
		if (*elf)
			elf_end(*elf);
		*elf = NULL;
		close(fd);
		if (real) {
			free(*real);
			*real = NULL;
		}
		return -ENOEXEC;
	}
	return fd;
}

/*
 * A module whose first page the core has no copy of: known from its own
 * file, opened by the rule (kept open for libdwfl). Nothing is added
 * when it cannot be opened or is no ELF file. 0 or -ENOMEM.
 */
static int add_from_file(struct scan *sc, const char *path, uint64_t start)
{
	struct coremod cm = { .fd = -1 };
	struct hdrs h;
	uint64_t bias;
	const void *id;
	ssize_t n;

	cm.fd = open_elf(path, &cm.elf, NULL);
	if (cm.fd < 0)
		return 0;
	if (file_hdrs(cm.elf, &h) != 0 ||
	    bias_at(&h, start, sc->page, &bias) != 0 ||
	    layout(&h, bias, &cm) != 0) {
		coremod_release(&cm);
		return 0;
	}
	n = dwelf_elf_gnu_build_id(cm.elf, &id);
	if (n > 0 && n <= SW_BUILD_ID_MAX) {
		memcpy(cm.build_id, id, (size_t)n);
		cm.build_id_len = (uint32_t)n;
	}
	cm.path = strdup(path);
	if (!cm.path) {
		coremod_release(&cm);
		return -ENOMEM;
	}
	return add_mod(sc, &cm);
}

/* The module whose file path the core shows mapped from offset 0 at start. */
static int add_mapped(struct scan *sc, const char *path, uint64_t start,
		      uint64_t end)
{
	unsigned char page[CORE_PAGE];
	size_t n = end - start < CORE_PAGE ? (size_t)(end - start) : CORE_PAGE;
	struct coremod cm = { .fd = -1 };
	struct hdrs h;
	uint64_t bias;

	for (size_t i = 0; i < sc->cf->n; i++)
		if (start >= sc->cf->v[i].low && start < sc->cf->v[i].high)
			return 0; /* a module already: the --exe in its place */
	if (corefile_read(sc->core, sc->fd, start, page, n) != 0)
		return add_from_file(sc, path, start);
	if (mem_hdrs(page, n, &h) != 0 ||
	    bias_at(&h, start, sc->page, &bias) != 0 ||
	    layout(&h, bias, &cm) != 0)
		return 0; /* not an ELF file: data mapped from a file */
	build_id_from_core(sc, &h, &cm);
	cm.path = strdup(path);
	if (!cm.path)
		return -ENOMEM;
	return add_mod(sc, &cm);
}

/*
 * The NT_FILE note: a count and a page size, then for each mapping of a
 * file its start, end and file offset (in pages), then the file names,
 * each ended by a NUL. Every file mapped from offset 0 by an absolute
 * path may be a module.
 */
static int file_note(const void *desc, size_t size, void *arg)
{
	struct scan *sc = arg;
	const unsigned char *p = desc;
	size_t w = sc->is64 ? 8 : 4, names;
	uint64_t count = word(p, sc->is64);
	const char *name;

	sc->page = word(p + w, sc->is64);
	if (count > (size - 2 * w) / (3 * w))
		return 1;
	names = 2 * w + (size_t)count * 3 * w;
	name = (const char *)p + names;
	for (uint64_t i = 0; i < count; i++) {
		const unsigned char *e = p + 2 * w + (size_t)i * 3 * w;
		size_t left = size - (size_t)(name - (const char *)p);
		const char *nul = memchr(name, '\0', left);
		uint64_t start = word(e, sc->is64), end = word(e + w, sc->is64);

		if (!nul)
			return 1;
		if (word(e + 2 * w, sc->is64) == 0 && name[0] == '/' &&
		    start < end) {
			sc->err = add_mapped(sc, name, start, end);
			if (sc->err)
				return 1;
		}
		name = nul + 1;
	}
	return 1;
}

int corefile_image(Elf *core, int fd, uint64_t addr, void **image, size_t *size)
{
	size_t nph, n = 0;

	*image = NULL;
	if (elf_getphdrnum(core, &nph) != 0)
		return -ENOENT;
	for (size_t i = 0; i < nph && !n; i++) {
		GElf_Phdr ph;

		if (gelf_getphdr(core, (int)i, &ph) && ph.p_type == PT_LOAD &&
		    addr >= ph.p_vaddr && addr - ph.p_vaddr < ph.p_filesz)
			n = (size_t)(ph.p_filesz - (addr - ph.p_vaddr));
	}
	if (!n || n > CORE_MAX_VDSO)
		return -ENOENT;
	*image = malloc(n);
	if (!*image)
		return -ENOMEM;
	if (corefile_read(core, fd, addr, *image, n) != 0) {
		free(*image);
		*image = NULL;
		return -ENOENT;
	}
	*size = n;
	return 0;
}

/* The vDSO, copied whole from the core. Nothing without it. */
static int add_vdso(struct scan *sc)
{
	struct coremod cm = { .fd = -1 };
	struct hdrs h;
	uint64_t bias;
	int r = corefile_image(sc->core, sc->fd, sc->sysinfo, &cm.image,
			       &cm.image_size);

	if (r == -ENOMEM)
		return r;
	if (r != 0 || mem_hdrs(cm.image, cm.image_size, &h) != 0 ||
	    bias_at(&h, sc->sysinfo, sc->page, &bias) != 0 ||
	    layout(&h, bias, &cm) != 0) {
		coremod_release(&cm);
		return 0;
	}
	build_id_from_core(sc, &h, &cm);
	cm.path = strdup("[vdso]");
	if (!cm.path) {
		coremod_release(&cm);
		return -ENOMEM;
	}
	return add_mod(sc, &cm);
}

/*
 * The executable named by the user in place of the core's: opened by the
 * rule, placed by the core's entry point, and refused when the core holds
 * a build-id for it that is not the file's.
 */
static int add_exe(struct scan *sc, const char *exe, char *why, size_t why_size)
{
	struct coremod cm = { .fd = -1 };
	struct hdrs h;
	const void *id;
	ssize_t n;
	int r;

	cm.fd = open_elf(exe, &cm.elf, &cm.path);
	if (cm.fd < 0) {
		r = cm.fd;
		snprintf(why, why_size, "%s: %s", exe,
			 r == -EINVAL	 ? "not a regular file"
			 : r == -ENOEXEC ? "not an ELF file"
					 : strerror(-r));
		return -EINVAL;
	}
	r = file_hdrs(cm.elf, &h);
	if (r == 0 && h.eh.e_type == ET_DYN && !sc->entry)
		r = -ENOEXEC;
	if (r == 0)
		r = layout(&h,
			   h.eh.e_type == ET_DYN ? sc->entry - h.eh.e_entry : 0,
			   &cm);
	if (r != 0) {
		snprintf(why, why_size, "%s: not an executable of this core",
			 exe);
		coremod_release(&cm);
		return -EINVAL;
	}
	build_id_from_core(sc, &h, &cm);
	n = dwelf_elf_gnu_build_id(cm.elf, &id);
	if (cm.build_id_len &&
	    (n != (ssize_t)cm.build_id_len ||
	     memcmp(id, cm.build_id, cm.build_id_len) != 0)) {
		snprintf(why, why_size,
			 "%s: not the executable of this core (another "
			 "build-id)",
			 exe);
		coremod_release(&cm);
		return -EINVAL;
	}
	return add_mod(sc, &cm);
}

/* Reports each module to dwfl, itself its userdata. */
static void report_all(Dwfl *dwfl, struct corefile *cf)
{
	for (size_t i = 0; i < cf->n; i++) {
		struct coremod *cm = &cf->v[i];
		Dwfl_Module *mod =
			dwfl_report_module(dwfl, cm->path, cm->low, cm->high);
		void **userdata = NULL;

		if (!mod)
			continue;
		dwfl_module_info(mod, &userdata, NULL, NULL, NULL, NULL, NULL,
				 NULL);
		if (userdata)
			*userdata = cm;
		if (cm->build_id_len)
			dwfl_module_report_build_id(mod, cm->build_id,
						    cm->build_id_len,
						    cm->build_id_vaddr);
	}
}

int corefile_report(Dwfl *dwfl, Elf *core, int fd, const char *exe,
		    struct corefile **out, char *why, size_t why_size)
{
	struct scan sc = { .core = core, .fd = fd };
	const char *ident = elf_getident(core, NULL);
	int r;

	*out = NULL;
	sc.is64 = ident && ident[EI_CLASS] == ELFCLASS64;
	sc.cf = calloc(1, sizeof(*sc.cf));
	if (!sc.cf)
		goto out_nomem;
	corefile_notes(core, NT_AUXV, 0, auxv_note, &sc);
	if (exe) {
		r = add_exe(&sc, exe, why, why_size);
		if (r)
			goto out_free;
	}
	if (sc.sysinfo && add_vdso(&sc) != 0)
		goto out_nomem;
	corefile_notes(core, NT_FILE, sc.is64 ? 16 : 8, file_note, &sc);
	if (sc.err)
		goto out_nomem;
	report_all(dwfl, sc.cf);
	*out = sc.cf;
	return 0;

out_nomem:
	r = -ENOMEM;
	snprintf(why, why_size, "out of memory");
out_free:
	corefile_free(sc.cf);
	return r;
}

void corefile_free(struct corefile *cf)
{
	if (!cf)
		return;
	for (size_t i = 0; i < cf->n; i++)
		coremod_release(&cf->v[i]);
	free(cf->v);
	free(cf);
}

/*
 * The module's file opened by the rule into cm->fd and cm->elf, only if
 * it is an ELF file with the build-id the core holds (if any). 0, or a
 * negative errno.
 */
static int open_checked(struct coremod *cm)
{
	const void *id;
	ssize_t n;
	int fd;

	fd = open_elf(cm->path, &cm->elf, NULL);
	if (fd < 0)
		return fd;
	n = dwelf_elf_gnu_build_id(cm->elf, &id);
	if (cm->build_id_len &&
	    (n != (ssize_t)cm->build_id_len ||
	     memcmp(id, cm->build_id, cm->build_id_len) != 0)) {
		elf_end(cm->elf);
		cm->elf = NULL;
		close(fd);
		return -ESTALE;
	}
	cm->fd = fd;
	return 0;
}

int corefile_find_elf(Dwfl_Module *mod, void **userdata, const char *name,
		      Dwarf_Addr base, char **file_name, Elf **elfp)
{
	struct coremod *cm = userdata ? *userdata : NULL;
	char *copy;
	int fd;

	(void)mod;
	(void)name;
	(void)base;
	if (!cm)
		return -1;
	if (cm->image) {
		*elfp = elf_memory(cm->image, cm->image_size);
		return -1;
	}
	if (cm->fd < 0 && (cm->path[0] != '/' || open_checked(cm) != 0))
		return -1;
	copy = strdup(cm->path);
	if (!copy)
		return -1;
	*file_name = copy;
	*elfp = cm->elf;
	fd = cm->fd;
	cm->elf = NULL;
	cm->fd = -1;
	return fd;
}

bool corefile_module_bias(void *userdata, uint64_t *bias)
{
	const struct coremod *cm = userdata;

	if (!cm)
		return false;
	*bias = cm->bias;
	return true;
}

int corefile_module_image(void *arg, const struct sw_module *m, void **image,
			  size_t *size)
{
	const struct corefile_in *c = arg;

	return c->elf ? corefile_image(c->elf, c->fd, m->start, image, size)
		      : -ENOENT;
}
