/*
 * test_broker.c - what a core opens and reads for the unprivileged
 * service (src/daemon/broker.c), and what it refuses whatever the
 * service asks: the service may be taken over, so the core serves the
 * few paths of the shapes it needs and nothing else.
 *
 * Each request goes through broker_serve(), the core's own code, on a
 * real socket pair, about a real child process: the answers are read as
 * the service reads them. Allowed: the child's maps, auxv, a file it
 * maps (through map_files), its namespace links, its perf map in its own
 * root, its threads' wchan and stack text. Refused with EPERM and no
 * descriptor: any other file of /proc/PID (environ, mem, cwd, exe, fd,
 * root/...), a path that climbs out (".."), our own /proc/self, any path
 * outside /proc, a file of the child's root but its perf map, a perf map
 * under another root. A FIFO in place of the perf map is never opened,
 * and the answer says what it was. Needs root (the core's privileges).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "daemon/broker.h"
#include "daemon/ptracer_msg.h"
#include "tap.h"

struct reply {
	struct broker_answer a;
	char text[BROKER_READ_MAX];
	size_t len;
	int fd;
};

/* Serves op on body (len bytes) as a core would; the answer into *r. */
static void serve(uint32_t op, const void *body, size_t len, struct reply *r)
{
	struct request rq = { .magic = PTRACER_MAGIC,
			      .kind = REQ_BROKER,
			      .n = op };
	char msg[sizeof(r->a) + BROKER_READ_MAX];
	char ctrl[CMSG_SPACE(sizeof(int))];
	struct iovec io = { msg, sizeof(msg) };
	struct msghdr mh = { .msg_iov = &io,
			     .msg_iovlen = 1,
			     .msg_control = ctrl,
			     .msg_controllen = sizeof(ctrl) };
	int sv[2];
	ssize_t n;

	memset(r, 0, sizeof(*r));
	r->fd = -1;
	r->a.rc = -9999;
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
		return;
	broker_serve(&rq, body, len, sv[1]);
	close(sv[1]);
	n = recvmsg(sv[0], &mh, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
	close(sv[0]);
	if (n < (ssize_t)sizeof(r->a))
		return;
	memcpy(&r->a, msg, sizeof(r->a));
	r->len = (size_t)n - sizeof(r->a);
	memcpy(r->text, msg + sizeof(r->a), r->len);
	r->text[r->len < sizeof(r->text) ? r->len : sizeof(r->text) - 1] = '\0';
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c))
		if (c->cmsg_type == SCM_RIGHTS)
			memcpy(&r->fd, CMSG_DATA(c), sizeof(int));
}

static void serve_path(uint32_t op, const char *path, struct reply *r)
{
	serve(op, path, strlen(path) + 1, r);
}

static void done(struct reply *r)
{
	if (r->fd >= 0)
		close(r->fd);
	r->fd = -1;
}

/* A refusal: EPERM, nothing attached, no text. */
static void refused(uint32_t op, const char *path, const char *what)
{
	struct reply r;

	serve_path(op, path, &r);
	TAP_OK(r.a.rc == -EPERM && r.fd < 0 && r.len == 0,
	       "refused: %s (%s: rc %d, fd %d)", what, path, (int)r.a.rc, r.fd);
	done(&r);
}

/* The first file mapping of pid: "START-END" into range, its dev/ino. */
static bool first_file_mapping(pid_t pid, char *range, size_t size,
			       struct stat *st)
{
	char path[64], line[512];
	bool found = false;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	f = fopen(path, "re");
	while (f && !found && fgets(line, sizeof(line), f)) {
		char *file = strchr(line, '/');
		unsigned long a, b;

		if (!file || sscanf(line, "%lx-%lx", &a, &b) != 2)
			continue;
		file[strcspn(file, "\n")] = '\0';
		if (stat(file, st) == 0) {
			snprintf(range, size, "%lx-%lx", a, b);
			found = true;
		}
	}
	if (f)
		fclose(f);
	return found;
}

