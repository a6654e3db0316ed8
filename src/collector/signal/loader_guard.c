/*
 * loader_guard.c - counts, per thread, how deep it is inside the dynamic
 * loader, and keeps the module list the handlers unwind with
 * (loader_guard.h).
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
#include <errno.h>
#include <link.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "sys.h"
#include "futex.h"
#include "loader_guard.h"
#include "sigctx.h"

__thread volatile int sw_loader_depth
	__attribute__((tls_model("initial-exec")));
__thread volatile int sw_loader_snap_ok
	__attribute__((tls_model("initial-exec")));
struct sw_loader_gate2 sw_loader_gate2;

/*
 * The gate word. HOLD: a dump is taking or using the snapshot, no dlclose
 * may start. UNW: handlers that may be reading the snapshot. CLOSE: threads
 * inside dlclose. WAITERS: someone sleeps on the word and wants a wake when
 * a count drops or HOLD clears.
 */
#define GATE_HOLD (1u << 31)
#define GATE_WAITERS (1u << 30)
#define GATE_UNW_ONE (1u << 15)
#define GATE_UNW_MASK (0x7fffu << 15)
#define GATE_CLOSE_MASK 0x7fffu

/*
 * How deep this thread is in dlclose: only the outermost call counts,
 * whichever copy of ours it went through first (exported and shared like
 * the gate: every copy's dlclose calls the next one's).
 */
__thread int sw_loader_close_depth __attribute__((tls_model("initial-exec")));

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

/*
 * Sleeps until the gate word moves from v, saying so in WAITERS first.
 * Returns -ETIMEDOUT at deadline_ns, 0 otherwise (look again).
 */
SW_INTERPOSER NOT_TSAN static int gate_wait(uint32_t v, uint64_t deadline_ns)
{
	if (!(v & GATE_WAITERS)) {
		if (!atomic_compare_exchange_strong(&sw_loader_gate2.word, &v,
						    v | GATE_WAITERS))
			return 0;
		v |= GATE_WAITERS;
	}
	return futex_wait_until(&sw_loader_gate2.word, v, deadline_ns) ==
			       -ETIMEDOUT
		       ? -ETIMEDOUT
		       : 0;
}

/* Wakes the sleepers, if any, after the word changed to v. */
NOT_TSAN static void gate_wake(uint32_t v)
{
	if (!(v & GATE_WAITERS))
		return;
	atomic_fetch_and(&sw_loader_gate2.word, ~GATE_WAITERS);
	futex_wake_all(&sw_loader_gate2.word);
}

#define TICKET_MS(w) ((w) >> 24)

/*
 * Takes back the tickets of handlers counted for longer than
 * LOADER_GATE_STALE_MS: a handler runs for microseconds, so one that old
 * never returned (a cancelled thread, a siglongjmp out of a fault handler
 * stacked on ours). Each ticket is taken back once, by its CAS; a handler
 * that comes back after all finds its ticket gone and leaves the count
 * alone. Returns how many were taken back.
 */
NOT_TSAN static unsigned gate_reap(uint64_t now_ns)
{
	struct sw_loader_gate2 *g = &sw_loader_gate2;
	uint64_t now_ms = now_ns / 1000000ull;
	unsigned n = 0;

	for (unsigned i = 0; i < LOADER_GATE_TICKETS; i++) {
		uint64_t w = atomic_load(&g->tickets[i]);

		/* (a ticket may be newer than now_ms: taken meanwhile) */
		if (!w || TICKET_MS(w) + LOADER_GATE_STALE_MS > now_ms)
			continue;
		if (atomic_compare_exchange_strong(&g->tickets[i], &w, 0)) {
			gate_wake(atomic_fetch_sub(&g->word, GATE_UNW_ONE) -
				  GATE_UNW_ONE);
			n++;
		}
	}
	return n;
}

/*
 * A dlclose may unmap a module the snapshot points into: it starts only
 * while no dump holds the gate and no handler may be reading the
 * snapshot. The wait lasts a dump's signal phase at most (a handler runs
 * for microseconds), and never longer than the holding dump's deadline or,
 * for handlers alone, LOADER_GATE_STALE_MS: then the stale tickets are
 * taken back, and past that it goes ahead whatever the word says. A
 * nested dlclose (from a destructor) is already counted.
 */
