/*
 * symbolize.c - the symbolizer of symbolize.h: raw instruction pointers to
 * frames with function, source file:line and inlined frames, through
 * elfutils libdwfl.
 *
 * Each module gets its own libdwfl session, keyed by build-id (by path
 * when it has none) and reported at address 0, so that the module's
 * addresses are its link-time addresses and a lookup is done by offset
 * (ip minus load bias) whatever the process it came from: one session
 * serves every process that maps the same file. The file is opened
 * through the caller's open function and handed to libdwfl as an Elf read
 * with pread (ELF_C_READ), never mmapped, so a file truncated under us
 * cannot SIGBUS the daemon. Modules that fail to open are remembered and
 * retried only after SYM_RETRY_NS.
 *
 * Frames and their strings live in the dump's memory (dump_alloc()).
 * Within one dump each distinct ip is expanded once (its strings copied
 * into the dump once) and its frames copied wherever it occurs, and threads
 * with the very same ips share one frame array: a thousand threads in a
 * few stacks cost a few dozen string copies and a few blocks of memory,
 * not tens of thousands of allocations.
 *
 * A lookup (symrec.c, with the symbol index of symtab.c) gives a record of
 * the frames one address expands to. Records are cached per (session id,
 * looked-up offset) in an open addressing hash table; the cache is
 * bounded: past SYM_CACHE_MAX entries it is emptied. So is the session
 * table past SYM_MODS_MAX sessions, together with the cache.
 */
#define _GNU_SOURCE
#include <elfutils/libdwfl.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "symbolize.h"
#include "symrec.h"
#include "symtab.h"

#define SYM_MAX_FILE_SIZE (1ULL << 30) /* default open: largest file */
#define SYM_CACHE_MAX (1u << 18)       /* cached addresses; then emptied */
#define SYM_CACHE_MIN_SLOTS 1024u      /* power of two */
#define SYM_MODS_MAX 256	       /* sessions kept; then all are dropped */
#define SYM_MOD_BUCKETS 256	       /* power of two */
#define SYM_RETRY_NS (60ULL * 1000000000ULL) /* retry a failed module */

static const char in_loader[] = "[in dynamic loader]";
static const char low_stack[] = "[stack nearly exhausted]";
static const char no_room[] = "[stack of unknown size: not unwound]";
static const char busy[] = "[not unwound: too many handlers at once]";
static const char cut[] = "[unwinding stopped: memory not known to be mapped]";

struct slot {
	uint64_t off;
	uint32_t mod; /* session id; 0 marks an empty slot */
	struct symrec *rec;
};

/* One module's libdwfl session, or the memory of a failure to open it. */
struct symmod {
	struct symmod *next; /* hash chain */
	char *key;	     /* build-id hex, or "path:" + path */
	uint32_t id;	     /* never reused: cache keys stay unambiguous */
	Dwfl *dwfl;	     /* NULL when the module could not be read */
	Dwfl_Module *mod;
	struct symtab *tab; /* sorted symbols, built on the first lookup */
	uint64_t failed_ns; /* CLOCK_MONOTONIC of the last failure */
	/* Handed over to libdwfl by find_elf while the session opens. */
	int fd;
	Elf *elf;
	const char *path;
};

struct sym {
	sym_open_fn open_fn;
	void *open_arg;
	struct symmod *buckets[SYM_MOD_BUCKETS];
	size_t nmods;
	uint32_t next_id;
	struct slot *slots;
	size_t nslots; /* power of two, or 0 before the first insert */
	size_t nused;
	uint64_t hits;
	uint64_t misses;
};

/* A module range of the dump being symbolized, for binary search. */
struct modrange {
	uint64_t start;
	uint64_t end;
	int idx;
};

/* -------------------------------------------------------------- cache */

static uint64_t mix64(uint64_t x)
{
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ULL;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebULL;
	x ^= x >> 31;
	return x;
}

static size_t slot_of(uint32_t mod, uint64_t off, size_t nslots)
{
	return (size_t)mix64(off ^ ((uint64_t)mod << 40) ^ mod) & (nslots - 1);
}

