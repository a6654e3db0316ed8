/*
 * perfmap.h - the perf map of a process with a JIT: the text file
 * /tmp/perf-PID.map that node (--perf-basic-prof), the JVM (jcmd PID
 * Compiler.perfmap) and Python 3.12+ (-X perf) write, one line per piece
 * of generated code:
 *
 *	START SIZE NAME
 *
 * START and SIZE in hexadecimal (with or without 0x), NAME the rest of the
 * line. The file is the target's: untrusted. Lines that do not parse are
 * skipped; names are cut at PERFMAP_NAME_MAX bytes; at most
 * PERFMAP_MAX_ENTRIES are kept. Where code was generated again at the same
 * address, the later line wins, as perf reads it.
 */
#ifndef SW_PERFMAP_H
#define SW_PERFMAP_H

#include <stddef.h>
#include <stdint.h>

#define PERFMAP_MAX_BYTES (64u << 20) /* of one file read */
#define PERFMAP_MAX_ENTRIES (1u << 20)
#define PERFMAP_NAME_MAX 1024

struct perfmap;

/* Parses len bytes of buf (any bytes). 0 with *out, or -ENOMEM. */
int perfmap_parse(const char *buf, size_t len, struct perfmap **out);

/* The name of the code holding ip, or NULL; *start gets its start. */
const char *perfmap_lookup(const struct perfmap *pm, uint64_t ip,
			   uint64_t *start);

/* Entries kept; the lowest start and one past the highest end. */
size_t perfmap_count(const struct perfmap *pm);
void perfmap_range(const struct perfmap *pm, uint64_t *lo, uint64_t *hi);

void perfmap_free(struct perfmap *pm);

#endif /* SW_PERFMAP_H */
