/*
 * unwind.c - libunwind's generic unwinder, loaded privately, with an
 * address space whose accessors read only known memory (unwind.h).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "stackwatch.h"
#include "loader_guard.h"
#include "stackmap.h"
#include "unwind.h"

#include "model/callsite.h"

struct unwind_api unwind;
uintptr_t unwind_text_lo, unwind_text_hi;

/* libunwind's names are macros (unw_step is _Ux86_64_step): spell them. */
#define NAME_OF(sym) NAME_STR(sym)
#define NAME_STR(sym) #sym

static const char soname[] = "libunwind-x86_64.so.8";

#define PAGE_MASK ((uint64_t)4095)

/* libunwind's register numbers, as indices into the kernel's gregs. */
static const int8_t greg_of[UNW_X86_64_RIP + 1] = {
	[UNW_X86_64_RAX] = REG_RAX, [UNW_X86_64_RDX] = REG_RDX,
	[UNW_X86_64_RCX] = REG_RCX, [UNW_X86_64_RBX] = REG_RBX,
	[UNW_X86_64_RSI] = REG_RSI, [UNW_X86_64_RDI] = REG_RDI,
	[UNW_X86_64_RBP] = REG_RBP, [UNW_X86_64_RSP] = REG_RSP,
	[UNW_X86_64_R8] = REG_R8,   [UNW_X86_64_R9] = REG_R9,
	[UNW_X86_64_R10] = REG_R10, [UNW_X86_64_R11] = REG_R11,
	[UNW_X86_64_R12] = REG_R12, [UNW_X86_64_R13] = REG_R13,
	[UNW_X86_64_R14] = REG_R14, [UNW_X86_64_R15] = REG_R15,
	[UNW_X86_64_RIP] = REG_RIP,
};

/* What a search of the module list is after, and what it found. */
struct find {
	uint64_t addr;
	uint64_t len;
	int want_exec; /* a code segment (and the eh_frame_hdr) */
	struct unwind_ctx *ctx;
	uint64_t text_lo, text_hi;
	uint64_t hdr; /* PT_GNU_EH_FRAME, or 0 */
};

/*
 * dl_iterate_phdr's callback: the module holding [addr, addr + len) in a
 * readable (want_exec: executable) loaded segment. Notes its readable
 * segments in the context for the reads that follow.
 */
static int find_module(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct find *f = arg;
	const ElfW(Phdr) *hit = NULL;
	uint64_t hdr = 0;

	(void)size;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		uint64_t lo = info->dlpi_addr + ph->p_vaddr;

		if (ph->p_type == PT_GNU_EH_FRAME)
			hdr = lo;
		if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_R))
			continue;
		if (f->want_exec && !(ph->p_flags & PF_X))
			continue;
		if (f->addr >= lo && f->addr - lo < ph->p_memsz &&
		    ph->p_memsz - (f->addr - lo) >= f->len)
			hit = ph;
	}
	if (!hit)
		return 0;
	f->text_lo = info->dlpi_addr + hit->p_vaddr;
	f->text_hi = f->text_lo + hit->p_memsz;
	f->hdr = hdr;
	f->ctx->nseg = 0;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		unsigned n = f->ctx->nseg;

		if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_R) ||
		    n == UNWIND_SEGS)
			continue;
		f->ctx->seg_lo[n] = info->dlpi_addr + ph->p_vaddr;
		f->ctx->seg_hi[n] = f->ctx->seg_lo[n] + ph->p_memsz;
		f->ctx->nseg = n + 1;
	}
	return 1;
}

/*
 * A search for addr. Field by field, not memset: at -O1 the compiler
 * keeps memset a call, and this runs in the handler (no PLT slot there,
 * tests/integration/handler_calls.sh).
 */
static void find_init(struct find *f, uint64_t addr, uint64_t len,
		      int want_exec, struct unwind_ctx *ctx)
{
	f->addr = addr;
	f->len = len;
	f->want_exec = want_exec;
	f->ctx = ctx;
	f->text_lo = f->text_hi = 0;
	f->hdr = 0;
}

static int within(uint64_t addr, uint64_t len, uint64_t lo, uint64_t hi)
{
	return addr >= lo && addr < hi && hi - addr >= len;
}

/* Whether [addr, addr + len) is known to be mapped and readable. */
static int readable(struct unwind_ctx *ctx, uint64_t addr, uint64_t len)
{
	uint64_t lo, hi;
	struct find f;

	if (within(addr, len, ctx->stack_lo, ctx->stack_hi) ||
	    within(addr, len, ctx->pc_page, ctx->pc_page + PAGE_MASK + 1))
		return 1;
	for (unsigned i = 0; i < ctx->nseg; i++)
		if (within(addr, len, ctx->seg_lo[i], ctx->seg_hi[i]))
			return 1;
	if (stackmap_bounds(addr, &lo, &hi) == 0 && within(addr, len, lo, hi))
		return 1;
	find_init(&f, addr, len, 0, ctx);
	return loader_modules(find_module, &f) > 0;
}

