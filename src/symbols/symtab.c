/*
 * symtab.c - the sorted symbol index of symtab.h.
 *
 * Each libdwfl session sorts its sized symbols once and searches them in
 * O(log n) instead of libdwfl's scan of the whole table. The rule is
 * libdwfl's (dwfl_module_addrinfo): global and weak symbols first, locals
 * only when none of those contains the address; among the
 * symbols that contain it the closest start wins, then the stronger
 * binding, then the smaller size, then the first in the table. An address
 * that no sized symbol contains (assembly labels without a size), or where
 * a sizeless global symbol sits, goes to dwfl_module_addrinfo itself,
 * which handles those cases.
 */
#include <errno.h>
#include <gelf.h>
#include <stdbool.h>
#include <stdlib.h>

#include "symtab.h"

struct syment {
	uint64_t lo;	  /* link-time start */
	uint64_t hi;	  /* one past the end */
	const char *name; /* in libelf's string table: lives with the session */
	uint32_t order;	  /* index in the symbol table */
	uint8_t bind; /* 3 global, 2 weak, 1 local, 0 other (libdwfl's order) */
};

/* One tier (globals or locals), sorted by lo, with the running max of hi. */
struct symtier {
	struct syment *e;
	uint64_t *maxhi;
	size_t n;
};

struct symtab {
	struct symtier tier[2]; /* [0] global and weak, [1] local */
	uint64_t *exact; /* sorted addresses of sizeless global symbols */
	size_t nexact;
};

#define SYM_WALK_MAX 4096 /* entries one search may step back over */

static int syment_cmp(const void *a, const void *b)
{
	const struct syment *x = a, *y = b;

	if (x->lo != y->lo)
		return x->lo < y->lo ? -1 : 1;
	return (x->order > y->order) - (x->order < y->order);
}

static int u64_cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return (x > y) - (x < y);
}

static uint8_t bind_rank(const GElf_Sym *sym)
{
	switch (GELF_ST_BIND(sym->st_info)) {
	case STB_GLOBAL:
		return 3;
	case STB_WEAK:
		return 2;
	case STB_LOCAL:
		return 1;
	default:
		return 0;
	}
}

void symtab_free(struct symtab *t)
{
	if (!t)
		return;
	for (int i = 0; i < 2; i++) {
		free(t->tier[i].e);
		free(t->tier[i].maxhi);
	}
	free(t->exact);
	free(t);
}

/* Sorts a tier and fills its running maximum. 0 or -ENOMEM. */
static int tier_finish(struct symtier *t)
{
	uint64_t max = 0;

	if (!t->n)
		return 0;
	qsort(t->e, t->n, sizeof(*t->e), syment_cmp);
	t->maxhi = malloc(t->n * sizeof(*t->maxhi));
	if (!t->maxhi)
		return -ENOMEM;
	for (size_t i = 0; i < t->n; i++) {
		if (t->e[i].hi > max)
			max = t->e[i].hi;
		t->maxhi[i] = max;
	}
	return 0;
}

/*
 * Reads mod's symbol table (symtab, else dynsym, as libdwfl chooses) into
 * a new index. Returns NULL on out of memory; a module without symbols
 * gets an empty index.
 */
struct symtab *symtab_build(Dwfl_Module *mod)
{
	struct symtab *t = calloc(1, sizeof(*t));
	int n = dwfl_module_getsymtab(mod);
	int first_global = dwfl_module_getsymtab_first_global(mod);

	if (!t)
		return NULL;
	if (n <= 1)
		return t;
	for (int i = 0; i < 2; i++) {
		t->tier[i].e = malloc((size_t)n * sizeof(struct syment));
		if (!t->tier[i].e)
			goto out_free;
	}
	t->exact = malloc((size_t)n * sizeof(*t->exact));
	if (!t->exact)
		goto out_free;
	for (int i = 1; i < n; i++) {
		GElf_Sym sym;
		GElf_Addr addr;
		GElf_Word shndx;
		Elf *elf;
		Dwarf_Addr bias;
		const char *name;
		struct symtier *tier;
		bool local;
		int type;

		name = dwfl_module_getsym_info(mod, i, &sym, &addr, &shndx,
					       &elf, &bias);
		type = GELF_ST_TYPE(sym.st_info);
		if (!name || !name[0] || sym.st_shndx == SHN_UNDEF ||
		    type == STT_SECTION || type == STT_FILE ||
		    type == STT_TLS || addr + sym.st_size < addr)
			continue;
		/* libdwfl searches the table from first_global on first. */
		local = first_global > 0 && i < first_global;
		if (!sym.st_size) {
			/* libdwfl prefers such a symbol at exactly the
			 * address to any local one: leave those to it. */
			if (!local)
				t->exact[t->nexact++] = addr;
			continue;
		}
		tier = &t->tier[local];
		tier->e[tier->n++] = (struct syment){
			.lo = addr,
			.hi = addr + sym.st_size,
			.name = name,
			.order = (uint32_t)i,
			.bind = bind_rank(&sym),
		};
	}
	if (tier_finish(&t->tier[0]) || tier_finish(&t->tier[1]))
		goto out_free;
	qsort(t->exact, t->nexact, sizeof(*t->exact), u64_cmp);
	return t;

out_free:
	symtab_free(t);
	return NULL;
}

/* Whether a is a better symbol than b, both containing the address. */
static bool syment_better(const struct syment *a, const struct syment *b)
{
	if (a->lo != b->lo)
		return a->lo > b->lo;
	if (a->bind != b->bind)
		return a->bind > b->bind;
	if (a->hi != b->hi)
		return a->hi < b->hi;
	return a->order < b->order;
}

/*
 * The best symbol of one tier containing x, or NULL. *gave_up is set when
 * the search stepped back over SYM_WALK_MAX symbols without an answer.
 */
static const struct syment *tier_find(const struct symtier *t, uint64_t x,
				      bool *gave_up)
{
	const struct syment *best = NULL;
	size_t lo = 0, hi = t->n, steps = 0;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (t->e[mid].lo <= x)
			lo = mid + 1;
		else
			hi = mid;
	}
	/* Step back from the last start at or below x while a symbol
	 * could still reach x; stop below the best start found. */
	for (size_t k = lo; k-- > 0;) {
		const struct syment *e = &t->e[k];

		if (t->maxhi[k] <= x || (best && e->lo < best->lo))
			break;
		if (++steps > SYM_WALK_MAX) {
			*gave_up = true;
			return NULL;
		}
		if (e->hi > x && (!best || syment_better(e, best)))
			best = e;
	}
	return best;
}

/* See symtab.h. O(log n) but for pathological nesting of symbols. */
const char *symtab_name_at(const struct symtab *t, Dwfl_Module *mod, uint64_t x)
{
	const struct syment *e = NULL;
	bool gave_up = false;
	GElf_Off off;
	GElf_Sym sym;
	GElf_Word shndx;
	Elf *elf;
	Dwarf_Addr bias;

	if (t) {
		e = tier_find(&t->tier[0], x, &gave_up);
		/* (bsearch() of no array at all is undefined) */
		if (!e && !gave_up &&
		    (!t->nexact ||
		     !bsearch(&x, t->exact, t->nexact, sizeof(x), u64_cmp)))
			e = tier_find(&t->tier[1], x, &gave_up);
		if (e)
			return e->name;
	}
	return dwfl_module_addrinfo(mod, x, &off, &sym, &shndx, &elf, &bias);
}
