/*
 * unwind.c - offline unwinding with libdwfl (unwind.h).
 *
 * A snapshot is handed to libdwfl as a process of our own making: its
 * threads are the snapshot's, their first registers the copied ones, and
 * every memory read is served from the copy of the thread being unwound.
 * libdwfl brings the rest: the modules (the process's file mappings,
 * procmaps.h, reported as its own /proc/PID/maps reader would), their
 * .eh_frame (or .debug_frame) call frame information, and its frame-
 * pointer fallback for code without any. Core files are read by
 * elfutils too (threads, registers and memory from the core's notes and
 * segments), but their modules are found by corefile.c, which opens the
 * files a core names only as module files (modopen.h): elfutils' own
 * dwfl_core_file_report() would open them with a blocking open().
 */
#include "unwind.h"

#include <elf.h>
#include <elfutils/libdwfl.h>
#include <errno.h>
#include <pthread.h>
#include <fcntl.h>
#include <gelf.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/procfs.h>
#include <sys/reg.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "model/callsite.h"
#include "corefile.h"
#include "model/procfs.h"
#include "model/waitmem.h"
#include "modopen.h"
#include "parsenote.h"
#include "stackwatch.h"
#include "vdso.h"

#define UNW_SEEN_MAX 64

struct session_files;

struct unw {
	struct session_files *files; /* of the session in use, or NULL */
	const struct snap *s;
	const struct snap_thread *cur; /* the thread being unwound */
	unwind_open_fn open_fn;
	void *open_arg;
	size_t next; /* next_thread's cursor */
	/* One thread's pcs while it is unwound. */
	uint64_t *ips;
	size_t nips;
	size_t max; /* ips' room: the frames kept */
	bool truncated;
	/* A read fell outside the copies: the unwind wanted memory that
	 * was not copied (libdwfl may still make one more frame of what it
	 * could read, so this is not reset by a frame). */
	bool missed;
	bool first_exact;
	uint64_t exact[SW_MAX_FRAMES / 64]; /* as sw_thread's */
	/*
	 * The registers of the last frame made (DWARF numbering; bit r of
	 * last_known set when register r is known), for going on past code
	 * with no unwind information (step_over_trampoline()).
	 */
	uint64_t last_pc;
	bool last_activation;
	uint64_t last_regs[SNAP_NREGS];
	uint32_t last_known;
	/* Reads from a core (the continuation of a core's walk), else from
	 * the snapshot's copies. */
	Elf *core;
	int core_fd;
	/* The walk starts again at resume_regs (set_initial_registers()),
	 * at a return address: its first frame is not an activation. */
	bool resuming;
	uint64_t resume_regs[SNAP_NREGS];
	uint32_t resume_known;
	/* Modules looked at for our interposers' code (ours()). */
	size_t nseen;
	struct seen_mod {
		Dwfl_Module *mod;
		uint64_t lo, hi; /* its sw_interpose section; lo == hi: none */
	} seen[UNW_SEEN_MAX];
};

/*
 * Our own vDSO image: the kernel gives every process the same one. Made
 * once, whatever threads unwind at the same time.
 */
static Elf *self_vdso(void)
{
	size_t size;
	const void *image = vdso_self(&size);

	return image ? elf_memory((char *)image, size) : NULL;
}

/*
 * The files a session opened, each as it was then: a session is used
 * again only while every one of them is unchanged (a file rewritten in
 * place keeps its inode, and its old mapping would read past its new
 * end). A copy of each descriptor is held to look.
 */
#define SESSION_FILES 64

struct session_files {
	size_t n;
	bool full; /* one more was opened: the session is not kept */
	struct {
		int fd;
		dev_t dev;
		ino_t ino;
		off_t size;
		struct timespec mtime, ctime;
	} f[SESSION_FILES];
};

static void session_note_file(struct session_files *sf, int fd)
{
	struct stat st;

	if (!sf || sf->full)
		return;
	if (sf->n == SESSION_FILES || fstat(fd, &st) != 0) {
		sf->full = true;
		return;
	}
	sf->f[sf->n].fd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
	if (sf->f[sf->n].fd < 0) {
		sf->full = true;
		return;
	}
	sf->f[sf->n].dev = st.st_dev;
	sf->f[sf->n].ino = st.st_ino;
	sf->f[sf->n].size = st.st_size;
	sf->f[sf->n].mtime = st.st_mtim;
	sf->f[sf->n].ctime = st.st_ctim;
	sf->n++;
}

static bool session_files_same(const struct session_files *sf)
{
	for (size_t i = 0; i < sf->n; i++) {
		struct stat st;

		if (fstat(sf->f[i].fd, &st) != 0 || st.st_dev != sf->f[i].dev ||
		    st.st_ino != sf->f[i].ino || st.st_size != sf->f[i].size ||
		    st.st_mtim.tv_sec != sf->f[i].mtime.tv_sec ||
		    st.st_mtim.tv_nsec != sf->f[i].mtime.tv_nsec ||
		    st.st_ctim.tv_sec != sf->f[i].ctime.tv_sec ||
		    st.st_ctim.tv_nsec != sf->f[i].ctime.tv_nsec)
			return false;
	}
	return !sf->full;
}

static void session_files_free(struct session_files *sf)
{
	if (!sf)
		return;
	for (size_t i = 0; i < sf->n; i++)
		close(sf->f[i].fd);
	free(sf);
}

/*
 * libdwfl's find_elf has no argument of ours: the unwind under way in
 * this thread is here.
 */
static __thread struct unw *tls_unw;

/* Dwfl_Callbacks.find_elf for a snapshot: the caller's way to the file. */
static int find_elf(Dwfl_Module *mod, void **userdata, const char *name,
		    Dwarf_Addr base, char **file_name, Elf **elfp)
{
	struct unw *u = tls_unw;
	int fd;

	(void)mod;
	(void)userdata;
	if (name[0] == '[') {
		if (strncmp(name, "[vdso", 5) == 0)
			*elfp = self_vdso();
		return -1;
	}
	if (name[0] != '/' || !u)
		return -1;
	parsenote(base);
	fd = u->open_fn ? u->open_fn(u->open_arg, base, name)
			: modopen_file(name, 0);
	if (fd < 0)
		return -1;
	session_note_file(u->files, fd);
	*file_name = strdup(name);
	return fd;
}

