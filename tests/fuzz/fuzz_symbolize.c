/*
 * fuzz_symbolize.c - libFuzzer target for the symbolizer
 * (src/symbols/symbolize.c): the input is a module's file, which a hostile
 * user may place where its own process maps it. A raw dump of a few
 * threads whose addresses lie in that module is symbolized by a fresh
 * symbolizer, so no session of an earlier input serves this one. Reading
 * the file must not crash, leak or hang, whatever it holds; the frames
 * must name only the dump's ips and module.
 *
 * The addresses come from the file: its entry point, functions of its own
 * symbol table (so that lookups start inside real functions, with their
 * lines and inlined calls), and words from its end (a linker puts the
 * section headers there), folded into the range its PT_LOAD segments
 * span. Which symbols, and how far into them, the padding bytes of
 * e_ident say: no ELF reader looks at those, so mutating them moves the
 * addresses and nothing else. One thread waits on a futex word in one of
 * the file's objects, for the names of globals.
 */
#define _GNU_SOURCE
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "model/dump.h"
#include "symbols/symbolize.h"

#define BASE 0x7f0000000000ull /* where the module is mapped */
#define SPAN_MAX (1ull << 32)  /* a wider range is taken as the file's */
#define NIPS 8
#define NFUNCS 3 /* of the ips, functions of the symbol table */
#define NTHREADS 3
#define SCAN_MAX 256 /* symbols looked at for one of a kind */
#define FD_SLACK 16  /* descriptors the fuzzer itself may hold for a while */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* What the addresses are chosen from, as the file says. */
struct layout {
	uint64_t lo, hi, entry; /* link-time range of PT_LOAD; e_entry */
	const uint8_t *syms;	/* .symtab's entries, else .dynsym's */
	size_t nsyms;
	uint8_t pad[EI_NIDENT - EI_PAD]; /* e_ident's padding */
};

static int memfd = -1;
static int fd_mark = -1; /* the lowest free descriptor after an input */

/* Little-endian n bytes at p. */
static uint64_t le(const uint8_t *p, size_t n)
{
	uint64_t v = 0;

	while (n-- > 0)
		v = v << 8 | p[n];
	return v;
}

/* The 32-bit word k words before the end of the input; 0 when too short. */
static uint64_t tail_word(const uint8_t *data, size_t size, size_t k)
{
	return size >= 4 * k ? le(data + size - 4 * k, 4) : 0;
}

/* Whether n entries of esize bytes at off lie within size bytes. */
static bool fits(uint64_t off, uint64_t n, size_t esize, size_t size)
{
	return off <= size && (size - off) / esize >= n;
}

/*
 * The range of the PT_LOAD segments, lo taken as libdwfl takes a file's
 * base (the first one's p_vaddr rounded down to its alignment); left as
 * it is when there is none, or the range wraps or is wider than SPAN_MAX.
 */
static void load_range(const uint8_t *data, size_t size, struct layout *l)
{
	uint64_t phoff = le(data + offsetof(Elf64_Ehdr, e_phoff), 8);
	uint64_t phnum = le(data + offsetof(Elf64_Ehdr, e_phnum), 2);
	uint64_t lo = 0, hi = 0;
	bool first = true;

	if (!fits(phoff, phnum, sizeof(Elf64_Phdr), size))
		return;
	for (uint64_t i = 0; i < phnum; i++) {
		const uint8_t *ph = data + phoff + i * sizeof(Elf64_Phdr);
		uint64_t vaddr = le(ph + offsetof(Elf64_Phdr, p_vaddr), 8);
		uint64_t memsz = le(ph + offsetof(Elf64_Phdr, p_memsz), 8);
		uint64_t align = le(ph + offsetof(Elf64_Phdr, p_align), 8);

		if (le(ph + offsetof(Elf64_Phdr, p_type), 4) != PT_LOAD)
			continue;
		if (first)
			lo = vaddr & -align;
		first = false;
		if (vaddr + memsz < vaddr)
			return;
		if (vaddr + memsz > hi)
			hi = vaddr + memsz;
	}
	if (first || hi <= lo || hi - lo > SPAN_MAX)
		return;
	l->lo = lo;
	l->hi = hi;
}

