/*
 * modfile.c - opens the file behind a module an agent named, only if that
 * process really maps it (modfile.h).
 *
 * The module list comes from the agent and is untrusted: a hostile agent
 * could name /etc/shadow. So we never open the path it gives: we look up
 * which file the process maps over the module's address range in
 * /proc/PID/maps, and open that mapping's file: through
 * /proc/PID/map_files when we may (root), else by the kernel's path
 * (through /proc/PID/root when the target lives in another mount
 * namespace) with O_NOFOLLOW|O_NONBLOCK and the same device and inode as
 * the mapping. Only regular files up to 1 GiB. The symbolizer then checks
 * the build-id the agent sent against the file.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "modfile.h"

#define MODFILE_MAX_SIZE (1ull << 30)
#define MAPS_MAX (8u << 20)

bool modfile_parse_maps_line(char *line, struct mapping_info *mi)
{
	unsigned long start, end, off, ino;
	unsigned maj, min;
	char perms[8];
	int n = 0;

	if (sscanf(line, "%lx-%lx %7s %lx %x:%x %lu %n", &start, &end, perms,
		   &off, &maj, &min, &ino, &n) < 7)
		return false;
	mi->start = start;
	mi->end = end;
	mi->dev = makedev(maj, min);
	mi->ino = ino;
	mi->path = n > 0 && line[n] == '/' ? line + n : NULL;
	if (mi->path) {
		char *nl = strchr(mi->path, '\n');
		if (nl)
			*nl = '\0';
	}
	return start < end;
}

/*
 * Finds the file mapping over [start, end) in /proc/PID/maps. The kernel's
 * path, not the agent's, is the one we open: the loader's name can differ
 * (/lib/... against /usr/lib/... on a merged /usr, a symlinked soname).
 * *path_out is malloc'd.
 */
static int find_mapping(pid_t pid, uint64_t start, uint64_t end,
			struct mapping_info *out, char **path_out)
{
	char fname[64], *line = NULL;
	size_t cap = 0, total = 0;
	ssize_t len;
	int rc = -ENOENT;
	FILE *f;

	snprintf(fname, sizeof(fname), "/proc/%d/maps", (int)pid);
	f = fopen(fname, "re");
	if (!f)
		return -errno;
	while ((len = getline(&line, &cap, f)) > 0) {
		struct mapping_info mi;

		total += (size_t)len;
		if (total > MAPS_MAX)
			break;
		if (!modfile_parse_maps_line(line, &mi) || !mi.path ||
		    mi.ino == 0 || mi.end <= start || mi.start >= end)
			continue;
		*path_out = strdup(mi.path);
		if (!*path_out) {
			rc = -ENOMEM;
			break;
		}
		*out = mi;
		out->path = NULL;
		rc = 0;
		break;
	}
	free(line);
	fclose(f);
	return rc;
}

static bool same_mount_ns(pid_t pid)
{
	char fname[64];
	struct stat a, b;

	snprintf(fname, sizeof(fname), "/proc/%d/ns/mnt", (int)pid);
	if (stat(fname, &a) < 0 || stat("/proc/self/ns/mnt", &b) < 0)
		return true; /* cannot tell: use the path as is */
	return a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

static int check_file(int fd, const struct mapping_info *mi, bool check_id)
{
	struct stat st;

	if (fstat(fd, &st) < 0)
		return -errno;
	if (!S_ISREG(st.st_mode) || (uint64_t)st.st_size > MODFILE_MAX_SIZE)
		return -EINVAL;
	if (check_id && (st.st_ino != mi->ino || st.st_dev != mi->dev))
		return -EPERM;
	return 0;
}

int modfile_open(pid_t pid, const struct sw_module *m)
{
	struct mapping_info mi = { 0 };
	char fname[4200], *path = NULL;
	int fd, rc;

	rc = find_mapping(pid, m->start, m->end, &mi, &path);
	if (rc < 0)
		return rc;
	/* Best: the mapping itself (needs CAP_SYS_ADMIN). */
	snprintf(fname, sizeof(fname), "/proc/%d/map_files/%lx-%lx", (int)pid,
		 (unsigned long)mi.start, (unsigned long)mi.end);
	fd = open(fname, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (fd >= 0) {
		if (check_file(fd, &mi, false) == 0)
			goto out;
		close(fd);
	}
	if (same_mount_ns(pid))
		snprintf(fname, sizeof(fname), "%s", path);
	else
		snprintf(fname, sizeof(fname), "/proc/%d/root%s", (int)pid,
			 path);
	fd = open(fname, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
	if (fd < 0) {
		fd = -errno;
		goto out;
	}
	rc = check_file(fd, &mi, true);
	if (rc < 0) {
		close(fd);
		fd = rc;
	}
out:
	free(path);
	return fd;
}
