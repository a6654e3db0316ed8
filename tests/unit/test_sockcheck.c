/*
 * test_sockcheck.c - the rule that decides whether the CLI and the agent
 * may use a unix socket (src/model/sockcheck.c), on real sockets, links
 * and directories in a private temp directory: what passes, what is
 * refused and why, and the peer check on a connected pair. The owner
 * cases need root (chown); without it they are skipped.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "model/sockcheck.h"
#include "tap.h"

#define OTHER_UID 65534

static char top[] = "/tmp/sw-sockcheck-XXXXXX";

/* Makes a unix socket at path (not listening: only the file matters). */
static int make_socket(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	int rc;

	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	rc = fd >= 0 && bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;
	if (fd >= 0)
		close(fd);
	return rc ? 0 : -1;
}

static void test_modes(uid_t me)
{
	char dir[128], sock[160], file[160], link[160], ldir[128], lsock[160];
	struct sockcheck sc;
	int rc;

	snprintf(dir, sizeof(dir), "%s/d", top);
	snprintf(sock, sizeof(sock), "%s/http.sock", dir);
	snprintf(file, sizeof(file), "%s/file", dir);
	snprintf(link, sizeof(link), "%s/link.sock", dir);
	snprintf(ldir, sizeof(ldir), "%s/ldir", top);
	snprintf(lsock, sizeof(lsock), "%s/http.sock", ldir);
	if (mkdir(dir, 0755) < 0 || make_socket(sock) < 0 ||
	    symlink(sock, link) < 0 || symlink(dir, ldir) < 0) {
		TAP_OK(0, "the fixtures are made under %s", top);
		return;
	}
	fclose(fopen(file, "w"));

	TAP_OK(sockcheck_path(sock, me, &sc) == 0 && sc.fault == SOCKCHECK_OK &&
		       strcmp(sc.dir, dir) == 0,
	       "a socket of ours in a directory of ours, 0755, passes (%s)",
	       sc.dir);
	rc = sockcheck_path(dir, me, &sc);
	TAP_OK(rc == -ENOTSOCK && sc.fault == SOCKCHECK_NOT_SOCKET,
	       "a directory is no socket (%d)", rc);
	rc = sockcheck_path(file, me, &sc);
	TAP_OK(rc == -ENOTSOCK && sc.fault == SOCKCHECK_NOT_SOCKET,
	       "a regular file is no socket (%d)", rc);
	rc = sockcheck_path(link, me, &sc);
	TAP_OK(rc == -ELOOP && sc.fault == SOCKCHECK_LINK,
	       "a symbolic link to a good socket is refused (%d)", rc);
	rc = sockcheck_path(lsock, me, &sc);
	TAP_OK(rc == -ELOOP && sc.fault == SOCKCHECK_DIR_LINK &&
		       strcmp(sc.dir, ldir) == 0,
	       "a socket in a directory reached by a symbolic link is "
	       "refused (%d, %s)",
	       rc, sc.dir);
	rc = sockcheck_path("/nonexistent-sw/http.sock", me, &sc);
	TAP_OK(rc == -ENOENT && sc.fault == SOCKCHECK_MISSING,
	       "nothing there: -ENOENT (%d)", rc);
	{
		char under[200];

		snprintf(under, sizeof(under), "%s/x.sock", file);
		rc = sockcheck_path(under, me, &sc);
		TAP_OK(rc == -ENOTDIR && sc.fault == SOCKCHECK_DIR_NOT_DIR,
		       "a regular file as the directory: -ENOTDIR (%d)", rc);
	}

	chmod(dir, 0775);
	rc = sockcheck_path(sock, me, &sc);
	TAP_OK(rc == -EPERM && sc.fault == SOCKCHECK_DIR_WRITABLE &&
		       (sc.mode & 07777) == 0775,
	       "a directory the group may write to is refused (%d, %04o)", rc,
	       (unsigned)(sc.mode & 07777));
	chmod(dir, 01777);
	rc = sockcheck_path(sock, me, &sc);
	TAP_OK(rc == -EPERM && sc.fault == SOCKCHECK_DIR_WRITABLE,
	       "a sticky directory anyone may write to (like /tmp) is "
	       "refused too (%d)",
	       rc);
	chmod(dir, 0700);
	TAP_OK(sockcheck_path(sock, me, NULL) == 0,
	       "0700 passes; the verdict may be NULL");

	/* A bare name is looked up in ".". */
	if (chdir(dir) == 0) {
		rc = sockcheck_path("http.sock", me, &sc);
		TAP_OK(rc == 0 && strcmp(sc.dir, ".") == 0,
		       "a bare name: its directory is '.' (%d, %s)", rc,
		       sc.dir);
		(void)!chdir("/");
	}
}