/* Only the call frame information is wanted: no separate debug files. */
static int no_debuginfo(Dwfl_Module *mod, void **userdata, const char *name,
			Dwarf_Addr base, const char *file_name,
			const char *debuglink, GElf_Word crc,
			char **debuginfo_file_name)
{
	(void)mod;
	(void)userdata;
	(void)name;
	(void)base;
	(void)file_name;
	(void)debuglink;
	(void)crc;
	(void)debuginfo_file_name;
	return -1;
}

static const Dwfl_Callbacks snap_callbacks = {
	.find_elf = find_elf,
	.find_debuginfo = no_debuginfo,
};

static const struct snap_thread *thread_by_tid(const struct snap *s, pid_t tid)
{
	size_t lo = 0, hi = s->nthreads;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (s->threads[mid].tid < tid)
			lo = mid + 1;
		else if (s->threads[mid].tid > tid)
			hi = mid;
		else
			return &s->threads[mid];
	}
	return NULL;
}

/*
 * The thread callbacks take the unwind under way in this thread (their
 * arg is the same, but for a session kept from an earlier snapshot,
 * whose arg was that snapshot's).
 */
static pid_t next_thread(Dwfl *dwfl, void *arg, void **thread_argp)
{
	struct unw *u = tls_unw ? tls_unw : arg;

	(void)dwfl;
	while (u->next < u->s->nthreads) {
		const struct snap_thread *t = &u->s->threads[u->next++];

		if (t->status == SW_ST_OK) {
			*thread_argp = (void *)t;
			return t->tid;
		}
	}
	return 0;
}

static bool get_thread(Dwfl *dwfl, pid_t tid, void *arg, void **thread_argp)
{
	struct unw *u = tls_unw ? tls_unw : arg;
	const struct snap_thread *t = thread_by_tid(u->s, tid);

	(void)dwfl;
	if (!t || t->status != SW_ST_OK)
		return false;
	u->cur = t;
	*thread_argp = (void *)t;
	return true;
}

/* Whether [addr, addr + n) lies in the n bytes of a copy at at. */
static bool in_copy(uint64_t addr, size_t n, uint64_t at, uint32_t len)
{
	return addr >= at && addr - at <= len && len - (addr - at) >= n;
}

/*
 * Every read comes from the copies of the thread being unwound: its
 * stack from sp, then the regions that a handler on an alternate signal
 * stack left behind (snapshot.h); or, going on with a core's walk, from
 * the core.
 */
static bool memory_read(Dwfl *dwfl, Dwarf_Addr addr, Dwarf_Word *result,
			void *arg)
{
	struct unw *u = tls_unw ? tls_unw : arg;
	const struct snap_thread *t = u->cur;

	(void)dwfl;
	if (u->core) {
		if (corefile_read(u->core, u->core_fd, addr, result,
				  sizeof(*result)) == 0)
			return true;
		u->missed = true;
		return false;
	}
	if (!t)
		return false;
	if (in_copy(addr, sizeof(*result), t->sp, t->stack_len)) {
		memcpy(result, t->stack + (addr - t->sp), sizeof(*result));
		return true;
	}
	for (uint32_t i = 0; i < t->nmore; i++)
		if (in_copy(addr, sizeof(*result), t->more[i].at,
			    t->more[i].len)) {
			memcpy(result,
			       t->more[i].bytes + (addr - t->more[i].at),
			       sizeof(*result));
			return true;
		}
	u->missed = true;
	return false;
}

static bool set_initial_registers(Dwfl_Thread *thread, void *thread_arg)
{
	const struct snap_thread *t = thread_arg;
	const struct unw *u = tls_unw;
	Dwarf_Word regs[SNAP_NREGS];

	if (u && u->resuming) {
		/* Only what the frame left known: the rest stays unknown. */
		for (unsigned r = 0; r < SNAP_NREGS - 1; r++) {
			Dwarf_Word v = u->resume_regs[r];

			if ((u->resume_known & (1u << r)) &&
			    !dwfl_thread_state_registers(thread, (int)r, 1, &v))
				return false;
		}
		dwfl_thread_state_register_pc(thread,
					      u->resume_regs[SNAP_NREGS - 1]);
		return true;
	}
	if (!t || (u && u->core))
		return false;
	for (size_t i = 0; i < SNAP_NREGS; i++)
		regs[i] = t->regs[i];
	return dwfl_thread_state_registers(thread, 0, SNAP_NREGS, regs);
}

unsigned unwind_max_frames(unsigned max_frames)
{
	return max_frames == 0			 ? SW_MAX_FRAMES
	       : max_frames > SW_MAX_FRAMES_HARD ? SW_MAX_FRAMES_HARD
						 : max_frames;
}

static const Dwfl_Thread_Callbacks snap_thread_callbacks = {
	.next_thread = next_thread,
	.get_thread = get_thread,
	.memory_read = memory_read,
	.set_initial_registers = set_initial_registers,
};

/*
 * Whether pc is in the code of the interposers of a copy of ours in the
 * process (the sw_interpose section of its module, sigctx.h): such a
 * frame is ours, not the program's, and the agent's own unwinder drops
 * it too.
 */
static bool ours(struct unw *u, Dwfl *dwfl, uint64_t pc)
{
	Dwfl_Module *mod = dwfl_addrmodule(dwfl, pc);
	struct seen_mod *s = NULL;
	size_t shstrndx;
	Dwarf_Addr bias;
	Elf_Scn *scn = NULL;
	Elf *elf;

	if (!mod)
		return false;
	for (size_t i = 0; i < u->nseen && !s; i++)
		if (u->seen[i].mod == mod)
			s = &u->seen[i];
	if (!s) {
		if (u->nseen == UNW_SEEN_MAX)
			return false;
		s = &u->seen[u->nseen++];
		s->mod = mod;
		s->lo = s->hi = 0;
		elf = dwfl_module_getelf(mod, &bias);
		if (elf && elf_getshdrstrndx(elf, &shstrndx) == 0)
			while ((scn = elf_nextscn(elf, scn))) {
				GElf_Shdr sh;
				const char *name;

				if (!gelf_getshdr(scn, &sh))
					continue;
				name = elf_strptr(elf, shstrndx, sh.sh_name);
				if (name && strcmp(name, "sw_interpose") == 0) {
					s->lo = bias + sh.sh_addr;
					s->hi = s->lo + sh.sh_size;
					break;
				}
			}
	}
	return pc >= s->lo && pc < s->hi;
}

