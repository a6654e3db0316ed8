/*
 * perfsample.c - one perf sample of a running thread (perfsample.h):
 * a task-clock event on that thread alone that fires once it has run a
 * few microseconds, with its user registers and a copy of the top of its
 * user stack, as `perf record --call-graph dwarf` takes them. The thread
 * is not stopped or signalled: the sample is taken by the kernel in the
 * thread's own timer interrupt.
 */
#define _GNU_SOURCE
#include "perfsample.h"

#include <errno.h>
#include <stdio.h>
#include <linux/perf_event.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "model/clock.h"

#if defined(__x86_64__)
#include <asm/perf_regs.h>

#define PS_DATA_PAGES 32   /* 128 KiB: one sample with a full stack copy */
#define PS_PERIOD_NS 20000 /* of the thread's own run time */
#define PS_STACK_MAX 65528 /* the most a sample holds (trimmed to fit) */

/* The registers asked for, in the order the sample gives them. */
static const int ps_regs[] = {
	PERF_REG_X86_AX,  PERF_REG_X86_BX,  PERF_REG_X86_CX,  PERF_REG_X86_DX,
	PERF_REG_X86_SI,  PERF_REG_X86_DI,  PERF_REG_X86_BP,  PERF_REG_X86_SP,
	PERF_REG_X86_IP,  PERF_REG_X86_R8,  PERF_REG_X86_R9,  PERF_REG_X86_R10,
	PERF_REG_X86_R11, PERF_REG_X86_R12, PERF_REG_X86_R13, PERF_REG_X86_R14,
	PERF_REG_X86_R15,
};
enum { PS_NREGS = sizeof(ps_regs) / sizeof(ps_regs[0]) };

/* DWARF register number of each perf register above. */
static const int ps_dwarf[PS_NREGS] = {
	0, 3, 2, 1, 4, 5, 6, 7, 16, 8, 9, 10, 11, 12, 13, 14, 15,
};

/* Copies n bytes at ring offset off out of the ring (it wraps). */
static void ring_copy(const uint8_t *ring, size_t size, uint64_t off, void *dst,
		      size_t n)
{
	size_t at = (size_t)(off % size), first = size - at;

	if (first > n)
		first = n;
	memcpy(dst, ring + at, first);
	memcpy((uint8_t *)dst + first, ring, n - first);
}

/*
 * Parses the first sample in the ring into t. Returns 0, or -EAGAIN when
 * none is there yet, -EPROTO for a record that is not ours.
 */
static int take_sample(struct perf_event_mmap_page *meta, pid_t tid,
		       struct snap_thread *t)
{
	const uint8_t *ring = (const uint8_t *)meta + meta->data_offset;
	size_t size = meta->data_size;
	uint64_t head = __atomic_load_n(&meta->data_head, __ATOMIC_ACQUIRE);
	uint64_t tail = meta->data_tail;

	while (tail + sizeof(struct perf_event_header) <= head) {
		struct perf_event_header h;
		uint8_t *rec;
		size_t off;
		uint64_t abi, regs[PS_NREGS], len, dyn;
		struct {
			uint32_t pid, tid;
			uint64_t time;
		} id;

		ring_copy(ring, size, tail, &h, sizeof(h));
		if (h.size < sizeof(h) || tail + h.size > head)
			return -EPROTO;
		if (h.type != PERF_RECORD_SAMPLE) {
			tail += h.size;
			continue;
		}
		rec = malloc(h.size);
		if (!rec)
			return -ENOMEM;
		ring_copy(ring, size, tail, rec, h.size);
		off = sizeof(h);
		if (h.size < off + sizeof(id) + 8) {
			free(rec);
			return -EPROTO;
		}
		memcpy(&id, rec + off, sizeof(id));
		off += sizeof(id);
		memcpy(&abi, rec + off, 8);
		off += 8;
		if ((pid_t)id.tid != tid || abi == PERF_SAMPLE_REGS_ABI_NONE ||
		    h.size < off + sizeof(regs) + 8) {
			free(rec);
			return -EAGAIN; /* no user state (a kernel moment) */
		}
		memcpy(regs, rec + off, sizeof(regs));
		off += sizeof(regs);
		memcpy(&len, rec + off, 8);
		off += 8;
		if (len > h.size - off || h.size - off - len < 8) {
			free(rec);
			return -EPROTO;
		}
		memcpy(&dyn, rec + off + len, 8);
		if (dyn > len)
			dyn = len;
		for (int i = 0; i < PS_NREGS; i++)
			t->regs[ps_dwarf[i]] = regs[i];
		t->sp = t->regs[7];
		t->captured_ns = id.time;
		t->stack = malloc(dyn ? dyn : 1);
		if (!t->stack) {
			free(rec);
			return -ENOMEM;
		}
		memcpy(t->stack, rec + off, dyn);
		t->stack_len = (uint32_t)dyn;
		/* As much as a sample holds: the stack may well go on. */
		t->cut = dyn == len;
		free(rec);
		return 0;
	}
	return -EAGAIN;
}

