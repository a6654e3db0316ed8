/*
 * jitmap.h - names for the frames of JIT code, from the target's perf map
 * (symbols/perfmap.h), kept per target and read again when it changes.
 *
 * The file is /tmp/perf-PID.map as the target sees it: through its own
 * root (/proc/PID/root) and with its pid in its own namespace. It is the
 * target user's file: it is read only when it is a regular file owned by
 * the target's uid, opened without following a final symlink and without
 * blocking (a FIFO is refused), at most PERFMAP_MAX_BYTES of it (the end:
 * the newest code). The parsed map comes from a cache (symbols/jitcache.h)
 * that shares it with every target reading the same file and charges it
 * to its owner, within the owner's limit.
 */
#ifndef SW_JITMAP_H
#define SW_JITMAP_H

#include <stdbool.h>
#include <sys/types.h>

#include "model/dump.h"

struct jitcache;
struct jitcache_map;

/* A target's map; all zero is a target not looked at yet. */
struct jitmap {
	struct jitcache *cache;	  /* of the last jitmap_apply() */
	struct jitcache_map *map; /* the file last read; NULL: none */
	bool refused; /* the last look found a file not to be read */
	/*
	 * The last look found a map that does not fit its owner's limit.
	 * That file is not parsed again while it stays the same file, no
	 * shorter, and its owner's maps take no less than then (it is
	 * still used when another target holds it parsed).
	 */
	bool over_limit;
	dev_t big_dev;
	ino_t big_ino;
	off_t big_size;
	size_t big_use;
};

/*
 * Names the frames of d (a symbolized dump of process pid of user uid)
 * that have no function and are in the perf map: function the map's
 * name, module "[jit]" (added to d's modules, spanning the map). Touches
 * nothing when no frame needs it. The map is taken from cache, which
 * jm keeps using until jitmap_release(). Returns how many frames were
 * named; jm->refused and jm->over_limit tell why a map was not used.
 * Blocks on the file's reads (or on another target's read of the same
 * file).
 */
size_t jitmap_apply(struct jitmap *jm, struct jitcache *cache, pid_t pid,
		    uid_t uid, struct sw_dump *d);

/* Gives jm's map back to its cache. */
void jitmap_release(struct jitmap *jm);

#endif /* SW_JITMAP_H */