/* The pc and the registers libdwfl knows of the frame it just made. */
static void note_frame(struct unw *u, Dwfl_Frame *state, uint64_t pc,
		       bool activation)
{
	u->last_pc = pc;
	u->last_activation = activation;
	u->last_known = 0;
	for (unsigned r = 0; r < SNAP_NREGS - 1; r++) {
		Dwarf_Word v;

		if (dwfl_frame_reg(state, r, &v) == 0) {
			u->last_regs[r] = v;
			u->last_known |= 1u << r;
		}
	}
}

/*
 * The next step reads the call frame information of the module that
 * holds pc: noted for a supervisor (parsenote.h).
 */
static void note_module(Dwfl_Frame *state, Dwarf_Addr pc)
{
	Dwfl_Module *mod;
	Dwarf_Addr low = 0;

	if (!parsenote_wanted())
		return;
	mod = dwfl_addrmodule(dwfl_thread_dwfl(dwfl_frame_thread(state)), pc);
	if (mod &&
	    dwfl_module_info(mod, NULL, &low, NULL, NULL, NULL, NULL, NULL))
		parsenote(low);
}

/* One frame: its pc, innermost first, up to u->max. */
static int frame_cb(Dwfl_Frame *state, void *arg)
{
	struct unw *u = arg;
	Dwarf_Addr pc;
	bool activation;

	if (!dwfl_frame_pc(state, &pc, &activation))
		return DWARF_CB_ABORT;
	if (u->resuming) {
		/* Where a walk starts again: a return address. */
		activation = false;
		u->resuming = false;
	}
	note_frame(u, state, pc, activation);
	note_module(state, pc);
	/* A return address is looked up at the call, just before it. */
	if (pc && ours(u, dwfl_thread_dwfl(dwfl_frame_thread(state)),
		       activation ? pc : pc - 1))
		return DWARF_CB_OK;
	/* The outermost frame's return address is 0 where the ABI ends. */
	if (pc == 0 && u->nips > 0)
		return DWARF_CB_ABORT;
	if (u->nips == u->max) {
		u->truncated = true;
		return DWARF_CB_ABORT;
	}
	if (u->nips == 0)
		u->first_exact = activation;
	else if (activation && u->nips < SW_MAX_FRAMES)
		u->exact[u->nips / 64] |= 1ull << (u->nips % 64);
	u->ips[u->nips++] = pc;
	return DWARF_CB_OK;
}

/*
 * Whether the code before the return address ra, in the module libdwfl
 * has for it, is a call: ra was pushed by a call, not merely a word that
 * points into code.
 */
static bool follows_call(Dwfl *dwfl, uint64_t ra)
{
	Dwfl_Module *mod =
		ra > CALLSITE_LOOKBACK ? dwfl_addrmodule(dwfl, ra - 1) : NULL;
	Dwarf_Addr bias = 0;
	Elf *elf = mod ? dwfl_module_getelf(mod, &bias) : NULL;
	size_t phnum;
	uint64_t a = ra - bias;

	if (!elf || elf_getphdrnum(elf, &phnum) != 0)
		return false;
	for (size_t i = 0; i < phnum; i++) {
		GElf_Phdr ph;
		Elf_Data *code;

		if (!gelf_getphdr(elf, (int)i, &ph) || ph.p_type != PT_LOAD ||
		    !(ph.p_flags & PF_X) ||
		    a < ph.p_vaddr + CALLSITE_LOOKBACK ||
		    a - ph.p_vaddr > ph.p_filesz)
			continue;
		code = elf_getdata_rawchunk(
			elf,
			(int64_t)(ph.p_offset +
				  (a - CALLSITE_LOOKBACK - ph.p_vaddr)),
			CALLSITE_LOOKBACK, ELF_T_BYTE);
		return code && code->d_buf &&
		       callsite_ends_call(code->d_buf, CALLSITE_LOOKBACK);
	}
	return false;
}

/*
 * Where the walk of u may go on when libdwfl stopped at a frame in code
 * that no module holds and that has no frame pointer to follow: the perf
 * trampolines of CPython 3.12+ (-X perf), one per Python function call,
 * made at run time as copies of
 *
 *	sub $8, %rsp; call *%rcx; add $8, %rsp; ret
 *
 * with neither call frame information nor a frame pointer of their own,
 * so that every stack stopped at its first Python frame. Such a frame,
 * entered by its return address, has its caller's return address 8 bytes
 * above its sp and leaves every callee-saved register as it was (rbp
 * too, but where a build made it push one: then rbp is its sp). That
 * rule is taken only where the word there is a return address: code of
 * a module follows a call just before it (follows_call()). Sets u's
 * resume registers and returns true, else false.
 */
static bool step_over_trampoline(Dwfl *dwfl, struct unw *u)
{
	/* rbx, rbp, r12-r15: callee-saved, as the trampoline leaves them. */
	const uint32_t kept = (1u << 3) | (1u << 6) | (0xfu << 12);
	Dwarf_Word ra;
	uint64_t sp;

	if (u->nips == 0 || u->nips >= u->max || u->truncated ||
	    u->last_activation || u->last_pc <= 1 ||
	    !(u->last_known & (1u << 7)) ||
	    dwfl_addrmodule(dwfl, u->last_pc - 1))
		return false;
	sp = u->last_regs[7];
	if (sp > UINT64_MAX - 16 || !memory_read(dwfl, sp + 8, &ra, u) ||
	    !follows_call(dwfl, ra))
		return false;
	memcpy(u->resume_regs, u->last_regs, sizeof(u->resume_regs));
	u->resume_known = (u->last_known & kept) | (1u << 7);
	/* A build that gives it a frame pointer (push %rbp; mov %rsp,%rbp):
	 * rbp is its sp, and the caller's rbp is what it pushed. */
	if ((u->last_known & (1u << 6)) && u->last_regs[6] == sp &&
	    !memory_read(dwfl, sp, &u->resume_regs[6], u))
		u->resume_known &= ~(1u << 6);
	u->resume_regs[7] = sp + 16;
	u->resume_regs[SNAP_NREGS - 1] = ra;
	u->resuming = true;
	return true;
}