SW_INTERPOSER NOT_TSAN static void close_enter(void)
{
	uint64_t start = sys_now_ns();

	if (sw_loader_close_depth++ > 0)
		return;
	for (;;) {
		uint32_t v = atomic_load(&sw_loader_gate2.word);
		uint64_t now, until = start + LOADER_GATE_STALE_MS * 1000000ull;

		if (!(v & (GATE_HOLD | GATE_UNW_MASK))) {
			if (atomic_compare_exchange_weak(&sw_loader_gate2.word,
							 &v, v + 1))
				return;
			continue;
		}
		now = sys_now_ns();
		if ((v & GATE_HOLD) && sw_loader_gate2.hold_until_ns > until)
			until = sw_loader_gate2.hold_until_ns;
		if (now >= until) {
			gate_reap(now);
			/* Bounded: in it goes. */
			atomic_fetch_add(&sw_loader_gate2.word, 1);
			return;
		}
		if ((v & GATE_UNW_MASK) && gate_reap(now))
			continue;
		gate_wait(v, now + 10 * 1000000ull < until
				     ? now + 10 * 1000000ull
				     : until);
	}
}

SW_INTERPOSER NOT_TSAN static void close_leave(void)
{
	if (--sw_loader_close_depth > 0)
		return;
	gate_wake(atomic_fetch_sub(&sw_loader_gate2.word, 1) - 1);
}

/*
 * Our dl_iterate_phdr inside the handler: the snapshot, no lock. libunwind
 * asks once per frame for the module holding a pc, and most frames of a
 * stack are in the module of the frame before: that one is offered first.
 */
static __thread size_t last_hit __attribute__((tls_model("initial-exec")));

NOT_TSAN static int iterate_snapshot(int (*cb)(struct dl_phdr_info *, size_t,
					       void *),
				     void *data)
{
	size_t first = last_hit, n = sw_loader_gate2.nsnap;
	int rc;

	if (first < n) {
		rc = cb(&sw_loader_gate2.snap[first],
			sizeof(struct dl_phdr_info), data);
		if (rc)
			return rc;
	}
	for (size_t i = 0; i < n; i++) {
		if (i == first)
			continue;
		rc = cb(&sw_loader_gate2.snap[i], sizeof(struct dl_phdr_info),
			data);
		if (rc) {
			last_hit = i;
			return rc;
		}
	}
	return 0;
}

/*
 * Makes room for one more module and n more program headers. Returns false
 * when out of memory.
 */
NOT_TSAN static bool snap_reserve(struct sw_loader_gate2 *g, size_t n)
{
	if (g->nsnap == g->cap) {
		size_t cap = g->cap ? 2 * g->cap : 64;
		struct dl_phdr_info *p = realloc(g->snap, cap * sizeof(*p));

		if (!p)
			return false;
		g->snap = p;
		g->cap = cap;
	}
	if (g->nphdr + n > g->phdr_cap) {
		size_t cap = g->phdr_cap ? 2 * g->phdr_cap : 1024;
		ElfW(Phdr) * p;

		while (cap < g->nphdr + n)
			cap *= 2;
		p = realloc(g->phdrs, cap * sizeof(*p));
		if (!p)
			return false;
		g->phdrs = p;
		g->phdr_cap = cap;
	}
	return true;
}

/*
 * Appends one module to the snapshot, its program headers copied: libunwind
 * reads every module's headers looking for the one that holds a pc, and
 * the copies keep that walk off modules that glibc unloads on its own
 * (iconv's, without dlclose). Stops, short, when out of memory.
 */
NOT_TSAN static int copy_module(struct dl_phdr_info *info, size_t size,
				void *arg)
{
	struct sw_loader_gate2 *g = &sw_loader_gate2;
	size_t n = info->dlpi_phnum;

	(void)size;
	(void)arg;
	if (!snap_reserve(g, n))
		return 1;
	memcpy(&g->phdrs[g->nphdr], info->dlpi_phdr, n * sizeof(ElfW(Phdr)));
	g->snap[g->nsnap] = *info;
	/* an index until the copying is done: phdrs may still move */
	g->snap[g->nsnap].dlpi_phdr = (const ElfW(Phdr) *)(uintptr_t)g->nphdr;
	g->snap[g->nsnap].dlpi_name = "";
	g->nphdr += n;
	g->nsnap++;
	return 0;
}

