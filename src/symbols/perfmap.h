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
 *
 * What a parsed map holds can be bounded by a budget: the parse asks for
 * each piece of memory before it takes it and stops at the first refusal,
 * so a map never holds more than it was allowed, not even for a moment.
 */
#ifndef SW_PERFMAP_H
#define SW_PERFMAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define PERFMAP_MAX_BYTES (64u << 20) /* of one file read */
#define PERFMAP_MAX_ENTRIES (1u << 20)
#define PERFMAP_NAME_MAX 1024

struct perfmap;

/*
 * What a parse may take. Before the map it builds grows by more bytes,
 * take(arg, more) is asked: 0 lets it, a negative errno stops the parse
 * with that error. Called from the parsing thread, between reads; it must
 * not call back into the parse.
 *
 * The sum of what was taken is the caller's to account for: once a parse
 * succeeds, the map holds perfmap_bytes() of it and the rest may be given
 * back (the parse shrinks its table when done); after a failure, all of it.
 */
struct perfmap_budget {
	int (*take)(void *arg, size_t more);
	void *arg;
};

/*
 * Parses len bytes of buf (any bytes), without a budget. 0 with *out, or
 * -ENOMEM.
 */
int perfmap_parse(const char *buf, size_t len, struct perfmap **out);

/*
 * Parses the regular file fd of size bytes: its last PERFMAP_MAX_BYTES
 * (the newest code; a line cut at the start is skipped), read in pieces
 * of 64 KiB, so reading costs no more than that whatever the file's size.
 * budget may be NULL. A read error ends the file where it happened. Returns
 * 0 with *out (owned by the caller), -ENOMEM, or the budget's error.
 * Blocks on the file's reads only.
 */
int perfmap_read(int fd, off_t size, const struct perfmap_budget *budget,
		 struct perfmap **out);

/*
 * A map built from entries rather than text (a parser worker parsed the
 * file, privsep/worker.h): begun with a budget as perfmap_read() takes
 * one, each entry [start, end) named by the n bytes at name added (under
 * the rules of a line: names cut and cleaned, empty ones skipped), then
 * ended with the first error met (rc): settled into *out, or freed.
 */
int perfmap_build_begin(const struct perfmap_budget *budget,
			struct perfmap **pm);
int perfmap_build_add(struct perfmap *pm, uint64_t start, uint64_t end,
		      const char *name, size_t n);
int perfmap_build_end(struct perfmap *pm, int rc, struct perfmap **out);

/* Entry i of pm (sorted by start, disjoint), false past the last. */
bool perfmap_entry(const struct perfmap *pm, size_t i, uint64_t *start,
		   uint64_t *end, const char **name);

/* The name of the code holding ip, or NULL; *start gets its start. */
const char *perfmap_lookup(const struct perfmap *pm, uint64_t ip,
			   uint64_t *start);

/* Entries kept; the lowest start and one past the highest end. */
size_t perfmap_count(const struct perfmap *pm);
void perfmap_range(const struct perfmap *pm, uint64_t *lo, uint64_t *hi);

/* The memory pm holds, in bytes: what it was charged, less what it gave
 * back when its parse ended. 0 for NULL. */
size_t perfmap_bytes(const struct perfmap *pm);

void perfmap_free(struct perfmap *pm);

#endif /* SW_PERFMAP_H */
