/*
 * framecache.h - the unwind rule of every pc seen before, so that a warm
 * dump's handlers walk their stacks without libunwind.
 *
 * libunwind without a cache reads the DWARF call-frame information of every
 * frame of every thread on every dump: ~10 us of a 1000-thread dump's
 * ~20 us a thread here, most of what the handler costs. Its own caches are
 * not for signal handlers (the global one takes a lock, the per-thread one
 * costs ~265 kB of every thread). Yet nearly every frame of x86-64 code
 * follows one shape of rule: the CFA (the caller's stack pointer) is rsp or
 * rbp plus a constant, the return address is at the CFA plus a constant,
 * and rbp is either unchanged or saved at the CFA plus a constant. So the
 * dumper learns that rule for each pc its handlers had to unwind with
 * libunwind, asking libunwind itself (framecache.c, probe()), and keeps it
 * in a fixed table; a handler whose every frame has a rule walks by them,
 * loads from its own stack and nothing else; any other unwinds the whole
 * stack with libunwind as before, and its pcs are learnt for the next
 * dump. A pc whose rule has another shape (PLT stubs, signal trampolines,
 * realigned stacks, code without unwind information) is learnt as "slow"
 * and always goes to libunwind.
 *
 * The table is written by the dumper only (under the collector's lock):
 * entries are added, each published by a release store of its key, and
 * never changed; the whole table is cleared only while no handler can
 * read it (the loader gate held and drained), when a module was unloaded
 * since the rules were learnt (its pcs may now hold other code).
 */
#ifndef SW_FRAMECACHE_H
#define SW_FRAMECACHE_H

#include <stdint.h>
#include <ucontext.h>

/*
 * The handler: walks the stack of the interrupted context uc into ips (at
 * most max; SW_TF_TRUNCATED added to *flags when there were more) by the
 * learnt rules. Returns 1 with *nips set when every frame had a rule,
 * else 0 (ips then hold garbage): the caller unwinds with libunwind.
 * Every load is from the stack mapping that holds uc's stack pointer, at
 * or above it. Async-signal-safe: atomic loads and arithmetic.
 */
int framecache_walk(const ucontext_t *uc, uint64_t *ips, uint32_t max,
		    uint32_t *nips, uint32_t *flags);

/*
 * The dumper, with the gate held and no handler running (right after
 * loader_gate_hold()): forgets every rule when a module was unloaded since
 * they were learnt. subs: the loader's count of unloads (dlpi_subs).
 */
void framecache_sync(unsigned long long subs);

/*
 * The dumper, after a dump: learns the rule of every pc of the stack ips
 * (n frames, ips[0] an interrupted pc) that has none yet, at most
 * FRAMECACHE_PROBES_PER_DUMP between two framecache_learn_done(), and
 * none once CLOCK_MONOTONIC reaches until_ns (0: no limit): what is left
 * is learnt after a later dump. Not for signal context (libunwind takes
 * the loader's lock; a scratch area is mapped).
 */
void framecache_learn(const uint64_t *ips, uint32_t n, uint64_t until_ns);
void framecache_learn_done(void);

#define FRAMECACHE_PROBES_PER_DUMP 512

struct framecache_stats {
	uint64_t walks;	 /* stacks walked by rules */
	uint64_t misses; /* stacks handed to libunwind */
	uint64_t rules;	 /* entries in the table, slow ones included */
	uint64_t slow;	 /* of which: pcs that always need libunwind */
	uint64_t probes; /* rules asked of libunwind */
	uint64_t resets; /* tables cleared after an unload */
};
void framecache_get_stats(struct framecache_stats *out);

/* Tests and benchmarks: nonzero, handlers always use libunwind. */
extern volatile int framecache_off;

/*
 * Tests: nonzero, a handler that walked by rules unwinds with libunwind
 * too and compares (handler.c), reporting every difference with
 * framecache_mismatch(): at which frame, how many frames each gave, and
 * libunwind's pc there. The first is kept in framecache_mismatch_info.
 */
extern volatile int framecache_verify;
extern volatile uint64_t framecache_mismatch_info[4];
void framecache_mismatch(uint64_t at, uint64_t by_rules, uint64_t by_unwind,
			 uint64_t pc);
uint64_t framecache_mismatch_count(void);

/* The handler counts each stack: walked by rules or not. */
void framecache_count(int walked);

#endif /* SW_FRAMECACHE_H */
