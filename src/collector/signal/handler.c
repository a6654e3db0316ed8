/*
 * handler.c - the signal handler that unwinds a thread into a slot, and its
 * installation on a free real-time signal.
 *
 * Everything reachable from handler() is async-signal-safe: atomics, raw
 * system calls, the vDSO clock and libunwind's local unwinder (whose global
 * cache lock is taken with every signal blocked, so a thread holding it is
 * never interrupted by us). The one libunwind hazard left is the dynamic
 * loader's lock, which loader_guard.c keeps out of the handler: a thread
 * inside the loader is not unwound, and the others find modules in a
 * snapshot instead of under the lock. The other hazard is stack:
 * the handler unwinds only with HANDLER_STACK_NEED bytes left below it
 * (stackmap.c), and a signal of ours that arrives while the handler is
 * still on the stack is put back (defer()), so frames never pile up.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdbool.h>
#include <linux/futex.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "stackwatch.h"
#include "framecache.h"
#include "futex.h"
#include "handler.h"
#include "loader_guard.h"
#include "sigmask.h"
#include "signo.h"
#include "stackmap.h"
#include "sys.h"
#include "unwind.h"

static pthread_once_t early_once = PTHREAD_ONCE_INIT;
static pthread_once_t install_once = PTHREAD_ONCE_INIT;
static pthread_once_t unwind_once = PTHREAD_ONCE_INIT;
static int early_result;   /* the signal, or a negative error */
static int install_result; /* the same, once primed for dumps */

/* What the handler and the interposers call through pointers: a few
 * dlsym() lookups, once, outside signal context. */
static void resolve_calls(void)
{
	const char *env = getenv("STACKWATCH_UNWIND");

	sys_init();
	loader_guard_init();
	sigmask_init();
	if (env && strcmp(env, "libunwind") == 0)
		framecache_off = 1; /* every stack by libunwind, no rules */
}

/* libunwind, once, outside signal context: a dlopen() of three objects. */
static void load_unwind(void)
{
	resolve_calls();
	unwind_load();
}

/*
 * Unwinds from the interrupted context uc into s. Async-signal-safe. The
 * first ip is the interrupted pc itself (UNW_INIT_SIGNAL_FRAME tells
 * libunwind so), the rest are return addresses. Never inlined: the cursor
 * (1 kB) must not be in the frame of a caller that decides not to unwind.
 */
__attribute__((noinline)) static void unwind_into(struct slot *s,
						  ucontext_t *uc)
{
	struct unwind_ctx ctx;
	unw_cursor_t cursor;
	unw_word_t ip;
	uint32_t n = 0;
	int ret = 0;

	if (stackmap_bounds((uintptr_t)uc->uc_mcontext.gregs[REG_RSP],
			    &ctx.stack_lo, &ctx.stack_hi) < 0)
		ctx.stack_lo = ctx.stack_hi = 0;
	if (unwind_init(&cursor, &ctx, uc) < 0) {
		s->ips[0] = (uint64_t)uc->uc_mcontext.gregs[REG_RIP];
		s->nips = 1;
		return;
	}
	for (;;) {
		if (unwind.get_reg(&cursor, UNW_REG_IP, &ip) < 0 || ip == 0)
			break;
		if (n == SLOT_IPS) {
			s->flags |= SW_TF_TRUNCATED;
			break;
		}
		s->ips[n++] = ip;
		/* Past a frame entered by its return address that libunwind
		 * could only guess at: CPython's perf trampolines. */
		if (n > 1 && unwind_trampoline(&cursor, &ctx))
			continue;
		if ((ret = unwind.step(&cursor)) <= 0)
			break;
	}
	if (n < SLOT_IPS && ret < 0 && ctx.cut)
		s->flags |= SW_TF_CUT;
	s->nips = n;
}

/*
 * Tests: the same stack unwound by libunwind, into a slot of its own, and
 * compared with what the rules gave (framecache_verify).
 */
static struct slot verify_slots[HANDLER_SLOTS];

