/*
 * worker.c - a parser worker (worker.h): sandboxes itself, then unwinds
 * snapshots and symbolizes dumps for its daemon, asking it for every
 * file it reads.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "caps.h"
#include "dumpwire.h"
#include "filter.h"
#include "msg.h"
#include "snapshot/snapshot.h"
#include "symbols/corefile.h"
#include "symbols/modopen.h"
#include "symbols/parsenote.h"
#include "symbols/perfmap.h"
#include "symbols/symbolize.h"
#include "symbols/unwind.h"
#include "symbols/vdso.h"
#include "worker.h"

#define MEM_MAX ((rlim_t)4 << 30) /* address space: files mapped too */
#define MAX_FDS 1024		  /* sessions keep their files open */
#define ALTSTACK_SIZE (64 * 1024)

static struct worker_note *note;
static struct sw_dump *cur; /* the dump being symbolized */

/*
 * For the test suite: a file that "crashes" or "hangs" the worker that
 * reads it, by the name of the module ($STACKWATCH_TEST_PARSER_FAULT,
 * "segv=NAME" or "hang=NAME", comma-separated): how a parser that dies
 * or never returns is dealt with, proved without a libdw bug at hand.
 */
static char fault[256];

static void maybe_fault(const char *path)
{
	const char *base = path ? strrchr(path, '/') : NULL;
	char want[300];

	if (!fault[0] || !base)
		return;
	snprintf(want, sizeof(want), "segv=%s,", base + 1);
	if (strstr(fault, want))
		raise(SIGSEGV);
	snprintf(want, sizeof(want), "hang=%s,", base + 1);
	if (strstr(fault, want))
		for (;;)
			;
}

static void note_start(uint64_t start)
{
	atomic_store_explicit(&note->start, start, memory_order_relaxed);
}

/*
 * A fatal signal (a crafted file's doing): noted for the daemon, which
 * blames the module noted, then taken as it would have been.
 */
static void on_fatal(int sig)
{
	atomic_store(&note->signo, (uint32_t)sig);
	signal(sig, SIG_DFL);
	raise(sig);
}

/*
 * Sends a question and waits for its answer. A daemon that is gone, or
 * that breaks the protocol, ends the worker: there is no one to answer.
 */
static void ask(uint32_t type, const void *body, size_t len, uint32_t want,
		struct msg *m)
{
	if (msg_send(WORKER_FD, type, body, len, NULL, 0, 0) < 0 ||
	    msg_recv(WORKER_FD, m, 0) < 0)
		_exit(0);
	if (m->type != want || m->len < 4)
		_exit(3);
}

/* The descriptor a W_FILE answer carries, or its error. */
static int ask_fd(uint32_t type, const void *body, size_t len)
{
	struct msg m;
	int32_t err;
	int fd;

	ask(type, body, len, W_FILE, &m);
	memcpy(&err, m.body, sizeof(err));
	if (err < 0)
		fd = err;
	else if (m.nfds == 1)
		fd = m.fds[0];
	else
		fd = -EPROTO;
	if (fd >= 0)
		m.fds[0] = -1;
	msg_release(&m);
	return fd;
}

/* The index of m in the dump being symbolized, or -1. */
static int module_index(const struct sw_module *m)
{
	if (!cur || m < cur->modules || m >= cur->modules + cur->nmodules)
		return -1;
	return (int)(m - cur->modules);
}

static int open_module(void *arg, const struct sw_module *m)
{
	uint32_t i;
	int k = module_index(m);

	(void)arg;
	if (k < 0)
		return -ENOENT;
	i = (uint32_t)k;
	k = ask_fd(W_NEED_MODULE, &i, sizeof(i));
	if (k >= 0)
		maybe_fault(m->path);
	return k;
}

static int open_debug(const uint8_t *id, size_t n)
{
	return ask_fd(W_NEED_DEBUG, id, n);
}