/* The cached record of (mod, off), or NULL. */
static struct symrec *cache_get(const struct sym *s, uint32_t mod, uint64_t off)
{
	size_t i;

	if (!s->nslots)
		return NULL;
	for (i = slot_of(mod, off, s->nslots);; i = (i + 1) & (s->nslots - 1)) {
		const struct slot *e = &s->slots[i];

		if (!e->mod)
			return NULL;
		if (e->mod == mod && e->off == off)
			return e->rec;
	}
}

/* Frees every record; keeps the table's allocation. */
static void cache_clear(struct sym *s)
{
	for (size_t i = 0; i < s->nslots; i++) {
		free(s->slots[i].rec);
		s->slots[i].rec = NULL;
		s->slots[i].mod = 0;
	}
	s->nused = 0;
}

/* Rehashes into a table of nslots (a power of two). 0 or -ENOMEM. */
static int cache_resize(struct sym *s, size_t nslots)
{
	struct slot *t = calloc(nslots, sizeof(*t));

	if (!t)
		return -ENOMEM;
	for (size_t i = 0; i < s->nslots; i++) {
		const struct slot *e = &s->slots[i];
		size_t j;

		if (!e->mod)
			continue;
		j = slot_of(e->mod, e->off, nslots);
		while (t[j].mod)
			j = (j + 1) & (nslots - 1);
		t[j] = *e;
	}
	free(s->slots);
	s->slots = t;
	s->nslots = nslots;
	return 0;
}

/*
 * Inserts rec (not yet present) and takes it over. Empties the cache
 * first when it holds SYM_CACHE_MAX entries; earlier records may be freed
 * then, never rec. Returns 0, or -ENOMEM with rec freed.
 */
static int cache_put(struct sym *s, uint32_t mod, uint64_t off,
		     struct symrec *rec)
{
	size_t i;

	if (s->nused >= SYM_CACHE_MAX)
		cache_clear(s);
	/* Load factor at most 1/2 keeps probe runs short. */
	if (2 * (s->nused + 1) > s->nslots) {
		size_t n = s->nslots ? 2 * s->nslots : SYM_CACHE_MIN_SLOTS;

		if (cache_resize(s, n)) {
			free(rec);
			return -ENOMEM;
		}
	}
	i = slot_of(mod, off, s->nslots);
	while (s->slots[i].mod)
		i = (i + 1) & (s->nslots - 1);
	s->slots[i].mod = mod;
	s->slots[i].off = off;
	s->slots[i].rec = rec;
	s->nused++;
	return 0;
}

/* ----------------------------------------------------------- sessions */

/*
 * The default sym_open_fn, for in-process use where module paths come
 * from our own loader: opens m->path read-only without following a final
 * symlink, and only a regular file of at most SYM_MAX_FILE_SIZE. Loader
 * names are often symlinks (libz.so.1 -> libz.so.1.2.13), so on ELOOP the
 * path is resolved with realpath() and the result opened the same way.
 * Returns the fd or a negative errno.
 */
static int default_open(void *arg, const struct sw_module *m)
{
	const int flags = O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK;
	struct stat st;
	char *real;
	int fd, err;

	(void)arg;
	fd = open(m->path, flags);
	if (fd < 0 && errno == ELOOP) {
		real = realpath(m->path, NULL);
		if (!real)
			return -errno;
		fd = open(real, flags);
		err = errno;
		free(real);
		errno = err;
	}
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0) {
		err = -errno;
		goto out_close;
	}
	err = -EINVAL;
	if (!S_ISREG(st.st_mode))
		goto out_close;
	err = -EFBIG;
	if ((uint64_t)st.st_size > SYM_MAX_FILE_SIZE)
		goto out_close;
	return fd;

out_close:
	close(fd);
	return err;
}

/*
 * libdwfl's find_elf callback: hands over the Elf and fd that
 * module_open() prepared (libdwfl owns them from here) and the file name,
 * from which it looks for separate debuginfo.
 */