static void verify_walk(const struct slot *s, ucontext_t *uc)
{
	struct slot *v = &verify_slots[(s - handler_slots) % HANDLER_SLOTS];
	uint32_t i = 0;

	v->flags = 0;
	unwind_into(v, uc);
	while (i < s->nips && i < v->nips && s->ips[i] == v->ips[i])
		i++;
	if (i == s->nips && i == v->nips &&
	    (s->flags & SW_TF_TRUNCATED) == (v->flags & SW_TF_TRUNCATED))
		return;
	framecache_mismatch(i, s->nips, v->nips, i < v->nips ? v->ips[i] : 0);
}

/*
 * The stack by the rules learnt in earlier dumps when every frame has one
 * (framecache.h), else by libunwind. Async-signal-safe.
 */
static void walk(struct slot *s, ucontext_t *uc)
{
	uint32_t n = 0, flags = 0;

	if (framecache_walk(uc, s->ips, SLOT_IPS, &n, &flags)) {
		s->nips = n;
		s->flags |= flags;
		s->walk = 'r';
		framecache_count(1);
		if (framecache_verify)
			verify_walk(s, uc);
		return;
	}
	s->walk = 'u';
	framecache_count(0);
	unwind_into(s, uc);
}

/*
 * Fills s with the stack of the interrupted context uc, or with the
 * interrupted pc alone and a flag saying why not: inside the dynamic
 * loader, unwinding would take the loader's lock again; without a ticket
 * of the loader gate (gate false), the module snapshot may change under
 * it; with less than HANDLER_STACK_NEED bytes of room (s->room, below
 * the handler's own frame), it would run off the stack and fault; on a stack
 * whose end is not known, it could run off it unseen, into the memory below.
 * Async-signal-safe.
 */
static void take_stack(struct slot *s, ucontext_t *uc, bool gate)
{
	size_t room = s->room;

	s->flags = SW_TF_FIRST_EXACT;
	s->walk = 0;
	if (sw_loader_depth > 0) {
		s->flags |= SW_TF_IN_LOADER;
	} else if (!gate) {
		s->flags |= SW_TF_BUSY;
	} else if (room == STACKMAP_UNKNOWN) {
		s->flags |= SW_TF_NO_ROOM; /* never unwound blind */
	} else if (room < HANDLER_STACK_NEED) {
		s->flags |= SW_TF_LOW_STACK;
	} else {
		walk(s, uc);
		return;
	}
	s->ips[0] = (uint64_t)uc->uc_mcontext.gregs[REG_RIP];
	s->nips = 1;
}

/* The thread's own CPU times: one system call, no /proc read. */
static void cpu_times(struct slot *s)
{
	struct rusage ru;

	/* (the kernel fills ru; set here for what cannot see that) */
	ru.ru_utime.tv_sec = ru.ru_utime.tv_usec = 0;
	ru.ru_stime.tv_sec = ru.ru_stime.tv_usec = 0;
	if (sys_call2(SYS_getrusage, RUSAGE_THREAD, &ru) < 0) {
		s->utime_us = s->stime_us = 0;
		return;
	}
	s->utime_us = (uint64_t)ru.ru_utime.tv_sec * 1000000u +
		      (uint64_t)ru.ru_utime.tv_usec;
	s->stime_us = (uint64_t)ru.ru_stime.tv_sec * 1000000u +
		      (uint64_t)ru.ru_stime.tv_usec;
}

/*
 * What the thread was doing when our signal came, read off its context:
 * 'S' inside a system call, else 'R' (running its own code). A signal
 * interrupts a blocking call in one of two ways: a restartable one (futex,
 * read, accept, nanosleep...) is rewound so that the saved pc points at the
 * syscall instruction (0f 05) again; one that fails with EINTR (epoll_wait,
 * poll...) returns -EINTR with the pc just past it. The bytes read are code
 * the thread is about to run, so they are mapped; the ones before or after
 * the pc are read only when on the same page. Async-signal-safe.
 */
