/*
 * framecache.c - learnt unwind rules, and the handler's walk by them
 * (framecache.h).
 *
 * A rule is learnt from libunwind, not from a DWARF reader of our own: the
 * dumper sets up a made-up frame at the pc (a context whose rsp, rbp and
 * other registers point into three separate scratch regions, every word
 * near them holding an address in a fourth, the echo region, that names
 * the word it came from), lets libunwind step once, and reads where the
 * caller's stack pointer, return address and rbp came from. Done twice
 * with the registers at other distances, a rule of our shape gives the
 * same answer both times; any other rule (one reading a register we do not
 * track, a value loaded through memory, a guess from the frame-pointer chain)
 * lands outside the right region or differs, and the pc is marked slow.
 */
#define _GNU_SOURCE
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <string.h>
#include <sys/mman.h>

#include "sys.h"
#include "model/limits.h"
#include "framecache.h"
#include "stackmap.h"
#include "unwind.h"

#define TABLE_BITS 12
#define TABLE_SIZE (1u << TABLE_BITS)
#define TABLE_FILL (TABLE_SIZE / 4 * 3) /* no insert beyond this */
#define MAX_PROBE 16			/* slots looked at per lookup */

#define KEY_EXACT (1ull << 63) /* the pc is interrupted, not a return */

enum {
	RULE_SLOW = 1,	   /* unwind this frame with libunwind */
	RULE_END = 2,	   /* the last frame: nothing calls it */
	RULE_CFA_BP = 4,   /* CFA = rbp + cfa_off, else rsp + cfa_off */
	RULE_BP_SAVED = 8, /* rbp = [CFA + bp_off], else unchanged */
};

struct rule {
	_Atomic uint64_t key; /* pc | KEY_EXACT; 0: empty */
	int16_t cfa_off;
	int16_t ra_off; /* the return address is at CFA + ra_off */
	int16_t bp_off;
	uint8_t kind; /* RULE_* */
};

static struct rule table[TABLE_SIZE];
static _Atomic uint32_t nrules;
static uint32_t nslow;
static unsigned long long table_subs; /* the loader's unload count */
static bool table_synced;

volatile int framecache_off;
volatile int framecache_verify;
volatile uint64_t framecache_mismatch_info[4];
static _Atomic uint64_t nmismatches;
static _Atomic uint64_t nwalks, nmisses;
static uint64_t nprobes, nresets;

static inline uint32_t slot_of(uint64_t key)
{
	return (uint32_t)((key * 0x9e3779b97f4a7c15ull) >> (64 - TABLE_BITS));
}

/* Async-signal-safe. */
static const struct rule *lookup(uint64_t key)
{
	uint32_t i = slot_of(key);

	for (unsigned n = 0; n < MAX_PROBE;
	     n++, i = (i + 1) & (TABLE_SIZE - 1)) {
		uint64_t k = atomic_load_explicit(&table[i].key,
						  memory_order_acquire);

		if (k == key)
			return &table[i];
		if (k == 0)
			return NULL;
	}
	return NULL;
}

