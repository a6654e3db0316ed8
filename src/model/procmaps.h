/*
 * procmaps.h - the file mappings of a process and its vDSO, as the kernel
 * knows them: asked mapping by mapping (the PROCMAP_QUERY ioctl of
 * /proc/PID/maps, Linux 6.11 and later), else parsed from that file's
 * text.
 *
 * A process of a thousand threads has two thousand mappings (a stack and
 * its guard page each) and some fifty file mappings. The text lists them
 * all, and writing it out and parsing it back cost milliseconds; the
 * ioctl skips the anonymous ones in the kernel, so a read costs about as
 * many calls as the process has file mappings.
 */
#ifndef SW_PROCMAPS_H
#define SW_PROCMAPS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* One mapping of a file: ascending by start, as the kernel lists them. */
struct procmap {
	uint64_t start, end, offset;
	dev_t dev;
	uint64_t ino;
	char *path; /* the kernel's name of the file, owned */
};

struct procmaps {
	struct procmap *v;
	size_t n, cap;
	uint64_t vdso_start, vdso_end; /* both 0: none found */
};

/* At most this many file mappings are kept; more is SW_ETOOBIG. */
#define PROCMAPS_MAX 65536u

/*
 * Reads the mappings of pid whose name is a path ("/...") and that are
 * backed by a file (an inode or a device), and where its vDSO is. Returns
 * 0, or a negative errno (-ESRCH or -ENOENT: gone; SW_ETOOBIG: too many
 * mappings) with nothing to release. Blocks briefly (reads /proc).
 */
int procmaps_read(pid_t pid, struct procmaps *out);
void procmaps_release(struct procmaps *pm);

/* The same from the text of /proc/PID/maps alone, as where the kernel
 * has no PROCMAP_QUERY. */
int procmaps_read_text(pid_t pid, struct procmaps *out);

/* One line of /proc/PID/maps, parsed. */
struct procmaps_line {
	uint64_t start, end, offset;
	dev_t dev;
	uint64_t ino;
	char *name; /* into the line, the newline cut off; "" for none */
};

/*
 * Parses one line of /proc/PID/maps (modified in place: the newline is cut
 * off the name). Returns false for a malformed line. Any bytes are safe.
 */
bool procmaps_parse_line(char *line, struct procmaps_line *l);

/* Whether the mapping a line describes is one procmaps_read() keeps. */
bool procmaps_is_file(const struct procmaps_line *l);

/* The file mapping of pm that holds addr, or NULL. */
const struct procmap *procmaps_find(const struct procmaps *pm, uint64_t addr);

/* A deep copy of pm into *out (released with procmaps_release()). 0 or
 * -ENOMEM (then *out is empty). */
int procmaps_copy(const struct procmaps *pm, struct procmaps *out);

#endif /* SW_PROCMAPS_H */
