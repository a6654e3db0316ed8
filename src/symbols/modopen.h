/*
 * modopen.h - the one rule by which module files, debug files and
 * executables are opened for reading, wherever their path came from (a
 * process's maps, an agent's module list as checked by the daemon, a core
 * file's notes, the command line): a regular file of at most
 * MODOPEN_MAX_SIZE bytes, or nothing. Never a FIFO, a device or a socket,
 * which is never even opened, so no open blocks and no driver sees us.
 */
#ifndef SW_MODOPEN_H
#define SW_MODOPEN_H

#include <stdint.h>

#define MODOPEN_MAX_SIZE (1ull << 30) /* the largest file opened */

/* modopen_file()'s flags. */
#define MODOPEN_FOLLOW 1u /* path may end in a symlink: one we built */

/*
 * Opens path read-only (O_CLOEXEC, O_NONBLOCK), only if it is a regular
 * file of at most MODOPEN_MAX_SIZE bytes. Without MODOPEN_FOLLOW a final
 * symlink is refused (-ELOOP); with it, it is followed (for links the
 * kernel makes, such as /proc/PID/map_files). Returns the fd, which the
 * caller closes, or a negative errno: -EINVAL for anything but a regular
 * file, -EFBIG for a larger one. Never blocks on the file; not
 * async-signal-safe (it may use /proc/self/fd).
 */
int modopen_file(const char *path, unsigned flags);

/*
 * As modopen_file(), for a path that may go through symlinks or be one
 * (libz.so.1 -> libz.so.1.2.13, /lib -> usr/lib): resolved first with
 * realpath(), the result opened without following anything further. On
 * success *real (when real is not NULL) is the resolved path, malloc'd.
 * Returns the fd or a negative errno.
 */
int modopen_resolved(const char *path, char **real);

/*
 * Has modopen_resolved() done by fn from now on, in a process that may
 * open nothing itself (a parser worker asks whoever started it:
 * privsep/worker.h). fn returns what modopen_resolved() would.
 */
typedef int (*modopen_resolver_fn)(const char *path, char **real);
void modopen_set_resolver(modopen_resolver_fn fn);

/*
 * As modopen_file(), for path (relative, "a/b") inside another process's
 * root directory root (/proc/PID/root): resolved as that process would,
 * never leaving it, and through no symlink at all (a process's files are
 * its own to lay out: a symlink there could name anything of ours). *st
 * gets the file's status. Returns the fd or a negative errno (-ELOOP for
 * a symlink on the way).
 */
struct stat;
int modopen_in_root(const char *root, const char *path, struct stat *st);

#endif /* SW_MODOPEN_H */
