/*
 * loader_guard.c - counts, per thread, how deep it is inside the dynamic
 * loader (loader_guard.h).
 *
 * We define dlopen, dlmopen, dlclose and dl_iterate_phdr ourselves; being
 * loaded before libc (LD_PRELOAD, or linked into the program) makes ours
 * the ones every library calls. Each raises the thread's depth, calls the
 * real function and lowers it again. The counter is initial-exec TLS, so
 * the handler reads it without any allocation or lock.
 *
 * None of it is instrumented by ThreadSanitizer: its runtime calls
 * dl_iterate_phdr (ours, then) while it initializes, before any
 * instrumented code may run, and the instrumentation crashed every
 * program of a `make tsan` build at start-up.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <stdatomic.h>
#include <stddef.h>

#include "loader_guard.h"

__thread volatile int sw_loader_depth
	__attribute__((tls_model("initial-exec")));

typedef void *(*dlopen_fn)(const char *, int);
typedef void *(*dlmopen_fn)(Lmid_t, const char *, int);
typedef int (*dlclose_fn)(void *);
typedef int (*iterate_fn)(int (*)(struct dl_phdr_info *, size_t, void *),
			  void *);

#define NOT_TSAN __attribute__((no_sanitize_thread))

static _Atomic(dlopen_fn) real_dlopen;
static _Atomic(dlmopen_fn) real_dlmopen;
static _Atomic(dlclose_fn) real_dlclose;
static _Atomic(iterate_fn) real_iterate;

/* dlsym returns void *; the cast to a function pointer goes through here. */
NOT_TSAN static void *next_symbol(const char *name)
{
	return dlsym(RTLD_NEXT, name);
}

#define RESOLVE(var, type, name)                                           \
	do {                                                               \
		if (!atomic_load_explicit(&(var), memory_order_acquire)) { \
			union {                                            \
				void *p;                                   \
				type f;                                    \
			} u = { .p = next_symbol(name) };                  \
			atomic_store_explicit(&(var), u.f,                 \
					      memory_order_release);       \
		}                                                          \
	} while (0)

NOT_TSAN void loader_guard_init(void)
{
	RESOLVE(real_dlopen, dlopen_fn, "dlopen");
	RESOLVE(real_dlmopen, dlmopen_fn, "dlmopen");
	RESOLVE(real_dlclose, dlclose_fn, "dlclose");
	RESOLVE(real_iterate, iterate_fn, "dl_iterate_phdr");
}

NOT_TSAN void *dlopen(const char *file, int mode)
{
	void *h = NULL;
	dlopen_fn f;

	RESOLVE(real_dlopen, dlopen_fn, "dlopen");
	f = atomic_load_explicit(&real_dlopen, memory_order_acquire);
	sw_loader_depth++;
	if (f)
		h = f(file, mode);
	sw_loader_depth--;
	return h;
}

NOT_TSAN void *dlmopen(Lmid_t lmid, const char *file, int mode)
{
	void *h = NULL;
	dlmopen_fn f;

	RESOLVE(real_dlmopen, dlmopen_fn, "dlmopen");
	f = atomic_load_explicit(&real_dlmopen, memory_order_acquire);
	sw_loader_depth++;
	if (f)
		h = f(lmid, file, mode);
	sw_loader_depth--;
	return h;
}

NOT_TSAN int dlclose(void *handle)
{
	int rc = -1;
	dlclose_fn f;

	RESOLVE(real_dlclose, dlclose_fn, "dlclose");
	f = atomic_load_explicit(&real_dlclose, memory_order_acquire);
	sw_loader_depth++;
	if (f)
		rc = f(handle);
	sw_loader_depth--;
	return rc;
}

NOT_TSAN int dl_iterate_phdr(int (*cb)(struct dl_phdr_info *, size_t, void *),
			     void *data)
{
	int rc = 0;
	iterate_fn f;

	RESOLVE(real_iterate, iterate_fn, "dl_iterate_phdr");
	f = atomic_load_explicit(&real_iterate, memory_order_acquire);
	sw_loader_depth++;
	if (f)
		rc = f(cb, data);
	sw_loader_depth--;
	return rc;
}