/*
 * Reads a word of another thread's stack, or of a module, while that
 * thread may run: a race by nature, as for any sampling profiler, and
 * harmless (a stale word ends a stack early at worst). ThreadSanitizer is
 * told not to watch this one load. The address may be unaligned (code).
 */
#if defined(__SANITIZE_THREAD__)
#define NOT_TSAN __attribute__((no_sanitize_thread))
#else
#define NOT_TSAN
#endif

/* A word at any address: libunwind reads code bytes one word at a time. */
typedef unw_word_t unaligned_word __attribute__((aligned(1)));

NOT_TSAN static unw_word_t load_word(unw_word_t addr)
{
	return *(const volatile unaligned_word *)(uintptr_t)addr;
}

static int access_mem(unw_addr_space_t as, unw_word_t addr, unw_word_t *val,
		      int write, void *arg)
{
	struct unwind_ctx *ctx = arg;

	(void)as;
	if (write)
		return -UNW_EINVAL;
	if (!readable(ctx, addr, sizeof(*val))) {
		ctx->cut = 1;
		return -UNW_EINVAL;
	}
	*val = load_word(addr);
	return 0;
}

static int access_reg(unw_addr_space_t as, unw_regnum_t reg, unw_word_t *val,
		      int write, void *arg)
{
	const struct unwind_ctx *ctx = arg;

	(void)as;
	if (write || reg < 0 || reg > UNW_X86_64_RIP)
		return -UNW_EBADREG;
	if (ctx->over_mask & (1u << reg))
		*val = (unw_word_t)ctx->over[reg];
	else
		*val = (unw_word_t)ctx->uc->uc_mcontext.gregs[greg_of[reg]];
	return 0;
}

static int access_fpreg(unw_addr_space_t as, unw_regnum_t reg, unw_fpreg_t *val,
			int write, void *arg)
{
	(void)as;
	(void)reg;
	(void)val;
	(void)write;
	(void)arg;
	return -UNW_EBADREG;
}

/* Reads a little-endian 4-byte value of the module at p (mapped). */
static uint32_t u32_at(uint64_t p)
{
	uint32_t v;

	memcpy(&v, (const void *)(uintptr_t)p, sizeof(v));
	return v;
}

/*
 * The unwind table of the module holding ip: its .eh_frame_hdr binary
 * search table, the only layout compilers emit (datarel sdata4 entries;
 * any other and the frame is left to the frame chain).
 */
static int find_proc_info(unw_addr_space_t as, unw_word_t ip,
			  unw_proc_info_t *pi, int need_unwind_info, void *arg)
{
	struct unwind_ctx *ctx = arg;
	unw_dyn_info_t di;
	struct find f;
	const uint8_t *h;
	uint64_t p, count;
	int ret;

	find_init(&f, ip, 1, 1, ctx);
	ctx->noinfo = 1; /* until found */
	if (loader_modules(find_module, &f) <= 0 || !f.hdr)
		return -UNW_ENOINFO;
	/* version 1; eh_frame_ptr, fde_count and table encodings */
	h = (const uint8_t *)(uintptr_t)f.hdr;
	if (!readable(ctx, f.hdr, 16) || h[0] != 1 || h[3] != 0x3b)
		return -UNW_ENOINFO;
	p = f.hdr + 4;
	switch (h[1] & 0x0f) { /* eh_frame_ptr: only skipped */
	case 0x03:	       /* udata4 */
	case 0x0b:	       /* sdata4 */
		p += 4;
		break;
	case 0x04: /* udata8 */
	case 0x0c: /* sdata8 */
		p += 8;
		break;
	default:
		return -UNW_ENOINFO;
	}
	if (h[2] != 0x03 && h[2] != 0x0b) /* fde_count: (u|s)data4, absolute */
		return -UNW_ENOINFO;
	count = u32_at(p);
	p += 4;
	if (!count || !readable(ctx, p, count * 8))
		return -UNW_ENOINFO;
	/* Every field the search reads; no memset (find_init). */
	di.next = di.prev = NULL;
	di.gp = 0;
	di.pad = 0;
	di.load_offset = 0;
	di.u.rti.name_ptr = 0;
	di.format = UNW_INFO_FORMAT_REMOTE_TABLE;
	di.start_ip = f.text_lo;
	di.end_ip = f.text_hi;
	di.u.rti.segbase = f.hdr;
	di.u.rti.table_data = p;
	di.u.rti.table_len = count * 8 / sizeof(unw_word_t);
	ret = unwind.search_table(as, ip, &di, pi, need_unwind_info, arg);
	if (ret >= 0)
		ctx->noinfo = 0;
	return ret;
}

