/*
 * mkseed.c - writes seed inputs for the fuzzers into a directory: valid
 * messages of every type and form (a real dump of this process included,
 * a HELLO with and without features, a DUMP_REQ with a skip set), task
 * stat and status files and maps lines, query strings of the daemon's
 * requests, the small ELF files of the fixtures for the symbolizer, and
 * a real snapshot of a fixture's thread spinning in its own code, with
 * that fixture's file, for the unwinder; so the fuzzers start from the
 * shapes they must survive mutations of.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "stackwatch.h"
#include "model/procmaps.h"
#include "model/wire.h"
#include "snapshot/snapshot.h"
#include "fuzz_unwind.h"

#define SEED_ELF_MAX (200u * 1024u)  /* bytes of a module file seed */
#define SEED_STACK_MAX (16u * 1024u) /* bytes of a stack copy seed */
#define SEED_CUT_STACK 512u	     /* and of its cut-short variant */

struct sw_dump;

static int write_file(const char *dir, const char *name, const void *p,
		      size_t n)
{
	char path[512];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "w");
	if (!f)
		return -1;
	fwrite(p, 1, n, f);
	return fclose(f);
}

static void write_seed(const char *dir, const char *name, const char *s)
{
	write_file(dir, name, s, strlen(s));
}

static void copy_proc(const char *dir, const char *src, const char *name)
{
	char buf[8192];
	int fd = open(src, O_RDONLY);
	ssize_t n;

	if (fd < 0)
		return;
	n = read(fd, buf, sizeof(buf));
	close(fd);
	if (n > 0)
		write_file(dir, name, buf, (size_t)n);
}

/* The file at path, malloc'd, if it has at most SEED_ELF_MAX bytes. */
static uint8_t *read_small(const char *path, size_t *n)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	struct stat st;
	uint8_t *p = NULL;

	if (fd < 0)
		return NULL;
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size <= 0 ||
	    st.st_size > SEED_ELF_MAX)
		goto out_close;
	p = malloc((size_t)st.st_size);
	if (p && read(fd, p, (size_t)st.st_size) != st.st_size) {
		free(p);
		p = NULL;
	}
	*n = (size_t)st.st_size;
out_close:
	close(fd);
	return p;
}

/* Copies the fixture name into dir, as a seed of the symbolizer. */
static void copy_elf(const char *dir, const char *fixtures, const char *name)
{
	char path[512];
	uint8_t *p;
	size_t n;

	snprintf(path, sizeof(path), "%s/%s", fixtures, name);
	p = read_small(path, &n);
	if (p)
		write_file(dir, name, p, n);
	free(p);
}

/*
 * Starts exe (plain_target) with one parked thread, its ticker and its
 * spinner, and waits for its "ready": its pid, with *in its stdin, or -1.
 */
static pid_t start_target(const char *exe, int *in)
{
	int to[2], from[2];
	char line[64] = "";
	FILE *f;
	pid_t pid;

	if (pipe2(to, O_CLOEXEC) != 0)
		return -1;
	if (pipe2(from, O_CLOEXEC) != 0)
		goto out_to;
	pid = fork();
	if (pid == 0) {
		dup2(to[0], 0);
		dup2(from[1], 1);
		execl(exe, exe, "1", (char *)NULL);
		_exit(127);
	}
	close(to[0]);
	close(from[1]);
	f = pid > 0 ? fdopen(from[0], "r") : NULL;
	if (!f)
		close(from[0]);
	while (f && fgets(line, sizeof(line), f) &&
	       strcmp(line, "ready\n") != 0)
		;
	if (f)
		fclose(f);
	if (pid > 0 && strcmp(line, "ready\n") == 0) {
		*in = to[1];
		return pid;
	}
	if (pid > 0) {
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
	}
	close(to[1]);
	return -1;
out_to:
	close(to[0]);
	close(to[1]);
	return -1;
}

/*
 * Writes t as fuzz_unwind's input into dir/name: the header, the file
 * that maps its pc (all of that file's mappings in pm as one), and the
 * first stack_len bytes of its stack copy.
 */
static void write_unwind(const char *dir, const char *name,
			 const struct procmaps *pm, const struct snap_thread *t,
			 uint32_t stack_len, uint32_t flags)
{
	const struct procmap *m = procmaps_find(pm, t->regs[16]);
	struct fuzz_unwind_hdr h = { 0 };
	uint8_t *elf, *p;
	size_t n;

	if (!m || !(elf = read_small(m->path, &n)))
		return;
	h.base = m->start;
	h.map_len = m->end - m->start;
	for (size_t i = 0; i < pm->n; i++)
		if (pm->v[i].dev == m->dev && pm->v[i].ino == m->ino) {
			if (pm->v[i].start < h.base)
				h.base = pm->v[i].start;
			if (pm->v[i].end - h.base > h.map_len)
				h.map_len = pm->v[i].end - h.base;
		}
	h.stack_at = t->sp;
	memcpy(h.regs, t->regs, sizeof(h.regs));
	h.elf_len = (uint32_t)n;
	if (stack_len > t->stack_len)
		stack_len = t->stack_len;
	h.flags = flags;
	if (stack_len < t->stack_len || t->cut)
		h.flags |= FUZZ_UNWIND_CUT;
	p = malloc(sizeof(h) + n + stack_len);
	if (p) {
		memcpy(p, &h, sizeof(h));
		memcpy(p + sizeof(h), elf, n);
		memcpy(p + sizeof(h) + n, t->stack, stack_len);
		write_file(dir, name, p, sizeof(h) + n + stack_len);
	}
	free(p);
	free(elf);
}

