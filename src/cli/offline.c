/*
 * offline.c - "stackwatch dump --local PID" and "stackwatch dump --core
 * FILE": the stacks taken by the CLI itself, without a daemon. --local
 * takes a ptrace snapshot of PID (snapshot/), --core reads a core file;
 * both are unwound and symbolized (symbols/) and printed in the daemon's
 * formats (render/), so the output reads the same either way. Run as
 * root, --local unwinds and symbolizes in parser workers that hold
 * nothing (sandbox.c), as the daemon does: the process read is another
 * user's, and so is every byte of its programs.
 */
#include <errno.h>
#include <fcntl.h>
#include <libelf.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "commands.h"
#include "model/clock.h"
#include "model/dump.h"
#include "model/procmaps.h"
#include "privsep/parsers.h"
#include "render/group.h"
#include "render/render.h"
#include "kread/ksnap.h"
#include "snapshot/snapshot.h"
#include "symbols/corefile.h"
#include "symbols/jitcache.h"
#include "symbols/jitmap.h"
#include "symbols/modopen.h"
#include "symbols/symbolize.h"
#include "symbols/unwind.h"
#include "symbols/vdso.h"

#define OFFLINE_TIMEOUT_MS 5000
#define OFFLINE_SYMBOLS_MS 60000 /* a worker's time for the symbols */
#define OFFLINE_MAX_FILE (1ull << 30)

/*
 * A file of the traced process as that process sees it: through its own
 * root (/proc/PID/root), so a process in a container gets its own files;
 * the path itself when that root cannot be entered.
 */
static int open_in_root(pid_t pid, const char *path)
{
	char full[4096 + 64];
	struct stat st;
	int fd = -1;

	if (path[0] != '/')
		return -ENOENT;
	if (pid > 0 && (size_t)snprintf(full, sizeof(full), "/proc/%d/root%s",
					(int)pid, path) < sizeof(full))
		fd = open(full, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0)
		fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) ||
	    (uint64_t)st.st_size > OFFLINE_MAX_FILE) {
		close(fd);
		return -EINVAL;
	}
	return fd;
}

static int unwind_open(void *arg, uint64_t start, const char *path)
{
	(void)start;
	return open_in_root((pid_t)(intptr_t)arg, path);
}

static int sym_open(void *arg, const struct sw_module *m)
{
	return open_in_root((pid_t)(intptr_t)arg, m->path);
}

/*
 * A core's module file, by the path the core names (or --exe's, resolved)
 * and the module file rule (symbols/modopen.h); never a relative name
 * such as the vDSO's "[vdso]". The symbolizer checks the file's build-id
 * against the one the core holds.
 */
static int core_sym_open(void *arg, const struct sw_module *m)
{
	(void)arg;
	if (m->path[0] != '/')
		return -ENOENT;
	return modopen_resolved(m->path, NULL);
}

/* The vDSO's image, read from the traced process's memory. */
static int live_image(void *arg, const struct sw_module *m, void **image,
		      size_t *size)
{
	return vdso_read_live((pid_t)(intptr_t)arg, m->start, m->end, image,
			      size);
}

static int print(struct sw_dump *d, const char *format)
{
	char *out = NULL;
	int r;

	if (strcmp(format, "json") == 0) {
		cJSON *o = NULL;

		r = render_json(d, &o);
		if (r == 0) {
			out = cJSON_PrintUnformatted(o);
			cJSON_Delete(o);
			r = out ? 0 : -ENOMEM;
		}
	} else if (strcmp(format, "folded") == 0) {
		r = render_folded(d, &out);
	} else {
		r = render_text(d, &out);
	}
	if (r != 0) {
		cli_error("cannot render the stacks: %s", sw_strerror(r));
		return CLI_EDAEMON;
	}
	fputs(out, stdout);
	if (strcmp(format, "json") == 0)
		fputc('\n', stdout);
	free(out);
	return cli_finish(CLI_OK);
}

/*
 * Frames of JIT code named from the process's perf map (symbols/jitmap.h),
 * which must belong to the process's user: the owner of /proc/PID.
 */