/*
 * The system call the kernel restarts when the handler returns (the pc
 * back on its syscall instruction, its number in rax again), with its
 * first two arguments, which the instruction leaves untouched; -2 with
 * them just after a call that returned EINTR; -1 for any other place.
 * Reads only the context.
 */
static void restarted_call(const ucontext_t *uc, struct slot *s)
{
	uintptr_t pc = (uintptr_t)uc->uc_mcontext.gregs[REG_RIP];
	long ax = (long)uc->uc_mcontext.gregs[REG_RAX];
	const unsigned char *p = (const unsigned char *)pc;

	s->sysno = -1;
	if ((pc & 4095) != 4095 && p[0] == 0x0f && p[1] == 0x05)
		s->sysno = (int64_t)ax;
	else if (ax == -EINTR && (pc & 4095) >= 2 && p[-2] == 0x0f &&
		 p[-1] == 0x05)
		s->sysno = -2; /* not restarted: a timed wait, perhaps */
	else
		return;
	s->sysarg[0] = (uint64_t)uc->uc_mcontext.gregs[REG_RDI];
	s->sysarg[1] = (uint64_t)uc->uc_mcontext.gregs[REG_RSI];
}

static char interrupted_state(const ucontext_t *uc)
{
	uintptr_t pc = (uintptr_t)uc->uc_mcontext.gregs[REG_RIP];
	long ax = (long)uc->uc_mcontext.gregs[REG_RAX];
	const unsigned char *p = (const unsigned char *)pc;

	if ((pc & 4095) != 4095 && p[0] == 0x0f && p[1] == 0x05)
		return 'S';
	if (ax == -EINTR && (pc & 4095) >= 2 && p[-2] == 0x0f && p[-1] == 0x05)
		return 'S';
	return 'R';
}

/*
 * Our signal arrived while this thread is still inside our handler: the
 * one below has published and is on its way out (often preempted right
 * after its futex wake, while the dumper already signals the next dump),
 * or it is a late one still unwinding. Handling the signal here would pile
 * a second kernel signal frame (AT_MINSIGSTKSZ: 3.6 kB with AVX-512) and a
 * second unwind on top of the first, and under a tight dump loop the pile
 * grows without bound: 116 levels deep in 500 dumps of a spinning thread
 * before this existed. A nested unwind could also wait forever for a lock
 * of libunwind's that the handler below holds (inside our handler the
 * masking around it is a no-op, sigmask.c). So the signal is put back
 * instead: blocked now, and
 * in the mask the handler below resumes with (uc), then queued again to
 * this thread. It is delivered once the handler below has returned and the
 * thread's own mask is back, on the interrupted code's stack. A stale one
 * is dropped. Async-signal-safe: raw system calls only (the libc mask
 * calls are interposed, sigmask.c).
 */
static void defer(int signo, siginfo_t *si, ucontext_t *uc,
		  const struct slot *s, uint64_t gen)
{
	uint64_t block = 1ull << (signo - 1); /* the kernel's sigset_t */

	if (atomic_load_explicit(&s->word, memory_order_relaxed) !=
	    SLOT_WORD(gen, SLOT_ARMED))
		return;
	sys_call4(SYS_rt_sigprocmask, SIG_BLOCK, &block, NULL, sizeof(block));
	/*
	 * The kernel restores the first word of uc_sigmask at sigreturn. Set
	 * by hand: a first call of sigaddset() here would go through the lazy
	 * binder, which saves every vector register on this stack (~3 kB).
	 */
	uc->uc_sigmask.__val[0] |= block;
	sys_call4(SYS_rt_tgsigqueueinfo, sys_call0(SYS_getpid),
		  sys_call0(SYS_gettid), signo, si);
}

/*
 * Gives back what a handler of ours on this thread held when it never
 * returned (cancelled, or long-jumped out of a fault handler stacked on
 * it): its slot, which it can no longer publish, and its loader-gate
 * ticket (unless a waiter took it back already). Async-signal-safe.
 */
