/*
 * test_symbolize.c - the symbolizer (src/symbols/symbolize.c) on real code:
 * addresses of functions in this test program and in libc, with the module
 * list the collector reads from the loader. Checks names, file:line of
 * known lines, inlined frames, demangling, symbol-version stripping,
 * unreadable and mismatching modules, the negative cache, the result
 * cache, symbols=false, the loader placeholder, and the warm cost.
 *
 * Built with -O0 -g (see the Makefile), so the lines below are exact.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <elfutils/libdwfl.h>
#include <errno.h>
#include <execinfo.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "model/dump.h"
#include "render/group.h"
#include "collector/modules.h"
#include "symbols/symbolize.h"
#include "tap.h"

/* ------------------------------------------------ code to symbolize */

/*
 * Returns its caller's return address and stores here (the caller's
 * __LINE__, passed in the same call so the call and the line are one
 * source line whatever the formatting) in *line.
 */
static __attribute__((noinline)) uint64_t ret_addr(int here, int *line)
{
	*line = here;
	return (uint64_t)(uintptr_t)__builtin_return_address(0);
}

static __attribute__((noinline)) uint64_t known_caller(int *line)
{
	volatile uint64_t ra = ret_addr(__LINE__, line);

	return ra;
}

static inline __attribute__((always_inline)) uint64_t inl_fn(int here,
							     int *line,
							     int *inner)
{
	*line = here;
	return ret_addr(__LINE__, inner);
}

static __attribute__((noinline)) uint64_t inl_caller(int *line, int *inner)
{
	volatile uint64_t ra = inl_fn(__LINE__, line, inner);

	return ra;
}

/* A C++ name and a compiler clone name, given by asm labels. */
__attribute__((noinline, used)) int cxx_fn(int x) __asm__("_ZN2sw4test3fooEi");
__attribute__((noinline, used)) int cxx_fn(int x)
{
	return x + 1;
}

__attribute__((noinline, used)) int clone_fn(int x) __asm__(
	"clone_fn.constprop.0");
__attribute__((noinline, used)) int clone_fn(int x)
{
	return x * 2;
}

/* ------------------------------------------------------------ helpers */

/* A dump of this process's modules and one ok thread with these ips. */
static struct sw_dump *make_dump(const uint64_t *ips, size_t nips,
				 uint32_t flags)
{
	struct sw_dump *d = dump_new();

	if (!d || modules_read_self(d)) {
		sw_dump_free(d);
		return NULL;
	}
	d->nthreads = 1;
	d->threads = calloc(1, sizeof(*d->threads));
	d->threads[0].tid = 1;
	d->threads[0].flags = flags;
	d->threads[0].nips = nips;
	d->threads[0].ips = malloc((nips ? nips : 1) * sizeof(uint64_t));
	if (nips)
		memcpy(d->threads[0].ips, ips, nips * sizeof(uint64_t));
	d->threads[0].group = -1;
	d->threads[0].unchanged_s = -1;
	return d;
}

/* Adds a module to d; returns its index. */
static int add_module(struct sw_dump *d, const char *path, uint64_t start,
		      uint64_t end, uint64_t bias, const uint8_t *id,
		      uint32_t idlen)
{
	struct sw_module *m;

	d->modules = realloc(d->modules, (d->nmodules + 1) * sizeof(*m));
	m = &d->modules[d->nmodules];
	memset(m, 0, sizeof(*m));
	m->path = strdup(path);
	m->start = start;
	m->end = end;
	m->bias = bias;
	m->build_id_len = idlen;
	if (idlen)
		memcpy(m->build_id, id, idlen);
	return (int)d->nmodules++;
}

static int opens;

/* An open function that counts calls and follows symlinks. */
static int counting_open(void *arg, const struct sw_module *m)
{
	int fd;

	(void)arg;
	opens++;
	fd = open(m->path, O_RDONLY | O_CLOEXEC);
	return fd < 0 ? -errno : fd;
}

static bool ends_with(const char *s, const char *suffix)
{
	size_t a = s ? strlen(s) : 0, b = strlen(suffix);

	return s && a >= b && strcmp(s + a - b, suffix) == 0;
}

static const char *str(const char *s)
{
	return s ? s : "(null)";
}

/* CPU time of this thread: the checks below must not flake on a busy host. */
static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* -------------------------------------------------------------- tests */

