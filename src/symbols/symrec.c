/*
 * symrec.c - one address to a record of frames (symrec.h): the function
 * name cleaned of its version suffix and demangled, the source file:line
 * made absolute, and the inlined functions around the address walked
 * outward through the DWARF scopes the way eu-stack -i does.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "symrec.h"

typedef char *(*demangle_fn)(const char *, char *, size_t *, int *);
static demangle_fn cxa_demangle;
static pthread_once_t demangle_once = PTHREAD_ONCE_INIT;

/*
 * Finds libstdc++'s __cxa_demangle at run time: in the process already
 * when it has C++ code, else by loading libstdc++ once. This keeps the
 * library (and the agent built from it, which goes into C programs) free
 * of a link-time C++ runtime dependency, and the load happens only when a
 * mangled name is met. Without libstdc++, names stay mangled.
 */
static void demangle_init(void)
{
	void *f = dlsym(RTLD_DEFAULT, "__cxa_demangle");

	if (!f) {
		void *h = dlopen("libstdc++.so.6", RTLD_NOW | RTLD_LOCAL);
		if (h)
			f = dlsym(h, "__cxa_demangle"); /* kept loaded */
	}
	cxa_demangle = (demangle_fn)f;
}

void symrec_prepare(void)
{
	pthread_once(&demangle_once, demangle_init);
}

/* See symrec.h. Loads libstdc++ on the first mangled name. */
char *symrec_clean_name(const char *raw)
{
	const char *at = strchr(raw, '@');
	char *name = at ? strndup(raw, (size_t)(at - raw)) : strdup(raw);
	char *dem;
	int status = -1;

	if (!name || strncmp(name, "_Z", 2) != 0)
		return name;
	pthread_once(&demangle_once, demangle_init);
	if (!cxa_demangle)
		return name;
	dem = cxa_demangle(name, NULL, NULL, &status);
	if (!dem || status != 0) {
		free(dem);
		return name;
	}
	free(name);
	/* cppcheck-suppress returnDanglingLifetime ; dem is malloc'd */
	return dem;
}

/* The raw name of a DIE: its linkage name, else DW_AT_name (following
 * DW_AT_abstract_origin and DW_AT_specification). NULL when it has none. */
static const char *die_raw_name(Dwarf_Die *die)
{
	Dwarf_Attribute attr;
	const char *name;

	name = dwarf_formstring(
		dwarf_attr_integrate(die, DW_AT_linkage_name, &attr));
	if (!name)
		name = dwarf_formstring(dwarf_attr_integrate(
			die, DW_AT_MIPS_linkage_name, &attr));
	if (!name)
		name = dwarf_formstring(
			dwarf_attr_integrate(die, DW_AT_name, &attr));
	return name;
}

/*
 * Returns a malloc'd absolute form of a source path: dir/file (a leading
 * "./" of file dropped) when file is relative and dir absolute, else file
 * as the debug info has it. Builds made with -ffile-prefix-map (Debian's
 * glibc: comp_dir "./nptl") have no absolute directory to offer, and
 * joining two relative paths would name a file that never existed. NULL
 * when file is NULL or on out of memory.
 */
static char *abs_path(const char *file, const char *dir)
{
	char *p;

	if (!file)
		return NULL;
	if (file[0] == '/' || !dir || dir[0] != '/')
		return strdup(file);
	while (file[0] == '.' && file[1] == '/')
		file += 2;
	if (asprintf(&p, "%s%s%s", dir, dir[strlen(dir) - 1] == '/' ? "" : "/",
		     file) < 0)
		return NULL;
	return p;
}

/* A frame being built; owns its strings. */
struct tmpfr {
	char *function;
	char *file;
	int line;
	bool inlined;
};

/* A record being built. nomem: an allocation failed on the way. */
struct tmprec {
	uint32_t n;
	bool nomem;
	struct tmpfr fr[SYMREC_MAX_FRAMES];
};

/* symrec_clean_name() of raw, NULL for a NULL raw; notes a failure. */
static char *dup_name(struct tmprec *r, const char *raw)
{
	char *p;

	if (!raw)
		return NULL;
	p = symrec_clean_name(raw);
	if (!p)
		r->nomem = true;
	return p;
}