static int find_elf(Dwfl_Module *mod, void **userdata, const char *modname,
		    Dwarf_Addr base, char **file_name, Elf **elfp)
{
	struct symmod *sm = *userdata;
	int fd;

	(void)mod;
	(void)modname;
	(void)base;
	if (!sm || sm->fd < 0 || !sm->elf)
		return -1;
	*file_name = strdup(sm->path);
	if (!*file_name)
		return -1;
	*elfp = sm->elf;
	fd = sm->fd;
	sm->elf = NULL;
	sm->fd = -1;
	return fd;
}

static const Dwfl_Callbacks dwfl_callbacks = {
	.find_elf = find_elf,
	.find_debuginfo = dwfl_standard_find_debuginfo,
	.section_address = dwfl_offline_section_address,
	.debuginfo_path = NULL,
};

/*
 * The link-time range of an ET_EXEC or ET_DYN file's PT_LOAD segments.
 * lo is computed exactly as libdwfl computes a file's base (the first
 * PT_LOAD's p_vaddr rounded down to its alignment), so a module reported
 * at [lo, hi) gets a bias of 0. Returns 0 or -EINVAL.
 */
static int elf_range(Elf *elf, uint64_t *lo, uint64_t *hi)
{
	GElf_Ehdr eh;
	size_t phnum;
	bool first = true;

	if (elf_kind(elf) != ELF_K_ELF || !gelf_getehdr(elf, &eh) ||
	    (eh.e_type != ET_EXEC && eh.e_type != ET_DYN) ||
	    elf_getphdrnum(elf, &phnum))
		return -EINVAL;
	*lo = *hi = 0;
	for (size_t i = 0; i < phnum; i++) {
		GElf_Phdr ph;

		if (!gelf_getphdr(elf, (int)i, &ph) || ph.p_type != PT_LOAD)
			continue;
		if (first)
			*lo = ph.p_vaddr & -ph.p_align;
		first = false;
		if (ph.p_vaddr + ph.p_memsz > *hi)
			*hi = ph.p_vaddr + ph.p_memsz;
	}
	if (first)
		return -EINVAL;
	if (*hi <= *lo)
		*hi = *lo + 1;
	return 0;
}

/* Ends sm's session, if any, and frees what find_elf did not take. */
static void module_close(struct symmod *sm)
{
	if (sm->dwfl)
		dwfl_end(sm->dwfl);
	sm->dwfl = NULL;
	sm->mod = NULL;
	symtab_free(sm->tab);
	sm->tab = NULL;
	if (sm->elf)
		elf_end(sm->elf);
	sm->elf = NULL;
	if (sm->fd >= 0)
		close(sm->fd);
	sm->fd = -1;
}

/*
 * Opens m's file through the open function and starts its libdwfl
 * session in sm. The file must be an ELF executable or shared object and,
 * when m has a build-id, carry the same one. Returns 0 or a negative
 * errno (then sm has no session). May block on file I/O.
 */