static void test_line(struct sym *s)
{
	int line = 0;
	uint64_t ip = known_caller(&line);
	struct sw_dump *d = make_dump(&ip, 1, 0);
	struct sw_thread *t = &d->threads[0];
	const struct sw_frame *f = t->frames;
	int mi = dump_find_module(d, ip);

	TAP_OK(sym_dump(s, d, true) == 0, "sym_dump succeeds");
	TAP_OK(d->symbolized, "dump marked symbolized");
	f = t->frames;
	TAP_OK(t->nframes == 1, "one frame for a plain call (got %zu)",
	       t->nframes);
	TAP_OK(f && f->module == mi && mi >= 0, "frame in the test program");
	TAP_OK(f && f->offset == ip - d->modules[mi].bias,
	       "offset is ip minus the load bias");
	TAP_OK(f && f->function && !strcmp(f->function, "known_caller"),
	       "static function named (got %s)", str(f ? f->function : 0));
	TAP_OK(f && f->file && f->file[0] == '/' &&
		       ends_with(f->file, "/tests/unit/test_symbolize.c"),
	       "file is absolute (got %s)", str(f ? f->file : 0));
	TAP_OK(f && f->line == line, "line of the call (want %d, got %d)", line,
	       f ? f->line : -1);
	TAP_OK(f && !f->inlined, "not inlined");
	sw_dump_free(d);
}

static void test_inline(struct sym *s)
{
	int line = 0, inner = 0;
	uint64_t ip = inl_caller(&line, &inner);
	struct sw_dump *d = make_dump(&ip, 1, 0);
	struct sw_thread *t = &d->threads[0];
	const struct sw_frame *f;

	TAP_OK(sym_dump(s, d, true) == 0, "sym_dump succeeds (inline)");
	f = t->frames;
	TAP_OK(t->nframes == 2, "inlined call gives two frames (got %zu)",
	       t->nframes);
	if (t->nframes != 2)
		goto out;
	TAP_OK(f[0].function && !strcmp(f[0].function, "inl_fn") &&
		       f[0].inlined,
	       "innermost frame is the inlined function (got %s, %d)",
	       str(f[0].function), f[0].inlined);
	TAP_OK(f[0].line == inner,
	       "inlined frame at its own line "
	       "(want %d, got %d)",
	       inner, f[0].line);
	TAP_OK(f[1].function && !strcmp(f[1].function, "inl_caller") &&
		       !f[1].inlined,
	       "outer frame is the containing function (got %s)",
	       str(f[1].function));
	TAP_OK(f[1].line == line,
	       "outer frame at the call site (want %d, "
	       "got %d)",
	       line, f[1].line);
	TAP_OK(f[0].ip == ip && f[1].ip == ip && f[0].offset == f[1].offset,
	       "inlined frames share the ip");
	TAP_OK(f[1].file && ends_with(f[1].file, "test_symbolize.c"),
	       "call site file (got %s)", str(f[1].file));
out:
	sw_dump_free(d);
}

static void test_names(struct sym *s)
{
	uint64_t ips[3];
	struct sw_dump *d;
	const struct sw_frame *f;
	void *p = dlsym(RTLD_DEFAULT, "pthread_cond_wait");

	ips[0] = (uint64_t)(uintptr_t)cxx_fn;
	d = make_dump(ips, 1, SW_TF_FIRST_EXACT);
	TAP_OK(sym_dump(s, d, true) == 0 && d->threads[0].nframes == 1,
	       "C++ symbol looked up");
	f = d->threads[0].frames;
	TAP_OK(f && f->function && !strcmp(f->function, "sw::test::foo(int)"),
	       "C++ name demangled (got %s)", str(f ? f->function : 0));
	sw_dump_free(d);

	ips[0] = (uint64_t)(uintptr_t)clone_fn + 1;
	d = make_dump(ips, 1, SW_TF_FIRST_EXACT);
	TAP_OK(sym_dump(s, d, true) == 0 && d->threads[0].nframes == 1,
	       "clone symbol looked up");
	f = d->threads[0].frames;
	TAP_OK(f && f->function && !strcmp(f->function, "clone_fn.constprop.0"),
	       "clone suffix kept (got %s)", str(f ? f->function : 0));
	sw_dump_free(d);

	ips[0] = (uint64_t)(uintptr_t)p;
	d = make_dump(ips, 1, SW_TF_FIRST_EXACT);
	TAP_OK(p && sym_dump(s, d, true) == 0 && d->threads[0].nframes >= 1,
	       "libc symbol looked up");
	f = d->threads[0].frames;
	TAP_OK(f && f->module >= 0 &&
		       strstr(d->modules[f->module].path, "libc.so"),
	       "frame in libc (got %s)",
	       f && f->module >= 0 ? d->modules[f->module].path : "none");
	TAP_OK(f && f->function && !strchr(f->function, '@') &&
		       strstr(f->function, "pthread_cond_wait"),
	       "libc function without version suffix (got %s)",
	       str(f ? f->function : 0));
	if (f && f->file)
		TAP_OK(f->line > 0 && strstr(f->file, "pthread_cond_wait.c") &&
			       !strstr(f->file, "nptl/nptl"),
		       "libc source line from separate debuginfo (%s:%d)",
		       f->file, f->line);
	else
		TAP_SKIP("no debuginfo for libc installed");
	sw_dump_free(d);
}