/* The entries of .symtab, else of .dynsym, into l. */
static void symbols_of(const uint8_t *data, size_t size, struct layout *l)
{
	uint64_t shoff = le(data + offsetof(Elf64_Ehdr, e_shoff), 8);
	uint64_t shnum = le(data + offsetof(Elf64_Ehdr, e_shnum), 2);

	if (!fits(shoff, shnum, sizeof(Elf64_Shdr), size))
		return;
	for (uint64_t i = 0; i < shnum; i++) {
		const uint8_t *sh = data + shoff + i * sizeof(Elf64_Shdr);
		uint64_t type = le(sh + offsetof(Elf64_Shdr, sh_type), 4);
		uint64_t off = le(sh + offsetof(Elf64_Shdr, sh_offset), 8);
		uint64_t n = le(sh + offsetof(Elf64_Shdr, sh_size), 8) /
			     sizeof(Elf64_Sym);

		if ((type != SHT_SYMTAB && (type != SHT_DYNSYM || l->syms)) ||
		    !fits(off, n, sizeof(Elf64_Sym), size))
			continue;
		l->syms = data + off;
		l->nsyms = n;
	}
}

/*
 * What the addresses are chosen from: for an ELF64 little-endian file its
 * segments, entry point and symbols; for anything else the file's size
 * from 0, and no symbols.
 */
static void layout_of(const uint8_t *data, size_t size, struct layout *l)
{
	memset(l, 0, sizeof(*l));
	l->hi = size ? size : 1;
	if (size < sizeof(Elf64_Ehdr) || memcmp(data, ELFMAG, SELFMAG) != 0 ||
	    data[EI_CLASS] != ELFCLASS64 || data[EI_DATA] != ELFDATA2LSB)
		return;
	memcpy(l->pad, data + EI_PAD, sizeof(l->pad));
	l->entry = le(data + offsetof(Elf64_Ehdr, e_entry), 8);
	load_range(data, size, l);
	symbols_of(data, size, l);
}

/*
 * The value of a symbol of the given type with a value, the first from
 * entry from (modulo their number) on; 0 when none is near.
 */
static uint64_t symbol_at(const struct layout *l, uint64_t from, unsigned type)
{
	for (size_t k = 0; k < SCAN_MAX && k < l->nsyms; k++) {
		const uint8_t *e =
			l->syms + ((from + k) % l->nsyms) * sizeof(Elf64_Sym);
		uint64_t value = le(e + offsetof(Elf64_Sym, st_value), 8);

		if (ELF64_ST_TYPE(e[offsetof(Elf64_Sym, st_info)]) == type &&
		    value)
			return value;
	}
	return 0;
}

/* The link-time address a, moved into l's range when it lies outside. */
static uint64_t fold(const struct layout *l, uint64_t a)
{
	uint64_t span = l->hi - l->lo;

	return a - l->lo < span ? a : l->lo + a % span;
}

/*
 * The ips at bias: the entry point; NFUNCS functions spread over the
 * symbol table, each a return address a little way in; words of the end.
 */
static void choose_ips(const uint8_t *data, size_t size, const struct layout *l,
		       uint64_t bias, uint64_t *ips)
{
	size_t k = 0;

	ips[k++] = bias + fold(l, l->entry);
	for (size_t i = 0; i < NFUNCS; i++, k++) {
		uint64_t from =
			le(l->pad + 2 * i, 2) + i * (l->nsyms / NFUNCS + 1);
		uint64_t f = symbol_at(l, from, STT_FUNC);

		ips[k] = bias + fold(l, f + 1 + l->pad[6] % 32);
	}
	for (size_t i = 1; k < NIPS; i++, k++)
		ips[k] = bias + fold(l, l->lo + tail_word(data, size, i));
}

/* Appends to d (room made by the caller) an ok thread of n ips. */
static int add_thread(struct sw_dump *d, const uint64_t *ips, size_t n,
		      uint32_t flags)
{
	struct sw_thread *t = &d->threads[d->nthreads];

	t->ips = malloc(n * sizeof(*t->ips));
	if (!t->ips)
		return -1;
	memcpy(t->ips, ips, n * sizeof(*t->ips));
	t->nips = n;
	t->tid = (pid_t)(100 + d->nthreads);
	t->state = 'S';
	t->status = SW_ST_OK;
	t->read = SW_READ_PTRACE;
	t->flags = flags;
	t->group = -1;
	t->unchanged_s = -1;
	d->nthreads++;
	return 0;
}

/*
 * The dump: one module, the input mapped at BASE, and NTHREADS threads in
 * it. The first two have the same ips, so that they share frames, and
 * the first waits on a futex word in an object of the file's (else
 * anywhere up to half the range beyond its end: a .bss past what the
 * file maps); the third has them in reverse, the padding saying which
 * are interrupted pcs.
 */
static struct sw_dump *make_dump(const uint8_t *data, size_t size)
{
	struct sw_dump *d = dump_new();
	uint64_t ips[NIPS], rev[NIPS], bias, span, word;
	struct sw_module *m;
	struct layout l;