/* Unwinds thread tid into u, on past CPython's perf trampolines. */
static void walk_thread(Dwfl *dwfl, pid_t tid, struct unw *u)
{
	size_t before;

	u->resuming = false;
	u->last_pc = 0;
	dwfl_getthread_frames(dwfl, tid, frame_cb, u);
	do {
		before = u->nips;
		if (!step_over_trampoline(dwfl, u))
			break;
		dwfl_getthread_frames(dwfl, tid, frame_cb, u);
		u->resuming = false;
	} while (u->nips > before);
}

/* The thread's pcs into t (a copy of u->ips). */
static int keep_ips(struct unw *u, struct sw_thread *t)
{
	t->ips = malloc((u->nips ? u->nips : 1) * sizeof(*t->ips));
	if (!t->ips)
		return -ENOMEM;
	memcpy(t->ips, u->ips, u->nips * sizeof(*t->ips));
	t->nips = u->nips;
	if (u->first_exact)
		t->flags |= SW_TF_FIRST_EXACT;
	memcpy(t->exact, u->exact, sizeof(t->exact));
	if (u->truncated)
		t->flags |= SW_TF_TRUNCATED;
	return 0;
}

struct mod_list {
	struct sw_dump *d;
	size_t cap;
	bool oom;
};

/* Each module libdwfl knows, with its load bias and build-id. */
static int module_cb(Dwfl_Module *mod, void **userdata, const char *name,
		     Dwarf_Addr start, void *arg)
{
	struct mod_list *ml = arg;
	struct sw_dump *d = ml->d;
	struct sw_module *m;
	Dwarf_Addr low, high, bias = 0;
	const char *mainfile = NULL;
	const unsigned char *id;
	GElf_Addr id_vaddr;
	int id_len;

	(void)start;
	if (d->nmodules >= SW_MAX_MODULES)
		return DWARF_CB_ABORT;
	/*
	 * Without a file, a snapshot's module is left out (its frames stay
	 * addresses); a core's is kept, its bias known from the core, so
	 * that its frames get its path and offset.
	 */
	if (!dwfl_module_getelf(mod, &bias) &&
	    (d->method != SW_METHOD_CORE ||
	     !corefile_module_bias(*userdata, &bias)))
		return DWARF_CB_OK;
	dwfl_module_info(mod, NULL, &low, &high, NULL, NULL, &mainfile, NULL);
	if (d->nmodules == ml->cap) {
		size_t nc = ml->cap ? ml->cap * 2 : 64;
		struct sw_module *nv = realloc(d->modules, nc * sizeof(*nv));

		if (!nv) {
			ml->oom = true;
			return DWARF_CB_ABORT;
		}
		d->modules = nv;
		ml->cap = nc;
	}
	m = &d->modules[d->nmodules];
	memset(m, 0, sizeof(*m));
	/* A core's modules are found as files; a snapshot's by the maps. */
	m->path = strdup(d->method == SW_METHOD_CORE && mainfile ? mainfile
								 : name);
	if (!m->path) {
		ml->oom = true;
		return DWARF_CB_ABORT;
	}
	m->bias = bias;
	m->start = low;
	m->end = high;
	id_len = dwfl_module_build_id(mod, &id, &id_vaddr);
	if (id_len > 0 && id_len <= SW_BUILD_ID_MAX) {
		memcpy(m->build_id, id, (size_t)id_len);
		m->build_id_len = (uint32_t)id_len;
	}
	d->nmodules++;
	return DWARF_CB_OK;
}

static int collect_modules(Dwfl *dwfl, struct sw_dump *d)
{
	struct mod_list ml = { .d = d };

	dwfl_getmodules(dwfl, module_cb, &ml, 0);
	return ml.oom ? -ENOMEM : 0;
}

static void set_collected_at(struct sw_dump *d, uint64_t ago_ns)
{
	clock_gettime(CLOCK_REALTIME, &d->collected_at);
	while (ago_ns >= 1000000000ull && d->collected_at.tv_sec > 0) {
		d->collected_at.tv_sec--;
		ago_ns -= 1000000000ull;
	}
	if ((uint64_t)d->collected_at.tv_nsec < ago_ns) {
		d->collected_at.tv_sec--;
		d->collected_at.tv_nsec += 1000000000L;
	}
	d->collected_at.tv_nsec -= (long)ago_ns;
}

static const char *thread_error(const struct snap_thread *st)
{
	switch (st->status) {
	case SW_ST_TIMEOUT:
		return "did not stop within the deadline";
	case SW_ST_EXITED:
		return "exited during the snapshot";
	default:
		return sw_strerror(st->err);
	}
}

/*
 * Reports the modules of pm to dwfl the way dwfl_linux_proc_report()
 * does, without reading the whole of /proc/PID/maps again: each run of
 * mappings of one file (by device and inode) as one module named by its
 * path, the vDSO as "[vdso: PID]".
 */
static int report_maps(Dwfl *dwfl, const struct procmaps *pm, pid_t pid)
{
	bool vdso = pm->vdso_start != 0;
	size_t i = 0;

	while (i < pm->n || vdso) {
		const struct procmap *m = i < pm->n ? &pm->v[i] : NULL;
		uint64_t hi;
		size_t j;

		if (vdso && (!m || pm->vdso_start < m->start)) {
			char name[32];

			vdso = false;
			snprintf(name, sizeof(name), "[vdso: %d]", (int)pid);
			if (!dwfl_report_module(dwfl, name, pm->vdso_start,
						pm->vdso_end))
				return -1;
			continue;
		}
		if (!m)
			break;
		hi = m->end;
		for (j = i + 1; j < pm->n && pm->v[j].ino == m->ino &&
				pm->v[j].dev == m->dev &&
				(!vdso || pm->v[j].start < pm->vdso_start) &&
				strcmp(pm->v[j].path, m->path) == 0;
		     j++)
			hi = pm->v[j].end;
		if (!dwfl_report_module(dwfl, m->path, m->start, hi))
			return -1;
		i = j;
	}
	return 0;
}

