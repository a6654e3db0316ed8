/*
 * unwind.c - resolves libunwind's local unwinder from a private copy
 * (unwind.h).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stddef.h>

#include "stackwatch.h"
#include "unwind.h"

struct unwind_api unwind;

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
	RESOLVE(set_caching_policy, unw_set_caching_policy);
	unwind.local_addr_space =
		resolve(h, NAME_OF(unw_local_addr_space), &missing);
	/* step last: it marks the table complete. */
	RESOLVE(step, unw_step);
	if (missing) {
		unwind.step = NULL;
		return SW_ENOTINIT;
	}
	return 0;
}