static void test_allowed(pid_t child)
{
	char path[128], range[64], perf[64];
	struct stat want, got;
	struct reply r;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/maps", (int)child);
	serve_path(BROKER_OPEN_READ, path, &r);
	{
		char buf[256] = "";
		ssize_t n = r.fd >= 0 ? read(r.fd, buf, sizeof(buf) - 1) : -1;

		TAP_OK(r.a.rc == 0 && n > 0 && strchr(buf, '-'),
		       "the child's maps: a descriptor that reads them");
	}
	done(&r);
	snprintf(path, sizeof(path), "/proc/%d/auxv", (int)child);
	serve_path(BROKER_OPEN_READ, path, &r);
	TAP_OK(r.a.rc == 0 && r.fd >= 0, "its auxv");
	done(&r);
	snprintf(path, sizeof(path), "/proc/%d/ns/mnt", (int)child);
	serve_path(BROKER_OPEN_PATH, path, &r);
	TAP_OK(r.a.rc == 0 && r.fd >= 0 && fstat(r.fd, &got) == 0 &&
		       stat(path, &want) == 0 && got.st_ino == want.st_ino,
	       "its mount namespace link, as an O_PATH handle of it");
	done(&r);
	snprintf(path, sizeof(path), "/proc/%d/task/%d/wchan", (int)child,
		 (int)child);
	serve_path(BROKER_READ, path, &r);
	TAP_OK(r.a.rc > 0 && (size_t)r.a.rc == r.len && r.text[0] != '0',
	       "its thread's wchan, as root reads it (%s)", r.text);
	done(&r);
	snprintf(path, sizeof(path), "/proc/%d/task/%d/stack", (int)child,
		 (int)child);
	serve_path(BROKER_READ, path, &r);
	TAP_OK(r.a.rc > 0 && strstr(r.text, "[<"),
	       "its thread's kernel stack text");
	done(&r);
	if (first_file_mapping(child, range, sizeof(range), &want)) {
		snprintf(path, sizeof(path), "/proc/%d/map_files/%s",
			 (int)child, range);
		serve_path(BROKER_OPEN_MODULE, path, &r);
		TAP_OK(r.a.rc == 0 && r.fd >= 0 && fstat(r.fd, &got) == 0 &&
			       got.st_ino == want.st_ino &&
			       got.st_dev == want.st_dev,
		       "a file it maps, through map_files: that very file");
		done(&r);
	} else {
		TAP_OK(0, "the child maps a file");
	}
	/* Its perf map, in its own root; then a FIFO in its place. */
	snprintf(perf, sizeof(perf), "/tmp/perf-%d.map", (int)child);
	fd = open(perf, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd >= 0) {
		(void)!write(fd, "1000 10 f\n", 10);
		close(fd);
	}
	{
		char body[128];
		size_t a, b;

		a = (size_t)snprintf(body, sizeof(body), "/proc/%d/root",
				     (int)child) +
		    1;
		b = (size_t)snprintf(body + a, sizeof(body) - a,
				     "tmp/perf-%d.map", (int)child) +
		    1;
		serve(BROKER_OPEN_IN_ROOT, body, a + b, &r);
		TAP_OK(r.a.rc == 0 && r.fd >= 0,
		       "its perf map, found in its own root");
		done(&r);
		unlink(perf);
		if (mkfifo(perf, 0644) == 0) {
			serve(BROKER_OPEN_IN_ROOT, body, a + b, &r);
			TAP_OK(r.a.rc < 0 && r.fd < 0 && S_ISFIFO(r.a.mode),
			       "a FIFO in its place is never opened, and the "
			       "answer says what it is (rc %d)",
			       (int)r.a.rc);
			done(&r);
			unlink(perf);
		}
		/* Anything else of that root: no. */
		b = (size_t)snprintf(body + a, sizeof(body) - a, "etc/shadow") +
		    1;
		serve(BROKER_OPEN_IN_ROOT, body, a + b, &r);
		TAP_OK(r.a.rc == -EPERM && r.fd < 0,
		       "refused: any other file of its root (etc/shadow)");
		done(&r);
		a = (size_t)snprintf(body, sizeof(body), "/") + 1;
		b = (size_t)snprintf(body + a, sizeof(body) - a,
				     "tmp/perf-%d.map", (int)child) +
		    1;
		serve(BROKER_OPEN_IN_ROOT, body, a + b, &r);
		TAP_OK(r.a.rc == -EPERM && r.fd < 0,
		       "refused: a perf map under a root that is not a "
		       "process's");
		done(&r);
	}
}