/* abs_path() of file in dir, or NULL for a NULL file; notes a failure. */
static char *dup_path(struct tmprec *r, const char *file, const char *dir)
{
	char *p;

	if (!file)
		return NULL;
	p = abs_path(file, dir);
	if (!p)
		r->nomem = true;
	return p;
}

/*
 * Appends a frame, taking ownership of function and file (either may be
 * NULL). Past SYMREC_MAX_FRAMES frames the new one replaces the last, so the
 * containing function always ends the record.
 */
static void tmp_push(struct tmprec *r, char *function, char *file, int line,
		     bool inlined)
{
	struct tmpfr *f;

	if (r->n == SYMREC_MAX_FRAMES) {
		f = &r->fr[r->n - 1];
		free(f->function);
		free(f->file);
	} else {
		f = &r->fr[r->n++];
	}
	f->function = function;
	f->file = file;
	f->line = file ? line : 0;
	f->inlined = inlined;
}

static void tmp_release(struct tmprec *r)
{
	for (uint32_t i = 0; i < r->n; i++) {
		free(r->fr[i].function);
		free(r->fr[i].file);
	}
	r->n = 0;
}

/*
 * Packs r into one immutable allocation (frames, then their strings) and
 * releases r. Returns the record, or NULL on out of memory.
 */
static struct symrec *tmp_pack(struct tmprec *r)
{
	size_t size = sizeof(struct symrec) + r->n * sizeof(struct symfr);
	struct symrec *rec;
	char *p;

	for (uint32_t i = 0; i < r->n; i++) {
		if (r->fr[i].function)
			size += strlen(r->fr[i].function) + 1;
		if (r->fr[i].file)
			size += strlen(r->fr[i].file) + 1;
	}
	rec = malloc(size);
	if (!rec)
		goto out;
	rec->n = r->n;
	p = (char *)&rec->fr[r->n];
	for (uint32_t i = 0; i < r->n; i++) {
		struct symfr *f = &rec->fr[i];

		f->function = f->file = NULL;
		if (r->fr[i].function) {
			f->function = strcpy(p, r->fr[i].function);
			p += strlen(p) + 1;
		}
		if (r->fr[i].file) {
			f->file = strcpy(p, r->fr[i].file);
			p += strlen(p) + 1;
		}
		f->line = r->fr[i].line;
		f->inlined = r->fr[i].inlined;
	}
out:
	tmp_release(r);
	return rec;
}

/*
 * The call site of an inlined subroutine (DW_AT_call_file and
 * DW_AT_call_line, resolved in its own CU): *file a malloc'd absolute path
 * or NULL when unknown, *line 0 when unknown.
 */
static void call_site(struct tmprec *r, Dwarf_Die *inl, char **file, int *line)
{
	Dwarf_Attribute attr;
	Dwarf_Word idx = 0, ln = 0;
	Dwarf_Files *files;
	Dwarf_Die cu;
	size_t nfiles;
	const char *dir;

	*file = NULL;
	*line = 0;
	if (dwarf_formudata(dwarf_attr(inl, DW_AT_call_file, &attr), &idx) ||
	    !dwarf_diecu(inl, &cu, NULL, NULL) ||
	    dwarf_getsrcfiles(&cu, &files, &nfiles) || idx >= nfiles)
		return;
	if (dwarf_formudata(dwarf_attr(inl, DW_AT_call_line, &attr), &ln) ||
	    ln > INT_MAX)
		ln = 0;
	dir = dwarf_formstring(dwarf_attr(&cu, DW_AT_comp_dir, &attr));
	*file = dup_path(r, dwarf_filesrc(files, idx, NULL, NULL), dir);
	*line = (int)ln;
}

/*
 * Walks the concrete scopes around one inlined subroutine outward, as
 * eu-stack -i does: chain[0] is the innermost inlined subroutine, whose
 * code is at file:line (owned, from the line table). Each frame's
 * file:line is where that frame's code is: the call site recorded in the
 * inlined subroutine just inside it. The containing subprogram ends the
 * record, named *symname (taken) when the symbol table had a name.
 */
