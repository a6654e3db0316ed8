/*
 * waitmem.c - lock words copied by process_vm_readv (waitmem.h).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/uio.h>

#include "waitmem.h"

#define PAGE 4096u
#define BATCH 256 /* iovecs per call, well under IOV_MAX */

void waitmem_window(const struct sw_wait *w, uint64_t *from, size_t *len)
{
	uint64_t page = w->addr & ~(uint64_t)(PAGE - 1);
	uint64_t lo = w->addr - SW_WAIT_BEFORE, hi = lo + SW_WAIT_MEM;

	if (w->addr < SW_WAIT_BEFORE || lo < page)
		lo = page;
	if (hi > page + PAGE)
		hi = page + PAGE;
	*from = lo;
	*len = (size_t)(hi - lo);
}

/*
 * Reads n windows in one call; where one fails (unmapped since: a
 * partial transfer stops at it), each is read alone.
 */
static size_t read_batch(pid_t pid, struct sw_wait **ws, size_t n)
{
	struct iovec local[BATCH], remote[BATCH];
	size_t want = 0, got = 0;
	ssize_t r;

	if (n == 0 || n > BATCH)
		return 0;
	for (size_t i = 0; i < n; i++) {
		uint64_t from;
		size_t len;

		waitmem_window(ws[i], &from, &len);
		ws[i]->mem_at = from;
		local[i].iov_base = ws[i]->mem;
		local[i].iov_len = len;
		remote[i].iov_base = (void *)(uintptr_t)from;
		remote[i].iov_len = len;
		want += len;
	}
	r = process_vm_readv(pid, local, n, remote, n, 0);
	if (r == (ssize_t)want) {
		for (size_t i = 0; i < n; i++)
			ws[i]->nmem = (uint32_t)local[i].iov_len;
		return n;
	}
	if (r < 0 && (errno == ENOSYS || errno == EPERM || errno == ESRCH))
		return 0; /* not allowed at all (a seccomp filter), or gone */
	for (size_t i = 0; i < n; i++)
		if (process_vm_readv(pid, &local[i], 1, &remote[i], 1, 0) ==
		    (ssize_t)local[i].iov_len) {
			ws[i]->nmem = (uint32_t)local[i].iov_len;
			got++;
		}
	return got;
}

size_t waitmem_fill(pid_t pid, struct sw_wait **ws, size_t n)
{
	struct sw_wait *batch[BATCH];
	size_t k = 0, got = 0;

	for (size_t i = 0; i < n; i++) {
		struct sw_wait *w = ws[i];

		w->nmem = 0;
		if (w->addr == 0 || (w->addr & 3))
			continue; /* the kernel refuses such a word */
		batch[k++] = w;
		if (k == BATCH) {
			got += read_batch(pid, batch, k);
			k = 0;
		}
	}
	if (k)
		got += read_batch(pid, batch, k);
	return got;
}

size_t waitmem_read(pid_t pid, struct sw_dump *d)
{
	struct sw_wait *ws[BATCH];
	size_t n = 0, got = 0;

	for (size_t i = 0; i < d->nthreads; i++) {
		if (!d->threads[i].wait)
			continue;
		ws[n++] = d->threads[i].wait;
		if (n == BATCH) {
			got += waitmem_fill(pid, ws, n);
			n = 0;
		}
	}
	if (n)
		got += waitmem_fill(pid, ws, n);
	return got;
}