static void name_jit_frames(struct sw_dump *d, pid_t pid)
{
	struct jitcache *cache;
	struct jitmap jm = { 0 };
	char path[32];
	struct stat st;

	snprintf(path, sizeof(path), "/proc/%d", (int)pid);
	/* One map, read once: no limit but the parser's own. */
	if (stat(path, &st) < 0 || jitcache_new(SIZE_MAX, &cache) < 0)
		return;
	/* Run as root: the map is the target's text, for a worker. */
	if (cli_sandboxed())
		jitcache_set_reader(cache, parsers_perfmap);
	jitmap_apply(&jm, cache, pid, st.st_uid, d);
	jitmap_release(&jm);
	jitcache_free(cache);
}

/* What a worker asks of the process read: its maps and its files. */
struct local_files {
	pid_t pid;
	int maps_rc; /* 1: not read yet */
	struct procmaps pm;
};

static int local_maps(void *arg, const struct procmaps **pm)
{
	struct local_files *l = arg;

	if (l->maps_rc == 1)
		l->maps_rc = procmaps_read(l->pid, &l->pm);
	*pm = &l->pm;
	return l->maps_rc;
}

static int local_mapped(void *arg, uint64_t start, const char *path)
{
	const struct local_files *l = arg;

	(void)start;
	return open_in_root(l->pid, path);
}

static int local_module(void *arg, const struct sw_module *m)
{
	const struct local_files *l = arg;

	return open_in_root(l->pid, m->path);
}

static int local_image(void *arg, const struct sw_module *m, void **image,
		       size_t *size)
{
	const struct local_files *l = arg;

	return vdso_read_live(l->pid, m->start, m->end, image, size);
}

/* Writes a snapshot to a worker's stream (a thread: it blocks). */
struct snap_out {
	int fd;
	const struct snap *s;
};

static void *write_snap(void *arg)
{
	struct snap_out *o = arg;

	(void)snap_write(o->fd, 0, o->s);
	close(o->fd);
	return NULL;
}

/* Unwinds s (of l->pid) in a parser worker into *d. 0 or -errno. */
static int unwind_in_worker(struct local_files *l, const struct snap *s,
			    struct sw_dump **d)
{
	struct parse_files f = { .arg = l,
				 .maps = local_maps,
				 .open_mapped = local_mapped };
	struct snap_out o = { .s = s };
	pthread_t th;
	pid_t tracer = 0;
	int sv[2], r;

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
		return -errno;
	o.fd = sv[1];
	if (pthread_create(&th, NULL, write_snap, &o) != 0) {
		close(sv[0]);
		close(sv[1]);
		return -EAGAIN;
	}
	r = parsers_unwind(sv[0], l->pid, s->max_frames,
			   clock_now_ns() + OFFLINE_TIMEOUT_MS * 1000000ull, &f,
			   d, &tracer);
	pthread_join(th, NULL);
	return r;
}

/*
 * Symbolizes (module files opened by open_fn, given root_pid; images of
 * modules without one by image_fn, given image_arg; in a parser worker
 * when lf is not NULL), groups and prints d; frees it.
 */
static int finish(struct sw_dump *d, sym_open_fn open_fn, pid_t root_pid,
		  sym_image_fn image_fn, void *image_arg,
		  struct local_files *lf, const char *format)
{
	struct sym *sym = NULL;
	int r = 0;

	if (d->symbolized) {
		/* A worker did it (core_in_worker()). */
	} else if (lf) {
		struct parse_files f = { .arg = lf,
					 .open_module = local_module,
					 .image = local_image };

		r = parsers_symbolize(
			d, clock_now_ns() + OFFLINE_SYMBOLS_MS * 1000000ull,
			&f);
	} else {
		r = sym_new(open_fn, (void *)(intptr_t)root_pid, &sym);
		if (r == 0) {
			sym_set_image_fn(sym, image_fn, image_arg);
			r = sym_dump(sym, d, true);
		}
	}
	if (r == 0 && root_pid > 0)
		name_jit_frames(d, root_pid);
	if (r == 0)
		r = group_dump(d);
	sym_free(sym);
	if (r != 0) {
		cli_error("cannot symbolize the stacks: %s", sw_strerror(r));
		sw_dump_free(d);
		return CLI_EDAEMON;
	}
	r = print(d, format);
	sw_dump_free(d);
	return r;
}