static void test_unreadable(void)
{
	struct sym *s;
	uint64_t ips[2];
	int line, fake;
	struct sw_dump *d;
	const struct sw_frame *f;
	int opens_before;

	ips[0] = 0x1234;
	ips[1] = known_caller(&line);
	TAP_OK(sym_new(counting_open, NULL, &s) == 0, "sym_new with open fn");
	d = make_dump(ips, 2, SW_TF_FIRST_EXACT);
	fake = add_module(d, "/nonexistent/libfake.so", 0x1000, 0x2000, 0x1000,
			  (const uint8_t *)"\1\2\3\4", 4);
	TAP_OK(sym_dump(s, d, true) == 0, "sym_dump with an unreadable module");
	f = d->threads[0].frames;
	TAP_OK(d->threads[0].nframes == 2, "both frames present");
	TAP_OK(f && f[0].module == fake && f[0].offset == 0x234 &&
		       !f[0].function && !f[0].file,
	       "unreadable module gives module+offset (0x%llx)",
	       f ? (unsigned long long)f[0].offset : 0ULL);
	TAP_OK(f && f[1].function && !strcmp(f[1].function, "known_caller"),
	       "readable module still symbolized");
	opens_before = opens;
	TAP_OK(opens >= 2, "modules opened through the open function (%d)",
	       opens);
	TAP_OK(sym_sessions(s) == 1 && sym_failed_files(s) == 0,
	       "one session; a file that cannot be opened is not kept "
	       "(%zu, %zu)",
	       sym_sessions(s), sym_failed_files(s));
	TAP_OK(sym_dump(s, d, true) == 0, "second dump");
	TAP_OK(opens == 2 * opens_before && sym_sessions(s) == 1,
	       "each dump opens its modules once, the session is reused "
	       "(%d opens, %zu sessions)",
	       opens, sym_sessions(s));
	sw_dump_free(d);
	sym_free(s);
}

/*
 * More distinct ips than the symbolizer memoizes in one dump: the rest
 * are worked out one by one, and every frame still matches its ip.
 */
static void test_many_ips(void)
{
	enum { NT = 3000, NIPS = 64 };
	const uint64_t base = 0x100000000ULL;
	struct sw_dump *d = dump_new();
	struct sym *s;
	bool ok = true;
	int fake;

	fake = add_module(d, "/nonexistent/libmany.so", base, base + (1 << 24),
			  base, NULL, 0);
	d->threads = calloc(NT, sizeof(*d->threads));
	d->nthreads = NT;
	for (size_t i = 0; i < NT; i++) {
		struct sw_thread *t = &d->threads[i];

		t->tid = (pid_t)(i + 1);
		t->group = -1;
		t->nips = NIPS;
		t->ips = malloc(NIPS * sizeof(uint64_t));
		/* Every tenth thread repeats the one before it. */
		for (size_t k = 0; k < NIPS; k++)
			t->ips[k] = base + 1 + (i - (i % 10 == 9)) * NIPS + k;
	}
	sym_new(NULL, NULL, &s);
	TAP_OK(sym_dump(s, d, true) == 0, "%d distinct ips symbolized",
	       NT * NIPS * 9 / 10);
	for (size_t i = 0; i < NT; i++) {
		const struct sw_thread *t = &d->threads[i];

		ok = ok && t->nframes == NIPS;
		for (size_t k = 0; ok && k < NIPS; k++)
			ok = t->frames[k].ip == t->ips[k] &&
			     t->frames[k].module == fake &&
			     t->frames[k].offset == t->ips[k] - base &&
			     !t->frames[k].function;
	}
	TAP_OK(ok, "every frame matches its ip");
	TAP_OK(group_dump(d) == 0 && d->ngroups == NT - NT / 10,
	       "threads with the same ips group together (%zu groups)",
	       d->ngroups);
	sw_dump_free(d);
	sym_free(s);
}

