/*
 * corefile.h - what a core file says of its process, read from the core
 * alone: its notes, its memory, and its modules, reported to libdwfl
 * without opening any path the core names but by the module file rule
 * (modopen.h). unwind.c unwinds cores with it.
 */
#ifndef SW_COREFILE_H
#define SW_COREFILE_H

#include <elfutils/libdwfl.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * Calls fn with each note of type type in the core whose descriptor has
 * at least size bytes (desc and its n_descsz) until fn returns nonzero;
 * returns that, or 0. Never reads outside the core's note segments.
 */
int corefile_notes(Elf *core, uint32_t type, size_t size,
		   int (*fn)(const void *desc, size_t descsz, void *arg),
		   void *arg);

/*
 * Copies len bytes of the process's memory at addr from the core (fd is
 * the core's file) into buf. Returns 0, or -ENOENT when the core holds no
 * copy of all of them in one segment. Blocks on file I/O.
 */
int corefile_read(Elf *core, int fd, uint64_t addr, void *buf, size_t len);

/*
 * Copies the core's segment that holds addr, from addr to the end of
 * what the core holds of it (at most 1 MiB: an image such as the vDSO's)
 * into *image (malloc'd, the caller frees) and *size. Returns 0,
 * -ENOENT when the core holds no such copy, or -ENOMEM.
 */
int corefile_image(Elf *core, int fd, uint64_t addr, void **image,
		   size_t *size);

/*
 * A core open for a symbolizer's images (symbolize.h's sym_image_fn,
 * given a struct corefile_in): the image of a module without a file
 * (the vDSO), from the core's copy of it.
 */
struct corefile_in {
	int fd;
	Elf *elf; /* NULL: no image */
};
struct sw_module;
int corefile_module_image(void *arg, const struct sw_module *m, void **image,
			  size_t *size);

struct corefile;

/*
 * Reports to dwfl (between dwfl_report_begin() and dwfl_report_end()) the
 * modules of the core: the executable, the shared objects and the vDSO,
 * found from the core's file note, auxiliary vector and memory. exe, when
 * not NULL, is the executable to use instead of the one the core names:
 * it must open by modopen_resolved() (and have the core's build-id for
 * it, when the core holds one), or this fails with a sentence in why.
 * dwfl must have been begun with corefile_find_elf as its find_elf.
 * Returns 0 with *out to free with corefile_free() after dwfl_end(), or a
 * negative errno (-ENOMEM, -EINVAL for a bad exe). Opens no file but exe.
 */
int corefile_report(Dwfl *dwfl, Elf *core, int fd, const char *exe,
		    struct corefile **out, char *why, size_t why_size);

/* Frees what corefile_report() made; accepts NULL. After dwfl_end(). */
void corefile_free(struct corefile *cf);

/*
 * Dwfl_Callbacks.find_elf for the modules of corefile_report(): the
 * module's file by modopen_resolved() from the path the core names, used
 * only if it is an ELF file with the build-id the core holds for it (when
 * it holds one); the vDSO from the core's own copy. Returns the fd (and
 * *elfp, *file_name) as libdwfl wants them, or -1, leaving *file_name
 * unset so that libdwfl opens nothing of its own. Never blocks on a
 * FIFO or device.
 */
int corefile_find_elf(Dwfl_Module *mod, void **userdata, const char *name,
		      Dwarf_Addr base, char **file_name, Elf **elfp);

/*
 * The load bias of a module of corefile_report() (its libdwfl userdata),
 * known from the core even when its file could not be opened. False for
 * a module that is not one of them.
 */
bool corefile_module_bias(void *userdata, uint64_t *bias);

#endif /* SW_COREFILE_H */
