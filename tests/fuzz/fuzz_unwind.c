/*
 * fuzz_unwind.c - libFuzzer target for the offline unwinder of ptrace
 * snapshots (src/symbols/unwind.c): the input (fuzz_unwind.h) is a
 * module's file, with the call frame information the unwinder reads
 * (.eh_frame, .debug_frame), and one thread's registers and stack copy,
 * both of which a hostile process chooses. The snapshot's one thread has
 * its pc in the module and its sp in the copy, and the process maps the
 * file once; unwinding must not crash, leak or hang, and must give the
 * thread between one and the kept number of addresses.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "model/procmaps.h"
#include "snapshot/snapshot.h"
#include "symbols/unwind.h"
#include "fuzz_unwind.h"

#define PAGE 4096ull
#define MAP_MAX (1ull << 30)  /* the most a mapping spans */
#define USER_END (1ull << 47) /* where x86-64 user space ends */
#define NO_PID 4194305	      /* above PID_MAX_LIMIT: no process's */
#define FD_SLACK 16 /* descriptors the fuzzer itself may hold for a while */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int memfd = -1;
static int fd_mark = -1; /* the lowest free descriptor after an input */

/* The open function: the input's file, as a descriptor of its own. */
static int open_module(void *arg, uint64_t start, const char *path)
{
	int fd = fcntl(memfd, F_DUPFD_CLOEXEC, 0);

	(void)arg;
	(void)start;
	(void)path;
	return fd < 0 ? -errno : fd;
}

/* Writes the file part of the input into the memfd. */
static int put_file(const uint8_t *data, size_t size)
{
	if (memfd < 0) {
		memfd = memfd_create("fuzz_unwind", MFD_CLOEXEC);
		if (memfd < 0)
			return -1;
	}
	if (ftruncate(memfd, 0) != 0)
		return -1;
	return pwrite(memfd, data, size, 0) == (ssize_t)size ? 0 : -1;
}

/*
 * at, moved where [at, at + len) fits in user space when it does not;
 * page-aligned when align is set, as a mapping is.
 */
static uint64_t fit(uint64_t at, uint64_t len, bool align)
{
	if (at > USER_END - len)
		at %= USER_END - len;
	return align ? at & ~(PAGE - 1) : at;
}

/*
 * The registers of h, with the pc moved into [base, base + map_len) and
 * sp into the copy when they lie outside: a snapshot's thread stopped
 * there, however the rest of its registers and stack read.
 */
static void thread_of(const struct fuzz_unwind_hdr *h, uint64_t base,
		      uint64_t map_len, uint64_t stack_at, uint32_t stack_len,
		      struct snap_thread *t)
{
	memcpy(t->regs, h->regs, sizeof(t->regs));
	if (t->regs[16] - base >= map_len)
		t->regs[16] = base + t->regs[16] % map_len;
	if (t->regs[7] - stack_at > stack_len)
		t->regs[7] = stack_at + t->regs[7] % ((uint64_t)stack_len + 1);
	t->tid = NO_PID;
	t->method = SNAP_M_PTRACE;
	t->status = SW_ST_OK;
	t->state = 'R';
	memcpy(t->name, "fuzz", 5);
	t->sp = stack_at;
	t->stack_len = stack_len;
	t->cut = (h->flags & FUZZ_UNWIND_CUT) != 0;
}

/* One thread, its addresses within the kept number; the module once. */
static void check_dump(const struct sw_dump *d)
{
	const struct sw_thread *t = &d->threads[0];

	if (d->nthreads != 1 || t->status != SW_ST_OK || t->nips < 1 ||
	    t->nips > unwind_max_frames(0) || d->nmodules > 1)
		abort();
}

/* Aborts when descriptors pile up from input to input. */
static void check_fds(void)
{
	int fd = fcntl(memfd, F_DUPFD_CLOEXEC, 0);

	if (fd < 0)
		return;
	close(fd);
	if (fd_mark < 0)
		fd_mark = fd;
	if (fd > fd_mark + FD_SLACK) {
		fprintf(stderr, "file descriptors leaked: %d open\n", fd);
		abort();
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static char path[] = "/fuzz/module";
	struct fuzz_unwind_hdr h;
	struct snap_thread t = { 0 };
	struct snap s = { 0 };
	struct procmap pm = { 0 };
	struct procmaps maps = { 0 };
	struct sw_dump *d = NULL;
	uint64_t map_len, base, stack_at;
	size_t elf_len, stack_len;

	if (size < sizeof(h))
		return 0;
	memcpy(&h, data, sizeof(h));
	data += sizeof(h);
	size -= sizeof(h);
	elf_len = h.elf_len < size ? h.elf_len : size;
	stack_len = size - elf_len;
	if (stack_len > SNAP_STACK_MAX)
		stack_len = SNAP_STACK_MAX;
	if (put_file(data, elf_len) != 0)
		return 0;

	map_len = (h.map_len + PAGE - 1) & ~(PAGE - 1);
	if (map_len < PAGE || map_len > MAP_MAX)
		map_len = map_len % MAP_MAX + PAGE;
	base = fit(h.base, map_len, true);
	stack_at = fit(h.stack_at, stack_len, false);
	t.stack = malloc(stack_len ? stack_len : 1);
	if (!t.stack)
		return 0;
	memcpy(t.stack, data + elf_len, stack_len);
	thread_of(&h, base, map_len, stack_at, (uint32_t)stack_len, &t);

	s.pid = NO_PID;
	memcpy(s.comm, "fuzz", 5);
	s.nthreads = 1;
	s.threads = &t;
	pm.start = base;
	pm.end = base + map_len;
	pm.ino = 1;
	pm.path = path;
	maps.v = &pm;
	maps.n = maps.cap = 1;

	if (unwind_snapshot(&s, &maps, open_module, NULL, &d) == 0)
		check_dump(d);
	sw_dump_free(d);
	free(t.stack);
	/* Each input rewrites the module file in place: no session of the
	 * last one may serve the next. */
	unwind_forget();
	check_fds();
	return 0;
}