static int image_module(void *arg, const struct sw_module *m, void **image,
			size_t *size)
{
	struct msg m_;
	int32_t err;
	uint32_t i;
	int k = module_index(m);

	(void)arg;
	if (k < 0)
		return -ENOENT;
	i = (uint32_t)k;
	ask(W_NEED_IMAGE, &i, sizeof(i), W_IMAGE, &m_);
	memcpy(&err, m_.body, sizeof(err));
	if (err >= 0 && m_.len == 4)
		err = -ENODATA;
	if (err >= 0) {
		*size = m_.len - 4;
		*image = malloc(*size);
		if (*image)
			memcpy(*image, m_.body + 4, *size);
		else
			err = -ENOMEM;
	}
	msg_release(&m_);
	return err < 0 ? err : 0;
}

/*
 * The files of mappings asked for before, by device and inode, kept
 * open for a while: the next snapshot of the process (or of another that
 * maps the same file) is unwound without asking for them again. Which
 * file a mapping is comes from the mappings the daemon read for this
 * request; a file is kept only if its descriptor is that file.
 */
#define KEEP_FILES 32
#define KEEP_NS (60 * 1000000000ull)

static struct kept_file {
	dev_t dev;
	uint64_t ino;
	int fd; /* -1: none */
	uint64_t used_ns;
} kept_files[KEEP_FILES];

static const struct procmaps *cur_maps; /* of the snapshot being unwound */

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Closes the files not used for KEEP_NS (all of them: every one). */
static void drop_kept_files(bool every)
{
	uint64_t now = now_ns();

	for (size_t i = 0; i < KEEP_FILES; i++)
		if (kept_files[i].fd >= 0 &&
		    (every || now - kept_files[i].used_ns > KEEP_NS)) {
			close(kept_files[i].fd);
			kept_files[i].fd = -1;
		}
}

/* Keeps a copy of fd as the file dev/ino, in place of the oldest. */
static void keep_file(dev_t dev, uint64_t ino, int fd)
{
	struct stat st;
	size_t k = 0;

	if (fstat(fd, &st) != 0 || st.st_dev != dev || st.st_ino != ino)
		return;
	for (size_t i = 0; i < KEEP_FILES; i++) {
		if (kept_files[i].fd < 0) {
			k = i;
			break;
		}
		if (kept_files[i].used_ns < kept_files[k].used_ns)
			k = i;
	}
	if (kept_files[k].fd >= 0)
		close(kept_files[k].fd);
	kept_files[k].fd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
	kept_files[k].dev = dev;
	kept_files[k].ino = ino;
	kept_files[k].used_ns = now_ns();
}

static int open_mapped(void *arg, uint64_t start, const char *path)
{
	const struct procmap *p =
		cur_maps ? procmaps_find(cur_maps, start) : NULL;
	struct wire_out o;
	int fd;

	(void)arg;
	for (size_t i = 0; p && i < KEEP_FILES; i++)
		if (kept_files[i].fd >= 0 && kept_files[i].dev == p->dev &&
		    kept_files[i].ino == p->ino) {
			fd = fcntl(kept_files[i].fd, F_DUPFD_CLOEXEC, 0);
			if (fd < 0)
				break;
			kept_files[i].used_ns = now_ns();
			maybe_fault(path);
			return fd;
		}
	wire_out_init(&o);
	wire_put_u64(&o, start);
	wire_put_str(&o, path, 4096);
	fd = o.err ? -ENOMEM : ask_fd(W_NEED_MAPPED, o.data, o.len);
	wire_out_release(&o);
	if (fd >= 0 && p)
		keep_file(p->dev, p->ino, fd);
	if (fd >= 0)
		maybe_fault(path);
	return fd;
}

/*
 * A file a core names, opened by whoever started us as modopen_resolved()
 * would, with the path resolved into *real (malloc'd) when real.
 */