/*
 * The last snapshot's session, kept for the next snapshot of the same
 * process with the same mappings (what a process's periodic samples
 * are): its modules' files stay open and their call frame information
 * parsed, instead of being opened and parsed again each time. Any other
 * process, or any change of mappings, and it is ended.
 */
static struct {
	pthread_mutex_t lock;
	pid_t pid;
	struct procmaps maps; /* a copy */
	Dwfl *dwfl;
	struct session_files *files;
} kept = { .lock = PTHREAD_MUTEX_INITIALIZER };

static bool same_maps(const struct procmaps *a, const struct procmaps *b)
{
	if (a->n != b->n || a->vdso_start != b->vdso_start ||
	    a->vdso_end != b->vdso_end)
		return false;
	for (size_t i = 0; i < a->n; i++) {
		const struct procmap *x = &a->v[i], *y = &b->v[i];

		if (x->start != y->start || x->end != y->end ||
		    x->offset != y->offset || x->dev != y->dev ||
		    x->ino != y->ino || strcmp(x->path, y->path) != 0)
			return false;
	}
	return true;
}

/*
 * The kept session of pid if its mappings are still maps and its files
 * unchanged (with its files in *files), or NULL.
 */
static Dwfl *session_take(pid_t pid, const struct procmaps *maps,
			  struct session_files **files)
{
	struct session_files *stale = NULL;
	Dwfl *dwfl = NULL, *end = NULL;

	*files = NULL;
	if (pthread_mutex_trylock(&kept.lock) != 0)
		return NULL;
	if (kept.dwfl && kept.pid == pid && same_maps(&kept.maps, maps) &&
	    session_files_same(kept.files)) {
		dwfl = kept.dwfl;
		*files = kept.files;
	} else {
		end = kept.dwfl;
		stale = kept.files;
	}
	kept.dwfl = NULL;
	kept.files = NULL;
	pthread_mutex_unlock(&kept.lock);
	if (end)
		dwfl_end(end);
	session_files_free(stale);
	return dwfl;
}

/*
 * Keeps dwfl, of pid with maps and files (both taken), in place of the
 * one kept (ended).
 */
static void session_keep(pid_t pid, const struct procmaps *maps, Dwfl *dwfl,
			 struct session_files *files)
{
	struct session_files *old_files = files;
	struct procmaps copy = { 0 };
	Dwfl *old = dwfl;

	if (files && !files->full && procmaps_copy(maps, &copy) == 0 &&
	    pthread_mutex_trylock(&kept.lock) == 0) {
		old = kept.dwfl;
		old_files = kept.files;
		procmaps_release(&kept.maps);
		kept.maps = copy;
		memset(&copy, 0, sizeof(copy));
		kept.pid = pid;
		kept.dwfl = dwfl;
		kept.files = files;
		pthread_mutex_unlock(&kept.lock);
	}
	procmaps_release(&copy);
	if (old)
		dwfl_end(old);
	session_files_free(old_files);
}

void unwind_forget(void)
{
	Dwfl *dwfl;
	struct session_files *files;

	pthread_mutex_lock(&kept.lock);
	dwfl = kept.dwfl;
	files = kept.files;
	kept.dwfl = NULL;
	kept.files = NULL;
	procmaps_release(&kept.maps);
	pthread_mutex_unlock(&kept.lock);
	if (dwfl)
		dwfl_end(dwfl);
	session_files_free(files);
}

int unwind_snapshot(const struct snap *s, const struct procmaps *maps,
		    unwind_open_fn open_fn, void *open_arg,
		    struct sw_dump **out)
{
	struct procmaps own = { 0 };
	struct unw u = { .s = s, .open_fn = open_fn, .open_arg = open_arg };
	struct sw_dump *d;
	Dwfl *dwfl = NULL;
	uint64_t first = 0, last = 0;
	bool need = false;
	int r = 0;

