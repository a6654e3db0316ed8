/*
 * modules.c - the module list of the calling process (modules.h).
 */
#define _GNU_SOURCE
#include <elf.h>
#include <errno.h>
#include <limits.h>
#include <link.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "modules.h"

size_t modules_find_build_id(const void *p, size_t len, uint8_t *id)
{
	const uint8_t *q = p, *end = q + len;

	while ((size_t)(end - q) >= sizeof(ElfW(Nhdr))) {
		const ElfW(Nhdr) *nh = (const ElfW(Nhdr) *)q;
		size_t namesz = (nh->n_namesz + 3u) & ~3u;
		size_t descsz = (nh->n_descsz + 3u) & ~3u;
		const uint8_t *name = q + sizeof(*nh);

		if (namesz > (size_t)(end - name) ||
		    descsz > (size_t)(end - name) - namesz)
			return 0;
		if (nh->n_type == NT_GNU_BUILD_ID && nh->n_namesz == 4 &&
		    memcmp(name, "GNU", 4) == 0 && nh->n_descsz > 0) {
			size_t n = nh->n_descsz;
			if (n > SW_BUILD_ID_MAX)
				n = SW_BUILD_ID_MAX;
			memcpy(id, name + namesz, n);
			return n;
		}
		q = name + namesz + descsz;
	}
	return 0;
}

struct collect_ctx {
	struct sw_dump *d;
	size_t cap;
	int err;
	char exe[PATH_MAX];
};

static int add_module(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct collect_ctx *c = arg;
	struct sw_dump *d = c->d;
	struct sw_module *m;
	uint64_t lo = UINT64_MAX, hi = 0;
	const char *path;

	(void)size;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type != PT_LOAD)
			continue;
		if (ph->p_vaddr < lo)
			lo = ph->p_vaddr;
		if (ph->p_vaddr + ph->p_memsz > hi)
			hi = ph->p_vaddr + ph->p_memsz;
	}
	if (lo >= hi)
		return 0;
	if (d->nmodules == SW_MAX_MODULES) {
		c->err = SW_ETOOBIG;
		return 1;
	}
	if (d->nmodules == c->cap) {
		size_t cap = c->cap ? 2 * c->cap : 32;
		struct sw_module *bigger =
			realloc(d->modules, cap * sizeof(*bigger));
		if (!bigger) {
			c->err = -ENOMEM;
			return 1;
		}
		d->modules = bigger;
		c->cap = cap;
	}
	path = info->dlpi_name;
	if (!path || !*path)
		path = d->nmodules == 0 ? c->exe : "[unknown]";
	m = &d->modules[d->nmodules];
	memset(m, 0, sizeof(*m));
	m->path = strdup(path);
	if (!m->path) {
		c->err = -ENOMEM;
		return 1;
	}
	m->bias = info->dlpi_addr;
	m->start = info->dlpi_addr + lo;
	m->end = info->dlpi_addr + hi;
	for (int i = 0; i < info->dlpi_phnum && !m->build_id_len; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type == PT_NOTE)
			m->build_id_len = (uint32_t)modules_find_build_id(
				(const void *)(info->dlpi_addr + ph->p_vaddr),
				ph->p_memsz, m->build_id);
	}
	d->nmodules++;
	return 0;
}

int modules_read_self(struct sw_dump *d)
{
	struct collect_ctx *c = calloc(1, sizeof(*c));
	ssize_t n;
	int err;

	if (!c)
		return -ENOMEM;
	c->d = d;
	/* Through our own thread: the first one may have exited. */
	n = readlink("/proc/thread-self/exe", c->exe, sizeof(c->exe) - 1);
	if (n < 0)
		n = 0;
	c->exe[n] = '\0';
	dl_iterate_phdr(add_module, c);
	err = c->err;
	free(c);
	return err;
}
