/*
 * unwind.h - stacks of processes without the agent, unwound offline with
 * elfutils libdwfl: from a ptrace snapshot (registers and stack copies,
 * snapshot/snapshot.h) or from a core file.
 *
 * The result is a raw dump like the agent's: per thread its raw
 * instruction pointers, plus the modules of the process, ready for the
 * symbolizer (symbolize.h). Only the call frame information of each module
 * is read here; memory comes from the copies (a read outside them ends the
 * stack), never from the live process.
 */
#ifndef SW_UNWIND_H
#define SW_UNWIND_H

#include <stddef.h>
#include <stdint.h>

#include "model/dump.h"
#include "model/procmaps.h"
#include "snapshot/snapshot.h"

/*
 * Opens the file that the snapshotted process maps at start (its kernel
 * path is path): an fd the unwinder owns, or a negative errno. NULL opens
 * path itself (a regular file only).
 */
typedef int (*unwind_open_fn)(void *arg, uint64_t start, const char *path);

/*
 * Unwinds every thread of s into a raw dump (*out, freed with
 * sw_dump_free()): method "ptrace", threads in s's order with their
 * status, the modules from maps (the process's file mappings, read by
 * the caller; NULL: read here, if there is anything to unwind). A thread s
 * marks reused gets SW_TF_REUSED and no addresses, for the caller to put back;
 * when every thread read is such, nothing is unwound and the dump has
 * no modules (the caller has those of its earlier read). The libdwfl
 * session (its files open, their call frame information parsed) is kept
 * for the next snapshot of the same pid whose mappings are the same and
 * whose files are unchanged (device, inode, size, times), and ended by
 * any other. Returns 0, -ENOMEM, or -ESRCH when the process is gone.
 */
int unwind_snapshot(const struct snap *s, const struct procmaps *maps,
		    unwind_open_fn open_fn, void *open_arg,
		    struct sw_dump **out);

/*
 * Ends the session kept from the last snapshot (unwind_snapshot() keeps
 * it for the next snapshot of the same process with the same mappings
 * and files): for a caller that rewrites files in place faster than
 * their times change, as a fuzzer does.
 */
void unwind_forget(void);

/*
 * The stacks of every thread of the core file at core_path (exe: the
 * executable, NULL to find it from the core's notes), as a raw dump with
 * method "core", with the fatal signal of a crash's core
 * (d->core_signal) and, for a core cut short, its size and the size its
 * segments need (d->core_cut_size, core_cut_need: what lay past the end
 * is unknown, so some stacks may be short). Returns 0, or a negative
 * errno or SW_EFORMAT with a sentence in why (a core of which nothing
 * can be read: no threads).
 */
int unwind_core(const char *core_path, const char *exe, struct sw_dump **out,
		char *why, size_t why_size);

/*
 * unwind_core() keeping max_frames frames per thread (as struct snap's
 * max_frames: 0 is SW_MAX_FRAMES, at most SW_MAX_FRAMES_HARD); a thread
 * with more gets SW_TF_TRUNCATED.
 */
int unwind_core_max(const char *core_path, const char *exe, unsigned max_frames,
		    struct sw_dump **out, char *why, size_t why_size);

/*
 * unwind_core_max() of the core file open at fd (taken: closed here),
 * named core_path in what it says.
 */
int unwind_core_fd(int fd, const char *core_path, const char *exe,
		   unsigned max_frames, struct sw_dump **out, char *why,
		   size_t why_size);

/* The frames kept for max_frames (struct snap's): 0 SW_MAX_FRAMES,
 * else max_frames, at most SW_MAX_FRAMES_HARD. */
unsigned unwind_max_frames(unsigned max_frames);

#endif /* SW_UNWIND_H */