int perf_sample_thread(pid_t pid, pid_t tid, uint64_t deadline_ns,
		       struct snap_thread *t)
{
	struct perf_event_attr a;
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	size_t len = (1 + PS_DATA_PAGES) * page;
	void *m;
	int fd, r = -EAGAIN;

	(void)pid;
	memset(&a, 0, sizeof(a));
	a.size = sizeof(a);
	a.type = PERF_TYPE_SOFTWARE;
	a.config = PERF_COUNT_SW_TASK_CLOCK;
	a.sample_period = PS_PERIOD_NS;
	a.sample_type = PERF_SAMPLE_TID | PERF_SAMPLE_TIME |
			PERF_SAMPLE_REGS_USER | PERF_SAMPLE_STACK_USER;
	for (int i = 0; i < PS_NREGS; i++)
		a.sample_regs_user |= 1ull << ps_regs[i];
	a.sample_stack_user = PS_STACK_MAX;
	a.wakeup_events = 1;
	a.use_clockid = 1;
	a.clockid = CLOCK_MONOTONIC;
	fd = (int)syscall(SYS_perf_event_open, &a, tid, -1, -1,
			  PERF_FLAG_FD_CLOEXEC);
	if (fd < 0)
		return -errno;
	m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (m == MAP_FAILED) {
		r = -errno;
		close(fd);
		return r;
	}
	for (;;) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		uint64_t now = clock_now_ns();

		r = take_sample(m, tid, t);
		if (r != -EAGAIN || now >= deadline_ns)
			break;
		if (poll(&p, 1, (int)((deadline_ns - now) / 1000000u) + 1) <
			    0 &&
		    errno != EINTR) {
			r = -errno;
			break;
		}
		if (p.revents & POLLHUP) { /* the thread exited */
			r = take_sample(m, tid, t);
			if (r == -EAGAIN)
				r = -ESRCH;
			break;
		}
	}
	munmap(m, len);
	close(fd);
	if (r == 0) {
		t->tid = tid;
		t->method = SNAP_M_PERF;
		t->status = SW_ST_OK;
	}
	return r;
}
#else
int perf_sample_thread(pid_t pid, pid_t tid, uint64_t deadline_ns,
		       struct snap_thread *t)
{
	(void)pid;
	(void)tid;
	(void)deadline_ns;
	(void)t;
	return SNAP_EARCH;
}
#endif

int perf_sample_check(char *why, size_t size)
{
	struct perf_event_attr a;
	int fd;

	memset(&a, 0, sizeof(a));
	a.size = sizeof(a);
	a.type = PERF_TYPE_SOFTWARE;
	a.config = PERF_COUNT_SW_TASK_CLOCK;
	a.sample_period = 1000000;
	a.sample_type = PERF_SAMPLE_REGS_USER | PERF_SAMPLE_STACK_USER;
	a.sample_regs_user = 1;
	a.sample_stack_user = 4096;
	a.disabled = 1;
	fd = (int)syscall(SYS_perf_event_open, &a, 0, -1, -1,
			  PERF_FLAG_FD_CLOEXEC);
	if (fd >= 0) {
		close(fd);
		return 0;
	}
	fd = -errno;
	snprintf(why, size, "perf_event_open: %s%s", strerror(-fd),
		 fd == -EACCES || fd == -EPERM
			 ? " (needs CAP_PERFMON, or a lower "
			   "kernel.perf_event_paranoid)"
			 : "");
	return fd;
}
