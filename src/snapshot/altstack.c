/*
 * altstack.c - where a stack goes on when a signal handler runs on an
 * alternate signal stack (snapshot.h, snap_more_next()).
 *
 * A handler installed with SA_ONSTACK runs on the stack the thread gave
 * sigaltstack(); the frames it interrupted stay on the thread's own
 * stack, in another mapping. A copy that starts at sp and ends with sp's
 * mapping therefore holds the handler's frames only. The kernel's signal
 * frame, near the top of the alternate stack, says where the rest is:
 * its ucontext holds the interrupted registers and the alternate stack's
 * own bounds. This file finds that frame in a copy; snapshot.c copies
 * the region it points to.
 */
#define _GNU_SOURCE
#include "snapshot.h"

#include <signal.h>
#include <stddef.h>
#include <string.h>
#include <ucontext.h>

#if defined(__x86_64__)
#define UC_FLAGS_KNOWN 0x7ull /* every uc_flags bit the kernel sets */
#define UC_SIGCONTEXT_SS 0x2ull
#define USER_CS 0x33u	   /* the code segment of 64-bit user code */
#define ALTSTACK_MIN 2048u /* MINSIGSTKSZ */
#define ALTSTACK_MAX (1ull << 30)
#ifndef SS_AUTODISARM
#define SS_AUTODISARM (1u << 31) /* linux/signal.h */
#endif

static uint64_t word(const uint8_t *p, size_t off)
{
	uint64_t v;

	memcpy(&v, p + off, sizeof(v));
	return v;
}

#define GREG(r) (offsetof(ucontext_t, uc_mcontext.gregs) + (r)*8u)

/*
 * Whether uc (in the copy) is the ucontext of a kernel signal frame
 * delivered on an alternate stack that holds sp, interrupting code that
 * ran outside it; *next gets the interrupted sp. Every field the kernel
 * fills is checked, so that stack contents that merely look alike are
 * not taken for a frame.
 */
static bool is_altstack_frame(const uint8_t *uc, uint64_t pretcode, uint64_t sp,
			      uint64_t *next, uint64_t *end)
{
	uint64_t flags = word(uc, offsetof(ucontext_t, uc_flags));
	uint64_t link = word(uc, offsetof(ucontext_t, uc_link));
	uint64_t ss_sp = word(uc, offsetof(ucontext_t, uc_stack.ss_sp));
	uint64_t ss_size = word(uc, offsetof(ucontext_t, uc_stack.ss_size));
	uint32_t ss_flags;
	uint64_t rsp, rip, segs, fpstate;

	if ((flags & ~UC_FLAGS_KNOWN) || !(flags & UC_SIGCONTEXT_SS) || link ||
	    !pretcode || ss_size < ALTSTACK_MIN || ss_size > ALTSTACK_MAX ||
	    sp < ss_sp || sp - ss_sp >= ss_size)
		return false;
	memcpy(&ss_flags, uc + offsetof(ucontext_t, uc_stack.ss_flags),
	       sizeof(ss_flags));
	/* SS_ONSTACK: it interrupted the alternate stack itself. */
	if (ss_flags & ~(uint32_t)SS_AUTODISARM)
		return false;
	rsp = word(uc, GREG(REG_RSP));
	rip = word(uc, GREG(REG_RIP));
	segs = word(uc, GREG(REG_CSGSFS));
	fpstate = word(uc, offsetof(ucontext_t, uc_mcontext.fpregs));
	if ((segs & 0xffff) != USER_CS || !rip || !rsp ||
	    (rsp >= ss_sp && rsp - ss_sp < ss_size) ||
	    (fpstate && (fpstate < ss_sp || fpstate - ss_sp >= ss_size)))
		return false;
	*next = rsp;
	*end = ss_sp + ss_size;
	return true;
}

uint64_t snap_more_next(const uint8_t *mem, uint64_t at, uint32_t len,
			uint64_t sp, uint64_t *frame, uint64_t *end)
{
	size_t need = SNAP_SIGFRAME_LEN;
	uint64_t next, top;

	if (!mem || len < need)
		return 0;
	/*
	 * From the top down: the first signal delivered on the alternate
	 * stack has its frame at the top, and it is the one that left the
	 * thread's own stack (those nested in it interrupted the handler).
	 * pretcode, the handler's return address, comes just before it.
	 */
	for (size_t off = (len - need) & ~(size_t)7;; off -= 8) {
		if (is_altstack_frame(mem + off + 8, word(mem, off), sp, &next,
				      &top) &&
		    (next < at || next - at >= len)) {
			if (frame)
				*frame = at + off;
			if (end)
				*end = top;
			return next;
		}
		if (off < 8)
			break;
	}
	return 0;
}
#else
uint64_t snap_more_next(const uint8_t *mem, uint64_t at, uint32_t len,
			uint64_t sp, uint64_t *frame, uint64_t *end)
{
	(void)end;
	(void)mem;
	(void)at;
	(void)len;
	(void)sp;
	(void)frame;
	return 0;
}
#endif

#if defined(__x86_64__)
_Static_assert(SNAP_SIGFRAME_LEN >=
		       8 + offsetof(ucontext_t, uc_mcontext.fpregs) + 8,
	       "the signal frame's fields read");
#endif