static int module_open(struct sym *s, struct symmod *sm,
		       const struct sw_module *m)
{
	const unsigned char *bits;
	GElf_Addr vaddr, bias;
	uint64_t lo, hi;
	void **ud;
	int rc;

	sm->fd = s->open_fn(s->open_arg, m);
	if (sm->fd < 0) {
		rc = sm->fd;
		sm->fd = -1;
		return rc;
	}
	rc = -EINVAL;
	sm->elf = elf_begin(sm->fd, ELF_C_READ, NULL);
	if (!sm->elf || elf_range(sm->elf, &lo, &hi))
		goto out_close;
	rc = -ENOMEM;
	sm->dwfl = dwfl_begin(&dwfl_callbacks);
	if (!sm->dwfl)
		goto out_close;
	dwfl_report_begin(sm->dwfl);
	sm->path = m->path;
	sm->mod = dwfl_report_module(sm->dwfl, m->path, lo, hi);
	if (!sm->mod || dwfl_report_end(sm->dwfl, NULL, NULL))
		goto out_close;
	dwfl_module_info(sm->mod, &ud, NULL, NULL, NULL, NULL, NULL, NULL);
	*ud = sm;
	rc = -EINVAL;
	if (!dwfl_module_getelf(sm->mod, &bias) || bias != 0)
		goto out_close;
	if (m->build_id_len) {
		int n = dwfl_module_build_id(sm->mod, &bits, &vaddr);

		if (n != (int)m->build_id_len ||
		    memcmp(bits, m->build_id, m->build_id_len) != 0)
			goto out_close;
	}
	sm->path = NULL;
	return 0;

out_close:
	sm->path = NULL;
	module_close(sm);
	return rc;
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/* FNV-1a, for the module table. */
static size_t hash_str(const char *p)
{
	uint64_t h = 0xcbf29ce484222325ULL;

	while (*p)
		h = (h ^ (unsigned char)*p++) * 0x100000001b3ULL;
	return (size_t)h;
}

/* m's session key: its build-id in hex, else "path:" and its path. */
static char *module_key(const struct sw_module *m)
{
	static const char hex[] = "0123456789abcdef";
	uint32_t n = m->build_id_len;
	char *key;

	if (!n) {
		if (asprintf(&key, "path:%s", m->path ? m->path : "") < 0)
			return NULL;
		return key;
	}
	if (n > SW_BUILD_ID_MAX)
		n = SW_BUILD_ID_MAX;
	key = malloc(2 * n + 1);
	if (!key)
		return NULL;
	for (uint32_t i = 0; i < n; i++) {
		key[2 * i] = hex[m->build_id[i] >> 4];
		key[2 * i + 1] = hex[m->build_id[i] & 15];
	}
	key[2 * n] = '\0';
	return key;
}

/* Ends every session and empties the cache, whose keys name them. */
static void modules_drop(struct sym *s)
{
	for (size_t b = 0; b < SYM_MOD_BUCKETS; b++) {
		struct symmod *sm = s->buckets[b], *next;

		for (; sm; sm = next) {
			next = sm->next;
			module_close(sm);
			free(sm->key);
			free(sm);
		}
		s->buckets[b] = NULL;
	}
	s->nmods = 0;
	cache_clear(s);
}

/*
 * The session of module m: found by key, or opened now. A module that
 * failed is retried once SYM_RETRY_NS have passed. Returns the entry
 * (whose dwfl is NULL when the module cannot be read), or NULL on out of
 * memory. May block on file I/O when it opens.
 */
static struct symmod *module_get(struct sym *s, const struct sw_module *m)
{
	char *key = module_key(m);
	struct symmod *sm;
	size_t b;

	if (!key)
		return NULL;
	b = hash_str(key) & (SYM_MOD_BUCKETS - 1);
	for (sm = s->buckets[b]; sm; sm = sm->next)
		if (strcmp(sm->key, key) == 0)
			break;
	if (sm) {
		free(key);
		if (!sm->dwfl && now_ns() - sm->failed_ns >= SYM_RETRY_NS &&
		    module_open(s, sm, m))
			sm->failed_ns = now_ns();
		return sm;
	}
	sm = calloc(1, sizeof(*sm));
	if (!sm) {
		free(key);
		return NULL;
	}
	sm->key = key;
	sm->fd = -1;
	sm->id = s->next_id++;
	if (module_open(s, sm, m))
		sm->failed_ns = now_ns();
	sm->next = s->buckets[b];
	s->buckets[b] = sm;
	s->nmods++;
	return sm;
}

/* --------------------------------------------------------------- dump */

int sym_new(sym_open_fn open_fn, void *open_arg, struct sym **out)
{
	struct sym *s = calloc(1, sizeof(*s));

	*out = NULL;
	if (!s)
		return -ENOMEM;
	elf_version(EV_CURRENT);
	s->open_fn = open_fn ? open_fn : default_open;
	s->open_arg = open_arg;
	s->next_id = 1;
	*out = s;
	return 0;
}

void sym_free(struct sym *s)
{
	if (!s)
		return;
	modules_drop(s);
	free(s->slots);
	free(s);
}

uint64_t sym_cache_hits(const struct sym *s)
{
	return s->hits;
}

uint64_t sym_cache_misses(const struct sym *s)
{
	return s->misses;
}

static int range_cmp(const void *a, const void *b)
{
	const struct modrange *x = a, *y = b;

	if (x->start != y->start)
		return x->start < y->start ? -1 : 1;
	return x->idx - y->idx;
}

/* Index of the module holding ip in the sorted ranges, or -1. */
static int range_find(const struct modrange *r, size_t n, uint64_t ip)
{
	size_t lo = 0, hi = n;

	/* The last range starting at or below ip. */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (r[mid].start <= ip)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == 0 || ip >= r[lo - 1].end)
		return -1;
	return r[lo - 1].idx;
}