int framecache_walk(const ucontext_t *uc, uint64_t *ips, uint32_t max,
		    uint32_t *nips, uint32_t *flags)
{
	uint64_t ip = (uint64_t)uc->uc_mcontext.gregs[REG_RIP];
	uint64_t sp = (uint64_t)uc->uc_mcontext.gregs[REG_RSP];
	uint64_t bp = (uint64_t)uc->uc_mcontext.gregs[REG_RBP];
	uint64_t exact = KEY_EXACT, lo, hi;
	uint32_t n = 0, more = 0;

	if (framecache_off ||
	    atomic_load_explicit(&nrules, memory_order_relaxed) == 0 ||
	    stackmap_bounds(sp, &lo, &hi) < 0 || hi - lo < 16)
		return 0;
	/* The same loop as unwind_into()'s over libunwind's steps. */
	while (ip != 0) {
		const struct rule *r;
		uint64_t cfa, at;

		if (n == max) {
			more = SW_TF_TRUNCATED;
			break;
		}
		r = lookup(ip | exact);
		if (!r || (r->kind & RULE_SLOW))
			return 0;
		ips[n++] = ip;
		if (r->kind & RULE_END)
			break;
		cfa = ((r->kind & RULE_CFA_BP) ? bp : sp) +
		      (uint64_t)r->cfa_off;
		/* Up the stack, inside its mapping, or libunwind decides. */
		if (cfa <= sp || cfa > hi)
			return 0;
		at = cfa + (uint64_t)r->ra_off;
		if (at < sp || at > hi - 8)
			return 0;
		ip = *(const uint64_t *)at;
		if (r->kind & RULE_BP_SAVED) {
			at = cfa + (uint64_t)r->bp_off;
			if (at < sp || at > hi - 8)
				return 0;
			bp = *(const uint64_t *)at;
		}
		sp = cfa;
		exact = 0;
	}
	*nips = n;
	*flags |= more;
	return 1;
}

void framecache_count(int walked)
{
	atomic_fetch_add_explicit(walked ? &nwalks : &nmisses, 1,
				  memory_order_relaxed);
}

void framecache_mismatch(uint64_t at, uint64_t by_rules, uint64_t by_unwind,
			 uint64_t pc)
{
	if (atomic_fetch_add(&nmismatches, 1) == 0) {
		framecache_mismatch_info[0] = at;
		framecache_mismatch_info[1] = by_rules;
		framecache_mismatch_info[2] = by_unwind;
		framecache_mismatch_info[3] = pc;
	}
}

uint64_t framecache_mismatch_count(void)
{
	return atomic_load(&nmismatches);
}

void framecache_sync(unsigned long long subs)
{
	if (table_synced && subs == table_subs)
		return;
	if (atomic_load_explicit(&nrules, memory_order_relaxed)) {
		memset(table, 0, sizeof(table));
		atomic_store_explicit(&nrules, 0, memory_order_relaxed);
		nslow = 0;
		nresets++;
	}
	table_subs = subs;
	table_synced = true;
}

/* ---- learning, in the dumper ---- */

/*
 * The scratch area: a region for rsp, one for rbp, one for every other
 * register, and the echo. Each is REGION bytes of which only FILL bytes
 * either side of its centre (where the register points) are written; the
 * rest reads as zeros and costs nothing (MAP_NORESERVE, never touched).
 * libunwind reads only memory our accessors allow (unwind.h): the area
 * is allowed whole. A frame's rule may read far from the registers (a 4 MB
 * array on the stack puts the return address 4 MB above rsp): every read a rule
 * could make lands in the area, and what it finds outside the filled words
 * (zero) names no word, so such a rule is left to libunwind.
 */
#define REGION ((uintptr_t)32 << 20)
#define CENTER ((uintptr_t)1 << 20)
#define FILL ((uintptr_t)64 << 10)
#define NREGIONS 3 /* rsp's, rbp's, every other register's */
#define AREA ((NREGIONS + 1) * REGION)
#define WORDS (2 * FILL / 8) /* filled words per region */

static unsigned char *area; /* mapped while learning */
static unsigned probes_left = FRAMECACHE_PROBES_PER_DUMP;
static uint64_t learn_until_ns; /* CLOCK_MONOTONIC; 0: no limit */

static uintptr_t centre(int region)
{
	return (uintptr_t)area + (uintptr_t)region * REGION + CENTER;
}

/*
 * The filled words of the register regions hold, each, the address of an
 * echo word that stands for it (loaded_from() maps it back); the echo
 * words hold an address among themselves, so a value loaded through any
 * chain of them is still a readable address.
 */
