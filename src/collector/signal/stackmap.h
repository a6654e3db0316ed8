/*
 * stackmap.h - how much stack is left under the handler: a table of the
 * process's stack-like mappings that the dumper fills before each dump and
 * the handler searches for its own stack pointer.
 *
 * libunwind's cursor and DWARF state need HANDLER_STACK_NEED bytes below
 * the handler's frame. On a thread that is that close to the end of its
 * stack the handler would fault, and a fault there kills the process. The
 * kernel tells where a stack ends only through /proc/self/maps, which is
 * no read for signal context; so the dumper reads it beforehand into
 * static memory, and the handler only searches.
 */
#ifndef SW_STACKMAP_H
#define SW_STACKMAP_H

#include <stddef.h>
#include <stdint.h>

#define STACKMAP_MAX 16384	  /* mappings kept; the rest are unknown */
#define STACKMAP_UNKNOWN SIZE_MAX /* stackmap_room(): no answer */

/*
 * Rebuilds the table from /proc/self/maps and RLIMIT_STACK: every private
 * writable anonymous mapping (each thread stack is one, with glibc's guard
 * below it), the main thread's [stack] extended down as far as the kernel
 * would grow it. Call before every dump, dumps serialized by the caller;
 * not async-signal-safe (it allocates and reads a file). Mappings past
 * STACKMAP_MAX are left out. Returns 0, or a negative errno with the table
 * left empty (every lookup then unknown).
 */
int stackmap_refresh(void);

/*
 * Bytes between sp and the lowest address the stack holding sp can use:
 * the sigaltstack the thread is running on if any, else the table's
 * mapping holding sp when that mapping's start is a stack's end (the main
 * thread's [stack], or a mapping right above a PROT_NONE guard: thread
 * stacks, guarded coroutine stacks). STACKMAP_UNKNOWN when sp is in any
 * other mapping (the heap, a malloc'd block of fiber stacks: a stack of
 * any size anywhere in it), in no mapping of the table (mapped since the
 * last refresh, or left out) or when the table is being rebuilt.
 * Async-signal-safe: one raw system call (sigaltstack) and atomic reads of the
 * table; no lock, so a late handler racing a refresh gets STACKMAP_UNKNOWN
 * rather than a torn answer.
 */
size_t stackmap_room(uintptr_t sp);

/*
 * The bounds [*lo, *hi) of the table's mapping that holds addr (for the
 * main thread's stack, lo is as far down as the kernel would grow it: only
 * what lies above a stack pointer in use is certainly mapped). Returns 0,
 * or -1 when no mapping of the table holds addr or the table is being
 * rebuilt. Async-signal-safe, like stackmap_room().
 */
int stackmap_bounds(uintptr_t addr, uint64_t *lo, uint64_t *hi);

/*
 * Parses one line of /proc/PID/maps into its bounds [*lo, *hi). Returns 1
 * when the mapping may hold a stack (private, readable, writable and
 * anonymous: no file, or a name in brackets such as [stack], [heap] or
 * [anon:...]), with *main_stack set for [stack]; 0 for any other mapping;
 * -1 for a malformed line.
 */
int stackmap_parse_line(const char *line, uint64_t *lo, uint64_t *hi,
			int *main_stack);

#endif /* SW_STACKMAP_H */