/* A growable array of frames. */
struct fvec {
	struct sw_frame *f;
	size_t n;
	size_t cap;
};

/* Room for k more frames. 0 or -ENOMEM. */
static int fvec_reserve(struct fvec *v, size_t k)
{
	struct sw_frame *f;
	size_t cap;

	if (v->n + k <= v->cap)
		return 0;
	cap = v->cap ? v->cap : 16;
	while (cap < v->n + k)
		cap *= 2;
	f = realloc(v->f, cap * sizeof(*f));
	if (!f)
		return -ENOMEM;
	v->f = f;
	v->cap = cap;
	return 0;
}

/*
 * Appends one frame. Its strings are not copied: they must be the dump's
 * (dump_strdup()) or literals. 0 or -ENOMEM.
 */
static int fvec_push(struct fvec *v, uint64_t ip, int module, uint64_t offset,
		     const char *function, const char *file, int line,
		     bool inlined)
{
	if (fvec_reserve(v, 1))
		return -ENOMEM;
	v->f[v->n++] = (struct sw_frame){
		.ip = ip,
		.module = module,
		.offset = offset,
		.function = function,
		.file = file,
		.line = line,
		.inlined = inlined,
	};
	return 0;
}

/* Appends n frames copied from f (not NULL unless n is 0). 0 or -ENOMEM. */
static int fvec_append(struct fvec *v, const struct sw_frame *f, size_t n)
{
	if (!n)
		return 0;
	if (fvec_reserve(v, n))
		return -ENOMEM;
	/* NOLINTNEXTLINE(clang-analyzer-core.NonNullParamChecker): n > 0 */
	memcpy(v->f + v->n, f, n * sizeof(*f));
	v->n += n;
	return 0;
}

/*
 * Within one dump an ip always expands to the same frames, so each ip is
 * worked out once, its frames kept in symctx.runs (with strings copied into
 * the dump once), and every later thread copies them. This is the frames
 * runs[start, start + n) of one ip.
 */
struct ipmemo {
	uint64_t ip;
	uint32_t start;
	uint32_t n;
	bool exact;	/* ip was looked up as is, not as ip - 1 */
	bool used;	/* false: an empty slot */
	bool looked_up; /* from a symbol lookup: each reuse is a cache hit */
};

#define MEMO_MIN_SLOTS 256u	  /* power of two */
#define MEMO_MAX_SLOTS (1u << 17) /* then ips are no longer memoized */

/*
 * A thread whose frames later threads with the same ips (and flags) share:
 * most threads of a big process wait in a handful of places.
 */
struct tslot {
	uint64_t hash;
	size_t thread;	  /* its index + 1; 0 marks an empty slot */
	uint32_t lookups; /* how many of its ips were looked up */
};

/* The flags that change what a thread's ips symbolize to. */
#define SAME_IPS_FLAGS                                                       \
	(SW_TF_FIRST_EXACT | SW_TF_IN_LOADER | SW_TF_LOW_STACK | SW_TF_CUT | \
	 SW_TF_NO_ROOM | SW_TF_BUSY)

/* Per-dump state of sym_dump(). */
struct symctx {
	struct sym *s;
	struct sw_dump *d;
	bool symbols;
	struct modrange *ranges; /* sorted by start */
	size_t nranges;
	struct symmod **mods; /* per dump module, resolved on first use */
	struct fvec runs;     /* the frames of the memoized ips */
	struct ipmemo *memo;  /* open addressing, load at most 1/2 */
	size_t nmemo;	      /* slots: 0 or a power of two */
	size_t nused;
	struct tslot *tslots; /* NULL: no memory, nothing is shared */
	size_t ntslots;	      /* at least twice the threads; a power of two */
	struct fvec scratch;  /* one thread's frames while they are built */
};

