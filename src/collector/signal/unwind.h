/*
 * unwind.h - libunwind, loaded privately.
 *
 * Linked normally, libunwind.so would sit in the program's global symbol
 * scope, where its _Unwind_* functions replace libgcc's as the C++
 * exception unwinder of every program the agent is preloaded into (and
 * its backtrace() replaces glibc's). So we load it with
 * dlopen(RTLD_LOCAL) and call the few functions we need through pointers
 * resolved once, before any signal is sent.
 */
#ifndef SW_UNWIND_H
#define SW_UNWIND_H

#define UNW_LOCAL_ONLY
#include <libunwind.h>
#include <stdint.h>

struct unwind_api {
	int (*getcontext)(unw_context_t *);
	int (*init_local)(unw_cursor_t *, unw_context_t *);
	int (*init_local2)(unw_cursor_t *, unw_context_t *, int);
	int (*step)(unw_cursor_t *);
	int (*get_reg)(unw_cursor_t *, unw_regnum_t, unw_word_t *);
	int (*get_proc_info)(unw_cursor_t *, unw_proc_info_t *);
	int (*set_caching_policy)(unw_addr_space_t, unw_caching_policy_t);
	unw_addr_space_t *local_addr_space;
};

/* Filled by unwind_load(); read-only afterwards. */
extern struct unwind_api unwind;

/*
 * libunwind's code, [lo, hi): its own calls to sigprocmask (masking every
 * signal around its locks) must keep our signal blocked too, or our
 * handler could interrupt an application thread that holds one of those
 * locks (an application using the same libunwind) and wait on it forever.
 */
extern uintptr_t unwind_text_lo, unwind_text_hi;

/*
 * Loads libunwind and resolves every function. Call once, outside signal
 * context (it takes the loader's lock). Returns 0, or SW_ENOTINIT when
 * libunwind is missing. Not thread-safe: the caller serializes.
 */
int unwind_load(void);

#endif /* SW_UNWIND_H */
