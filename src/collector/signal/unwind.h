/*
 * unwind.h - libunwind, loaded privately, unwinding through an address
 * space of our own.
 *
 * Linked normally, libunwind.so would sit in the program's global symbol
 * scope, where its _Unwind_* functions replace libgcc's as the C++
 * exception unwinder of every program the agent is preloaded into (and
 * its backtrace() replaces glibc's). So we load it with
 * dlopen(RTLD_LOCAL) and call the few functions we need through pointers
 * resolved once, before any signal is sent.
 *
 * We use libunwind's generic ("remote") unwinder on our own process, with
 * accessors of our own, never its local address space: the local one
 * checks doubtful addresses by writing them into a pipe it keeps open
 * (file descriptors the program may have closed and reused for its own
 * files) and reads any other address blindly. Ours reads only memory
 * known to be mapped (unwind_ctx below) and never touches a descriptor;
 * a read it refuses ends the stack (SW_TF_CUT).
 */
#ifndef SW_UNWIND_H
#define SW_UNWIND_H

#include <libunwind.h>
#include <stdint.h>
#include <ucontext.h>

struct unwind_api {
	int (*init_remote)(unw_cursor_t *, unw_addr_space_t, void *);
	int (*step)(unw_cursor_t *);
	int (*get_reg)(unw_cursor_t *, unw_regnum_t, unw_word_t *);
	int (*get_proc_info)(unw_cursor_t *, unw_proc_info_t *);
	int (*set_caching_policy)(unw_addr_space_t, unw_caching_policy_t);
	unw_addr_space_t (*create_addr_space)(unw_accessors_t *, int);
	int (*search_table)(unw_addr_space_t, unw_word_t, unw_dyn_info_t *,
			    unw_proc_info_t *, int, void *);
	unw_addr_space_t as; /* ours */
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

#define UNWIND_SEGS 8

/*
 * One unwind: the registers it starts from and the memory it may read.
 * Reads are allowed in [stack_lo, stack_hi) (the thread's stack, or a
 * scratch area), in the page of the interrupted pc, in any mapping of the
 * stack map (stackmap.h) and in the loaded segments of the modules that
 * dl_iterate_phdr lists (in the handler: the dumper's snapshot, held
 * against dlclose). Nothing else is read; cut says a read was refused.
 */
struct unwind_ctx {
	const ucontext_t *uc;
	uint64_t stack_lo, stack_hi;
	uint64_t pc_page;
	uint64_t seg_lo[UNWIND_SEGS], seg_hi[UNWIND_SEGS]; /* last module */
	unsigned nseg;
	int cut;    /* a read was refused */
	int noinfo; /* some pc had no unwind table (frame chain guessed) */
	/* Registers that stand for uc's (bit r: libunwind's register r),
	 * once a walk starts again past a trampoline (unwind_trampoline()). */
	uint32_t over_mask;
	uint64_t over[UNW_X86_64_RIP + 1];
};

/*
 * Starts cursor c at uc, whose pc is where the thread was interrupted
 * (exact: no call to back up over), reading memory as ctx allows; the
 * caller sets ctx->stack_lo/hi first (zeros: none). 0 or a negative
 * libunwind error. Async-signal-safe.
 */
int unwind_init(unw_cursor_t *c, struct unwind_ctx *ctx, const ucontext_t *uc);

/*
 * Whether the frame at c is one of CPython's perf trampolines (python
 * 3.12+ -X perf: a copy of "sub $8,%rsp; call *%rcx; add $8,%rsp; ret"
 * made at run time, with neither unwind table nor frame pointer, where
 * libunwind's frame-chain guess goes astray): its pc, a return address,
 * in no module, the word 8 bytes above its sp a return address into a
 * module's code just after a call. Then c starts again at that caller
 * (sp + 16, the callee-saved registers as they were; rbp the word at sp
 * where rbp is sp: a build that made it push one) and it returns 1;
 * else 0, c untouched. Async-signal-safe.
 */
int unwind_trampoline(unw_cursor_t *c, struct unwind_ctx *ctx);

/*
 * Loads libunwind and resolves every function. Call once, outside signal
 * context (it takes the loader's lock). Returns 0, or SW_ENOTINIT when
 * libunwind is missing. Not thread-safe: the caller serializes.
 */
int unwind_load(void);

#endif /* SW_UNWIND_H */