	*out = NULL;
	d = dump_new();
	u.max = unwind_max_frames(s->max_frames);
	u.ips = malloc(u.max * sizeof(*u.ips));
	if (!d || !u.ips) {
		r = -ENOMEM;
		goto out;
	}
	d->pid = s->pid;
	memcpy(d->comm, s->comm, sizeof(d->comm));
	procfs_read_cmdline(s->pid, &d->cmdline);
	d->method = SW_METHOD_PTRACE;
	d->elapsed_us = s->elapsed_ns / 1000;
	d->paused_us_max = s->paused_max_ns / 1000;
	d->paused_us_total = s->paused_total_ns / 1000;
	{
		struct timespec now;
		uint64_t mono;

		clock_gettime(CLOCK_MONOTONIC, &now);
		mono = (uint64_t)now.tv_sec * 1000000000ull +
		       (uint64_t)now.tv_nsec;
		set_collected_at(d, mono > s->started_ns ? mono - s->started_ns
							 : 0);
	}
	d->threads = calloc(s->nthreads ? s->nthreads : 1, sizeof(*d->threads));
	if (!d->threads) {
		r = -ENOMEM;
		goto out;
	}
	tls_unw = &u;
	/*
	 * Nothing to unwind when every thread read is one the caller kept
	 * (reused): then no modules either, the caller has those too.
	 */
	for (size_t i = 0; i < s->nthreads && !need; i++)
		need = s->threads[i].status == SW_ST_OK &&
		       !s->threads[i].reused;
	if (need && !maps && procmaps_read(s->pid, &own) == 0)
		maps = &own;
	/* The last snapshot's session when it is of the same process as it
	 * is still mapped; else a new one. */
	dwfl = need && maps ? session_take(s->pid, maps, &u.files) : NULL;
	if (!dwfl && need && maps) {
		u.files = calloc(1, sizeof(*u.files));
		dwfl = u.files ? dwfl_begin(&snap_callbacks) : NULL;
		if (dwfl) {
			dwfl_report_begin(dwfl);
			if (report_maps(dwfl, maps, s->pid) != 0 ||
			    dwfl_report_end(dwfl, NULL, NULL) != 0 ||
			    !dwfl_attach_state(dwfl, NULL, s->pid,
					       &snap_thread_callbacks, &u)) {
				dwfl_end(dwfl);
				dwfl = NULL;
			}
		}
	}
	for (size_t i = 0; i < s->nthreads; i++) {
		const struct snap_thread *st = &s->threads[i];
		struct sw_thread *t = &d->threads[d->nthreads++];

		t->tid = st->tid;
		memcpy(t->name, st->name, sizeof(t->name));
		t->state = st->state;
		t->utime_ms = st->utime_ms;
		t->stime_ms = st->stime_ms;
		t->captured_ns = st->captured_ns;
		t->group = -1;
		t->unchanged_s = -1;
		t->status = st->status;
		if (st->status != SW_ST_OK) {
			dump_thread_set_error(t, st->status, thread_error(st));
			continue;
		}
		t->read = st->method == SNAP_M_KERNEL ? SW_READ_KERNEL
			  : st->method == SNAP_M_PERF ? SW_READ_PERF
						      : SW_READ_PTRACE;
		t->nvcsw = st->nvcsw;
		t->nivcsw = st->nivcsw;
		if (st->reused) {
			/* The caller puts back what it unwound before. */
			t->flags |= SW_TF_REUSED;
			if (st->waits) {
				t->wait = malloc(sizeof(*t->wait));
				if (!t->wait) {
					r = -ENOMEM;
					goto out;
				}
				*t->wait = st->wait;
			}
			continue;
		}
		if (!first || st->captured_ns < first)
			first = st->captured_ns;
		if (st->captured_ns > last)
			last = st->captured_ns;
		u.nips = 0;
		u.truncated = false;
		u.missed = false;
		u.first_exact = true;
		memset(u.exact, 0, sizeof(u.exact));
		if (dwfl)
			walk_thread(dwfl, st->tid, &u);
		if (u.nips == 0) {
			/* Not even a first frame: keep the copied pc. */
			u.ips[u.nips++] = st->regs[16];
			u.first_exact = true;
		}
		u.cur = NULL;
		r = keep_ips(&u, t);
		/* Cut only if the unwind wanted what was not copied. */
		if (st->cut && u.missed && !u.truncated)
			t->flags |= SW_TF_STACK_CUT;
		if (r == 0 && st->waits) {
			t->wait = malloc(sizeof(*t->wait));
			if (!t->wait)
				r = -ENOMEM;
			else
				*t->wait = st->wait;
		}
		if (r != 0)
			goto out;
	}
	d->skew_us = (last - first) / 1000;
	if (dwfl)
		r = collect_modules(dwfl, d);
out:
	tls_unw = NULL;
	if (dwfl && r == 0) {
		session_keep(s->pid, maps, dwfl, u.files);
	} else {
		if (dwfl)
			dwfl_end(dwfl);
		session_files_free(u.files);
	}
	procmaps_release(&own);
	free(u.ips);
	if (r != 0) {
		sw_dump_free(d);
		return r;
	}
	*out = d;
	return 0;
}

/* The process name and arguments of an NT_PRPSINFO note, into d. */
static int psinfo_note(const void *desc, size_t size, void *arg)
{
	struct sw_dump *d = arg;
	prpsinfo_t ps;
	char args[sizeof(ps.pr_psargs) + 1];

	(void)size;
	memcpy(&ps, desc, sizeof(ps));
	memcpy(d->comm, ps.pr_fname,
	       sizeof(d->comm) < sizeof(ps.pr_fname) ? sizeof(d->comm)
						     : sizeof(ps.pr_fname));
	d->comm[SW_COMM_MAX - 1] = '\0';
	memcpy(args, ps.pr_psargs, sizeof(ps.pr_psargs));
	args[sizeof(ps.pr_psargs)] = '\0';
	free(d->cmdline);
	d->cmdline = strdup(args);
	return 1; /* the first is the one */
}

/* The process name and arguments from the core's NT_PRPSINFO note. */
static void core_psinfo(Elf *core, struct sw_dump *d)
{
	corefile_notes(core, NT_PRPSINFO, sizeof(prpsinfo_t), psinfo_note, d);
}

/* The first NT_PRSTATUS note: the thread the kernel dumped the core for. */
static int first_prstatus(const void *desc, size_t size, void *arg)
{
	struct sw_core_signal *cs = arg;
	struct elf_prstatus ps;

	(void)size;
	memcpy(&ps, desc, sizeof(ps));
	cs->number = ps.pr_cursig;
	cs->tid = ps.pr_pid;
	return 1;
}

/* Whether sig's kernel-sent siginfo holds the faulting address. */
static bool fault_signal(int sig)
{
	return sig == SIGSEGV || sig == SIGBUS || sig == SIGILL ||
	       sig == SIGFPE || sig == SIGTRAP;
}

/* The first NT_SIGINFO note, the dumping thread's: code and address. */
static int siginfo_note(const void *desc, size_t size, void *arg)
{
	struct sw_core_signal *cs = arg;
	siginfo_t si;

	(void)size;
	memcpy(&si, desc, sizeof(si));
	if (si.si_signo != cs->number)
		return 1;
	cs->code = si.si_code;
	/* Only the kernel's own codes (above 0) carry an address. */
	if (fault_signal(si.si_signo) && si.si_code > 0 &&
	    si.si_code != SI_KERNEL) {
		cs->has_addr = true;
		cs->addr = (uint64_t)(uintptr_t)si.si_addr;
	}
	return 1;
}

/*
 * The signal that ended the process, when the core is a crash's: the
 * kernel writes the dumping thread's NT_PRSTATUS first, with pr_cursig
 * the fatal signal, and its NT_SIGINFO after it. gcore writes a
 * pr_cursig of 0 (its NT_SIGINFO notes are of its own stop): no signal.
 */
static void core_signal(Elf *core, struct sw_dump *d)
{
	struct sw_core_signal cs = { 0 };

	corefile_notes(core, NT_PRSTATUS, sizeof(struct elf_prstatus),
		       first_prstatus, &cs);
	if (cs.number <= 0 || cs.number > 64 || cs.tid <= 0)
		return;
	corefile_notes(core, NT_SIGINFO, sizeof(siginfo_t), siginfo_note, &cs);
	d->core_signal = cs;
}

/*
 * Whether the core was cut short: a segment (or its notes) whose data
 * lies past the end of the file, as when the disk filled or a size limit
 * cut the kernel's write. Sets d->core_cut_size and core_cut_need then.
 */