static int ask_path(const char *path, char **real)
{
	struct wire_out o;
	struct wire_in in;
	struct msg m;
	int32_t err;
	int fd;

	wire_out_init(&o);
	wire_put_str(&o, path, 4096);
	if (o.err)
		return -ENOMEM;
	ask(W_NEED_PATH, o.data, o.len, W_FILE, &m);
	wire_out_release(&o);
	wire_in_init(&in, m.body, m.len);
	err = (int32_t)wire_get_u32(&in);
	if (err < 0)
		fd = err;
	else if (m.nfds == 1)
		fd = m.fds[0];
	else
		fd = -EPROTO;
	if (fd >= 0 && real) {
		*real = wire_get_strdup(&in, 4096);
		if (!*real || in.err) {
			free(*real);
			*real = NULL;
			fd = -EPROTO;
		}
	}
	if (fd >= 0) {
		m.fds[0] = -1;
		maybe_fault(path);
	}
	msg_release(&m);
	return fd;
}

/* The file mappings of the process being unwound, from the daemon. */
static int ask_maps(struct procmaps *pm)
{
	struct wire_in in;
	struct msg m;
	int32_t err;
	uint32_t n;
	int rc = 0;

	memset(pm, 0, sizeof(*pm));
	ask(W_NEED_MAPS, NULL, 0, W_MAPS, &m);
	wire_in_init(&in, m.body, m.len);
	err = (int32_t)wire_get_u32(&in);
	pm->vdso_start = wire_get_u64(&in);
	pm->vdso_end = wire_get_u64(&in);
	n = wire_get_u32(&in);
	if (err < 0)
		rc = err;
	else if (in.err || n > WORKER_MAX_MAPS)
		rc = -EPROTO;
	else if (n && !(pm->v = calloc(n, sizeof(*pm->v))))
		rc = -ENOMEM;
	for (uint32_t i = 0; rc == 0 && i < n; i++) {
		struct procmap *p = &pm->v[i];

		p->start = wire_get_u64(&in);
		p->end = wire_get_u64(&in);
		p->offset = wire_get_u64(&in);
		p->dev = (dev_t)wire_get_u64(&in);
		p->ino = wire_get_u64(&in);
		p->path = wire_get_strdup(&in, 4096);
		pm->n = i + 1;
		if (in.err || !p->path)
			rc = in.err ? -EPROTO : -ENOMEM;
	}
	pm->cap = pm->n;
	msg_release(&m);
	if (rc)
		procmaps_release(pm);
	return rc;
}

/* Sends W_DONE: rc, then what o holds (when not NULL). */
static void done(int32_t rc, const struct wire_out *o)
{
	struct wire_out a;

	wire_out_init(&a);
	wire_put_u32(&a, (uint32_t)rc);
	if (o && !o->err)
		wire_put_bytes(&a, o->data, o->len);
	if (a.err || msg_send(WORKER_FD, W_DONE, a.data, a.len, NULL, 0, 0))
		_exit(0);
	wire_out_release(&a);
}

static void symbolize(struct sym *s, const struct msg *m)
{
	struct wire_in in;
	struct wire_out o;
	struct sw_dump *d = NULL;
	uint64_t deadline, hits = sym_cache_hits(s),
			   misses = sym_cache_misses(s);
	bool symbols;
	int rc;

	wire_in_init(&in, m->body, m->len);
	deadline = wire_get_u64(&in);
	symbols = wire_get_u32(&in) != 0;
	rc = in.err ? SW_EFORMAT : dumpwire_get(&in, &d);
	if (rc == 0) {
		cur = d;
		rc = sym_dump_until(s, d, symbols, deadline);
		cur = NULL;
	}
	note_start(0);
	wire_out_init(&o);
	wire_put_u64(&o, sym_cache_hits(s) - hits);
	wire_put_u64(&o, sym_cache_misses(s) - misses);
	if (rc == 0)
		dumpwire_put_symbols(&o, d);
	if (o.err)
		rc = o.err;
	done(rc, &o);
	wire_out_release(&o);
	sw_dump_free(d);
}

/* A core's module file, by the path the core names. */
static int core_module(void *arg, const struct sw_module *m)
{
	(void)arg;
	if (!m->path || m->path[0] != '/')
		return -ENOENT;
	return ask_path(m->path, NULL);
}