static void test_build_id_mismatch(void)
{
	struct sym *s;
	uint64_t ip;
	int line, mi;
	struct sw_dump *d;
	const struct sw_frame *f;

	ip = known_caller(&line);
	d = make_dump(&ip, 1, 0);
	mi = dump_find_module(d, ip);
	TAP_OK(mi >= 0 && d->modules[mi].build_id_len > 0,
	       "test program has a build-id");
	if (mi < 0 || !d->modules[mi].build_id_len)
		goto out;
	d->modules[mi].build_id[0] ^= 0xff;
	TAP_OK(sym_new(NULL, NULL, &s) == 0, "sym_new");
	TAP_OK(sym_dump(s, d, true) == 0, "sym_dump with a wrong build-id");
	f = d->threads[0].frames;
	TAP_OK(d->threads[0].nframes == 1 && f && !f->function && !f->file &&
		       f->module == mi && f->offset == ip - d->modules[mi].bias,
	       "build-id mismatch gives module+offset only (got %s)",
	       str(f ? f->function : 0));
	d->modules[mi].build_id[0] ^= 0xff;
	TAP_OK(sym_dump(s, d, true) == 0 && d->threads[0].frames &&
		       d->threads[0].frames[0].function,
	       "the right build-id still symbolizes");
	sym_free(s);
out:
	sw_dump_free(d);
}

static void test_cache(struct sym *s)
{
	int line;
	uint64_t ips[2];
	struct sw_dump *d;
	uint64_t hits, misses;

	ips[0] = known_caller(&line);
	ips[1] = inl_caller(&line, &line);
	d = make_dump(ips, 2, 0);
	TAP_OK(sym_dump(s, d, true) == 0, "first dump");
	hits = sym_cache_hits(s);
	misses = sym_cache_misses(s);
	TAP_OK(sym_dump(s, d, true) == 0, "second dump");
	TAP_OK(sym_cache_hits(s) == hits + 2, "two more cache hits (%llu)",
	       (unsigned long long)(sym_cache_hits(s) - hits));
	TAP_OK(sym_cache_misses(s) == misses, "no more misses");
	TAP_OK(d->threads[0].nframes == 3,
	       "frames rebuilt, not appended "
	       "(%zu)",
	       d->threads[0].nframes);

	TAP_OK(sym_dump(s, d, false) == 0, "symbols=false");
	TAP_OK(!d->symbolized, "dump marked unsymbolized");
	TAP_OK(d->threads[0].nframes == 2 &&
		       !d->threads[0].frames[0].function &&
		       !d->threads[0].frames[1].file,
	       "raw frames only");
	TAP_OK(d->threads[0].frames[0].module >= 0 &&
		       d->threads[0].frames[0].offset ==
			       ips[0] - d->modules
						[d->threads[0].frames[0].module]
							.bias,
	       "raw frames carry module and offset");
	TAP_OK(sym_cache_hits(s) == hits + 2 && sym_cache_misses(s) == misses,
	       "symbols=false looks nothing up");
	sw_dump_free(d);
}

static void test_loader_and_status(struct sym *s)
{
	int line;
	uint64_t ips[2];
	struct sw_dump *d;

	ips[0] = known_caller(&line);
	ips[1] = ips[0];
	d = make_dump(ips, 2, SW_TF_IN_LOADER);
	TAP_OK(sym_dump(s, d, true) == 0, "sym_dump (in loader)");
	TAP_OK(d->threads[0].nframes == 1 &&
		       d->threads[0].frames[0].ip == ips[0] &&
		       d->threads[0].frames[0].module >= 0 &&
		       !strcmp(str(d->threads[0].frames[0].function),
			       "[in dynamic loader]"),
	       "thread in the loader gets one placeholder frame");
	d->threads[0].flags = 0;
	d->threads[0].status = SW_ST_TIMEOUT;
	TAP_OK(sym_dump(s, d, true) == 0 && d->threads[0].nframes == 0 &&
		       !d->threads[0].frames,
	       "a thread that is not ok gets no frames");
	sw_dump_free(d);
}

static void test_unknown_address(struct sym *s)
{
	uint64_t ip = 0x10; /* below any mapping */
	struct sw_dump *d = make_dump(&ip, 1, 0);

	TAP_OK(sym_dump(s, d, true) == 0 && d->threads[0].nframes == 1,
	       "unknown address gives a frame");
	TAP_OK(d->threads[0].frames[0].module == -1 &&
		       d->threads[0].frames[0].offset == ip &&
		       !d->threads[0].frames[0].function,
	       "unknown module: module -1, offset = ip, no function");
	sw_dump_free(d);
}

