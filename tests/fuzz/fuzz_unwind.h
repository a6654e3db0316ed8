/*
 * fuzz_unwind.h - the input of fuzz_unwind.c, shared with mkseed.c,
 * which writes real ones: a header, then elf_len bytes of the module's
 * file, then the copy of one thread's stack (the rest). In the byte order
 * and register numbering of x86-64, whose snapshots these are.
 */
#ifndef SW_FUZZ_UNWIND_H
#define SW_FUZZ_UNWIND_H

#include <stdint.h>

#include "snapshot/snapshot.h"

struct fuzz_unwind_hdr {
	uint64_t base;		   /* where the file is mapped */
	uint64_t map_len;	   /* bytes mapped there */
	uint64_t stack_at;	   /* the address of the stack copy */
	uint64_t regs[SNAP_NREGS]; /* DWARF numbering: 7 rsp, 16 rip */
	uint32_t elf_len;	   /* bytes of the file after the header */
	uint32_t flags;		   /* FUZZ_UNWIND_* */
};

/* The copy stops short of the end of the stack (snap_thread.cut). */
#define FUZZ_UNWIND_CUT 0x1u

_Static_assert(sizeof(struct fuzz_unwind_hdr) == 168,
	       "the header has no padding");

#endif /* SW_FUZZ_UNWIND_H */
