/*
 * modfile.c - opens the file behind a module an agent named, only if that
 * process really maps it (modfile.h).
 *
 * The module list comes from the agent and is untrusted: a hostile agent
 * could name /etc/shadow. So we never open the path it gives: we read the
 * process's file mappings once per dump (procmaps.h; used only if the process
 * pinned at registration is still there, so a reused pid lends nothing),
 * find the file mapping that holds the module's start, and open that
 * mapping's file: through /proc/PID/map_files when we may (root), else by
 * the kernel's path (through /proc/PID/root when the target lives in
 * another mount namespace) without following a final symlink, and with
 * the same device and inode as the mapping. Either way by the module
 * file rule that the CLI's core files use too (symbols/modopen.h):
 * regular files up to 1 GiB only, never a FIFO or a device, never
 * blocking. The symbolizer keys its sessions by the identity of the file so
 * opened and checks the build-id the agent sent against the file's own.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "model/procfs.h"
#include "modfile.h"
#include "model/clock.h"
#include "stackwatch.h"
#include "symbols/modopen.h"

bool modfile_still_there(int pidfd)
{
	struct pollfd p = { .fd = pidfd, .events = POLLIN };

	if (pidfd < 0)
		return true;
	while (poll(&p, 1, 0) < 0)
		if (errno != EINTR)
			return false;
	return !(p.revents & (POLLIN | POLLHUP | POLLERR));
}

static bool same_mount_ns(pid_t pid)
{
	char fname[64];
	struct stat a, b;

	snprintf(fname, sizeof(fname), "/proc/%d/ns/mnt", (int)pid);
	if (procfs_stat(fname, &a) < 0 || stat("/proc/self/ns/mnt", &b) < 0)
		return true; /* cannot tell: use the path as is */
	return a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

int modfile_maps_read(pid_t pid, int pidfd, struct modfile_maps *out)
{
	int rc;

	memset(out, 0, sizeof(*out));
	out->pid = pid;
	out->pidfd = pidfd;
	rc = procmaps_read(pid, &out->pm);
	/*
	 * What was read is the pinned process's only if it is still there:
	 * gone, its pid may name another process already.
	 */
	if (!rc && !modfile_still_there(pidfd)) {
		procmaps_release(&out->pm);
		rc = -ESRCH;
	}
	return rc;
}

void modfile_maps_release(struct modfile_maps *mm)
{
	procmaps_release(&mm->pm);
}

/* What modfile_pass_put() left for this thread's dump; held: pass_held. */
static __thread struct modfile_maps pass;
static __thread bool pass_held;

void modfile_pass_begin(void)
{
	if (pass_held)
		modfile_maps_release(&pass);
	pass_held = false;
}

void modfile_pass_put(struct modfile_maps *mm)
{
	modfile_pass_begin();
	pass = *mm;
	pass_held = true;
	memset(mm, 0, sizeof(*mm));
}

int modfile_pass_take(pid_t pid, int pidfd, struct modfile_maps *out)
{
	if (!pass_held || pass.pid != pid || pass.pidfd != pidfd)
		return -ENOENT;
	*out = pass;
	pass_held = false;
	memset(&pass, 0, sizeof(pass));
	return 0;
}

/*
 * The file mapping that holds m's start: a module's first segment is
 * mapped from its file at its lowest address. Any claim that does not
 * start inside a file mapping of the process names no file of it.
 */
static const struct procmap *mapping_of(const struct modfile_maps *mm,
					const struct sw_module *m)
{
	const struct procmap *mp = procmaps_find(&mm->pm, m->start);

	return mp && mp->ino ? mp : NULL;
}

/*
 * The files opened lately, by device and inode: the next dump of the same
 * process (or of another mapping that file) takes a copy of the
 * descriptor instead of opening it again through a core (broker.h). Any
 * descriptor of that inode reads the same bytes; a file replaced by an
 * upgrade is another inode. Unused for FILES_IDLE_NS, one goes.
 */
#define FILES_KEPT 128
#define FILES_IDLE_NS (60ull * 1000000000ull)
static struct kept_file {
	dev_t dev;
	ino_t ino;
	int fd; /* -1: a free slot */
	uint64_t used_ns;
} files[FILES_KEPT];
static pthread_mutex_t files_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t files_once = PTHREAD_ONCE_INIT;

static void files_init(void)
{
	for (size_t i = 0; i < FILES_KEPT; i++)
		files[i].fd = -1;
}

/* A copy of the descriptor kept for mp's file, or -1. */
static int cached(const struct procmap *mp)
{
	uint64_t now = clock_now_ns();
	int fd = -1;

	pthread_once(&files_once, files_init);
	pthread_mutex_lock(&files_lock);
	for (size_t i = 0; i < FILES_KEPT; i++) {
		struct kept_file *k = &files[i];

		if (k->fd >= 0 && now - k->used_ns > FILES_IDLE_NS) {
			close(k->fd);
			k->fd = -1;
		}
		if (fd < 0 && k->fd >= 0 && k->dev == mp->dev &&
		    k->ino == mp->ino) {
			fd = fcntl(k->fd, F_DUPFD_CLOEXEC, 0);
			k->used_ns = now;
		}
	}
	pthread_mutex_unlock(&files_lock);
	return fd;
}

/* Keeps a copy of fd, mp's file, in place of the one least used. */
static void keep(const struct procmap *mp, int fd)
{
	struct kept_file *oldest = &files[0];

	pthread_mutex_lock(&files_lock);
	for (size_t i = 0; i < FILES_KEPT; i++) {
		struct kept_file *k = &files[i];

		if (k->fd >= 0 && k->dev == mp->dev && k->ino == mp->ino) {
			oldest = NULL;
			break;
		}
		if (k->fd < 0 ||
		    (oldest->fd >= 0 && k->used_ns < oldest->used_ns))
			oldest = k;
	}
	if (oldest) {
		if (oldest->fd >= 0)
			close(oldest->fd);
		oldest->fd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
		oldest->dev = mp->dev;
		oldest->ino = mp->ino;
		oldest->used_ns = clock_now_ns();
	}
	pthread_mutex_unlock(&files_lock);
}

/*
 * Opens mp's file: its map_files link (root; a link the kernel makes, so
 * followed), else its path, checked.
 */
static int open_mapping(const struct modfile_maps *mm, const struct procmap *mp)
{
	char fname[4200];
	struct stat st;
	int fd;

	snprintf(fname, sizeof(fname), "/proc/%d/map_files/%lx-%lx",
		 (int)mm->pid, (unsigned long)mp->start,
		 (unsigned long)mp->end);
	fd = cached(mp);
	if (fd < 0)
		fd = modopen_file(fname, MODOPEN_FOLLOW);
	if (fd < 0) {
		/* Asked here only: map_files serves nearly every open. */
		if (same_mount_ns(mm->pid))
			snprintf(fname, sizeof(fname), "%s", mp->path);
		else
			snprintf(fname, sizeof(fname), "/proc/%d/root%s",
				 (int)mm->pid, mp->path);
		fd = modopen_file(fname, 0);
		if (fd < 0)
			return fd;
	}
	if (fstat(fd, &st) < 0 || st.st_ino != mp->ino ||
	    st.st_dev != mp->dev) {
		close(fd);
		return -EPERM;
	}
	if (!modfile_still_there(mm->pidfd)) {
		close(fd);
		return -ESRCH;
	}
	keep(mp, fd);
	return fd;
}

int modfile_open(const struct modfile_maps *mm, const struct sw_module *m)
{
	const struct procmap *mp = mapping_of(mm, m);

	return mp ? open_mapping(mm, mp) : -ENOENT;
}
