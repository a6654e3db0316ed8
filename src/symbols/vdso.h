/*
 * vdso.h - the vDSO's image, for the symbolizer. The vDSO is a module
 * without a file: the kernel maps the same small ELF image into every
 * process of one ABI, so its symbols are read from a copy of that image,
 * taken from the process's memory or from a core's.
 */
#ifndef SW_VDSO_H
#define SW_VDSO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define VDSO_MAX (1u << 20) /* the largest image taken */

/*
 * Whether path names the vDSO as the ways of reading a process name it:
 * "[vdso]" (a core), "[vdso: PID]" (a snapshot), "linux-vdso.so.1" or
 * "linux-gate.so.1" (the dynamic loader's name, in an agent's list).
 */
bool vdso_is_module(const char *path);

/*
 * Copies the vDSO image that live process pid maps at start (from start
 * to end rounded up to a page, at most VDSO_MAX bytes) from
 * /proc/PID/mem into *image (malloc'd, the caller frees) and *size.
 * Returns 0, or a negative errno (-ENOEXEC: what is there is no ELF
 * image). Needs the right to read the process's memory; blocks briefly.
 */
int vdso_read_live(pid_t pid, uint64_t start, uint64_t end, void **image,
		   size_t *size);

/*
 * Our own vDSO image, copied once and kept for the life of the process
 * (NULL with *size 0 when we have none). Thread-safe.
 */
const void *vdso_self(size_t *size);

/*
 * A copy of our own vDSO image (malloc'd, the caller frees) when its
 * GNU build-id is id (n bytes): a process of this boot and ABI maps the
 * very same image. Returns 0, -ENOENT when ours has another build-id or
 * we have none, or -ENOMEM. Thread-safe.
 */
int vdso_own(const uint8_t *id, size_t n, void **image, size_t *size);

#endif /* SW_VDSO_H */