/*
 * The symbolizer's own sorted symbol index must name addresses as
 * libdwfl's dwfl_module_addrinfo does: compare them on addresses spread
 * over the text of libc and of this program (exact lookups, so the
 * outermost frame's function is the symbol's name).
 */
static void test_symbol_index(struct sym *s)
{
	static const Dwfl_Callbacks cb = {
		.find_elf = dwfl_build_id_find_elf,
		.find_debuginfo = dwfl_standard_find_debuginfo,
		.section_address = dwfl_offline_section_address,
	};
	struct sw_dump *d = make_dump(NULL, 0, 0);
	int compared = 0, differ = 0;

	for (size_t mi = 0; mi < d->nmodules; mi++) {
		const struct sw_module *m = &d->modules[mi];
		struct sw_dump *t;
		Dwfl *dwfl;
		Dwfl_Module *mod;
		enum { N = 500 };
		uint64_t step;

		if (!strstr(m->path, "libc.so") &&
		    !ends_with(m->path, "/test_symbolize"))
			continue;
		dwfl = dwfl_begin(&cb);
		dwfl_report_begin(dwfl);
		mod = dwfl_report_elf(dwfl, "m", m->path, -1, 0, true);
		dwfl_report_end(dwfl, NULL, NULL);
		t = make_dump(&m->start, 1, SW_TF_FIRST_EXACT);
		t->threads = realloc(t->threads, N * sizeof(*t->threads));
		step = (m->end - m->start) / N;
		for (size_t i = 1; i < N; i++) {
			t->threads[i] = t->threads[0];
			t->threads[i].ips = malloc(sizeof(uint64_t));
			t->threads[i].ips[0] = m->start + i * step + i % 13;
		}
		t->nthreads = N;
		if (!mod || sym_dump(s, t, true)) {
			TAP_OK(0, "set up the comparison for %s", m->path);
			goto next;
		}
		for (size_t i = 0; i < N; i++) {
			const struct sw_thread *th = &t->threads[i];
			const char *mine =
				th->nframes
					? th->frames[th->nframes - 1].function
					: NULL;
			GElf_Off off;
			GElf_Sym sym;
			GElf_Word shndx;
			Elf *elf;
			Dwarf_Addr bias;
			const char *ref = dwfl_module_addrinfo(
				mod, th->ips[0] - m->bias, &off, &sym, &shndx,
				&elf, &bias);
			size_t n;

			if (!ref || !strncmp(ref, "_Z", 2))
				continue; /* no symbol, or demangled */
			n = strcspn(ref, "@");
			compared++;
			if (!mine || strlen(mine) != n ||
			    strncmp(mine, ref, n)) {
				if (++differ <= 3)
					TAP_NOTE("0x%llx: ours %s, libdwfl %s",
						 (unsigned long long)th->ips[0],
						 str(mine), ref);
			}
		}
	next:
		sw_dump_free(t);
		dwfl_end(dwfl);
	}
	TAP_OK(compared > 300 && differ == 0,
	       "symbol index agrees with dwfl_module_addrinfo (%d of %d "
	       "differ)",
	       differ, compared);
	sw_dump_free(d);
}

/* Depth of real frames for the cost test. */
static __attribute__((noinline)) int deep(int n, void **buf, int max)
{
	int r;

	if (n > 0)
		r = deep(n - 1, buf, max);
	else
		r = backtrace(buf, max);
	__asm__ volatile("" ::: "memory"); /* no tail call */
	return r;
}

/*
 * Threads that stopped at the same ips share one frame array, built once;
 * other flags or ips get their own. Compacting keeps the frames of each
 * group's first thread, in memory of their own.
 */