static void heal(void)
{
	struct handler_tls *h = &handler_tls;

	if (h->slot >= 0 && h->slot < HANDLER_SLOTS) {
		uint64_t w = h->slot_word;

		atomic_compare_exchange_strong(
			&handler_slots[h->slot].word, &w,
			SLOT_WORD(SLOT_GEN(w) + 1, SLOT_FREE));
	}
	h->slot = -1;
	loader_gate_leave(h->ticket, h->ticket_word);
	h->ticket = -1;
	h->frame = 0;
	sw_loader_snap_ok = 0;
	handler_depth = 0;
}

/*
 * Claims the slot the cookie names, armed for exactly its generation, and
 * fills it. The loader-gate ticket is taken first: the snapshot stays
 * while we may read it; without one (every ticket taken) the handler must
 * not read it, and takes the pc alone. Async-signal-safe.
 */
static void take(struct slot *s, uint64_t gen, ucontext_t *uc)
{
	struct handler_tls *h = &handler_tls;
	uint64_t expect = SLOT_WORD(gen, SLOT_ARMED);

	h->ticket = loader_gate_enter(&h->ticket_word);
	if (!atomic_compare_exchange_strong_explicit(
		    &s->word, &expect, SLOT_WORD(gen, SLOT_WRITING),
		    memory_order_acquire, memory_order_relaxed)) {
		loader_gate_leave(h->ticket, h->ticket_word);
		h->ticket = -1;
		return;
	}
	h->slot = (int)(s - handler_slots);
	h->slot_word = SLOT_WORD(gen, SLOT_WRITING);
	sw_loader_snap_ok = h->ticket >= 0;
	s->captured_ns = sys_now_ns();
	/*
	 * Below our frame (not a local: ASan may keep locals elsewhere).
	 * The empty handler too: the next dump's fast path goes by it.
	 */
	s->room = stackmap_room((uintptr_t)__builtin_frame_address(0));
	if (handler_empty) {
		s->nips = 0;
		s->flags = 0;
		s->walk = 0;
		s->name[0] = '\0';
		s->state = '?';
		s->sysno = -1;
	} else {
		take_stack(s, uc, h->ticket >= 0);
		cpu_times(s);
		s->state = interrupted_state(uc);
		restarted_call(uc, s);
		s->name[0] = '\0';
		if (atomic_load_explicit(&handler_want_name,
					 memory_order_relaxed) &&
		    sys_call2(SYS_prctl, PR_GET_NAME, s->name) < 0)
			s->name[0] = '\0';
	}
	/* Published unless the dumper took the slot back as abandoned. */
	expect = SLOT_WORD(gen, SLOT_WRITING);
	if (atomic_compare_exchange_strong_explicit(
		    &s->word, &expect, SLOT_WORD(gen, SLOT_DONE),
		    memory_order_release, memory_order_relaxed)) {
		atomic_fetch_add_explicit(&handler_done_seq, 1,
					  memory_order_release);
		futex_wake_all(&handler_done_seq);
	}
	h->slot = -1;
	loader_gate_leave(h->ticket, h->ticket_word);
	h->ticket = -1;
}

bool handler_sent_by_us(const siginfo_t *si)
{
	uint64_t cookie = (uint64_t)(uintptr_t)si->si_value.sival_ptr;
	uint64_t gen = cookie >> 8;

	if (si->si_code != SI_QUEUE || si->si_pid != sys_call0(SYS_getpid))
		return false;
	if ((cookie & 0xff) == HANDLER_COOKIE_MIGRATE)
		return true;
	return gen >= atomic_load(&handler_gen_first) &&
	       gen < atomic_load(&handler_gen_next);
}

/*
 * A signal on one we gave up to the program (signo.c). One of the
 * program's own is handed back to the process, blocked from now on in
 * this thread (the kernel restores uc's mask at sigreturn), so that the
 * thread that waits for it (signalfd, sigwaitinfo) gets it with its
 * siginfo whole. A request from the dumper to move this thread's mask
 * along with us is done here. Returns false for a late signal of ours,
 * which the handler proper then ignores. Async-signal-safe.
 */
