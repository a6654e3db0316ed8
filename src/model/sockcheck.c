/*
 * sockcheck.c - whether a unix socket may be trusted by its client: the
 * path rule and the peer rule of sockcheck.h, shared by the CLI and the
 * agent.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdbool.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include "sockcheck.h"

#define SUN_PATH_MAX sizeof(((struct sockaddr_un *)0)->sun_path)

_Static_assert(sizeof(((struct sockcheck *)0)->dir) >= SUN_PATH_MAX,
	       "sockcheck.dir holds any socket path");

/* Sets the verdict and returns rc, for "return fault(...)". */
static int fault(struct sockcheck *out, enum sockcheck_fault f,
		 const struct stat *st, int rc)
{
	out->fault = f;
	if (st) {
		out->uid = st->st_uid;
		out->mode = st->st_mode;
	}
	return rc;
}

/*
 * Copies the directory part of path (n bytes, n < size) into dir: "." for
 * a bare name, "/" for a name at the root, without trailing slashes so
 * that lstat() does not follow a link in its last component. Returns the
 * offset of the name in path.
 */
static size_t split_dir(const char *path, size_t n, char *dir)
{
	size_t slash = n, end;

	while (slash > 0 && path[slash - 1] != '/')
		slash--;
	if (slash == 0) {
		memcpy(dir, ".", 2);
		return 0;
	}
	end = slash;
	while (end > 1 && path[end - 1] == '/')
		end--;
	memcpy(dir, path, end);
	dir[end] = '\0';
	return slash;
}

static bool owner_ok(uid_t uid, uid_t euid)
{
	return uid == 0 || uid == euid;
}

int sockcheck_path(const char *path, uid_t euid, struct sockcheck *out)
{
	struct sockcheck scratch;
	struct stat sock, dir;
	size_t n = path ? strnlen(path, SUN_PATH_MAX) : 0;
	size_t name;

	if (!out)
		out = &scratch;
	memset(out, 0, sizeof(*out));
	if (n == 0)
		return fault(out, SOCKCHECK_BAD_PATH, NULL, -EINVAL);
	if (n >= SUN_PATH_MAX)
		return fault(out, SOCKCHECK_BAD_PATH, NULL, -ENAMETOOLONG);
	name = split_dir(path, n, out->dir);
	if (name == n)
		return fault(out, SOCKCHECK_BAD_PATH, NULL, -EINVAL);
	if (lstat(path, &sock) < 0) {
		if (errno == ENOENT)
			return fault(out, SOCKCHECK_MISSING, NULL, -ENOENT);
		if (errno == ENOTDIR)
			return fault(out, SOCKCHECK_DIR_NOT_DIR, NULL,
				     -ENOTDIR);
		return fault(out, SOCKCHECK_ERROR, NULL, -errno);
	}
	if (lstat(out->dir, &dir) < 0)
		return fault(out, SOCKCHECK_ERROR, NULL, -errno);
	/* The directory first: who may put a name there says the most. */
	if (S_ISLNK(dir.st_mode))
		return fault(out, SOCKCHECK_DIR_LINK, &dir, -ELOOP);
	if (!S_ISDIR(dir.st_mode))
		return fault(out, SOCKCHECK_DIR_NOT_DIR, &dir, -ENOTDIR);
	if (!owner_ok(dir.st_uid, euid))
		return fault(out, SOCKCHECK_DIR_OWNER, &dir, -EPERM);
	if (dir.st_mode & (S_IWGRP | S_IWOTH))
		return fault(out, SOCKCHECK_DIR_WRITABLE, &dir, -EPERM);
	if (S_ISLNK(sock.st_mode))
		return fault(out, SOCKCHECK_LINK, &sock, -ELOOP);
	if (!S_ISSOCK(sock.st_mode))
		return fault(out, SOCKCHECK_NOT_SOCKET, &sock, -ENOTSOCK);
	if (!owner_ok(sock.st_uid, euid))
		return fault(out, SOCKCHECK_OWNER, &sock, -EPERM);
	return 0;
}

int sockcheck_peer(int fd, uid_t euid, uid_t *peer_uid)
{
	struct ucred cred;
	socklen_t len = sizeof(cred);

	memset(&cred, 0, sizeof(cred));
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0)
		return -errno;
	if (len != sizeof(cred))
		return -EPROTO;
	if (peer_uid)
		*peer_uid = cred.uid;
	return owner_ok(cred.uid, euid) ? 0 : -EPERM;
}