/* libunwind frees what the table search allocated itself. */
static void put_unwind_info(unw_addr_space_t as, unw_proc_info_t *pi, void *arg)
{
	(void)as;
	(void)pi;
	(void)arg;
}

static int get_dyn_info_list_addr(unw_addr_space_t as, unw_word_t *addr,
				  void *arg)
{
	(void)as;
	(void)addr;
	(void)arg;
	return -UNW_ENOINFO;
}

static int resume(unw_addr_space_t as, unw_cursor_t *c, void *arg)
{
	(void)as;
	(void)c;
	(void)arg;
	return -UNW_EINVAL;
}

static int get_proc_name(unw_addr_space_t as, unw_word_t addr, char *buf,
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

int unwind_init(unw_cursor_t *c, struct unwind_ctx *ctx, const ucontext_t *uc)
{
	ctx->uc = uc;
	ctx->pc_page = (uint64_t)uc->uc_mcontext.gregs[REG_RIP] & ~PAGE_MASK;
	ctx->nseg = 0;
	ctx->cut = 0;
	ctx->noinfo = 0;
	ctx->over_mask = 0;
	return unwind.init_remote(c, unwind.as, ctx);
}

/* Whether addr lies in a segment of the module libunwind looked at last. */
static int in_last_module(const struct unwind_ctx *ctx, uint64_t addr)
{
	for (unsigned i = 0; i < ctx->nseg; i++)
		if (addr >= ctx->seg_lo[i] && addr < ctx->seg_hi[i])
			return 1;
	return 0;
}

int unwind_trampoline(unw_cursor_t *c, struct unwind_ctx *ctx)
{
	/* Callee-saved: as the trampoline leaves them for its caller. */
	static const int kept[] = { UNW_X86_64_RBX, UNW_X86_64_RBP,
				    UNW_X86_64_R12, UNW_X86_64_R13,
				    UNW_X86_64_R14, UNW_X86_64_R15 };
	uint8_t code[CALLSITE_LOOKBACK];
	unw_word_t ip, sp, ra, v;
	uint32_t mask = 0;
	struct find f;

	if (unwind.get_reg(c, UNW_REG_IP, &ip) < 0 || ip < 2 ||
	    in_last_module(ctx, ip - 1))
		return 0;
	/* Only now the module list: most frames are in the last module. */
	find_init(&f, ip - 1, 1, 0, ctx);
	if (loader_modules(find_module, &f) > 0)
		return 0;
	if (unwind.get_reg(c, UNW_REG_SP, &sp) < 0 || sp > UINT64_MAX - 16 ||
	    !readable(ctx, sp + 8, sizeof(ra)))
		return 0;
	ra = load_word(sp + 8);
	if (ra < CALLSITE_LOOKBACK)
		return 0;
	find_init(&f, ra - CALLSITE_LOOKBACK, CALLSITE_LOOKBACK, 1, ctx);
	if (loader_modules(find_module, &f) <= 0)
		return 0;
	for (unsigned i = 0; i < CALLSITE_LOOKBACK; i++)
		code[i] = *(
			const volatile uint8_t *)(uintptr_t)(ra -
							     CALLSITE_LOOKBACK +
							     i);
	if (!callsite_ends_call(code, CALLSITE_LOOKBACK))
		return 0;
	for (unsigned i = 0; i < sizeof(kept) / sizeof(kept[0]); i++)
		if (unwind.get_reg(c, kept[i], &v) == 0) {
			ctx->over[kept[i]] = v;
			mask |= 1u << kept[i];
		}
	/* A build that gives it a frame pointer (push %rbp; mov %rsp,%rbp):
	 * rbp is its sp, and the caller's rbp is what it pushed. */
	if ((mask & 1u << UNW_X86_64_RBP) && ctx->over[UNW_X86_64_RBP] == sp) {
		if (readable(ctx, sp, sizeof(v)))
			ctx->over[UNW_X86_64_RBP] = load_word(sp);
		else
			mask &= ~(1u << UNW_X86_64_RBP);
	}
	ctx->over[UNW_X86_64_RSP] = sp + 16;
	ctx->over[UNW_X86_64_RIP] = ra;
	ctx->over_mask = mask | 1u << UNW_X86_64_RSP | 1u << UNW_X86_64_RIP;
	ctx->pc_page = ra & ~PAGE_MASK;
	return unwind.init_remote(c, unwind.as, ctx) == 0;
}

/* dlsym returns void *; a function pointer is assigned through this. */
static void *resolve(void *h, const char *name, int *missing)
{
	void *p = dlsym(h, name);

	if (!p)
		(*missing)++;
	return p;
}

#define RESOLVE(field, sym)                                    \
	do {                                                   \
		void *p_ = resolve(h, NAME_OF(sym), &missing); \
		*(void **)&unwind.field = p_;                  \
	} while (0)

/* Finds the loaded object whose base is arg's and notes its code range. */
static int note_range(struct dl_phdr_info *info, size_t size, void *arg)
{
	uintptr_t base = *(uintptr_t *)arg;

	(void)size;
	if ((uintptr_t)info->dlpi_addr != base)
		return 0;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		uintptr_t lo = base + ph->p_vaddr, hi = lo + ph->p_memsz;

		if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X))
			continue;
		if (!unwind_text_lo || lo < unwind_text_lo)
			unwind_text_lo = lo;
		if (hi > unwind_text_hi)
			unwind_text_hi = hi;
	}
	return 1;
}