/* The frames kept for --max-frames (-1: not given), as struct snap's. */
static unsigned frames_kept(long max_frames)
{
	return max_frames < 0	 ? 0
	       : max_frames == 0 ? SW_MAX_FRAMES_HARD
				 : (unsigned)max_frames;
}

int cli_dump_local(long pid, const char *format, long max_frames)
{
	struct local_files lf = { .pid = (pid_t)pid, .maps_rc = 1 };
	struct snap *s = NULL;
	struct sw_dump *d = NULL;
	struct kread *k = NULL;
	unsigned keep = frames_kept(max_frames);
	char why[512];
	int r;

	/*
	 * With the privilege (root), blocked threads are read from the
	 * kernel, stopped for nothing; without it, or on a kernel that
	 * cannot, every thread is ptraced.
	 */
	if (kread_open(&k, why, sizeof(why)) != 0)
		k = NULL;
	/* More frames than usual need more of each stack copied. */
	r = ksnap_take(k, 0, (pid_t)pid, OFFLINE_TIMEOUT_MS,
		       keep > SW_MAX_FRAMES ? SNAP_DEEP : 0, &s, NULL);
	kread_close(k);
	if (r != 0) {
		snap_why((pid_t)pid, r, s ? s->tracer : 0, why, sizeof(why));
		snap_free(s);
		cli_error("cannot take a snapshot of process %ld: %s", pid,
			  why);
		if (r == -ESRCH || r == -ENOENT) {
			cli_error("check the pid: ps -e lists the processes");
			return CLI_ENOPROC;
		}
		return r == -EPERM || r == -EACCES ? CLI_EPERM : CLI_EDAEMON;
	}
	s->max_frames = keep;
	if (cli_sandboxed()) {
		lf.pid = (pid_t)pid;
		/* A worker gone mid-stream is an error, not our death. */
		signal(SIGPIPE, SIG_IGN);
		r = cli_sandbox_start();
		if (r == 0)
			r = unwind_in_worker(&lf, s, &d);
		/* The file it died on is refused now: once more without. */
		if (r == PARSERS_EAGAIN || r == PARSERS_EFAILED)
			r = unwind_in_worker(&lf, s, &d);
	} else {
		r = unwind_snapshot(s, NULL, unwind_open, (void *)(intptr_t)pid,
				    &d);
	}
	snap_free(s);
	if (r != 0) {
		cli_error("cannot unwind process %ld: %s", pid,
			  r == PARSERS_EAGAIN || r == PARSERS_EFAILED
				  ? "its parser failed on a file it maps"
			  : r == PARSERS_EBUSY ? "no parser could start"
					       : sw_strerror(r));
		cli_sandbox_stop();
		if (lf.maps_rc == 0)
			procmaps_release(&lf.pm);
		return CLI_EDAEMON;
	}
	d->timeout_ms = OFFLINE_TIMEOUT_MS;
	r = finish(d, sym_open, (pid_t)pid, live_image, (void *)(intptr_t)pid,
		   cli_sandboxed() ? &lf : NULL, format);
	cli_sandbox_stop();
	if (lf.maps_rc == 0)
		procmaps_release(&lf.pm);
	return r;
}

/*
 * Checks --exe before the core is read, so that a wrong path is named as
 * the --exe it is (the core's reader would take it for its own failure):
 * it must exist, be a regular file we may read, and start as ELF does.
 * Returns 0, or -1 having said why and what to do.
 */
