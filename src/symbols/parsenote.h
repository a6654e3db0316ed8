/*
 * parsenote.h - which file a parser is about to read, for whoever runs it.
 *
 * libdw and libelf read a module's file lazily, deep inside a lookup or
 * an unwind step; a file crafted to crash them crashes the process that
 * reads it. The parser workers of the daemon (privsep/worker.c) set a
 * note function that writes where a supervisor can read it after a
 * crash: the symbolizer and the unwinder call parsenote() with the
 * module's start address (in the process the dump is of) before they
 * read its file. Without one set (the library, the CLI), nothing is done.
 */
#ifndef SW_PARSENOTE_H
#define SW_PARSENOTE_H

#include <stdbool.h>
#include <stdint.h>

/* Sets the note function, process-wide (NULL: none). */
void parsenote_set(void (*fn)(uint64_t start));

/* Whether anything is noted (worth finding a module to note). */
bool parsenote_wanted(void);

/* Notes that the module at start is about to be read. */
void parsenote(uint64_t start);

#endif /* SW_PARSENOTE_H */