/* W_CORE: a core file unwound and symbolized. */
static void core_read(struct msg *m)
{
	struct corefile_in c = { .fd = -1 };
	char why[512] = "", *name, *exe;
	struct sw_dump *d = NULL;
	struct sym *s = NULL;
	struct wire_out o;
	struct wire_in in;
	uint32_t max_frames;
	bool has_exe;
	int rc, fd;

	wire_in_init(&in, m->body, m->len);
	max_frames = wire_get_u32(&in);
	name = wire_get_strdup(&in, 4096);
	has_exe = wire_get_u32(&in) != 0;
	exe = wire_get_strdup(&in, 4096);
	if (in.err || m->nfds != 1 || !name || !exe) {
		free(name);
		free(exe);
		done(SW_EFORMAT, NULL);
		return;
	}
	/* One descriptor for the unwinder (which closes it), one for the
	 * images. */
	c.fd = m->fds[0];
	m->fds[0] = -1;
	fd = dup(c.fd);
	rc = fd < 0 ? -errno
		    : unwind_core_fd(fd, name, has_exe ? exe : NULL, max_frames,
				     &d, why, sizeof(why));
	if (rc == 0) {
		c.elf = elf_begin(c.fd, ELF_C_READ_MMAP, NULL);
		rc = sym_new(core_module, NULL, &s);
	}
	if (rc == 0) {
		sym_set_image_fn(s, corefile_module_image, &c);
		rc = sym_dump(s, d, true);
		if (rc)
			snprintf(why, sizeof(why), "%s", sw_strerror(rc));
	}
	note_start(0);
	wire_out_init(&o);
	wire_put_str(&o, why, sizeof(why) - 1);
	if (rc == 0) {
		dumpwire_put(&o, d);
		dumpwire_put_symbols(&o, d);
	}
	if (o.err)
		rc = o.err;
	done(rc, &o);
	wire_out_release(&o);
	sym_free(s);
	sw_dump_free(d);
	if (c.elf)
		elf_end(c.elf);
	close(c.fd);
	free(name);
	free(exe);
}

/* W_PERFMAP: a perf map's text parsed, its entries sent back. */
static void perfmap(struct msg *m)
{
	struct perfmap *pm = NULL;
	struct wire_out o;
	struct wire_in in;
	uint64_t size, start, end;
	const char *name;
	int rc;

	wire_in_init(&in, m->body, m->len);
	size = wire_get_u64(&in);
	if (in.err || in.left || m->nfds != 1 || size > INT64_MAX) {
		done(SW_EFORMAT, NULL);
		return;
	}
	maybe_fault("/perf-map"); /* the test hook: segv=perf-map */
	rc = perfmap_read(m->fds[0], (off_t)size, NULL, &pm);
	for (size_t i = 0; rc == 0 && i < perfmap_count(pm);) {
		struct wire_out e;
		uint32_t n = 0;

		wire_out_init(&o);
		wire_out_init(&e);
		while (e.len < WORKER_CHUNK - PERFMAP_NAME_MAX - 64 &&
		       perfmap_entry(pm, i, &start, &end, &name)) {
			wire_put_u64(&e, start);
			wire_put_u64(&e, end);
			wire_put_str(&e, name, PERFMAP_NAME_MAX);
			n++;
			i++;
		}
		wire_put_u32(&o, n);
		wire_put_bytes(&o, e.data, e.len);
		rc = o.err ? o.err : e.err;
		if (rc == 0 && msg_send(WORKER_FD, W_ENTRIES, o.data, o.len,
					NULL, 0, 0) < 0)
			_exit(0);
		wire_out_release(&e);
		wire_out_release(&o);
	}
	done(rc, NULL);
	perfmap_free(pm);
}

/* Whether any thread of s is to be unwound (not kept from before). */
static bool any_to_unwind(const struct snap *s)
{
	for (size_t i = 0; i < s->nthreads; i++)
		if (s->threads[i].status == SW_ST_OK && !s->threads[i].reused)
			return true;
	return false;
}