static bool pass_on(int signo, siginfo_t *si, ucontext_t *uc)
{
	uint64_t old = 1ull << (signo - 1);
	int now = handler_signo;
	bool foreign = !handler_sent_by_us(si);

	if (!foreign && ((uint64_t)(uintptr_t)si->si_value.sival_ptr & 0xff) !=
				HANDLER_COOKIE_MIGRATE)
		return false;
	/*
	 * Either way this thread's mask moves along with us: a thread that
	 * takes the old signal got its mask before we moved, from a "block
	 * everything" less the old one; it blocks the old one now, and the
	 * new one no more.
	 */
	uc->uc_sigmask.__val[0] |= old;
	if (now > 0 && now <= 64)
		uc->uc_sigmask.__val[0] &= ~(1ull << (now - 1));
	if (foreign)
		sys_call3(SYS_rt_sigqueueinfo, sys_call0(SYS_getpid), signo,
			  si);
	return true;
}

/*
 * A signal on our current one that our dumper did not send: someone else's
 * kill(), sigqueue() or tgkill(). Without us the signal's disposition
 * would be the default one (signo.c takes only a signal left at SIG_DFL,
 * and gives it up when the program installs its own handler or names it in
 * a mask), whose action for a real-time signal is to end the process. So
 * that is done: the default put back and the same siginfo sent to this
 * thread again, to be delivered the moment the handler returns. A dump's
 * signal on another thread meanwhile ends the process the same way, which
 * is what was to happen. Async-signal-safe.
 */
static void foreign_default(int signo, siginfo_t *si)
{
	struct sys_sigaction dfl = { 0 }; /* SIG_DFL is 0 */

	sys_call4(SYS_rt_sigaction, signo, &dfl, NULL, sizeof(uint64_t));
	sys_call4(SYS_rt_tgsigqueueinfo, sys_call0(SYS_getpid),
		  sys_call0(SYS_gettid), signo, si);
}

/*
 * The handler. Accepts only our own SI_QUEUE signal whose cookie names a
 * slot armed for exactly this generation; everything else (a late signal
 * from an abandoned dump, a forged one) leaves no trace. A handler of
 * ours already on this thread's stack below us means nesting (the signal
 * is put back); one that is not below us never returned, and what it
 * held is given back first. Async-signal-safe.
 */
static void handler(int signo, siginfo_t *si, void *ctx)
{
	int *err = sys_errno(), saved_errno = *err;
	struct handler_tls *h = &handler_tls;
	uintptr_t frame = (uintptr_t)__builtin_frame_address(0);
	uint64_t cookie;
	struct slot *s;

	h->runs++;
	if (signo != handler_signo && signo_is_retired(signo) &&
	    pass_on(signo, si, ctx)) {
		*err = saved_errno;
		return;
	}
	if (signo == handler_signo && !h->priming && !handler_sent_by_us(si)) {
		foreign_default(signo, si);
		*err = saved_errno;
		return;
	}
	if (h->frame) {
		if (frame < h->frame && h->frame - frame < HANDLER_NEST_SPAN) {
			cookie = (uint64_t)(uintptr_t)si->si_value.sival_ptr;
			if (si->si_code == SI_QUEUE &&
			    (cookie & 0xff) < HANDLER_SLOTS)
				defer(signo, si, ctx,
				      &handler_slots[cookie & 0xff],
				      cookie >> 8);
			*err = saved_errno;
			return;
		}
		heal();
	}
	h->frame = frame;
	handler_depth = 1;
	if (si->si_code != SI_QUEUE || si->si_pid != sys_call0(SYS_getpid))
		goto out;
	cookie = (uint64_t)(uintptr_t)si->si_value.sival_ptr;
	if ((cookie & 0xff) >= HANDLER_SLOTS)
		goto out;
	s = &handler_slots[cookie & 0xff];
	take(s, cookie >> 8, ctx);
out:
	h->frame = 0;
	handler_depth = 0;
	*err = saved_errno;
}