/*
 * Appends the frames of one ip: those of its cached record (looked up and
 * cached on a miss) or, when the module is unknown or unreadable or
 * symbols are off, one frame with module and offset only. The record's
 * strings are copied into the dump. *looked_up tells whether symbols were
 * looked up (in the cache or libdwfl). Returns 0 or -ENOMEM.
 */
static int expand_ip(struct symctx *c, struct fvec *v, uint64_t ip, bool exact,
		     bool *looked_up)
{
	struct sym *s = c->s;
	struct symmod *sm;
	struct symrec *rec;
	uint64_t off, addr;
	int mi, rc;

	*looked_up = false;
	mi = range_find(c->ranges, c->nranges, ip);
	if (mi < 0)
		return fvec_push(v, ip, -1, ip, NULL, NULL, 0, false);
	off = ip - c->d->modules[mi].bias;
	if (!c->symbols)
		return fvec_push(v, ip, mi, off, NULL, NULL, 0, false);
	sm = c->mods[mi];
	if (!sm) {
		sm = module_get(s, &c->d->modules[mi]);
		if (!sm)
			return -ENOMEM;
		c->mods[mi] = sm;
	}
	if (!sm->dwfl)
		return fvec_push(v, ip, mi, off, NULL, NULL, 0, false);
	/* A return address points after the call: look the call up. */
	addr = exact ? off : off - 1;
	*looked_up = true;
	rec = cache_get(s, sm->id, addr);
	if (rec) {
		s->hits++;
	} else {
		s->misses++;
		if (!sm->tab)
			sm->tab = symtab_build(sm->mod); /* NULL: slow path */
		rec = symrec_lookup(
			sm->mod, symtab_name_at(sm->tab, sm->mod, addr), addr);
		if (!rec)
			return -ENOMEM;
		rc = cache_put(s, sm->id, addr, rec);
		if (rc)
			return rc;
	}
	rc = fvec_reserve(v, rec->n);
	for (uint32_t i = 0; !rc && i < rec->n; i++) {
		const struct symfr *f = &rec->fr[i];
		const char *function = NULL, *file = NULL;

		if (f->function && !(function = dump_strdup(c->d, f->function)))
			return -ENOMEM;
		if (f->file && !(file = dump_strdup(c->d, f->file)))
			return -ENOMEM;
		rc = fvec_push(v, ip, mi, off, function, file, f->line,
			       f->inlined);
	}
	return rc;
}

static size_t memo_first(uint64_t ip, bool exact, size_t nslots)
{
	return (size_t)mix64(ip ^ exact) & (nslots - 1);
}

/* Rehashes the memo into nslots (a power of two). 0 or -ENOMEM. */
static int memo_resize(struct symctx *c, size_t nslots)
{
	struct ipmemo *t = calloc(nslots, sizeof(*t));

	if (!t)
		return -ENOMEM;
	for (size_t i = 0; i < c->nmemo; i++) {
		const struct ipmemo *e = &c->memo[i];
		size_t j;

		if (!e->used)
			continue;
		j = memo_first(e->ip, e->exact, nslots);
		while (t[j].used)
			j = (j + 1) & (nslots - 1);
		t[j] = *e;
	}
	free(c->memo);
	c->memo = t;
	c->nmemo = nslots;
	return 0;
}

/* The slot of (ip, exact) in the memo, or NULL when there is none. */
static struct ipmemo *memo_probe(const struct symctx *c, uint64_t ip,
				 bool exact)
{
	size_t i;

	if (!c->nmemo)
		return NULL;
	for (i = memo_first(ip, exact, c->nmemo);;
	     i = (i + 1) & (c->nmemo - 1)) {
		struct ipmemo *e = &c->memo[i];

		if (!e->used || (e->ip == ip && e->exact == exact))
			return e;
	}
}

/*
 * The memo entry of (ip, exact): a used one when the ip was seen before,
 * an empty slot to fill, or NULL when the memo is full (or could not
 * grow): then the ip is worked out without it.
 */