static void add_chain(struct tmprec *r, Dwarf_Die *chain, int nchain,
		      char **symname, char *file, int line)
{
	Dwarf_Die *last = &chain[0];
	char *cfile, *name;
	int cline;

	tmp_push(r, dup_name(r, die_raw_name(&chain[0])), file, line, true);
	for (int i = 1; i < nchain; i++) {
		int tag = dwarf_tag(&chain[i]);

		if (tag != DW_TAG_inlined_subroutine &&
		    tag != DW_TAG_subprogram && tag != DW_TAG_entry_point)
			continue;
		call_site(r, last, &cfile, &cline);
		if (tag == DW_TAG_inlined_subroutine) {
			name = dup_name(r, die_raw_name(&chain[i]));
			tmp_push(r, name, cfile, cline, true);
			last = &chain[i];
			continue;
		}
		name = *symname ? *symname
				: dup_name(r, die_raw_name(&chain[i]));
		*symname = NULL;
		tmp_push(r, name, cfile, cline, false);
		return;
	}
	/* No subprogram around the inlined code (broken DWARF): close
	 * with the symbol table's function at the outermost call site. */
	call_site(r, last, &cfile, &cline);
	tmp_push(r, *symname, cfile, cline, false);
	*symname = NULL;
}

/*
 * Adds the frames of addr from the DWARF scopes around it: the inlined
 * chain when addr is inside inlined code (then returns true, having taken
 * file). Otherwise returns false, leaves file to the caller and, when
 * *symname is NULL, names the function from its DW_TAG_subprogram.
 */
static bool add_scopes(Dwfl_Module *mod, uint64_t addr, struct tmprec *r,
		       char **symname, char *file, int line)
{
	Dwarf_Die *cu, *scopes = NULL, *chain = NULL;
	Dwarf_Addr bias = 0;
	int nscopes, nchain, i;
	bool inlined = false;

	cu = dwfl_module_addrdie(mod, addr, &bias);
	if (!cu)
		return false;
	nscopes = dwarf_getscopes(cu, addr - bias, &scopes);
	for (i = 0; i < nscopes; i++) {
		int tag = dwarf_tag(&scopes[i]);

		if (tag == DW_TAG_inlined_subroutine)
			break;
		if (tag == DW_TAG_subprogram && !*symname)
			*symname = dup_name(r, die_raw_name(&scopes[i]));
	}
	if (i < nscopes) {
		nchain = dwarf_getscopes_die(&scopes[i], &chain);
		if (nchain > 0) {
			add_chain(r, chain, nchain, symname, file, line);
			inlined = true;
		}
		free(chain);
	}
	free(scopes);
	return inlined;
}

void symrec_guard_init(struct symrec_guard *g)
{
	memset(g, 0, sizeof(*g));
	g->strings_ok = -1;
}

/*
 * The deepest the DIEs of cu nest, walked without recursion; stops once
 * past max.
 */
static int unit_depth(Dwarf_Die *cu, int max)
{
	Dwarf_Die stack[SYMREC_MAX_DEPTH + 2];
	int depth = 0, deepest = 0;
	/* A sibling chain that loops is as bad as one too deep. */
	uint64_t visits = 0;

	if (dwarf_child(cu, &stack[0]) != 0)
		return 0;
	for (;;) {
		Dwarf_Die *d = &stack[depth];

		if (++visits > SYMREC_MAX_DIES)
			return max + 1;
		if (depth + 1 > deepest)
			deepest = depth + 1;
		if (deepest > max)
			return deepest;
		if (dwarf_haschildren(d) > 0 &&
		    dwarf_child(d, &stack[depth + 1]) == 0) {
			depth++;
			continue;
		}
		/* Up until a DIE with a next sibling, or out of the unit. */
		while (dwarf_siblingof(&stack[depth], &stack[depth]) != 0)
			if (--depth < 0)
				return deepest;
	}
}