static void core_cut(Elf *core, uint64_t file_size, struct sw_dump *d)
{
	uint64_t need = 0;
	size_t nph;

	if (elf_getphdrnum(core, &nph) != 0)
		return;
	for (size_t i = 0; i < nph; i++) {
		GElf_Phdr ph;
		uint64_t end;

		if (!gelf_getphdr(core, (int)i, &ph) || ph.p_type == PT_NULL)
			continue;
		end = ph.p_offset + ph.p_filesz;
		if (end < ph.p_offset)
			end = UINT64_MAX;
		if (end > need)
			need = end;
	}
	if (need > file_size) {
		d->core_cut_size = file_size;
		d->core_cut_need = need;
	}
}

struct core_walk {
	struct unw u;
	struct sw_dump *d;
	size_t cap;
	int err;
	Elf *core;
	int fd;
	const char *exe;
	Dwfl *dwfl;
	/* Where a walk goes on past a trampoline (core_more()). */
	Dwfl *more;
	struct corefile *more_cf;
	bool more_failed;
};

/*
 * A core's threads are elfutils' own (dwfl_core_file_attach()), whose
 * registers cannot be given again: a walk that goes on past a CPython
 * perf trampoline (step_over_trampoline()) starts again in a second Dwfl
 * of the same modules, whose one thread is the one being walked, its
 * registers the walk's resume registers and its memory the core's.
 */
static pid_t core_more_next(Dwfl *dwfl, void *arg, void **thread_argp)
{
	(void)dwfl;
	(void)arg;
	(void)thread_argp;
	return 0;
}

static bool core_more_get(Dwfl *dwfl, pid_t tid, void *arg, void **thread_argp)
{
	(void)dwfl;
	(void)tid;
	*thread_argp = arg;
	return true;
}

static const Dwfl_Thread_Callbacks core_more_callbacks = {
	.next_thread = core_more_next,
	.get_thread = core_more_get,
	.memory_read = memory_read,
	.set_initial_registers = set_initial_registers,
};

static const Dwfl_Callbacks core_callbacks = {
	.find_elf = corefile_find_elf,
	.find_debuginfo = no_debuginfo,
};

/* The second Dwfl of w (core_more_callbacks), made when first needed. */
static Dwfl *core_more(struct core_walk *w)
{
	char why[256];

	if (w->more || w->more_failed)
		return w->more;
	w->more_failed = true;
	w->more = dwfl_begin(&core_callbacks);
	if (!w->more)
		return NULL;
	dwfl_report_begin(w->more);
	if (corefile_report(w->more, w->core, w->fd, w->exe, &w->more_cf, why,
			    sizeof(why)) != 0 ||
	    dwfl_report_end(w->more, NULL, NULL) != 0 ||
	    !dwfl_attach_state(w->more, w->core, w->d->pid,
			       &core_more_callbacks, &w->u)) {
		dwfl_end(w->more);
		corefile_free(w->more_cf);
		w->more = NULL;
		w->more_cf = NULL;
		return NULL;
	}
	w->more_failed = false;
	return w->more;
}

/* Walks on past CPython's perf trampolines from where a walk stopped. */
static void core_walk_on(struct core_walk *w, pid_t tid)
{
	for (;;) {
		size_t before = w->u.nips;
		Dwfl *more;

		if (!step_over_trampoline(w->dwfl, &w->u))
			break;
		more = core_more(w);
		if (!more)
			break;
		dwfl_getthread_frames(more, tid, frame_cb, &w->u);
		w->u.resuming = false;
		if (w->u.nips == before)
			break;
	}
}

static int core_thread_cb(Dwfl_Thread *thread, void *arg)
{
	struct core_walk *w = arg;
	struct sw_dump *d = w->d;
	struct sw_thread *t;

	if (d->nthreads >= SW_MAX_THREADS)
		return DWARF_CB_ABORT;
	if (d->nthreads == w->cap) {
		size_t nc = w->cap ? w->cap * 2 : 64;
		struct sw_thread *nv = realloc(d->threads, nc * sizeof(*nv));

		if (!nv) {
			w->err = -ENOMEM;
			return DWARF_CB_ABORT;
		}
		d->threads = nv;
		w->cap = nc;
	}
	t = &d->threads[d->nthreads++];
	memset(t, 0, sizeof(*t));
	t->tid = dwfl_thread_tid(thread);
	memcpy(t->name, d->comm, sizeof(t->name));
	t->state = '?';
	t->group = -1;
	t->unchanged_s = -1;
	t->status = SW_ST_OK;
	t->read = SW_READ_CORE;
	w->u.nips = 0;
	w->u.truncated = false;
	w->u.first_exact = true;
	w->u.resuming = false;
	w->u.last_pc = 0;
	memset(w->u.exact, 0, sizeof(w->u.exact));
	dwfl_thread_getframes(thread, frame_cb, &w->u);
	core_walk_on(w, t->tid);
	if (w->u.nips == 0) {
		dump_thread_set_error(t, SW_ST_ERROR,
				      "no frame could be read from the core");
		return DWARF_CB_OK;
	}
	w->err = keep_ips(&w->u, t);
	return w->err ? DWARF_CB_ABORT : DWARF_CB_OK;
}

/* The thread of d whose tid is tid; NULL. */
static struct sw_thread *core_thread(struct sw_dump *d, pid_t tid)
{
	for (size_t i = 0; i < d->nthreads; i++)
		if (d->threads[i].tid == tid)
			return &d->threads[i];
	return NULL;
}

/* Copies w's window from the core's memory (its PT_LOAD segments). */
static void core_wait_mem(Elf *core, int fd, struct sw_wait *w)
{
	uint64_t from;
	size_t len;

	waitmem_window(w, &from, &len);
	w->mem_at = from;
	w->nmem = 0;
	if (corefile_read(core, fd, from, w->mem, len) == 0)
		w->nmem = (uint32_t)len;
}

struct core_wait_walk {
	Elf *core;
	int fd;
	struct sw_dump *d;
};

