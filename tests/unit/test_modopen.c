/*
 * test_modopen.c - the module file rule (src/symbols/modopen.c) on real
 * files in a temporary directory: a regular file opens; a FIFO, a
 * device, a socket and a directory are refused at once (never blocking),
 * directly or through a symlink; a final symlink is refused unless
 * followed or resolved; a path through a symlinked directory resolves;
 * a file over the size cap is refused. An alarm ends the test should any
 * open block.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "symbols/modopen.h"
#include "tap.h"

static char dir[] = "/tmp/sw-modopen-XXXXXX";

/* dir/name into buf. */
static const char *in_dir(char *buf, size_t size, const char *name)
{
	snprintf(buf, size, "%s/%s", dir, name);
	return buf;
}

/* The result of modopen_file(path, flags), its fd closed. */
static int try_file(const char *path, unsigned flags)
{
	int fd = modopen_file(path, flags);

	if (fd >= 0)
		close(fd);
	return fd >= 0 ? 0 : fd;
}

/* The result of modopen_resolved(path), its fd closed. */
static int try_resolved(const char *path)
{
	int fd = modopen_resolved(path, NULL);

	if (fd >= 0)
		close(fd);
	return fd >= 0 ? 0 : fd;
}

int main(void)
{
	char reg[256], fifo[256], sock[256], big[256], link[256], lfifo[256],
		ldev[256], ldir[256], via[300], buf[16];
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	char *real = NULL;
	int fd, s, r;

	alarm(30); /* an open that blocks fails the test */
	if (!mkdtemp(dir)) {
		TAP_OK(0, "a temporary directory");
		return tap_done();
	}
	fd = open(in_dir(reg, sizeof(reg), "reg"), O_WRONLY | O_CREAT, 0644);
	TAP_OK(fd >= 0 && write(fd, "module", 6) == 6, "a regular file");
	close(fd);
	mkfifo(in_dir(fifo, sizeof(fifo), "fifo"), 0644);
	in_dir(sock, sizeof(sock), "sock");
	memcpy(sa.sun_path, sock, strlen(sock) + 1); /* a short path */
	s = socket(AF_UNIX, SOCK_STREAM, 0);
	TAP_OK(s >= 0 && bind(s, (struct sockaddr *)&sa, sizeof(sa)) == 0,
	       "a socket bound at %s", sock);
	fd = open(in_dir(big, sizeof(big), "big"), O_WRONLY | O_CREAT, 0644);
	TAP_OK(fd >= 0 && ftruncate(fd, (off_t)MODOPEN_MAX_SIZE + 1) == 0,
	       "a sparse file one byte over the cap");
	close(fd);
	(void)!symlink(reg, in_dir(link, sizeof(link), "link"));
	(void)!symlink(fifo, in_dir(lfifo, sizeof(lfifo), "lfifo"));
	(void)!symlink("/dev/zero", in_dir(ldev, sizeof(ldev), "ldev"));
	(void)!symlink(dir, in_dir(ldir, sizeof(ldir), "ldir"));
	snprintf(via, sizeof(via), "%s/reg", ldir);

	fd = modopen_file(reg, 0);
	TAP_OK(fd >= 0 && read(fd, buf, sizeof(buf)) == 6 &&
		       memcmp(buf, "module", 6) == 0,
	       "a regular file opens and reads (%d)", fd);
	if (fd >= 0) {
		TAP_OK((fcntl(fd, F_GETFD) & FD_CLOEXEC) &&
			       (fcntl(fd, F_GETFL) & O_ACCMODE) == O_RDONLY,
		       "read-only, close-on-exec");
		close(fd);
	}
	r = try_file(fifo, 0);
	TAP_OK(r == -EINVAL, "a FIFO is refused at once (%d)", r);
	r = try_file("/dev/zero", 0);
	TAP_OK(r == -EINVAL, "a device is refused (%d)", r);
	r = try_file(sock, 0);
	TAP_OK(r == -EINVAL, "a socket is refused (%d)", r);
	r = try_file(dir, 0);
	TAP_OK(r == -EINVAL, "a directory is refused (%d)", r);
	r = try_file(big, 0);
	TAP_OK(r == -EFBIG, "a file over MODOPEN_MAX_SIZE is refused (%d)", r);
	r = try_file(link, 0);
	TAP_OK(r == -ELOOP, "a final symlink is refused (%d)", r);
	r = try_file(link, MODOPEN_FOLLOW);
	TAP_OK(r == 0, "a final symlink is followed with MODOPEN_FOLLOW (%d)",
	       r);
	r = try_file(lfifo, MODOPEN_FOLLOW);
	TAP_OK(r == -EINVAL, "a symlink to a FIFO, followed, is refused (%d)",
	       r);
	r = try_file("/nonexistent/sw", 0);
	TAP_OK(r == -ENOENT, "a missing file: -ENOENT (%d)", r);

	fd = modopen_resolved(link, &real);
	TAP_OK(fd >= 0 && real && strcmp(real, reg) == 0,
	       "a symlink resolves to its regular file (%s)",
	       real ? real : "(none)");
	if (fd >= 0)
		close(fd);
	free(real);
	real = NULL;
	fd = modopen_resolved(via, &real);
	TAP_OK(fd >= 0 && real && strcmp(real, reg) == 0,
	       "a path through a symlinked directory resolves (%s)",
	       real ? real : "(none)");
	if (fd >= 0)
		close(fd);
	free(real);
	r = try_resolved(lfifo);
	TAP_OK(r == -EINVAL, "a symlink to a FIFO, resolved, is refused (%d)",
	       r);
	r = try_resolved(ldev);
	TAP_OK(r == -EINVAL,
	       "a symlink to /dev/zero, resolved, is refused (%d)", r);

	if (s >= 0)
		close(s);
	unlink(reg);
	unlink(fifo);
	unlink(sock);
	unlink(big);
	unlink(link);
	unlink(lfifo);
	unlink(ldev);
	unlink(ldir);
	TAP_OK(rmdir(dir) == 0, "the temporary directory is removed");
	return tap_done();
}