/* The section of elf named name, or NULL. */
static Elf_Data *section_data(Elf *elf, const char *name)
{
	Elf_Scn *scn = NULL;
	size_t shstrndx;

	if (!elf || elf_getshdrstrndx(elf, &shstrndx) != 0)
		return NULL;
	while ((scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;
		const char *n;

		if (!gelf_getshdr(scn, &sh))
			continue;
		n = elf_strptr(elf, shstrndx, sh.sh_name);
		if (n && strcmp(n, name) == 0)
			return elf_getdata(scn, NULL);
	}
	return NULL;
}

/* The length of the line program of cu (0 when it has none). */
static uint64_t line_program_bytes(Dwarf_Die *cu)
{
	Dwarf_Attribute attr;
	Dwarf_Word off;
	Elf_Data *data;
	uint32_t len32;
	uint64_t len;

	if (dwarf_formudata(dwarf_attr(cu, DW_AT_stmt_list, &attr), &off) != 0)
		return 0;
	data = section_data(dwarf_getelf(dwarf_cu_getdwarf(cu->cu)),
			    ".debug_line");
	if (!data || !data->d_buf || off > data->d_size ||
	    data->d_size - off < 4)
		return 0;
	memcpy(&len32, (const char *)data->d_buf + off, 4);
	if (len32 != 0xffffffffu)
		return len32;
	if (data->d_size - off < 12)
		return 0;
	memcpy(&len, (const char *)data->d_buf + off + 4, 8);
	return len;
}

/* Whether the string sections of dw end in NUL (libdw reads to one). */
static bool strings_end(Dwarf *dw)
{
	static const char *const names[] = { ".debug_str", ".debug_line_str" };
	Elf *elf = dwarf_getelf(dw);

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		Elf_Data *data = section_data(elf, names[i]);

		if (data && data->d_buf && data->d_size &&
		    ((const char *)data->d_buf)[data->d_size - 1] != '\0')
			return false;
	}
	return true;
}

/* g's verdict on cu, checked on its first use. */
static void unit_verdict(struct symrec_guard *g, Dwarf_Die *cu, bool *deep_ok,
			 bool *lines_ok)
{
	Dwarf_Off off = dwarf_dieoffset(cu);
	unsigned k;

	for (unsigned i = 0; i < g->nseen; i++)
		if (g->seen[i].cu == off) {
			*deep_ok = g->seen[i].deep_ok;
			*lines_ok = g->seen[i].lines_ok;
			return;
		}
	if (g->strings_ok < 0)
		g->strings_ok = strings_end(dwarf_cu_getdwarf(cu->cu));
	*deep_ok = g->strings_ok &&
		   unit_depth(cu, SYMREC_MAX_DEPTH) <= SYMREC_MAX_DEPTH;
	*lines_ok = g->strings_ok &&
		    line_program_bytes(cu) <= SYMREC_MAX_LINE_BYTES;
	if (!g->why && !g->strings_ok)
		g->why = "its debug information has a string section with no "
			 "end";
	else if (!g->why && !*deep_ok)
		g->why = "its debug information nests deeper than 256 scopes";
	else if (!g->why && !*lines_ok)
		g->why = "a line table of it is larger than 4 MiB";
	k = g->nseen < SYMREC_GUARD_UNITS ? g->nseen++
					  : g->next++ % SYMREC_GUARD_UNITS;
	g->seen[k].cu = off;
	g->seen[k].deep_ok = *deep_ok;
	g->seen[k].lines_ok = *lines_ok;
}

/* See symrec.h. */
struct symrec *symrec_lookup(Dwfl_Module *mod, bool dwarf,
			     const char *symname_raw, uint64_t addr,
			     struct symrec_guard *g)
{
	struct tmprec r = { 0 };
	Dwfl_Line *l = NULL;
	Dwarf_Addr bias = 0;
	Dwarf_Die *cu = dwarf ? dwfl_module_addrdie(mod, addr, &bias) : NULL;
	bool deep_ok = false, lines_ok = false;
	char *symname, *file = NULL;
	int line = 0;

	if (cu)
		unit_verdict(g, cu, &deep_ok, &lines_ok);
	symname = dup_name(&r, symname_raw);
	if (lines_ok)
		l = dwfl_module_getsrc(mod, addr);
	if (l) {
		const char *f = dwfl_lineinfo(l, NULL, &line, NULL, NULL, NULL);

		file = dup_path(&r, f, dwfl_line_comp_dir(l));
	}
	if (!deep_ok || !add_scopes(mod, addr, &r, &symname, file, line))
		tmp_push(&r, symname, file, line, false);
	else
		free(symname);
	if (r.nomem) {
		tmp_release(&r);
		return NULL;
	}
	return tmp_pack(&r);
}