/* The futex wait of an NT_PRSTATUS note's thread, if it is in one. */
static int prstatus_note(const void *desc, size_t size, void *arg)
{
#if defined(__x86_64__)
	struct core_wait_walk *w = arg;
	struct elf_prstatus ps;
	struct sw_thread *t;

	(void)size;
	memcpy(&ps, desc, sizeof(ps));
	/* restart_syscall: a timed wait stopped once before (snapshot.c). */
	if ((long long)ps.pr_reg[ORIG_RAX] != SYS_futex &&
	    (long long)ps.pr_reg[ORIG_RAX] != SYS_restart_syscall)
		return 0;
	t = core_thread(w->d, ps.pr_pid);
	if (!t || t->status != SW_ST_OK || t->wait)
		return 0;
	t->wait = calloc(1, sizeof(*t->wait));
	if (!t->wait)
		return -ENOMEM;
	t->wait->addr = ps.pr_reg[RDI];
	t->wait->op = (uint32_t)ps.pr_reg[RSI];
	core_wait_mem(w->core, w->fd, t->wait);
#else
	(void)desc;
	(void)size;
	(void)arg;
#endif
	return 0;
}

/*
 * The futex waits of the core's threads: each NT_PRSTATUS note holds the
 * thread's registers as the kernel (or gcore) saved them, orig_rax the
 * system call it was in; the lock words come from the core's memory.
 */
static int core_waits(Elf *core, int fd, struct sw_dump *d)
{
	struct core_wait_walk w = { core, fd, d };
	int r = corefile_notes(core, NT_PRSTATUS, sizeof(struct elf_prstatus),
			       prstatus_note, &w);

	return r < 0 ? r : 0;
}

static int cmp_sw_thread(const void *a, const void *b)
{
	const struct sw_thread *x = a, *y = b;

	return (x->tid > y->tid) - (x->tid < y->tid);
}

/*
 * A core's modules are opened by corefile.c only. Separate debug files
 * are not looked for: libdwfl's standard search opens the paths that a
 * module's .gnu_debuglink names, in the module's own directory, which a
 * core may point anywhere; the call frame information of the module's
 * own file is enough to unwind, and the symbolizer finds debug files by
 * build-id in the system's debug directory only.
 */
int unwind_core(const char *core_path, const char *exe, struct sw_dump **out,
		char *why, size_t why_size)
{
	return unwind_core_max(core_path, exe, 0, out, why, why_size);
}

int unwind_core_max(const char *core_path, const char *exe, unsigned max_frames,
		    struct sw_dump **out, char *why, size_t why_size)
{
	int fd;

	*out = NULL;
	fd = open(core_path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0) {
		int r = -errno;

		snprintf(why, why_size, "%s: %s", core_path, strerror(-r));
		return r;
	}
	return unwind_core_fd(fd, core_path, exe, max_frames, out, why,
			      why_size);
}

int unwind_core_fd(int fd, const char *core_path, const char *exe,
		   unsigned max_frames, struct sw_dump **out, char *why,
		   size_t why_size)
{
	struct core_walk w = { 0 };
	struct corefile *cf = NULL;
	struct sw_dump *d = NULL;
	Dwfl *dwfl = NULL;
	Elf *core = NULL;
	GElf_Ehdr eh;
	struct stat st;
	int r;

	*out = NULL;
	elf_version(EV_CURRENT);
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
		snprintf(why, why_size, "%s: not a regular file", core_path);
		close(fd);
		return -EINVAL;
	}
	core = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	if (!core || !gelf_getehdr(core, &eh) || eh.e_type != ET_CORE) {
		snprintf(why, why_size, "%s: not an ELF core file", core_path);
		r = SW_EFORMAT;
		goto out;
	}
	d = dump_new();
	w.u.max = unwind_max_frames(max_frames);
	w.u.ips = malloc(w.u.max * sizeof(*w.u.ips));
	w.u.core = w.core = core;
	w.u.core_fd = w.fd = fd;
	w.exe = exe;
	tls_unw = &w.u;
	dwfl = w.dwfl = dwfl_begin(&core_callbacks);
	if (!d || !w.u.ips || !dwfl) {
		r = -ENOMEM;
		snprintf(why, why_size, "out of memory");
		goto out;
	}
	d->method = SW_METHOD_CORE;
	d->timeout_ms = 0;
	d->collected_at.tv_sec = st.st_mtim.tv_sec;
	d->collected_at.tv_nsec = st.st_mtim.tv_nsec;
	core_psinfo(core, d);
	core_signal(core, d);
	core_cut(core, (uint64_t)st.st_size, d);
	dwfl_report_begin(dwfl);
	r = corefile_report(dwfl, core, fd, exe, &cf, why, why_size);
	if (r != 0)
		goto out;
	if (dwfl_report_end(dwfl, NULL, NULL) != 0) {
		snprintf(why, why_size, "%s: %s", core_path, dwfl_errmsg(-1));
		r = SW_EFORMAT;
		goto out;
	}
	r = dwfl_core_file_attach(dwfl, core);
	if (r < 0 && d->core_cut_need) {
		snprintf(why, why_size,
			 "%s: cut short (%llu bytes of the %llu its segments "
			 "need), and no thread is left in what remains",
			 core_path, (unsigned long long)d->core_cut_size,
			 (unsigned long long)d->core_cut_need);
		r = SW_EFORMAT;
		goto out;
	}
	if (r < 0) {
		const char *msg = dwfl_errmsg(-1);

		snprintf(why, why_size, "%s: no threads: %s", core_path,
			 msg ? msg : "no thread notes");
		r = SW_EFORMAT;
		goto out;
	}
	d->pid = r;
	w.d = d;
	/* A thread that cannot be walked has an error of its own. */
	(void)dwfl_getthreads(dwfl, core_thread_cb, &w);
	if (w.err) {
		r = w.err;
		snprintf(why, why_size, "out of memory");
		goto out;
	}
	r = core_waits(core, fd, d);
	if (r != 0) {
		snprintf(why, why_size, "out of memory");
		goto out;
	}
	qsort(d->threads, d->nthreads, sizeof(*d->threads), cmp_sw_thread);
	r = collect_modules(dwfl, d);
	if (r != 0)
		snprintf(why, why_size, "out of memory");
out:
	tls_unw = NULL;
	if (w.more)
		dwfl_end(w.more);
	corefile_free(w.more_cf);
	if (dwfl)
		dwfl_end(dwfl);
	corefile_free(cf); /* after dwfl_end(): the vDSO's image */
	if (core)
		elf_end(core);
	close(fd);
	free(w.u.ips);
	if (r != 0) {
		sw_dump_free(d);
		return r;
	}
	*out = d;
	return 0;
}
