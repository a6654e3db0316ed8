/*
 * modules.h - the module list of the calling process: every loaded ELF
 * object with its path, load bias, mapped range and build-id, read from
 * the loader (dl_iterate_phdr) without touching any file.
 */
#ifndef SW_MODULES_H
#define SW_MODULES_H

#include "model/dump.h"

/*
 * Fills d->modules. The main program's path comes from /proc/self/exe; the
 * vDSO is listed under its loader name. Takes the loader's lock briefly:
 * never call it from a signal handler. Returns 0, -ENOMEM or SW_ETOOBIG.
 */
int modules_read_self(struct sw_dump *d);

/*
 * Finds the GNU build-id note in a note segment of size len at p. Copies
 * at most SW_BUILD_ID_MAX bytes to id; returns its length, 0 when absent.
 * Bounds-checked: p may be any bytes.
 */
size_t modules_find_build_id(const void *p, size_t len, uint8_t *id);

#endif /* SW_MODULES_H */
