/*
 * modfile.h - opens a module's file for the symbolizer, only when the
 * target process really maps it.
 */
#ifndef SWD_MODFILE_H
#define SWD_MODFILE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "model/dump.h"

struct mapping_info {
	uint64_t start;
	uint64_t end;
	dev_t dev;
	uint64_t ino;
	char *path; /* into the parsed line; NULL for anonymous mappings */
};

/*
 * Parses one line of /proc/PID/maps (modified in place: the newline is cut
 * off the path). Returns false for a malformed line. Any bytes are safe.
 */
bool modfile_parse_maps_line(char *line, struct mapping_info *mi);

/*
 * Opens the file behind module m of process pid, read-only, for the
 * symbolizer: only when pid maps that very file over m's range, only a
 * regular file of at most 1 GiB. Returns an fd the caller closes, or a
 * negative errno. Blocks briefly (reads /proc).
 */
int modfile_open(pid_t pid, const struct sw_module *m);

#endif /* SWD_MODFILE_H */
