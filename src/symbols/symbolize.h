/*
 * symbolize.h - turns a dump's raw instruction pointers into frames with
 * function, source file, line and inlined frames, through elfutils libdwfl.
 *
 * One symbolizer is long-lived: it keeps one libdwfl session per file
 * (keyed by the identity of the file it opened: device, inode, size,
 * mtime, ctime; never by what a module claims) and a cache of results per
 * (session, looked-up offset), so a thousand threads with the same stack
 * cost one lookup, a rebuilt binary reuses nothing stale, and a file that
 * claims another's build-id shares nothing with it. Sessions are kept
 * least-recently-used. It is not thread-safe: callers serialize.
 */
#ifndef SW_SYMBOLIZE_H
#define SW_SYMBOLIZE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "model/dump.h"

struct sym;

/*
 * How the symbolizer opens a module's file, once per dump that uses the
 * module (the open file's identity selects the session). Returns an open
 * read-only fd the symbolizer owns, or a negative errno; NULL selects the
 * default, which opens m->path by the module file rule (modopen.h: its
 * symlinks resolved, only a regular file of at most 1 GiB, never
 * blocking). The daemon
 * passes one that opens the file the target really maps at the module's
 * start, never the module's path.
 */
typedef int (*sym_open_fn)(void *arg, const struct sw_module *m);

/*
 * How the symbolizer gets the image of a module that has no file: the
 * vDSO (vdso.h), whose image the process or the core holds. Puts a
 * malloc'd copy (the symbolizer frees it) in *image and its size in
 * *size and returns 0, or returns a negative errno. Called once per dump
 * that has a frame in such a module; the image's bytes select the
 * session, and its build-id must be the one m claims. Without one, or
 * when it fails, our own vDSO's image serves a module that claims its
 * build-id (the kernel maps the same image into every process of one
 * boot and ABI).
 */
typedef int (*sym_image_fn)(void *arg, const struct sw_module *m, void **image,
			    size_t *size);

/*
 * How separate debug files are found by build-id, for every symbolizer
 * of the process: fn returns an open fd of the file (the symbolizer owns
 * it) or a negative errno. NULL (the default): the system's debug
 * directory, /usr/lib/debug/.build-id, opened by the module file rule.
 * A parser worker, which may open nothing, asks its daemon.
 */
void sym_set_debug_fn(int (*fn)(const uint8_t *id, size_t n));

/*
 * Loads what symbolizing would load later (libstdc++'s demangler), for
 * a process about to lose the right to open files.
 */
void sym_prepare(void);

/* The default's way: the system's debug file for a build-id, or -ENOENT. */
int sym_open_debug(const uint8_t *id, size_t n);

/* Creates a symbolizer. Returns 0 or -ENOMEM. */
int sym_new(sym_open_fn open_fn, void *open_arg, struct sym **out);

/* Sets the image function (NULL: none); see sym_image_fn. */
void sym_set_image_fn(struct sym *s, sym_image_fn fn, void *arg);

/* Frees a symbolizer and its caches. Accepts NULL. */
void sym_free(struct sym *s);

/*
 * Fills threads[i].frames of d from threads[i].ips, for every thread with
 * status ok. With symbols false, frames carry only ip, module and offset;
 * with symbols true also the demangled function (without a symbol-version
 * suffix), the absolute source file and line, and inlined frames (each its
 * own frame with inlined true, before the function it was inlined into,
 * sharing its ip). Looks up pc - 1 for every frame but an exact first one
 * (SW_TF_FIRST_EXACT). A module that cannot be read, or whose build-id does
 * not match the file, gives frames with module and offset only. A thread
 * flagged SW_TF_IN_LOADER gets one frame, function "[in dynamic loader]",
 * and one flagged SW_TF_LOW_STACK one frame "[stack nearly exhausted]".
 * Frames and their strings are allocated in d's memory (dump_alloc()),
 * after the frames d had before are dropped; threads with the same ips and
 * flags share one frame array. Sets d->symbolized = symbols. Returns 0 or
 * -ENOMEM (then only some threads have frames).
 */
int sym_dump(struct sym *s, struct sw_dump *d, bool symbols);

/*
 * sym_dump() with a time budget: once CLOCK_MONOTONIC reaches
 * deadline_ns (0: never), no more file is opened and no more address
 * looked up; the frames still to make get module and offset only (cached
 * results still serve), and d->symbols_partial is set. One lookup under
 * way when the deadline passes is finished first.
 */
int sym_dump_until(struct sym *s, struct sw_dump *d, bool symbols,
		   uint64_t deadline_ns);

/* Cache statistics since creation. */
uint64_t sym_cache_hits(const struct sym *s);
uint64_t sym_cache_misses(const struct sym *s);

/* Sessions kept now, and files remembered as no module we can read. */
size_t sym_sessions(const struct sym *s);
size_t sym_failed_files(const struct sym *s);

#endif /* SW_SYMBOLIZE_H */