static void unwind(struct msg *m)
{
	struct wire_in in;
	struct wire_out o;
	struct procmaps pm = { 0 };
	struct snap *s = NULL;
	struct sw_dump *d = NULL;
	uint64_t deadline;
	uint32_t max_frames;
	int32_t pid, tracer = 0;
	bool need = false;
	int rc;

	drop_kept_files(false);
	wire_in_init(&in, m->body, m->len);
	deadline = wire_get_u64(&in);
	max_frames = wire_get_u32(&in);
	pid = (int32_t)wire_get_u32(&in);
	if (in.err || m->nfds != 1) {
		done(SW_EFORMAT, NULL);
		return;
	}
	rc = snap_read(m->fds[0], deadline, &s);
	/* The core is done with it: its next requester may go. */
	if (msg_send(WORKER_FD, W_SNAPPED, &rc, sizeof(rc), NULL, 0, 0) < 0)
		_exit(0);
	if (rc == SNAP_ETRACED && s)
		tracer = s->tracer;
	if (rc == 0 && (!s || s->pid != pid))
		rc = SW_EFORMAT;
	if (rc == 0) {
		need = any_to_unwind(s);
		if (need)
			rc = ask_maps(&pm);
	}
	if (rc == 0) {
		s->max_frames = max_frames;
		cur_maps = need ? &pm : NULL;
		rc = unwind_snapshot(s, need ? &pm : NULL, open_mapped, NULL,
				     &d);
		cur_maps = NULL;
	}
	note_start(0);
	wire_out_init(&o);
	wire_put_u32(&o, (uint32_t)tracer);
	if (rc == 0)
		dumpwire_put(&o, d);
	if (o.err)
		rc = o.err;
	done(rc, &o);
	wire_out_release(&o);
	sw_dump_free(d);
	snap_free(s);
	procmaps_release(&pm);
}

/* The worker's note page, shared with the daemon; -1 if none. */
static int make_note(void)
{
	static const struct worker_note zero;
	int fd = memfd_create("stackwatch-note", MFD_CLOEXEC);

	if (fd < 0)
		return -1;
	/* Written, not truncated: the core's filter, ours too, denies
	 * ftruncate(). */
	if (write(fd, &zero, sizeof(zero)) != (ssize_t)sizeof(zero)) {
		close(fd);
		return -1;
	}
	note = mmap(NULL, sizeof(*note), PROT_READ | PROT_WRITE, MAP_SHARED, fd,
		    0);
	if (note == MAP_FAILED) {
		note = NULL;
		close(fd);
		return -1;
	}
	return fd;
}

/* Fatal signals are noted, on a stack of their own (an overflow). */
static void catch_fatal(void)
{
	static const int sigs[] = { SIGSEGV, SIGBUS,  SIGILL,
				    SIGFPE,  SIGABRT, SIGSYS };
	stack_t st = { .ss_size = ALTSTACK_SIZE };
	struct sigaction sa;

	st.ss_sp = malloc(ALTSTACK_SIZE);
	if (st.ss_sp)
		sigaltstack(&st, NULL);
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_fatal;
	sa.sa_flags = SA_ONSTACK | SA_RESETHAND;
	sigemptyset(&sa.sa_mask);
	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
		sigaction(sigs[i], &sa, NULL);
}

static void limit(int what, rlim_t n)
{
	struct rlimit r = { n, n };

	setrlimit(what, &r);
}

/*
 * Everything a worker gives up, once its note and our own vDSO's image
 * (what serves a module that claims its build-id) are ready. What could
 * not be done is said in why ("" when all was).
 */
static void sandbox(char *why, size_t size)
{
	char fwhy[200] = "", cwhy[160] = "";
	int fd;

	why[0] = '\0';
	/* Killed first when memory runs short: the daemon lives on. */
	fd = open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC);
	if (fd >= 0) {
		(void)!write(fd, "1000", 4);
		close(fd);
	}
	prctl(PR_SET_DUMPABLE, 0);
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	limit(RLIMIT_CORE, 0);
	limit(RLIMIT_FSIZE, 0);
	limit(RLIMIT_NOFILE, MAX_FDS);
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
	limit(RLIMIT_AS, MEM_MAX);