/*
 * The stack above uc, a context of handler_unwind_self() taken by its
 * caller, which has not returned: each step leaves a frame, the first
 * lands in that function's caller.
 */
static size_t unwind_from(ucontext_t *uc, struct unwind_ctx *ctx, uint64_t *ips,
			  size_t max, unsigned skip)
{
	unw_cursor_t cursor;
	unw_word_t ip;
	size_t n = 0;

	if (unwind_init(&cursor, ctx, uc) < 0)
		return 0;
	while (unwind.step(&cursor) > 0) {
		if (unwind.get_reg(&cursor, UNW_REG_IP, &ip) < 0 || ip == 0)
			break;
		if (skip > 0) {
			skip--;
			continue;
		}
		if (n == max)
			break;
		ips[n++] = ip;
	}
	return n;
}

size_t handler_unwind_self(uint64_t *ips, size_t max, unsigned skip)
{
	struct unwind_ctx ctx;
	pthread_attr_t attr;
	ucontext_t uc;
	void *lo;
	size_t size;

	/*
	 * The caller may come before the first dump installed anything, or
	 * be a copy of ours that another serves (collect.c): libunwind only.
	 */
	if (!unwind.step) {
		pthread_once(&unwind_once, load_unwind);
		if (!unwind.step)
			return 0;
	}
	ctx.stack_lo = ctx.stack_hi = 0;
	if (pthread_getattr_np(pthread_self(), &attr) == 0) {
		if (pthread_attr_getstack(&attr, &lo, &size) == 0) {
			ctx.stack_lo = (uintptr_t)lo;
			ctx.stack_hi = (uintptr_t)lo + size;
		}
		pthread_attr_destroy(&attr);
	}
	if (getcontext(&uc) < 0)
		return 0;
	return unwind_from(&uc, &ctx, ips, max, skip);
}

/*
 * Runs the handler once, here and now, on a context of this thread, so
 * that every function it calls through the PLT (errno, getpid,
 * clock_gettime, syscall) is bound before any signal is sent. Left to a
 * first dump, the lazy binder would save every vector register on the
 * interrupted stack (~3 kB, ahead of any check of ours): a thread near the
 * end of its stack died of it. It runs as if inside the loader, which
 * takes the placeholder path: libunwind is reached only through pointers
 * resolved with RTLD_NOW, and must not run with handler_depth set outside
 * a signal (its locks are taken unmasked there, sigmask.c).
 */
static void prime_handler(int signo)
{
	siginfo_t si;
	ucontext_t uc;

	memset(&si, 0, sizeof(si));
	si.si_signo = signo;
	si.si_code = SI_QUEUE;
	si.si_pid = getpid();
	/* the cookie: generation 1 << 8 | slot 0 */
	si.si_value.sival_ptr = (void *)(uintptr_t)(1u << 8);
	atomic_store(&handler_slots[0].word, SLOT_WORD(1, SLOT_ARMED));
	sw_loader_depth++;
	/* Its cookie is no dump's: handler_sent_by_us() would say foreign. */
	handler_tls.priming = true;
	/* getcontext() saves no rax, which the handler reads (is this a
	 * system call?): the rest of the context is zeroes, not garbage. */
	memset(&uc, 0, sizeof(uc));
	if (getcontext(&uc) == 0)
		handler(signo, &si, &uc);
	handler_tls.priming = false;
	sw_loader_depth--;
	/* (it published: the slot is DONE, and prime_unwinder clears it) */
}

/*
 * Makes libunwind do its one-time initialization (which may allocate and
 * take locks) here, outside signal context, binds what the handler calls,
 * and touches every slot so the first dump does not fault pages in from a
 * handler.
 */
static void prime_unwinder(int signo)
{
	uint64_t ips[8];

	handler_unwind_self(ips, 8, 0);
	prime_handler(signo);
	memset(handler_slots, 0, sizeof(handler_slots));
}

