/*
 * jitcache.h - parsed perf maps (symbols/perfmap.h) shared by every
 * target that reads the same file, and what they cost charged to the
 * file's owner.
 *
 * A map is known by the identity of the file it was read from: device,
 * inode, size, modification and change times, owner. Targets that find
 * the same file (the same path, or hard links to one file) share one
 * parsed copy, counted by references and freed with the last; a file that
 * changed is another map. While one target parses a file, the others that
 * want it wait for that parse instead of making their own.
 *
 * Each owner's maps together take at most a limit of bytes (shared maps
 * counted once). A parse asks for its memory as it goes and stops at the
 * first byte past the limit, so a map that does not fit is refused without
 * ever having been held whole.
 *
 * Thread-safe: one lock, a leaf, held for bookkeeping only (never while a
 * file is read).
 */
#ifndef SW_JITCACHE_H
#define SW_JITCACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "perfmap.h"

struct jitcache;
struct jitcache_map;
struct perfmap;

/*
 * A cache whose maps may take max_user_bytes per owner (SIZE_MAX: no
 * limit but the parser's own). 0 with *out, or -ENOMEM.
 */
int jitcache_new(size_t max_user_bytes, struct jitcache **out);

/* Frees c; every map must have been put back. Accepts NULL. */
void jitcache_free(struct jitcache *c);

/*
 * How c reads a file into a map: perfmap_read() by default; a process
 * that parses nothing a target wrote hands the file to a parser worker
 * (privsep/parsers.h's parsers_perfmap()). Called before any use.
 */
typedef int (*jitcache_reader_fn)(int fd, off_t size,
				  const struct perfmap_budget *budget,
				  struct perfmap **out);
void jitcache_set_reader(struct jitcache *c, jitcache_reader_fn fn);

/* Changes the limit for the parses that start from now on. */
void jitcache_set_limit(struct jitcache *c, size_t max_user_bytes);
size_t jitcache_limit(struct jitcache *c);

/* The bytes uid's maps take now (parses in progress included). */
size_t jitcache_use_of(struct jitcache *c, uid_t uid);

/*
 * The map of the open regular file fd, st its fstat(): shared when a map
 * of the same file is held already (or waited for while it is parsed),
 * else, when parse is true, read with perfmap_read() and charged to
 * st->st_uid. Returns 0 with *out, to be given back with jitcache_put();
 * -ENOENT when none is held and parse is false; -EFBIG when it does not
 * fit the owner's limit (nothing is kept, and another look parses it
 * again); -ENOMEM. Blocks for the file's reads, its own or another
 * target's.
 */
int jitcache_get(struct jitcache *c, int fd, const struct stat *st, bool parse,
		 struct jitcache_map **out);

/* Whether m was read from the file whose fstat() is st, as it is now. */
bool jitcache_same(const struct jitcache_map *m, const struct stat *st);

/* The parsed map of m. */
const struct perfmap *jitcache_perfmap(const struct jitcache_map *m);

/* Gives m back; the last reference frees it and its charge. NULL is ok. */
void jitcache_put(struct jitcache *c, struct jitcache_map *m);

#endif /* SW_JITCACHE_H */
