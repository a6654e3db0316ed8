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
 * Every other thread unwinds, and libunwind finds each module's tables
 * through dl_iterate_phdr, which takes the loader's lock too: a handler
 * interrupting a thread that holds the allocator's lock would wait there
 * for a dlclose that itself waits for the allocator. So inside the handler
 * our dl_iterate_phdr takes no lock: it answers from a snapshot of the
 * module list that the dumper took just before signalling. The snapshot
 * points into the modules themselves, so no dlclose may run while a
 * handler could read it: the gate below.
 *
 * The gate is one atomic word: a HOLD bit the dumper sets from before the
 * snapshot until the last signal is answered, a count of handlers running
 * (each counted before it claims its slot, so a late one is still covered
 * after the dumper gave up), and a count of threads inside dlclose. dlclose
 * starts only while there is neither a hold nor a handler; the dumper takes
 * the snapshot only once neither a handler nor a dlclose is running. No
 * one waits without end: dlclose waits at most for the holding dump's
 * deadline, and a handler counted for longer than LOADER_GATE_STALE_MS is
 * taken to be gone (tickets, below).
 *
 * The counter, the gate and the snapshot are exported symbols, so when
 * both the agent and the library (or a program linking it statically) are
 * loaded, every copy of the interposers and of the handler binds to the
 * first definition and they all share one of each. The gate's name
 * carries its layout's version: copies that disagree on it share nothing
 * (and only one of them dumps, collect.c).
 */
#ifndef SW_LOADER_GUARD_H
#define SW_LOADER_GUARD_H

#include <link.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

extern __thread volatile int sw_loader_depth
	__attribute__((tls_model("initial-exec")));

/* How deep this thread is inside dlclose, through any copy of ours. */
extern __thread int sw_loader_close_depth
	__attribute__((tls_model("initial-exec")));

/* Nonzero while this thread's handler may unwind with the snapshot. */
extern __thread volatile int sw_loader_snap_ok
	__attribute__((tls_model("initial-exec")));

/*
 * A handler in the gate holds a ticket: one word of a table, the time it
 * entered (CLOCK_MONOTONIC ms, above bit 24) and a sequence number, so
 * that no two tickets are equal. A handler that never leaves (a thread
 * cancelled, or long-jumped out of a fault handler stacked on ours)
 * leaves its ticket behind; once it is LOADER_GATE_STALE_MS old, whoever
 * waits on the gate takes it back, so nothing waits for it for good.
 */
#define LOADER_GATE_TICKETS 256
#define LOADER_GATE_STALE_MS 1000ull

struct sw_loader_gate2 {
	_Atomic uint32_t word;
	_Atomic uint32_t next_seq;
	uint64_t hold_until_ns; /* the deadline of the dump holding it */
	_Atomic uint64_t tickets[LOADER_GATE_TICKETS]; /* 0: free */
	/* changed only under HOLD with no handler running */
	struct dl_phdr_info *snap; /* names "", headers in phdrs */
	size_t nsnap, cap;
	ElfW(Phdr) * phdrs;
	size_t nphdr, phdr_cap;
};
extern struct sw_loader_gate2 sw_loader_gate2;

/* Resolves the real functions. Idempotent; call before any signal. */
void loader_guard_init(void);

/*
 * The dumper, before signalling: holds dlclose off, waits for the ones
 * running and for handlers of earlier dumps, then snapshots the module
 * list. Returns 0, or -ETIMEDOUT (and holds nothing) when they did not
 * finish by the absolute CLOCK_MONOTONIC time deadline_ns.
 */
int loader_gate_hold(uint64_t deadline_ns);

/* The dumper, once every signal is answered or abandoned. */
void loader_gate_release(void);

/*
 * The handler: enter before claiming a slot, leave after publishing. A
 * handler that claimed its slot sets sw_loader_snap_ok between the two.
 * enter returns the ticket (leave gives it back; *seq is its word), or -1
 * when every ticket is taken: then the handler must not read the
 * snapshot. leave does nothing if the ticket was taken back as stale
 * meanwhile. Async-signal-safe (atomics, the vDSO clock, a futex wake
 * when someone waits).
 */
int loader_gate_enter(uint64_t *seq);
void loader_gate_leave(int ticket, uint64_t seq);

/*
 * The module list for the unwinder's accessors: the snapshot inside a
 * handler that holds a ticket, else the loader's (libc's dl_iterate_phdr,
 * resolved by loader_guard_init(): no lookup, no PLT slot). Async-signal-
 * safe in the first case.
 */
int loader_modules(int (*cb)(struct dl_phdr_info *, size_t, void *),
		   void *data);

/* In a child of fork(): the gate as only this thread holds it. */
void loader_gate_atfork_child(void);

#endif /* SW_LOADER_GUARD_H */
