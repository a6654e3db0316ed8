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
#include "model/procmaps.h"

/* The file mappings of a pinned process, read once per dump. */
struct modfile_maps {
	pid_t pid;
	int pidfd; /* -1: not pinned (the daemon itself) */
	struct procmaps pm;
};

/*
 * Reads the file mappings of pid, and keeps them only if the process
 * pinned by pidfd (-1: none) is still there afterwards. Returns 0, or a
 * negative errno (-ESRCH: gone, SW_ETOOBIG: too many mappings) with
 * nothing to release. Blocks briefly (reads /proc).
 */
int modfile_maps_read(pid_t pid, int pidfd, struct modfile_maps *out);
void modfile_maps_release(struct modfile_maps *mm);

/*
 * Hands mappings on within one dump, in the thread doing it: the
 * unwinder of a process without the agent reads them, and its symbolizer
 * takes the same read instead of reading them again (a thousand threads'
 * process has two thousand mappings to walk). modfile_pass_begin()
 * drops any left from before; modfile_pass_put() takes mm over (mm is
 * left empty); modfile_pass_take() gives them to the first who asks for
 * that pid and pidfd (0), or -ENOENT.
 */
void modfile_pass_begin(void);
void modfile_pass_put(struct modfile_maps *mm);
int modfile_pass_take(pid_t pid, int pidfd, struct modfile_maps *out);

/* Whether the process pinned by pidfd is still there (-1: not pinned). */
bool modfile_still_there(int pidfd);

/*
 * Opens the file behind module m, read-only, for the symbolizer: the
 * process's own file mapping at m's start (never m's path), a regular
 * file of at most 1 GiB with the mapping's device and inode, while the
 * pinned process is still there. Returns an fd the caller closes, or a
 * negative errno (-ESRCH: gone). Blocks briefly.
 */
int modfile_open(const struct modfile_maps *mm, const struct sw_module *m);

#endif /* SWD_MODFILE_H */
