/*
 * jitmap.h - names for the frames of JIT code, from the target's perf map
 * (symbols/perfmap.h), kept per target and read again when it changes.
 *
 * The file is /tmp/perf-PID.map as the target sees it: through its own
 * root (/proc/PID/root) and with its pid in its own namespace. It is the
 * target user's file: it is read only when it is a regular file owned by
 * the target's uid, opened without following a final symlink and without
 * blocking (a FIFO is refused), at most PERFMAP_MAX_BYTES of it (the end:
 * the newest code).
 */
#ifndef SW_JITMAP_H
#define SW_JITMAP_H

#include <stdbool.h>
#include <sys/types.h>
#include <time.h>

#include "model/dump.h"

struct perfmap;

struct jitmap {
	dev_t dev; /* the file last read; pm NULL: none */
	ino_t ino;
	off_t size;
	struct timespec mtime;
	struct perfmap *pm;
	bool refused; /* the last look found a file not to be read */
};

/*
 * Names the frames of d (a symbolized dump of process pid of user uid)
 * that have no function and are in the perf map: function the map's
 * name, module "[jit]" (added to d's modules, spanning the map). Touches
 * nothing when no frame needs it. Returns how many frames were named.
 */
size_t jitmap_apply(struct jitmap *jm, pid_t pid, uid_t uid, struct sw_dump *d);

void jitmap_release(struct jitmap *jm);

#endif /* SW_JITMAP_H */