/*
 * The handler on its signal, and nothing that costs: a program that
 * exits or execs at once pays two sigaction() calls. No dump signals
 * before install() has run too (handler_check() says so).
 */
static void install_early(void)
{
	struct sigaction sa;
	int signo;

	resolve_calls();
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = handler;
	/*
	 * No SA_NODEFER: the kernel blocks our signal while the handler
	 * runs, so however many of ours it has queued for a thread (the
	 * dumper sends one at a time, collect.c), they come one after the
	 * other, never nested. A dumper that reads SigBlk meanwhile sees it
	 * blocked but not pending, and waits (collect.c).
	 */
	sa.sa_flags = SA_SIGINFO | SA_RESTART;
	/*
	 * Every other signal waits while we unwind: no handler of the
	 * application can run in the middle of libunwind or the loader on
	 * this thread (what libunwind's own masking is for, see sigmask.c).
	 * Faults stay deliverable: a blocked SIGSEGV would kill at once.
	 * (signo.c leaves the signal it installs on out of the mask.)
	 */
	sigfillset(&sa.sa_mask);
	sigdelset(&sa.sa_mask, SIGSEGV);
	sigdelset(&sa.sa_mask, SIGBUS);
	sigdelset(&sa.sa_mask, SIGILL);
	sigdelset(&sa.sa_mask, SIGFPE);
	sigdelset(&sa.sa_mask, SIGTRAP);
	/*
	 * And SIGSYS: a seccomp filter that traps a call of ours (getrusage,
	 * say) for the program's handler to emulate would otherwise kill,
	 * the kernel forcing the default action on a blocked SIGSYS.
	 */
	sigdelset(&sa.sa_mask, SIGSYS);
	/*
	 * glibc's sigfillset leaves out its own SIGCANCEL (32) and SIGSETXID
	 * (33); set by hand. Asynchronous cancellation would otherwise end a
	 * thread inside our handler, its loader-gate count never returned,
	 * and a set*id broadcast would run on top of libunwind.
	 */
	sa.sa_mask.__val[0] |= (1ull << (32 - 1)) | (1ull << (33 - 1));
	signo = signo_install(&sa);
	if (signo > 0)
		handler_signo = signo; /* the mask interposers keep it open */
	early_result = signo;
}

/*
 * The rest, before the first dump: libunwind loaded, the handler run
 * once so that everything it calls is bound, the slots touched. Until
 * then a signal of ours finds no armed slot and the handler returns.
 */
static void install(void)
{
	int signo;

	pthread_once(&early_once, install_early);
	if (early_result < 0) {
		install_result = early_result;
		return;
	}
	pthread_once(&unwind_once, load_unwind);
	if (!unwind.step) {
		install_result = SW_ENOTINIT;
		return;
	}
	/* Moved since (signo.c), or given up: nothing to prime. */
	signo = handler_signo;
	if (!signo) {
		install_result = SW_ENOSIGNAL;
		return;
	}
	prime_unwinder(signo);
	install_result = signo;
}

int handler_install_early(void)
{
	pthread_once(&early_once, install_early);
	if (early_result < 0)
		return early_result;
	return handler_signo ? handler_signo : SW_ENOSIGNAL;
}

int handler_install(void)
{
	pthread_once(&install_once, install);
	if (install_result < 0)
		return install_result;
	/* Moved since, or given up (signo.c). */
	return handler_signo ? handler_signo : SW_ENOSIGNAL;
}

int handler_signal(void)
{
	return handler_signo;
}

int handler_check(void)
{
	struct sigaction cur;

	if (install_result <= 0)
		return install_result < 0 ? install_result : SW_ENOTINIT;
	if (!handler_signo)
		return SW_ENOSIGNAL;
	if (sigaction(handler_signo, NULL, &cur) < 0)
		return -errno;
	if (!(cur.sa_flags & SA_SIGINFO) || cur.sa_sigaction != handler)
		return SW_EHANDLER;
	return 0;
}