NOT_TSAN int loader_gate_hold(uint64_t deadline_ns)
{
	iterate_fn f;

	sw_loader_gate2.hold_until_ns = deadline_ns;
	atomic_fetch_or(&sw_loader_gate2.word, GATE_HOLD);
	for (;;) {
		uint32_t v = atomic_load(&sw_loader_gate2.word);
		uint64_t now;

		if (!(v & (GATE_UNW_MASK | GATE_CLOSE_MASK)))
			break;
		now = sys_now_ns();
		if ((v & GATE_UNW_MASK) && gate_reap(now))
			continue;
		/* Looks again now and then: a ticket may turn stale. */
		if (now >= deadline_ns ||
		    (gate_wait(v, now + 50 * 1000000ull < deadline_ns
					  ? now + 50 * 1000000ull
					  : deadline_ns) == -ETIMEDOUT &&
		     sys_now_ns() >= deadline_ns)) {
			loader_gate_release();
			return -ETIMEDOUT;
		}
	}
	/* Nobody reads the snapshot now and no module can go away. */
	loader_guard_init();
	f = atomic_load_explicit(&real_iterate, memory_order_acquire);
	sw_loader_gate2.nsnap = 0;
	sw_loader_gate2.nphdr = 0;
	if (f)
		f(copy_module, NULL);
	for (size_t i = 0; i < sw_loader_gate2.nsnap; i++) {
		struct dl_phdr_info *m = &sw_loader_gate2.snap[i];

		m->dlpi_phdr = &sw_loader_gate2.phdrs[(uintptr_t)m->dlpi_phdr];
	}
	return 0;
}

NOT_TSAN void loader_gate_release(void)
{
	gate_wake(atomic_fetch_and(&sw_loader_gate2.word, ~GATE_HOLD) &
		  ~GATE_HOLD);
}

NOT_TSAN int loader_gate_enter(uint64_t *word_out)
{
	struct sw_loader_gate2 *g = &sw_loader_gate2;
	uint32_t seq = atomic_fetch_add(&g->next_seq, 1);
	uint64_t w =
		(sys_now_ns() / 1000000ull) << 24 | (seq & 0xffffff) | 1u << 23;

	for (unsigned k = 0; k < LOADER_GATE_TICKETS; k++) {
		unsigned i = (seq + k) % LOADER_GATE_TICKETS;
		uint64_t free_word = 0;

		if (atomic_load_explicit(&g->tickets[i],
					 memory_order_relaxed) ||
		    !atomic_compare_exchange_strong(&g->tickets[i], &free_word,
						    w))
			continue;
		atomic_fetch_add(&g->word, GATE_UNW_ONE);
		*word_out = w;
		return (int)i;
	}
	*word_out = 0;
	return -1;
}

NOT_TSAN void loader_gate_leave(int ticket, uint64_t word)
{
	sw_loader_snap_ok = 0;
	if (ticket < 0 || ticket >= LOADER_GATE_TICKETS)
		return;
	if (!atomic_compare_exchange_strong(&sw_loader_gate2.tickets[ticket],
					    &word, 0))
		return; /* taken back as stale: counted off already */
	gate_wake(atomic_fetch_sub(&sw_loader_gate2.word, GATE_UNW_ONE) -
		  GATE_UNW_ONE);
}

NOT_TSAN void loader_gate_atfork_child(void)
{
	/* Only this thread is left: what it holds is all that counts. */
	uint32_t word = sw_loader_close_depth > 0 ? 1u : 0u;

	/* (written only where it changes: a page written is a page copied) */
	for (unsigned i = 0; i < LOADER_GATE_TICKETS; i++)
		if (atomic_load(&sw_loader_gate2.tickets[i]) != 0)
			atomic_store(&sw_loader_gate2.tickets[i], 0);
	if (atomic_load(&sw_loader_gate2.word) != word)
		atomic_store(&sw_loader_gate2.word, word);
}

SW_INTERPOSER NOT_TSAN void *dlopen(const char *file, int mode)
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

SW_INTERPOSER NOT_TSAN void *dlmopen(Lmid_t lmid, const char *file, int mode)
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

SW_INTERPOSER NOT_TSAN int dlclose(void *handle)
{
	int rc = -1;
	dlclose_fn f;

	RESOLVE(real_dlclose, dlclose_fn, "dlclose");
	f = atomic_load_explicit(&real_dlclose, memory_order_acquire);
	close_enter();
	sw_loader_depth++;
	if (f)
		rc = f(handle);
	sw_loader_depth--;
	close_leave();
	return rc;
}

NOT_TSAN int loader_modules(int (*cb)(struct dl_phdr_info *, size_t, void *),
			    void *data)
{
	iterate_fn f;

	if (sw_loader_snap_ok)
		return iterate_snapshot(cb, data);
	f = atomic_load_explicit(&real_iterate, memory_order_acquire);
	return f ? f(cb, data) : 0;
}

SW_INTERPOSER NOT_TSAN int dl_iterate_phdr(int (*cb)(struct dl_phdr_info *,
						     size_t, void *),
					   void *data)
{
	int rc = 0;
	iterate_fn f;

	if (sw_loader_snap_ok)
		return iterate_snapshot(cb, data);
	RESOLVE(real_iterate, iterate_fn, "dl_iterate_phdr");
	f = atomic_load_explicit(&real_iterate, memory_order_acquire);
	sw_loader_depth++;
	if (f)
		rc = f(cb, data);
	sw_loader_depth--;
	return rc;
}
