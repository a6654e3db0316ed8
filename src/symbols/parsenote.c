/*
 * parsenote.c - which file a parser is about to read (parsenote.h).
 */
#include <stddef.h>

#include "parsenote.h"

static void (*note_fn)(uint64_t start);

void parsenote_set(void (*fn)(uint64_t start))
{
	note_fn = fn;
}

void parsenote(uint64_t start)
{
	if (note_fn)
		note_fn(start);
}

bool parsenote_wanted(void)
{
	return note_fn != NULL;
}