static int map_area(void)
{
	uintptr_t echo;

	if (area)
		return 0;
	/*
	 * Read-only but for the words filled: a private writable mapping
	 * would be charged in full where overcommit is strict.
	 */
	area = mmap(NULL, AREA, PROT_READ,
		    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (area == MAP_FAILED) {
		area = NULL;
		return -1;
	}
	echo = centre(NREGIONS);
	for (int r = 0; r < NREGIONS; r++)
		if (mprotect((void *)(centre(r) - FILL), 2 * FILL,
			     PROT_READ | PROT_WRITE) < 0)
			goto fail;
	if (mprotect((void *)echo, NREGIONS * WORDS * 8,
		     PROT_READ | PROT_WRITE) < 0)
		goto fail;
	for (int r = 0; r < NREGIONS; r++) {
		uint64_t *w = (uint64_t *)(centre(r) - FILL);

		for (size_t i = 0; i < WORDS; i++)
			w[i] = echo + ((size_t)r * WORDS + i) * 8;
	}
	for (size_t i = 0; i < NREGIONS * WORDS; i++)
		((uint64_t *)echo)[i] = echo;
	return 0;
fail:
	munmap(area, AREA);
	area = NULL;
	return -1;
}

/* Which register region an address is in, or -1. */
static int region_of(uintptr_t a)
{
	uintptr_t base = (uintptr_t)area;

	if (a < base || a >= base + NREGIONS * REGION)
		return -1;
	return (int)((a - base) / REGION);
}

/* The filled word a loaded value names, or 0 when it names none. */
static uintptr_t loaded_from(uint64_t v)
{
	uintptr_t echo = centre(NREGIONS);
	size_t i;

	if (v < echo || v >= echo + NREGIONS * WORDS * 8 || (v - echo) % 8)
		return 0;
	i = (v - echo) / 8;
	return centre((int)(i / WORDS)) - FILL + (i % WORDS) * 8;
}

static bool fits16(int64_t v)
{
	return v >= INT16_MIN && v <= INT16_MAX;
}

/*
 * One step of libunwind from a made-up frame at pc whose rsp and rbp are
 * shift bytes off the middle of their regions (in opposite directions).
 * Fills *out and returns 0 when the step followed a rule of our shape,
 * else -1.
 */
static int probe_once(uint64_t pc, bool exact, int shift, struct rule *out)
{
	uintptr_t rsp0 = centre(0) + (uintptr_t)shift;
	uintptr_t rbp0 = centre(1) - (uintptr_t)shift;
	uintptr_t other = centre(2);
	struct unwind_ctx ctx;
	unw_word_t rip1, rsp1, rbp1;
	unw_proc_info_t pi;
	unw_cursor_t c;
	ucontext_t uc;
	uintptr_t at;
	int ret, reg;

	memset(&uc, 0, sizeof(uc));
	for (int i = 0; i < NGREG; i++)
		uc.uc_mcontext.gregs[i] = (greg_t)other;
	uc.uc_mcontext.gregs[REG_RSP] = (greg_t)rsp0;
	uc.uc_mcontext.gregs[REG_RBP] = (greg_t)rbp0;
	/*
	 * A return address is looked up one byte back, inside its call (the
	 * call may be the last instruction of its function): no row of the
	 * rules can start inside a call instruction.
	 */
	uc.uc_mcontext.gregs[REG_RIP] = (greg_t)(exact ? pc : pc - 1);
	ctx.stack_lo = (uintptr_t)area;
	ctx.stack_hi = (uintptr_t)area + AREA;
	if (unwind_init(&c, &ctx, &uc) < 0)
		return -1;
	/*
	 * No unwind information: libunwind would guess from rbp (and on
	 * x86-64 its get_proc_info succeeds with a made-up entry).
	 */
	if (unwind.get_proc_info(&c, &pi) < 0 || ctx.noinfo)
		return -1;
	ret = unwind.step(&c);
	memset(out, 0, sizeof(*out));
	if (ret == 0) {
		out->kind = RULE_END;
		return 0;
	}
	if (ret < 0 || unwind.get_reg(&c, UNW_X86_64_RIP, &rip1) < 0 ||
	    unwind.get_reg(&c, UNW_X86_64_RSP, &rsp1) < 0 ||
	    unwind.get_reg(&c, UNW_X86_64_RBP, &rbp1) < 0)
		return -1;
	reg = region_of(rsp1);
	if (reg == 0) {
		if (!fits16((int64_t)(rsp1 - rsp0)))
			return -1;
		out->cfa_off = (int16_t)(rsp1 - rsp0);
	} else if (reg == 1) {
		if (!fits16((int64_t)(rsp1 - rbp0)))
			return -1;
		out->cfa_off = (int16_t)(rsp1 - rbp0);
		out->kind |= RULE_CFA_BP;
	} else {
		return -1;
	}
	at = loaded_from(rip1);
	if (!at || region_of(at) != reg || !fits16((int64_t)(at - rsp1)))
		return -1;
	out->ra_off = (int16_t)(at - rsp1);
	if (rbp1 != rbp0) {
		at = loaded_from(rbp1);
		if (!at || region_of(at) != reg ||
		    !fits16((int64_t)(at - rsp1)))
			return -1;
		out->bp_off = (int16_t)(at - rsp1);
		out->kind |= RULE_BP_SAVED;
	}
	return 0;
}

static void insert(uint64_t key, const struct rule *r)
{
	uint32_t i = slot_of(key);

	for (unsigned n = 0; n < MAX_PROBE;
	     n++, i = (i + 1) & (TABLE_SIZE - 1)) {
		uint64_t k = atomic_load_explicit(&table[i].key,
						  memory_order_relaxed);

		if (k == key)
			return;
		if (k != 0)
			continue;
		table[i].cfa_off = r->cfa_off;
		table[i].ra_off = r->ra_off;
		table[i].bp_off = r->bp_off;
		table[i].kind = r->kind;
		atomic_store_explicit(&table[i].key, key, memory_order_release);
		atomic_fetch_add_explicit(&nrules, 1, memory_order_relaxed);
		if (r->kind & RULE_SLOW)
			nslow++;
		return;
	}
}

static bool same_rule(const struct rule *a, const struct rule *b)
{
	return a->kind == b->kind && a->cfa_off == b->cfa_off &&
	       a->ra_off == b->ra_off && a->bp_off == b->bp_off;
}

static void learn_one(uint64_t pc, bool exact)
{
	uint64_t key = pc | (exact ? KEY_EXACT : 0);
	struct rule a, b;

	if (pc == 0 || (pc & KEY_EXACT) || lookup(key))
		return;
	if (probes_left == 0 ||
	    atomic_load_explicit(&nrules, memory_order_relaxed) >= TABLE_FILL)
		return;
	if (learn_until_ns && sys_now_ns() >= learn_until_ns) {
		probes_left = 0; /* the rest, next time */
		return;
	}
	if (map_area() < 0)
		return;
	probes_left--;
	nprobes++;
	if (probe_once(pc, exact, 0, &a) < 0 ||
	    probe_once(pc, exact, 200, &b) < 0 || !same_rule(&a, &b)) {
		memset(&a, 0, sizeof(a));
		a.kind = RULE_SLOW;
	}
	insert(key, &a);
}

void framecache_learn(const uint64_t *ips, uint32_t n, uint64_t until_ns)
{
	if (!unwind.get_proc_info || !table_synced)
		return;
	learn_until_ns = until_ns;
	for (uint32_t i = 0; i < n; i++)
		learn_one(ips[i], i == 0);
}

void framecache_learn_done(void)
{
	if (area)
		munmap(area, AREA);
	area = NULL;
	probes_left = FRAMECACHE_PROBES_PER_DUMP;
}

void framecache_get_stats(struct framecache_stats *out)
{
	out->walks = atomic_load(&nwalks);
	out->misses = atomic_load(&nmisses);
	out->rules = atomic_load(&nrules);
	out->slow = nslow;
	out->probes = nprobes;
	out->resets = nresets;
}
