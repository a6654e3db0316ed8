/*
 * modopen.c - opens module files as regular files only (modopen.h).
 *
 * A path named from outside may lead anywhere: a FIFO (an open for
 * reading blocks until a writer comes, which may be never), a device
 * (whose driver acts on open: a watchdog armed, a tape rewound), a
 * socket. So a path is first opened with O_PATH, which reaches the inode
 * without opening the file itself, and checked with fstat; only a regular
 * file of acceptable size is then opened for reading, through
 * /proc/self/fd/N, which opens that very inode whatever the path has
 * become meanwhile. The result is checked again (same inode, size).
 */
#define _GNU_SOURCE
#include "modopen.h"

#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "model/procfs.h"

/* 0 when st is a regular file we may read, else a negative errno. */
static int check_stat(const struct stat *st)
{
	if (S_ISLNK(st->st_mode))
		return -ELOOP;
	if (!S_ISREG(st->st_mode))
		return -EINVAL;
	if ((uint64_t)st->st_size > MODOPEN_MAX_SIZE)
		return -EFBIG;
	return 0;
}

/* The open file reopen() made of fd: checked against pst, else closed. */
static int checked(int fd, const struct stat *pst)
{
	struct stat st;
	int err;

	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0) {
		err = -errno;
		goto out_close;
	}
	err = check_stat(&st);
	if (err)
		goto out_close;
	err = -EPERM;
	if (st.st_dev != pst->st_dev || st.st_ino != pst->st_ino)
		goto out_close;
	return fd;

out_close:
	close(fd);
	return err;
}

/* Opens for reading what pfd (O_PATH) reaches, through /proc/self/fd. */
static int reopen_fd(int pfd, const struct stat *pst)
{
	char self[40];

	snprintf(self, sizeof(self), "/proc/self/fd/%d", pfd);
	return checked(open(self, O_RDONLY | O_CLOEXEC | O_NONBLOCK), pst);
}

/*
 * Opens for reading the regular file that pfd (an O_PATH descriptor)
 * reaches. Without /proc (no /proc/self/fd), path is opened again
 * instead, never following a final symlink unless follow, and must be
 * the same inode as pfd's: a file swapped in between is refused after
 * an open that O_NONBLOCK keeps from blocking.
 */
static int reopen(int pfd, const char *path, bool follow,
		  const struct stat *pst)
{
	char self[40];
	int fd;

	snprintf(self, sizeof(self), "/proc/self/fd/%d", pfd);
	fd = open(self, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0 && errno == ENOENT)
		fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK |
					(follow ? 0 : O_NOFOLLOW));
	return checked(fd, pst);
}

int modopen_file(const char *path, unsigned flags)
{
	bool follow = flags & MODOPEN_FOLLOW;
	struct stat st;
	int pfd, fd;

	pfd = open(path, O_PATH | O_CLOEXEC | (follow ? 0 : O_NOFOLLOW));
	/* A process's map_files are a privileged reader's (procfs.h). */
	if (pfd < 0 && follow && (errno == EPERM || errno == EACCES) &&
	    procfs_get_broker() && strncmp(path, "/proc/", 6) == 0)
		return procfs_get_broker()->open(path, strlen(path) + 1,
						 PROCFS_HOW_MODULE, &st);
	if (pfd < 0)
		return -errno;
	if (fstat(pfd, &st) < 0)
		fd = -errno;
	else if ((fd = check_stat(&st)) == 0)
		fd = reopen(pfd, path, follow, &st);
	close(pfd);
	return fd;
}

/*
 * realpath() resolves every symlink with lstat and readlink, which open
 * nothing and never block, so a path through symlinked directories or
 * ending in a symlink costs no safety: what it resolves to is opened as
 * any other path, its last component without following, and checked
 * before it is opened for reading. A directory swapped for a symlink
 * after realpath() can only lead to another regular file that the caller
 * could read anyway; callers that must have one particular file check
 * its identity or build-id afterwards.
 */
static modopen_resolver_fn resolver;

void modopen_set_resolver(modopen_resolver_fn fn)
{
	resolver = fn;
}

int modopen_resolved(const char *path, char **real)
{
	char *res;
	int fd;

	if (resolver)
		return resolver(path, real);
	res = realpath(path, NULL);
	if (!res)
		return -errno;
	fd = modopen_file(res, 0);
	if (fd >= 0 && real) {
		*real = res;
		return fd;
	}
	free(res);
	return fd;
}

/*
 * path below root, one component at a time as the process whose root it
 * is would find it, and no further: every component opened with O_PATH
 * and O_NOFOLLOW from the one before (so no symlink anywhere, and no
 * absolute one that would lead out of that root), "." and ".." refused.
 * Only the inode is reached. The fd, or a negative errno.
 */
static int path_in_root(const char *root, const char *path)
{
	char comp[256];
	int fd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);

	if (fd < 0)
		return -errno;
	while (*path) {
		size_t n = strcspn(path, "/");
		bool last = path[n] == '\0';
		int next;

		if (n == 0 || n >= sizeof(comp)) {
			close(fd);
			return -EINVAL;
		}
		memcpy(comp, path, n);
		comp[n] = '\0';
		if (strcmp(comp, ".") == 0 || strcmp(comp, "..") == 0) {
			close(fd);
			return -EINVAL;
		}
		next = openat(fd, comp,
			      O_PATH | O_NOFOLLOW | O_CLOEXEC |
				      (last ? 0 : O_DIRECTORY));
		close(fd);
		if (next < 0)
			return errno == ENOTDIR ? -ELOOP : -errno;
		fd = next;
		path += n + !last;
	}
	return fd;
}

int modopen_in_root(const char *root, const char *path, struct stat *st)
{
	int pfd = path_in_root(root, path), fd;

	/* Another user's root is a privileged reader's (procfs.h). */
	if ((pfd == -EPERM || pfd == -EACCES) && procfs_get_broker() &&
	    strncmp(root, "/proc/", 6) == 0) {
		char both[512];
		size_t a = strlen(root) + 1, b = strlen(path) + 1;

		if (a + b > sizeof(both))
			return -ENAMETOOLONG;
		memcpy(both, root, a);
		memcpy(both + a, path, b);
		return procfs_get_broker()->open(both, a + b,
						 PROCFS_HOW_IN_ROOT, st);
	}
	if (pfd < 0)
		return pfd;
	if (fstat(pfd, st) < 0)
		fd = -errno;
	else if ((fd = check_stat(st)) == 0)
		fd = reopen_fd(pfd, st);
	close(pfd);
	return fd;
}
