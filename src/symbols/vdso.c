/*
 * vdso.c - copies of vDSO images (vdso.h).
 *
 * Our own image is copied once from where the auxiliary vector says the
 * kernel put it, bounded by its mapping in /proc/self/maps. A target's
 * is read from its memory file, which the kernel serves only to those
 * allowed to ptrace it; what is read is checked to be an ELF image and
 * nothing more is trusted of it: the symbolizer keys what it learns from
 * an image by the image's bytes.
 */
#define _GNU_SOURCE
#include "vdso.h"

#include <elf.h>
#include <elfutils/libdwelf.h>
#include <errno.h>
#include <fcntl.h>
#include <libelf.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <unistd.h>

#define VDSO_PAGE 4096u

static pthread_once_t self_once = PTHREAD_ONCE_INIT;
static void *self_copy;
static size_t self_size;

bool vdso_is_module(const char *path)
{
	return strncmp(path, "[vdso", 5) == 0 ||
	       strcmp(path, "linux-vdso.so.1") == 0 ||
	       strcmp(path, "linux-gate.so.1") == 0;
}

/* The end of our mapping that starts at base, from /proc/self/maps. */
static size_t self_mapping(unsigned long base)
{
	char line[256];
	size_t size = 0;
	FILE *f = fopen("/proc/self/maps", "re");

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f)) {
		unsigned long long s, e;

		if (strstr(line, "[vdso]") &&
		    sscanf(line, "%llx-%llx", &s, &e) == 2 && s == base &&
		    e > s && e - s <= VDSO_MAX) {
			size = (size_t)(e - s);
			break;
		}
	}
	fclose(f);
	return size;
}

static void copy_self(void)
{
	unsigned long base = getauxval(AT_SYSINFO_EHDR);
	size_t size = base ? self_mapping(base) : 0;

	if (!size)
		return;
	self_copy = malloc(size);
	if (!self_copy)
		return;
	memcpy(self_copy, (const void *)base, size);
	self_size = size;
}

const void *vdso_self(size_t *size)
{
	pthread_once(&self_once, copy_self);
	*size = self_size;
	return self_copy;
}

int vdso_own(const uint8_t *id, size_t n, void **image, size_t *size)
{
	size_t have;
	const void *self = vdso_self(&have);
	const void *own_id;
	ssize_t len = -1;
	Elf *elf;

	if (!self || !n || n > SSIZE_MAX)
		return -ENOENT;
	elf_version(EV_CURRENT);
	elf = elf_memory((char *)self, have);
	if (elf)
		len = dwelf_elf_gnu_build_id(elf, &own_id);
	if (len <= 0 || (size_t)len != n || memcmp(own_id, id, (size_t)len)) {
		if (elf)
			elf_end(elf);
		return -ENOENT;
	}
	elf_end(elf);
	*image = malloc(have);
	if (!*image)
		return -ENOMEM;
	memcpy(*image, self, have);
	*size = have;
	return 0;
}

int vdso_read_live(pid_t pid, uint64_t start, uint64_t end, void **image,
		   size_t *size)
{
	char path[32];
	uint64_t len;
	void *buf;
	ssize_t got;
	int fd, r;

	if (end <= start || end - start > VDSO_MAX)
		return -EINVAL;
	len = (end - start + VDSO_PAGE - 1) & ~(uint64_t)(VDSO_PAGE - 1);
	snprintf(path, sizeof(path), "/proc/%d/mem", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	buf = malloc((size_t)len);
	if (!buf) {
		close(fd);
		return -ENOMEM;
	}
	got = pread(fd, buf, (size_t)len, (off_t)start);
	r = got < 0 ? -errno : 0;
	close(fd);
	/* A mapping cut short keeps what it had: the image may be less. */
	if (r == 0 && (got < SELFMAG || memcmp(buf, ELFMAG, SELFMAG) != 0))
		r = -ENOEXEC;
	if (r != 0) {
		free(buf);
		return r;
	}
	*image = buf;
	*size = (size_t)got;
	return 0;
}
