/*
 * symtab.h - a sorted index of one module's symbols for the symbolizer.
 *
 * libdwfl finds the symbol of an address by scanning the whole symbol
 * table (about 180 us per lookup in a libc of 10k symbols), so each
 * libdwfl session builds this index once and searches it in O(log n),
 * with libdwfl's own rule for which symbol names an address.
 */
#ifndef SW_SYMTAB_H
#define SW_SYMTAB_H

#include <stdint.h>

#include <elfutils/libdwfl.h>

struct symtab;

/*
 * Reads mod's symbol table (the one libdwfl chose: symtab, else dynsym)
 * into a new index; names point into libelf's string tables, so the index
 * must not outlive mod's session. Returns NULL on out of memory; a module
 * without symbols gets an empty index. May block on file I/O.
 */
struct symtab *symtab_build(Dwfl_Module *mod);

/* Frees an index. Accepts NULL. */
void symtab_free(struct symtab *t);

/*
 * The raw name (symbol-version suffix and all) of the symbol that holds
 * the link-time address x of mod: from the index t, or, where the index
 * cannot decide (t NULL, sizeless symbols), from dwfl_module_addrinfo.
 * NULL when there is none. The string lives as long as mod's session.
 */
const char *symtab_name_at(const struct symtab *t, Dwfl_Module *mod,
			   uint64_t x);

#endif /* SW_SYMTAB_H */
