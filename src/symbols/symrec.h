/*
 * symrec.h - what one address of a module symbolizes to: the frames of
 * the inlined functions around it (innermost first) and of the function
 * that contains it (last), each with a demangled name and a source
 * file:line, looked up in libdwfl and packed into one immutable record
 * that the symbolizer caches.
 */
#ifndef SW_SYMREC_H
#define SW_SYMREC_H

#include <stdbool.h>
#include <stdint.h>

#include <elfutils/libdwfl.h>

#define SYMREC_MAX_FRAMES 64 /* frames one address may expand to */

/* One frame of a record; strings point into the record. */
struct symfr {
	const char *function; /* demangled, no version suffix; may be NULL */
	const char *file; /* absolute when the debug info allows; may be NULL */
	int line;	  /* 0 when unknown */
	bool inlined;	  /* inlined into the next frame */
};

/* What one address expands to, innermost first. Freed with free(). */
struct symrec {
	uint32_t n; /* at least 1 */
	struct symfr fr[];
};

/*
 * What libdw cannot be trusted to bound, checked once per unit before
 * it is walked: how deep its DIEs nest (libdw walks them recursively:
 * 35,000 nested blocks overflow an 8 MiB stack, and inlined ones cost
 * the cube of their depth) and how long its line program is (each row
 * costs libdw about 100 bytes, and a compressed table of 114 KB holds
 * 100 million). A unit past a bound is used without its scopes or its
 * lines; the module keeps the first reason.
 */
#define SYMREC_MAX_DEPTH 256		 /* DIEs nested in a unit */
#define SYMREC_MAX_LINE_BYTES (4u << 20) /* one unit's line program */
#define SYMREC_GUARD_UNITS 64		 /* units remembered */
#define SYMREC_MAX_DIES 50000000	 /* DIEs walked in one unit */

struct symrec_guard {
	struct {
		Dwarf_Off cu; /* the unit's DIE offset */
		bool deep_ok, lines_ok;
	} seen[SYMREC_GUARD_UNITS];
	unsigned nseen, next;
	int strings_ok;	 /* 1 its string sections end in NUL; -1 not yet */
	const char *why; /* the first bound hit (static text), or NULL */
};

/* A guard with nothing checked yet. */
void symrec_guard_init(struct symrec_guard *g);

/*
 * Looks up the link-time address addr of mod: the containing function is
 * named symname (the raw symbol-table name, NULL when there is none; the
 * DWARF name is used then), file:line comes from the line table and the
 * inlined frames from the DWARF scopes, as eu-stack -i finds them. With
 * dwarf false the module's DWARF is not touched: the frame is symname.
 * g (the module's, kept with it) bounds what libdw is given.
 * Returns a new record the caller frees with free(), or NULL on out of
 * memory. Costs tens of microseconds (more on a module's first use, when
 * its tables load): callers cache. May block on file I/O.
 */
struct symrec *symrec_lookup(Dwfl_Module *mod, bool dwarf, const char *symname,
			     uint64_t addr, struct symrec_guard *g);

/*
 * A malloc'd copy of a symbol name without its symbol-version suffix
 * ("@GLIBC_2.2.5", "@@GLIBC_2.3.2"), demangled when it is a C++ name;
 * clone suffixes such as ".constprop.0" stay. NULL on out of memory.
 */
char *symrec_clean_name(const char *raw);

/*
 * Loads now what symrec_clean_name() loads on the first mangled name
 * (the demangler), for a process that will not be able to later.
 */
void symrec_prepare(void);

#endif /* SW_SYMREC_H */
