/*
 * unwind.c - resolves libunwind's local unwinder from a private copy
 * (unwind.h).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <stddef.h>
#include <stdint.h>

#include "stackwatch.h"
#include "unwind.h"

struct unwind_api unwind;
uintptr_t unwind_text_lo, unwind_text_hi;

/* libunwind's names are macros (unw_step is _ULx86_64_step): spell them. */
#define NAME_OF(sym) NAME_STR(sym)
#define NAME_STR(sym) #sym

static const char *const sonames[] = { "libunwind.so.8", "libunwind.so" };

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

int unwind_load(void)
{
	void *h = NULL;
	int missing = 0;

	if (unwind.step)
		return 0;
	for (size_t i = 0; i < sizeof(sonames) / sizeof(sonames[0]) && !h; i++)
		h = dlopen(sonames[i], RTLD_NOW | RTLD_LOCAL);
	if (!h)
		return SW_ENOTINIT;
	RESOLVE(getcontext, unw_tdep_getcontext);
	RESOLVE(init_local, unw_init_local);
	RESOLVE(init_local2, unw_init_local2);
	RESOLVE(get_reg, unw_get_reg);
	RESOLVE(get_proc_info, unw_get_proc_info);
	RESOLVE(set_caching_policy, unw_set_caching_policy);
	unwind.local_addr_space =
		resolve(h, NAME_OF(unw_local_addr_space), &missing);
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