static void test_shared(struct sym *s)
{
	int line, inner;
	uint64_t ips[2], rev[2];
	struct sw_dump *d;
	struct sw_thread *t;
	struct sw_frame before[3];
	char *names[3], *files[3];
	const char *fn0;
	size_t n0;
	bool same = true;

	ips[0] = rev[1] = known_caller(&line);
	ips[1] = rev[0] = inl_caller(&line, &inner);
	d = make_dump(ips, 2, 0);
	d->threads = realloc(d->threads, 4 * sizeof(*d->threads));
	for (size_t i = 1; i < 4; i++) {
		d->threads[i] = d->threads[0];
		d->threads[i].tid = (pid_t)(i + 1);
		d->threads[i].ips = malloc(2 * sizeof(uint64_t));
		memcpy(d->threads[i].ips, i == 3 ? rev : ips,
		       2 * sizeof(uint64_t));
	}
	d->threads[2].flags = SW_TF_FIRST_EXACT;
	d->nthreads = 4;
	t = d->threads;
	TAP_OK(sym_dump(s, d, true) == 0 && t[0].nframes == 3,
	       "four threads symbolized");
	TAP_OK(t[1].frames == t[0].frames && t[1].nframes == t[0].nframes,
	       "the same ips share one frame array");
	TAP_OK(t[2].frames != t[0].frames && t[3].frames != t[0].frames &&
		       t[3].nframes == 3 && t[3].frames[0].function &&
		       t[0].frames[0].function &&
		       !strcmp(t[3].frames[2].function,
			       t[0].frames[0].function),
	       "other flags or ips get their own frames");
	/* What compacting must keep; the strings' memory goes with it. */
	n0 = t[0].nframes < 3 ? t[0].nframes : 3;
	memcpy(before, t[0].frames, n0 * sizeof(*before));
	for (size_t i = 0; i < n0; i++) {
		names[i] = strdup(str(before[i].function));
		files[i] = strdup(str(before[i].file));
	}
	fn0 = t[0].frames[0].function;
	TAP_OK(group_dump(d) == 0 && d->groups[0].rep == 0 &&
		       d->threads[1].group == d->threads[0].group,
	       "threads sharing frames group together");
	dump_compact(d);
	for (size_t i = 0; i < n0; i++) {
		const struct sw_frame *a = &before[i], *b = &t[0].frames[i];

		same = same && a->ip == b->ip && a->line == b->line &&
		       a->inlined == b->inlined && a->module == b->module &&
		       !strcmp(names[i], str(b->function)) &&
		       !strcmp(files[i], str(b->file));
		free(names[i]);
		free(files[i]);
	}
	TAP_OK(t[0].nframes == n0 && same && t[0].frames[0].function != fn0,
	       "compacting copies the representative's frames");
	TAP_OK(!t[1].frames && !t[1].nframes, "and drops the others'");
	sw_dump_free(d);
}

static void test_cost(void)
{
	enum { NT = 1000 };
	void *buf[32];
	int n = deep(14, buf, 32);
	struct sw_dump *d;
	struct sym *s;
	uint64_t t0, t1, t2;
	size_t frames = 0;

	TAP_OK(n > 10, "backtrace of %d frames", n);
	d = make_dump((const uint64_t *)buf, (size_t)n, 0);
	d->threads = realloc(d->threads, NT * sizeof(*d->threads));
	for (size_t i = 1; i < NT; i++) {
		d->threads[i] = d->threads[0];
		d->threads[i].tid = (pid_t)(i + 1);
		d->threads[i].ips = malloc((size_t)n * sizeof(uint64_t));
		memcpy(d->threads[i].ips, d->threads[0].ips,
		       (size_t)n * sizeof(uint64_t));
	}
	d->nthreads = NT;
	sym_new(NULL, NULL, &s);
	t0 = now_ns();
	TAP_OK(sym_dump(s, d, true) == 0, "cold dump of %d threads", NT);
	t1 = now_ns();
	TAP_OK(sym_dump(s, d, true) == 0, "warm dump of %d threads", NT);
	t2 = now_ns();
	for (size_t i = 0; i < NT; i++)
		frames += d->threads[i].nframes;
	TAP_NOTE("cold (CPU): %.2f ms for %d unique addresses (%.1f us each)",
		 (double)(t1 - t0) / 1e6, n, (double)(t1 - t0) / 1e3 / n);
	TAP_NOTE("warm (CPU): %.2f ms for %zu frames (%.0f ns per frame)",
		 (double)(t2 - t1) / 1e6, frames,
		 (double)(t2 - t1) / (double)frames);
	/* Speed is make bench's business; here only that it is cached. */
	TAP_OK(sym_cache_hits(s) >= frames,
	       "the warm dump came from the cache");
	sym_free(s);
	sw_dump_free(d);
}

/* ------------------------------------------- files that lie or abound */

static char tmpdir[] = "/tmp/sw-symtest-XXXXXX";

/* $BUILD/fixtures/stub.so, read whole into *len bytes (malloc'd). */
static unsigned char *read_stub(size_t *len)
{
	const char *b = getenv("BUILD");
	char path[4096];
	unsigned char *buf;
	FILE *f;

	snprintf(path, sizeof(path), "%s/fixtures/stub.so", b ? b : "build");
	f = fopen(path, "rb");
	if (!f)
		return NULL;
	buf = malloc(1 << 20);
	*len = buf ? fread(buf, 1, 1 << 20, f) : 0;
	fclose(f);
	return buf;
}