/*
 * The unwinder's seeds: a snapshot of plain_target's "spinner" thread,
 * caught in plain_spin(), called from spinner(), in its own file.
 */
static void seed_unwind(const char *dir, const char *fixtures)
{
	char exe[512];
	struct procmaps pm;
	struct snap *s = NULL;
	int in = -1;
	pid_t pid;

	snprintf(exe, sizeof(exe), "%s/plain_target", fixtures);
	pid = start_target(exe, &in);
	if (pid < 0) {
		fprintf(stderr, "mkseed: %s did not start\n", exe);
		return;
	}
	if (snap_take(pid, 2000, &s) == 0 && procmaps_read(pid, &pm) == 0) {
		for (size_t i = 0; i < s->nthreads; i++) {
			const struct snap_thread *t = &s->threads[i];

			if (strcmp(t->name, "spinner") != 0 ||
			    t->status != SW_ST_OK || !t->stack_len)
				continue;
			write_unwind(dir, "spinner", &pm, t, SEED_STACK_MAX, 0);
			write_unwind(dir, "spinner-cut", &pm, t, SEED_CUT_STACK,
				     FUZZ_UNWIND_CUT);
		}
		procmaps_release(&pm);
	} else {
		fprintf(stderr, "mkseed: no snapshot of %s\n", exe);
	}
	snap_free(s);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	close(in);
}

int main(int argc, char **argv)
{
	struct wire_hello h = {
		.pid = 42, .signo = 38, .comm = "seed", .cmdline = "seed --flag"
	};
	struct wire_dump_req r = { .timeout_ms = 1000, .window = 64 };
	pid_t skip[] = { 2, 3, 70000 };
	struct wire_dump_req rs = {
		.timeout_ms = 500, .window = 8, .nskip = 3, .skip = skip
	};
	struct sw_dump_opts o;
	struct sw_dump *d;
	struct wire_out w;

	if (argc != 3 && argc != 4 && argc != 7) {
		fprintf(stderr, "usage: mkseed WIRE_DIR PROC_DIR [QUERY_DIR "
				"[SYMBOLIZE_DIR UNWIND_DIR FIXTURE_DIR]]\n");
		return 2;
	}
	wire_out_init(&w);
	if (wire_encode_hello(&w, 0, &h) == 0)
		write_file(argv[1], "hello", w.data, w.len);
	h.features = WIRE_FEAT_SKIP;
	if (wire_encode_hello(&w, 0, &h) == 0)
		write_file(argv[1], "hello-features", w.data, w.len);
	if (wire_encode_dump_req(&w, 7, &r) == 0)
		write_file(argv[1], "req", w.data, w.len);
	if (wire_encode_dump_req(&w, 9, &rs) == 0)
		write_file(argv[1], "req-skip", w.data, w.len);
	sw_dump_opts_init(&o);
	o.symbolize = 0;
	if (sw_dump_self(&o, &d) == 0) {
		if (wire_encode_dump_resp(&w, 7, 0, d) == 0)
			write_file(argv[1], "resp", w.data, w.len);
		sw_dump_free(d);
	}
	if (wire_encode_dump_resp(&w, 8, SW_EHANDLER, NULL) == 0)
		write_file(argv[1], "resp-error", w.data, w.len);
	wire_out_release(&w);
	copy_proc(argv[2], "/proc/self/stat", "stat");
	copy_proc(argv[2], "/proc/self/status", "status");
	copy_proc(argv[2], "/proc/self/maps", "maps");
	/* A task in a pid namespace two levels down. */
	write_seed(argv[2], "status-nspid", "Name:\tx\nNSpid:\t4242\t17\t1\n");
	if (argc == 4) {
		write_seed(argv[3], "stacks",
			   "pid=4242&format=json&symbols=0&timeout_ms=1500");
		write_seed(argv[3], "page",
			   "format=html&pid=7\ntext/html,application/json");
		write_seed(argv[3], "diff",
			   "pid=4242&since=2.5&timeout_ms=200");
		write_seed(argv[3], "bad", "pid=-1&format=xml&since=1e9&x=y");
	}
	if (argc == 7) {
		/* With DWARF and a build-id; one that lies about its
		 * build-id; one with a symbol table only. */
		copy_elf(argv[4], argv[6], "plain_target");
		copy_elf(argv[4], argv[6], "stub.so");
		copy_elf(argv[4], argv[6], "secret_lib.so");
		seed_unwind(argv[5], argv[6]);
	}
	return 0;
}