#endif
	if (caps_keep(0, cwhy, sizeof(cwhy)) < 0)
		snprintf(why, size, "capabilities kept: %s", cwhy);
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
	/* Their runtimes map terabytes of shadow and call what the
	 * allow-list denies. */
	snprintf(fwhy, sizeof(fwhy), "a sanitizer build: no seccomp filter");
#else
	filter_lock_worker(WORKER_FD, fwhy, sizeof(fwhy));
#endif
	if (fwhy[0])
		snprintf(why + strlen(why), size - strlen(why), "%s%s",
			 why[0] ? "; " : "", fwhy);
}

int worker_main(int argc, char **argv)
{
	struct wire_out hello;
	struct sym *s = NULL;
	char why[400];
	size_t vsize;
	int type = 0, note_fd;
	socklen_t len = sizeof(type);

	/* stackwatchd's, or the CLI's (dump --local and --core as root). */
	const char *me = argc > 0 && argv[0] && strrchr(argv[0], '/')
				 ? strrchr(argv[0], '/') + 1
			 : argc > 0 && argv[0] ? argv[0]
					       : "stackwatchd";

	if (argc != 2 ||
	    getsockopt(WORKER_FD, SOL_SOCKET, SO_TYPE, &type, &len) != 0 ||
	    type != SOCK_STREAM) {
		fprintf(stderr,
			"%s: --parser-worker is started by %s itself, "
			"never by hand\n",
			me, me);
		return 2;
	}
	prctl(PR_SET_NAME, "sw-parser");
	if (getenv("STACKWATCH_TEST_PARSER_FAULT"))
		snprintf(fault, sizeof(fault), "%s,",
			 getenv("STACKWATCH_TEST_PARSER_FAULT"));
	unsetenv("DEBUGINFOD_URLS");
	signal(SIGPIPE, SIG_IGN);
	signal(SIGINT, SIG_IGN);
	signal(SIGTERM, SIG_IGN);
	note_fd = make_note();
	if (note_fd < 0 || sym_new(open_module, NULL, &s) != 0) {
		fprintf(stderr, "%s: a parser worker cannot start: %s\n", me,
			strerror(errno));
		return 1;
	}
	sym_set_image_fn(s, image_module, NULL);
	sym_set_debug_fn(open_debug);
	modopen_set_resolver(ask_path);
	parsenote_set(note_start);
	(void)vdso_self(&vsize);
	sym_prepare();
	catch_fatal();
	sandbox(why, sizeof(why));
	wire_out_init(&hello);
	wire_put_u32(&hello, WORKER_HELLO);
	wire_put_str(&hello, why, sizeof(why) - 1);
	if (hello.err || msg_send(WORKER_FD, W_DONE, hello.data, hello.len,
				  &note_fd, 1, 0) < 0)
		return 0;
	wire_out_release(&hello);
	close(note_fd);
	for (size_t i = 0; i < KEEP_FILES; i++)
		kept_files[i].fd = -1;
	/*
	 * A snapshot of a thousand changed threads brings megabytes of
	 * stack copies, freed when it is unwound: kept in the heap for the
	 * next one, not mapped and faulted in anew each time (the memory
	 * limit and the pool's recycling still bound it).
	 */
	mallopt(M_MMAP_THRESHOLD, 32 << 20);
	mallopt(M_TRIM_THRESHOLD, 64 << 20);
	for (;;) {
		struct msg m;

		if (msg_recv(WORKER_FD, &m, 0) < 0)
			break;
		if (m.type == W_SYMBOLIZE)
			symbolize(s, &m);
		else if (m.type == W_UNWIND)
			unwind(&m);
		else if (m.type == W_CORE)
			core_read(&m);
		else if (m.type == W_PERFMAP)
			perfmap(&m);
		else
			_exit(3);
		msg_release(&m);
	}
	sym_free(s);
	return 0;
}