/*
 * A copy of the library at path of our own, loaded from a memfd: the
 * program loaded libunwind itself, lazily bound, and the handler must
 * never run the lazy binder (it saves every vector register on the
 * interrupted stack and takes the loader's lock). Loaded with RTLD_NOW
 * under another name, every slot of the copy is bound now. NULL on any
 * failure.
 */
static void *load_copy(const char *path)
{
	char buf[64 * 1024], name[64];
	void *h = NULL;
	int in, out;
	ssize_t n;

	in = open(path, O_RDONLY | O_CLOEXEC);
	if (in < 0)
		return NULL;
	out = memfd_create("stackwatch-libunwind", MFD_CLOEXEC);
	if (out < 0)
		goto out_in;
	while ((n = read(in, buf, sizeof(buf))) > 0)
		if (write(out, buf, (size_t)n) != n)
			goto out;
	if (n == 0) {
		/* thread-self: the agent's thread has a table of its own */
		snprintf(name, sizeof(name), "/proc/thread-self/fd/%d", out);
		h = dlopen(name, RTLD_NOW | RTLD_LOCAL);
	}
out:
	close(out);
out_in:
	close(in);
	return h;
}

/* Our own, fully bound handle of libunwind's generic unwinder. */
static void *open_library(void)
{
	void *h = dlopen(soname, RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
	struct link_map *lm = NULL;
	void *copy = NULL;

	if (!h)
		return dlopen(soname, RTLD_NOW | RTLD_LOCAL);
	if (dlinfo(h, RTLD_DI_LINKMAP, &lm) == 0 && lm && lm->l_name &&
	    lm->l_name[0] == '/')
		copy = load_copy(lm->l_name);
	if (!copy)
		return h; /* no better: bound lazily after all */
	dlclose(h);
	return copy;
}

int unwind_load(void)
{
	static unw_accessors_t acc = {
		.find_proc_info = find_proc_info,
		.put_unwind_info = put_unwind_info,
		.get_dyn_info_list_addr = get_dyn_info_list_addr,
		.access_mem = access_mem,
		.access_reg = access_reg,
		.access_fpreg = access_fpreg,
		.resume = resume,
		.get_proc_name = get_proc_name,
	};
	void *h;
	int missing = 0;

	if (unwind.step)
		return 0;
	h = open_library();
	if (!h)
		return SW_ENOTINIT;
	RESOLVE(init_remote, unw_init_remote);
	RESOLVE(get_reg, unw_get_reg);
	RESOLVE(get_proc_info, unw_get_proc_info);
	RESOLVE(set_caching_policy, unw_set_caching_policy);
	RESOLVE(create_addr_space, unw_create_addr_space);
	*(void **)&unwind.search_table =
		resolve(h, "_Ux86_64_dwarf_search_unwind_table", &missing);
	if (!missing)
		unwind.as = unwind.create_addr_space(&acc, 0);
	/*
	 * No cache: the global one takes a lock with every signal blocked,
	 * two sigprocmask calls per frame.
	 */
	if (!unwind.as ||
	    unwind.set_caching_policy(unwind.as, UNW_CACHE_NONE) < 0)
		missing++;
	/* step last: it marks the table complete. */
	RESOLVE(step, unw_step);
	if (missing) {
		unwind.step = NULL;
		return SW_ENOTINIT;
	}
	{
		Dl_info info;

		if (dladdr(*(void **)&unwind.step, &info) && info.dli_fbase) {
			uintptr_t base = (uintptr_t)info.dli_fbase;

			/* dli_fbase is the mapping's start; the bias is what
			 * dl_iterate_phdr reports for a shared object whose
			 * first segment is at 0, as libunwind's is. */
			dl_iterate_phdr(note_range, &base);
		}
	}
	return 0;
}