	if (!d)
		return NULL;
	layout_of(data, size, &l);
	bias = l.hi <= UINT64_MAX - BASE ? BASE : 0;
	span = l.hi - l.lo;
	choose_ips(data, size, &l, bias, ips);
	for (int k = 0; k < NIPS; k++)
		rev[k] = ips[NIPS - 1 - k];
	word = symbol_at(&l, l.pad[6], STT_OBJECT);
	if (!word)
		word = l.lo + tail_word(data, size, 1) % (span + span / 2 + 1);

	d->pid = 4242;
	d->method = SW_METHOD_PTRACE;
	d->modules = calloc(1, sizeof(*d->modules));
	d->threads = calloc(NTHREADS, sizeof(*d->threads));
	if (!d->modules || !d->threads)
		goto out_free;
	m = &d->modules[0];
	m->path = strdup("/fuzz/module.so");
	if (!m->path)
		goto out_free;
	m->bias = bias;
	m->start = bias + l.lo;
	m->end = bias + l.hi;
	d->nmodules = 1;
	if (add_thread(d, ips, NIPS, SW_TF_FIRST_EXACT) ||
	    add_thread(d, ips, NIPS, SW_TF_FIRST_EXACT) ||
	    add_thread(d, rev, NIPS,
		       l.pad[6] & (SW_TF_FIRST_EXACT | SW_TF_CUT)))
		goto out_free;
	d->threads[2].exact[0] = (uint64_t)l.pad[6] << 1;
	d->threads[0].wait = calloc(1, sizeof(*d->threads[0].wait));
	if (!d->threads[0].wait)
		goto out_free;
	d->threads[0].wait->addr = bias + word;
	return d;

out_free:
	sw_dump_free(d);
	return NULL;
}

/* The open function: the input's file, as a descriptor of its own. */
static int open_module(void *arg, const struct sw_module *m)
{
	int fd = fcntl(memfd, F_DUPFD_CLOEXEC, 0);

	(void)arg;
	(void)m;
	return fd < 0 ? -errno : fd;
}

/* Separate debug files are never found: only the input is read. */
static int no_debug(const uint8_t *id, size_t n)
{
	(void)id;
	(void)n;
	return -ENOENT;
}

/* Writes the input into the memfd, the file's only contents. */
static int put_file(const uint8_t *data, size_t size)
{
	if (memfd < 0) {
		memfd = memfd_create("fuzz_symbolize", MFD_CLOEXEC);
		if (memfd < 0)
			return -1;
		sym_set_debug_fn(no_debug);
	}
	if (ftruncate(memfd, 0) != 0)
		return -1;
	return pwrite(memfd, data, size, 0) == (ssize_t)size ? 0 : -1;
}

/* Every frame names one of its thread's ips and the module or none. */
static void check_frames(const struct sw_dump *d)
{
	for (size_t i = 0; i < d->nthreads; i++) {
		const struct sw_thread *t = &d->threads[i];

		for (size_t k = 0; k < t->nframes; k++) {
			const struct sw_frame *f = &t->frames[k];
			bool known = f->ip == 0 && f->module < 0;

			for (size_t j = 0; j < t->nips && !known; j++)
				known = f->ip == t->ips[j];
			if (!known || f->module < -1 ||
			    f->module >= (int)d->nmodules ||
			    (f->module == 0 &&
			     f->offset != f->ip - d->modules[0].bias) ||
			    (f->function && strlen(f->function) > (1u << 20)) ||
			    (f->file && strlen(f->file) > (1u << 20)))
				abort();
		}
	}
	for (size_t i = 0; i < d->naddr_names; i++)
		if (!d->addr_names[i].name || !d->addr_names[i].size)
			abort();
}

/* Aborts when descriptors pile up from input to input. */
static void check_fds(void)
{
	int fd = fcntl(memfd, F_DUPFD_CLOEXEC, 0);

	if (fd < 0)
		return;
	close(fd);
	if (fd_mark < 0)
		fd_mark = fd;
	if (fd > fd_mark + FD_SLACK) {
		fprintf(stderr, "file descriptors leaked: %d open\n", fd);
		abort();
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct sw_dump *d;
	struct sym *s;

	if (put_file(data, size) != 0)
		return 0;
	d = make_dump(data, size);
	if (!d)
		return 0;
	if (sym_new(open_module, NULL, &s) == 0) {
		if (sym_dump(s, d, true) == 0)
			check_frames(d);
		/* Again, from the sessions' caches. */
		if (sym_dump(s, d, true) == 0)
			check_frames(d);
		sym_free(s);
	}
	sw_dump_free(d);
	check_fds();
	return 0;
}