/* Writes len bytes to tmpdir/name; returns the path (static) or NULL. */
static const char *write_tmp(const char *name, const void *p, size_t len)
{
	static char path[4200];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", tmpdir, name);
	f = fopen(path, "wb");
	if (!f)
		return NULL;
	if (fwrite(p, 1, len, f) != len) {
		fclose(f);
		return NULL;
	}
	fclose(f);
	return path;
}

/*
 * A dump of one thread in a module of the given file at base: the ip is
 * inside the stub's POISONED (link-time 0x1000) when the file is a stub.
 */
static struct sw_dump *stub_dump(const char *path, uint64_t base,
				 const uint8_t *id, uint32_t idlen)
{
	struct sw_dump *d = dump_new();
	uint64_t ip = base + 0x1000;

	add_module(d, path, base, base + (17 << 20), base, id, idlen);
	d->nthreads = 1;
	d->threads = calloc(1, sizeof(*d->threads));
	d->threads[0].tid = 1;
	d->threads[0].flags = SW_TF_FIRST_EXACT;
	d->threads[0].nips = 1;
	d->threads[0].ips = malloc(sizeof(uint64_t));
	d->threads[0].ips[0] = ip;
	d->threads[0].group = -1;
	d->threads[0].unchanged_s = -1;
	return d;
}

/* The function of the first frame of a dump's first thread, symbolized. */
static const char *first_function(struct sym *s, struct sw_dump *d)
{
	if (sym_dump(s, d, true) || !d->threads[0].nframes)
		return NULL;
	return d->threads[0].frames[0].function;
}

/*
 * A file claiming this program's build-id is not this program: the
 * sessions are the files', whichever comes first, and each file's frames
 * are its own.
 */
static void test_claimed_build_id(void)
{
	static const char pattern[] = "SWSTUBSTUBSTUBSTUBST";
	unsigned char *stub, *at;
	const struct sw_module *self;
	struct sw_dump *real, *liar;
	const char *path, *fn;
	struct sym *s;
	size_t len = 0;
	int line, mi;
	uint64_t ip = known_caller(&line);

	real = make_dump(&ip, 1, 0);
	mi = dump_find_module(real, ip);
	stub = read_stub(&len);
	at = stub ? memmem(stub, len, pattern, 20) : NULL;
	TAP_OK(at && mi >= 0 && real->modules[mi].build_id_len == 20,
	       "the stub and this program's 20-byte build-id");
	if (!at || mi < 0 || real->modules[mi].build_id_len != 20)
		goto out;
	self = &real->modules[mi];
	memcpy(at, self->build_id, 20);
	path = write_tmp("liar.so", stub, len);
	liar = stub_dump(path, 0x7e0000000000ull, self->build_id, 20);

	/* The liar first: the old cache, keyed by build-id, kept its file. */
	sym_new(NULL, NULL, &s);
	fn = first_function(s, liar);
	TAP_OK(fn && !strcmp(fn, "POISONED"),
	       "the liar's own stack shows its own file (%s)", str(fn));
	fn = first_function(s, real);
	TAP_OK(fn && !strcmp(fn, "known_caller"),
	       "this program's stack shows its own symbols after the liar's "
	       "(%s)",
	       str(fn));
	TAP_OK(sym_sessions(s) == 2, "two files, two sessions (%zu)",
	       sym_sessions(s));
	sym_free(s);

	/* This program first: the liar still gets nothing of it. */
	sym_new(NULL, NULL, &s);
	fn = first_function(s, real);
	TAP_OK(fn && !strcmp(fn, "known_caller"), "this program first (%s)",
	       str(fn));
	fn = first_function(s, liar);
	TAP_OK(fn && !strcmp(fn, "POISONED"),
	       "then the liar: its own file, not this program (%s)", str(fn));
	fn = first_function(s, real);
	TAP_OK(fn && !strcmp(fn, "known_caller"), "and this program again (%s)",
	       str(fn));
	sym_free(s);
	sw_dump_free(liar);
out:
	free(stub);
	sw_dump_free(real);
}

