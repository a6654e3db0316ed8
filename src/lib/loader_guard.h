/*
 * loader_guard.h - knows when a thread is inside the dynamic loader.
 *
 * libunwind looks up unwind tables through dl_iterate_phdr, which takes
 * the loader's lock; a thread interrupted while it holds that lock (inside
 * dlopen, dlclose or dl_iterate_phdr) would deadlock unwinding itself. We
 * interpose those three functions and count their depth per thread in
 * initial-exec TLS; the handler reads the count and, when nonzero, records
 * a placeholder instead of unwinding.
 *
 * The counter is an exported symbol, so when both the agent and the
 * library (or a program linking it statically) are loaded, every copy of
 * the interposers and of the handler binds to the first definition and
 * they all count on one variable.
 */
#ifndef SW_LOADER_GUARD_H
#define SW_LOADER_GUARD_H

extern __thread volatile int sw_loader_depth
	__attribute__((tls_model("initial-exec")));

/* Resolves the real functions. Idempotent; call before any signal. */
void loader_guard_init(void);

#endif /* SW_LOADER_GUARD_H */