static void test_paths(uid_t me)
{
	char longp[200];
	struct sockcheck sc;

	memset(longp, 'a', sizeof(longp) - 1);
	longp[0] = '/';
	longp[sizeof(longp) - 1] = '\0';
	TAP_OK(sockcheck_path("", me, &sc) == -EINVAL &&
		       sc.fault == SOCKCHECK_BAD_PATH,
	       "an empty path: -EINVAL");
	TAP_OK(sockcheck_path("/tmp/", me, &sc) == -EINVAL,
	       "a path ending in '/': -EINVAL");
	TAP_OK(sockcheck_path(longp, me, &sc) == -ENAMETOOLONG,
	       "a path longer than sun_path: -ENAMETOOLONG");
}

/* Who owns what, against whom: needs root for chown. */
static void test_owners(void)
{
	char dir[128], sock[160];
	struct sockcheck sc;
	int rc;

	snprintf(dir, sizeof(dir), "%s/o", top);
	snprintf(sock, sizeof(sock), "%s/agent.sock", dir);
	if (mkdir(dir, 0755) < 0 || make_socket(sock) < 0) {
		TAP_OK(0, "the owner fixtures are made");
		return;
	}
	TAP_OK(sockcheck_path(sock, OTHER_UID, &sc) == 0,
	       "root's socket in root's directory passes for uid %d",
	       OTHER_UID);
	(void)!chown(dir, OTHER_UID, OTHER_UID);
	rc = sockcheck_path(sock, 0, &sc);
	TAP_OK(rc == -EPERM && sc.fault == SOCKCHECK_DIR_OWNER &&
		       sc.uid == OTHER_UID,
	       "a directory of uid %d is refused for root (%d, uid %u)",
	       OTHER_UID, rc, (unsigned)sc.uid);
	TAP_OK(sockcheck_path(sock, OTHER_UID, &sc) == 0,
	       "... and passes for uid %d itself (root's socket inside)",
	       OTHER_UID);
	(void)!chown(dir, 0, 0);
	(void)!chown(sock, OTHER_UID, OTHER_UID);
	rc = sockcheck_path(sock, 1, &sc);
	TAP_OK(rc == -EPERM && sc.fault == SOCKCHECK_OWNER &&
		       sc.uid == OTHER_UID,
	       "a socket of uid %d in root's directory is refused for uid "
	       "1 (%d)",
	       OTHER_UID, rc);
	unlink(sock);
	rmdir(dir);
}

static void test_peer(uid_t me)
{
	int sv[2];
	uid_t peer = (uid_t)-1;
	int rc;

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) {
		TAP_OK(0, "socketpair");
		return;
	}
	rc = sockcheck_peer(sv[0], me, &peer);
	TAP_OK(rc == 0 && peer == me, "the peer of our own pair is us (%d, %u)",
	       rc, (unsigned)peer);
	if (me != 0) {
		rc = sockcheck_peer(sv[0], me + 1, &peer);
		TAP_OK(rc == -EPERM && peer == me,
		       "... and refused for another uid (%d)", rc);
	}
	close(sv[0]);
	close(sv[1]);
	rc = sockcheck_peer(-1, me, NULL);
	TAP_OK(rc == -EBADF, "no socket: -EBADF (%d)", rc);
}

int main(void)
{
	char cmd[64];
	uid_t me = geteuid();

	if (!mkdtemp(top)) {
		TAP_OK(0, "mkdtemp");
		return tap_done();
	}
	chmod(top, 0755);
	test_modes(me);
	test_paths(me);
	if (me == 0)
		test_owners();
	else
		TAP_SKIP("owner cases need root (chown)");
	test_peer(me);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", top);
	TAP_OK(system(cmd) == 0, "%s removed", top);
	return tap_done();
}