/* Gives d one thread per module, at offset off into it. */
static void thread_per_module(struct sw_dump *d, uint64_t off)
{
	d->threads = calloc(d->nmodules, sizeof(*d->threads));
	d->nthreads = d->nmodules;
	for (size_t i = 0; i < d->nmodules; i++) {
		struct sw_thread *t = &d->threads[i];

		t->tid = (pid_t)(i + 1);
		t->flags = SW_TF_FIRST_EXACT;
		t->group = -1;
		t->unchanged_s = -1;
		t->nips = 1;
		t->ips = malloc(sizeof(uint64_t));
		t->ips[0] = d->modules[i].start + off;
	}
}

/*
 * Hundreds of files in one dump: junk that is no ELF is remembered apart
 * and never costs another module its session; real modules are kept
 * least-recently-used, at most 256, and the one pushed out comes back
 * right.
 */
static void test_many_files(void)
{
	enum { N = 300 };
	struct sw_dump *junk = dump_new(), *elves = dump_new(), *real;
	unsigned char *stub;
	uint64_t misses, ip;
	const char *fn;
	struct sym *s;
	size_t len = 0, poisoned = 0;
	int line;
	bool ok = true;

	ip = known_caller(&line);
	real = make_dump(&ip, 1, 0);
	stub = read_stub(&len);
	for (int i = 0; i < N && stub; i++) {
		uint64_t base = 0x100000000000ull + (uint64_t)i * (32 << 20);
		char name[32];
		const char *path;

		snprintf(name, sizeof(name), "junk%d", i);
		path = write_tmp(name, name, strlen(name));
		ok = ok && path;
		if (path)
			add_module(junk, path, base, base + 4096, base,
				   (const uint8_t *)"\1\2\3\4\5\6\7\10", 8);
		snprintf(name, sizeof(name), "elf%d.so", i);
		path = write_tmp(name, stub, len);
		ok = ok && path;
		if (path)
			add_module(elves, path, base, base + (17 << 20), base,
				   NULL, 0);
	}
	free(stub);
	TAP_OK(stub && ok, "%d junk files and %d ELF files", N, N);
	if (!stub || !ok)
		goto out;
	thread_per_module(junk, 16);
	thread_per_module(elves, 0x1000);

	sym_new(NULL, NULL, &s);
	fn = first_function(s, real);
	misses = sym_cache_misses(s);
	TAP_OK(fn && !strcmp(fn, "known_caller"), "this program (%s)", str(fn));
	TAP_OK(sym_dump(s, junk, true) == 0, "a dump of %d junk modules", N);
	fn = first_function(s, real);
	TAP_OK(fn && !strcmp(fn, "known_caller") &&
		       sym_cache_misses(s) == misses,
	       "this program's session survived the junk: no new lookup "
	       "(%s, %llu misses)",
	       str(fn), (unsigned long long)(sym_cache_misses(s) - misses));
	TAP_OK(sym_sessions(s) == 1 && sym_failed_files(s) <= 256,
	       "junk remembered apart, at most 256 (%zu sessions, %zu junk)",
	       sym_sessions(s), sym_failed_files(s));

	TAP_OK(sym_dump(s, elves, true) == 0, "a dump of %d ELF modules", N);
	for (size_t i = 0; i < elves->nthreads; i++)
		poisoned += elves->threads[i].nframes &&
			    elves->threads[i].frames[0].function &&
			    !strcmp(elves->threads[i].frames[0].function,
				    "POISONED");
	TAP_OK(poisoned == N, "each ELF module symbolized (%zu)", poisoned);
	fn = first_function(s, real);
	TAP_OK(fn && !strcmp(fn, "known_caller"),
	       "this program, pushed out, comes back right (%s)", str(fn));
	TAP_OK(sym_sessions(s) <= 257, "sessions bounded (%zu)",
	       sym_sessions(s));
	sym_free(s);
out:
	sw_dump_free(junk);
	sw_dump_free(elves);
	sw_dump_free(real);
}

int main(void)
{
	struct sym *s;

	TAP_OK(sym_new(NULL, NULL, &s) == 0, "sym_new");
	test_line(s);
	test_inline(s);
	test_names(s);
	test_cache(s);
	test_shared(s);
	test_loader_and_status(s);
	test_unknown_address(s);
	test_symbol_index(s);
	sym_free(s);
	sym_free(NULL);
	test_unreadable();
	test_many_ips();
	test_build_id_mismatch();
	if (mkdtemp(tmpdir)) {
		test_claimed_build_id();
		test_many_files();
		char cmd[sizeof(tmpdir) + 16];

		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
		if (system(cmd) != 0)
			TAP_NOTE("could not remove %s", tmpdir);
	} else {
		TAP_OK(false, "a temporary directory: %s", strerror(errno));
	}
	test_cost();
	return tap_done();
}