static int check_exe(const char *exe)
{
	unsigned char magic[4];
	const char *why = NULL;
	struct stat st;
	int fd, err = 0;

	fd = open(exe, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	if (fd < 0 || fstat(fd, &st) != 0)
		err = errno;
	else if (!S_ISREG(st.st_mode))
		why = "not a regular file";
	else if (read(fd, magic, sizeof(magic)) != (ssize_t)sizeof(magic) ||
		 memcmp(magic, "\177ELF", 4) != 0)
		why = "not an ELF file";
	if (fd >= 0)
		close(fd);
	if (!err && !why)
		return 0;
	cli_error("--exe %s: %s", exe, why ? why : strerror(err));
	cli_error("name the program the core was dumped from, or leave "
		  "--exe out to use the one the core names");
	return -1;
}

/* A file a core names, opened here for a worker (modopen.h's rule). */
static int core_open_path(void *arg, const char *path, char **real)
{
	(void)arg;
	return modopen_resolved(path, real);
}

/*
 * The core read in a parser worker, unwound and symbolized there: a
 * crafted core, or a crafted program it names, costs the worker. One
 * more try without a module file that killed one. 0 or a negative errno
 * (PARSERS_*) with why.
 */
static int core_in_worker(const char *core, const char *exe,
			  unsigned max_frames, struct sw_dump **d, char *why,
			  size_t size)
{
	struct parse_files f = { .open_path = core_open_path };
	struct stat st;
	int fd, r;

	fd = open(core, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0) {
		r = -errno;
		snprintf(why, size, "%s: %s", core, strerror(-r));
		return r;
	}
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
		snprintf(why, size, "%s: not a regular file", core);
		close(fd);
		return -EINVAL;
	}
	/* A worker gone mid-stream is an error, not our death. */
	signal(SIGPIPE, SIG_IGN);
	r = cli_sandbox_start();
	for (int tries = 0; r == 0 && tries < 2; tries++) {
		r = parsers_core(fd, core, exe, max_frames,
				 clock_now_ns() +
					 OFFLINE_SYMBOLS_MS * 1000000ull,
				 &f, d, why, size);
		if (r != PARSERS_EAGAIN)
			break;
		if (tries == 0)
			r = 0; /* once more: the file it died on is refused */
	}
	if (r == PARSERS_EAGAIN || r == PARSERS_EFAILED)
		snprintf(why + strlen(why), size - strlen(why),
			 "%sits parser failed on it", why[0] ? ": " : "");
	else if (r == PARSERS_EBUSY && !why[0])
		snprintf(why, size, "no parser could start");
	else if (r < 0 && !why[0])
		snprintf(why, size, "%s", sw_strerror(r));
	close(fd);
	return r;
}

int cli_dump_core(const char *core, const char *exe, const char *format,
		  long max_frames)
{
	struct corefile_in c = { .fd = -1 };
	bool cut;
	struct sw_dump *d = NULL;
	char why[512] = "";
	int r;

	if (exe && check_exe(exe) != 0)
		return CLI_EDAEMON;
	if (cli_sandboxed())
		r = core_in_worker(core, exe, frames_kept(max_frames), &d, why,
				   sizeof(why));
	else
		r = unwind_core_max(core, exe, frames_kept(max_frames), &d, why,
				    sizeof(why));
	cli_sandbox_stop();
	if (r != 0) {
		cli_error("cannot read the core file: %s", why);
		cli_error("give a core file (from gcore or a crash) that you "
			  "may read%s",
			  exe ? ", and the program it was dumped from" : "");
		return CLI_EDAEMON;
	}
	/* Symbolized in the worker already: the core is not read here. */
	c.fd = d->symbolized ? -1
			     : open(core, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (c.fd >= 0)
		c.elf = elf_begin(c.fd, ELF_C_READ, NULL);
	cut = d->core_cut_need != 0;
	if (cut)
		cli_error("%s is cut short: it has %llu bytes of the %llu its "
			  "segments need; stacks may be short",
			  core, (unsigned long long)d->core_cut_size,
			  (unsigned long long)d->core_cut_need);
	r = finish(d, core_sym_open, 0, corefile_module_image, &c, NULL,
		   format);
	if (r == CLI_OK && cut)
		r = CLI_EPARTIAL;
	if (c.elf)
		elf_end(c.elf);
	if (c.fd >= 0)
		close(c.fd);
	return r;
}