static void test_refused(pid_t child)
{
	char p[160];
	struct reply r;

	snprintf(p, sizeof(p), "/proc/%d/environ", (int)child);
	refused(BROKER_OPEN_READ, p, "its environment");
	refused(BROKER_READ, p, "its environment, as text");
	snprintf(p, sizeof(p), "/proc/%d/mem", (int)child);
	refused(BROKER_OPEN_READ, p, "its memory");
	refused(BROKER_READ, p, "its memory, as text");
	snprintf(p, sizeof(p), "/proc/%d/root/etc/shadow", (int)child);
	refused(BROKER_OPEN_READ, p, "a file through its root");
	refused(BROKER_OPEN_MODULE, p, "a module path through its root");
	snprintf(p, sizeof(p), "/proc/%d/exe", (int)child);
	refused(BROKER_OPEN_MODULE, p, "its executable by its link");
	snprintf(p, sizeof(p), "/proc/%d/cwd", (int)child);
	refused(BROKER_OPEN_PATH, p, "its working directory");
	snprintf(p, sizeof(p), "/proc/%d/fd/0", (int)child);
	refused(BROKER_OPEN_MODULE, p, "one of its descriptors");
	snprintf(p, sizeof(p), "/proc/%d/../1/maps", (int)child);
	refused(BROKER_OPEN_READ, p, "a path that climbs out");
	snprintf(p, sizeof(p), "/proc/%d/map_files/../../1/environ",
		 (int)child);
	refused(BROKER_OPEN_MODULE, p, "map_files with a path after it");
	snprintf(p, sizeof(p), "/proc/%d/map_files/1000-2000/x", (int)child);
	refused(BROKER_OPEN_MODULE, p, "a range with more after it");
	refused(BROKER_OPEN_READ, "/proc/self/maps", "the core's own maps");
	refused(BROKER_READ, "/proc/self/status", "the core's own status");
	refused(BROKER_OPEN_READ, "/etc/shadow", "a file outside /proc");
	refused(BROKER_OPEN_MODULE, "/etc/shadow", "a module outside /proc");
	refused(BROKER_OPEN_READ, "/proc/01/maps", "a pid with a leading 0");
	refused(77, "/proc/1/maps", "an operation that does not exist");
	/* Malformed bodies. */
	snprintf(p, sizeof(p), "/proc/%d/maps", (int)child);
	serve(BROKER_OPEN_READ, p, strlen(p), &r);
	TAP_OK(r.a.rc < 0 && r.fd < 0, "refused: a path without its NUL");
	done(&r);
	serve(BROKER_OPEN_READ, p, strlen(p) + 2, &r);
	TAP_OK(r.a.rc < 0 && r.fd < 0, "refused: bytes after the path's NUL");
	done(&r);
	{
		static char big[BROKER_PATH_MAX + 64];

		memset(big, 'a', sizeof(big) - 1);
		memcpy(big, "/proc/1/", 8);
		serve(BROKER_OPEN_READ, big, sizeof(big), &r);
		TAP_OK(r.a.rc < 0 && r.fd < 0, "refused: an overlong path");
		done(&r);
	}
}

int main(void)
{
	pid_t child;
	int st;

	if (geteuid() != 0) {
		tap_skip("test_broker needs root (the core's privileges)");
		return tap_done();
	}
	child = fork();
	if (child == 0) {
		/* Another user's: only a privileged reader sees its files. */
		if (setresgid(65534, 65534, 65534) < 0 ||
		    setresuid(65534, 65534, 65534) < 0)
			_exit(1);
		pause();
		_exit(0);
	}
	usleep(100000);
	test_allowed(child);
	test_refused(child);
	kill(child, SIGKILL);
	waitpid(child, &st, 0);
	return tap_done();
}