static struct ipmemo *memo_slot(struct symctx *c, uint64_t ip, bool exact)
{
	struct ipmemo *e = memo_probe(c, ip, exact);

	if (e && (e->used || 2 * (c->nused + 1) <= c->nmemo))
		return e;
	if (c->nmemo >= MEMO_MAX_SLOTS ||
	    memo_resize(c, c->nmemo ? 2 * c->nmemo : MEMO_MIN_SLOTS))
		return NULL;
	return memo_probe(c, ip, exact);
}

/*
 * Appends the frames of one ip, from the memo when it can, and counts in
 * *lookups whether symbols were looked up for it. 0 or -ENOMEM.
 */
static int add_ip(struct symctx *c, struct fvec *v, uint64_t ip, bool exact,
		  uint32_t *lookups)
{
	struct ipmemo *e = memo_slot(c, ip, exact);
	size_t start = c->runs.n;
	bool looked_up;
	int rc;

	if (!e) {
		rc = expand_ip(c, v, ip, exact, &looked_up);
		*lookups += looked_up;
		return rc;
	}
	if (e->used) {
		if (e->looked_up)
			c->s->hits++;
		*lookups += e->looked_up;
		return fvec_append(v, c->runs.f + e->start, e->n);
	}
	rc = expand_ip(c, &c->runs, ip, exact, &looked_up);
	*lookups += looked_up;
	if (rc)
		return rc;
	*e = (struct ipmemo){
		.ip = ip,
		.start = (uint32_t)start,
		.n = (uint32_t)(c->runs.n - start),
		.exact = exact,
		.used = true,
		.looked_up = looked_up,
	};
	c->nused++;
	return fvec_append(v, c->runs.f + start, e->n);
}

static uint64_t ips_hash(const struct sw_thread *t)
{
	uint64_t h =
		mix64(t->nips ^ ((uint64_t)(t->flags & SAME_IPS_FLAGS) << 32));

	for (size_t k = 0; k < t->nips; k++)
		h = mix64(h ^ t->ips[k]);
	return h;
}

static bool same_ips(const struct sw_thread *a, const struct sw_thread *b)
{
	return a->nips == b->nips &&
	       (a->flags & SAME_IPS_FLAGS) == (b->flags & SAME_IPS_FLAGS) &&
	       memcmp(a->ips, b->ips, a->nips * sizeof(*a->ips)) == 0;
}

/*
 * The slot of t's ips in c->tslots: the one of an earlier thread with the
 * same ips, or the empty one to take. NULL without the table.
 */
static struct tslot *tslot_of(const struct symctx *c, const struct sw_thread *t,
			      uint64_t h)
{
	size_t i;

	if (!c->tslots)
		return NULL;
	for (i = (size_t)h & (c->ntslots - 1);;
	     i = (i + 1) & (c->ntslots - 1)) {
		struct tslot *e = &c->tslots[i];

		if (!e->thread || (e->hash == h &&
				   same_ips(&c->d->threads[e->thread - 1], t)))
			return e;
	}
}

/*
 * Builds the frames of t from its ips in c->scratch; *lookups counts the
 * ips whose symbols were looked up. 0 or -ENOMEM.
 */
static int build_frames(struct symctx *c, const struct sw_thread *t,
			uint32_t *lookups)
{
	struct fvec *v = &c->scratch;
	int rc = 0;

	v->n = 0;
	if (t->flags &
	    (SW_TF_IN_LOADER | SW_TF_LOW_STACK | SW_TF_NO_ROOM | SW_TF_BUSY)) {
		uint64_t ip = t->nips ? t->ips[0] : 0;
		int mi = t->nips ? range_find(c->ranges, c->nranges, ip) : -1;
		uint64_t off = mi < 0 ? ip : ip - c->d->modules[mi].bias;
		const char *why = t->flags & SW_TF_IN_LOADER   ? in_loader
				  : t->flags & SW_TF_LOW_STACK ? low_stack
				  : t->flags & SW_TF_BUSY      ? busy
							       : no_room;

		return fvec_push(v, ip, mi, off, why, NULL, 0, false);
	}
	for (size_t k = 0; !rc && k < t->nips; k++)
		rc = add_ip(c, v, t->ips[k],
			    k == 0 && (t->flags & SW_TF_FIRST_EXACT), lookups);
	/* Where libunwind was refused a read: said as a last frame. */
	if (!rc && (t->flags & SW_TF_CUT))
		rc = fvec_push(v, 0, -1, 0, cut, NULL, 0, false);
	return rc;
}

/*
 * Fills the frames of thread ti from its ips, or shares those of an
 * earlier thread with the same ips (counting the lookups that saves as
 * cache hits). 0 or -ENOMEM (then the thread has no frames).
 */
static int thread_frames(struct symctx *c, size_t ti)
{
	struct sw_thread *t = &c->d->threads[ti];
	uint64_t h = ips_hash(t);
	struct tslot *e = tslot_of(c, t, h);
	uint32_t lookups = 0;
	int rc;

	if (e && e->thread) {
		const struct sw_thread *same = &c->d->threads[e->thread - 1];

		t->frames = same->frames;
		t->nframes = same->nframes;
		c->s->hits += e->lookups;
		return 0;
	}
	rc = build_frames(c, t, &lookups);
	if (rc)
		return rc;
	t->frames = dump_alloc(c->d, c->scratch.n * sizeof(*t->frames));
	if (!t->frames)
		return -ENOMEM;
	t->nframes = c->scratch.n;
	if (t->nframes)
		memcpy(t->frames, c->scratch.f,
		       t->nframes * sizeof(*t->frames));
	if (e)
		*e = (struct tslot){ h, ti + 1, lookups };
	return 0;
}

/* Allocates c->tslots for n threads; without memory, nothing is shared. */
static void tslots_init(struct symctx *c, size_t n)
{
	size_t nslots = 16;

	while (nslots < 2 * n)
		nslots *= 2;
	c->tslots = calloc(nslots, sizeof(*c->tslots));
	c->ntslots = c->tslots ? nslots : 0;
}

/*
 * See symbolize.h. Module ranges are sorted once per dump for a binary
 * search per ip; modules are resolved to sessions on first use, so an
 * unused module is never opened. The hot path per ip is one lookup in the
 * dump's memo and a copy of a few frames; strings are copied once per
 * distinct ip.
 */
int sym_dump(struct sym *s, struct sw_dump *d, bool symbols)
{
	struct symctx c = { .s = s, .d = d, .symbols = symbols };
	int rc = -ENOMEM;

	if (s->nmods > SYM_MODS_MAX)
		modules_drop(s);
	for (size_t i = 0; i < d->nthreads; i++)
		dump_thread_release_frames(&d->threads[i]);
	dump_release_mem(d);
	if (d->nmodules) {
		c.ranges = malloc(d->nmodules * sizeof(*c.ranges));
		/* NOLINTNEXTLINE(bugprone-sizeof-expression): pointers */
		c.mods = calloc(d->nmodules, sizeof(struct symmod *));
		if (!c.ranges || !c.mods)
			goto out_free;
	}
	for (size_t i = 0; i < d->nmodules; i++) {
		const struct sw_module *m = &d->modules[i];

		if (m->end <= m->start)
			continue;
		c.ranges[c.nranges].start = m->start;
		c.ranges[c.nranges].end = m->end;
		c.ranges[c.nranges].idx = (int)i;
		c.nranges++;
	}
	if (c.nranges)
		qsort(c.ranges, c.nranges, sizeof(*c.ranges), range_cmp);

	tslots_init(&c, d->nthreads);
	rc = 0;
	for (size_t i = 0; i < d->nthreads; i++) {
		if (d->threads[i].status != SW_ST_OK)
			continue;
		rc = thread_frames(&c, i);
		if (rc)
			break;
	}
	if (!rc)
		d->symbolized = symbols;
out_free:
	free(c.scratch.f);
	free(c.tslots);
	free(c.runs.f);
	free(c.memo);
	free(c.mods);
	free(c.ranges);
	return rc;
}
