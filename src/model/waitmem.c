/*
 * waitmem.c - lock words copied by process_vm_readv (waitmem.h).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
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

/* Reads the distinct windows of ws (n, ascending by word), in batches. */
static size_t fill_distinct(pid_t pid, struct sw_wait **ws, size_t n)
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

static int cmp_addr(const void *a, const void *b)
{
	const struct sw_wait *x = *(struct sw_wait *const *)a;
	const struct sw_wait *y = *(struct sw_wait *const *)b;

	return (x->addr > y->addr) - (x->addr < y->addr);
}

/*
 * Threads of a pool sleep on one word (a queue's condition variable, a
 * contended mutex): each distinct word is read once and its copy shared,
 * not pinned and copied a hundred times over.
 */
size_t waitmem_fill(pid_t pid, struct sw_wait **ws, size_t n)
{
	struct sw_wait **v, **d;
	size_t nd = 0, got = 0;

	if (n < 2)
		return fill_distinct(pid, ws, n);
	/* NOLINTNEXTLINE(bugprone-sizeof-expression): pointers */
	v = malloc(2 * n * sizeof(*v));
	if (!v)
		return fill_distinct(pid, ws, n);
	d = v + n;
	/* NOLINTNEXTLINE(bugprone-sizeof-expression): pointers */
	memcpy(v, ws, n * sizeof(*v));
	/* NOLINTNEXTLINE(bugprone-sizeof-expression): pointers */
	qsort(v, n, sizeof(*v), cmp_addr);
	for (size_t i = 0; i < n; i++)
		if (!i || v[i]->addr != v[i - 1]->addr)
			d[nd++] = v[i];
	fill_distinct(pid, d, nd);
	for (size_t i = 0, first = 0; i < n; i++) {
		if (v[i]->addr != v[first]->addr)
			first = i;
		if (i != first) {
			v[i]->mem_at = v[first]->mem_at;
			v[i]->nmem = v[first]->nmem;
			memcpy(v[i]->mem, v[first]->mem, v[first]->nmem);
		}
		got += v[i]->nmem > 0;
	}
	free(v);
	return got;
}

size_t waitmem_read(pid_t pid, struct sw_dump *d)
{
	struct sw_wait *few[BATCH], **ws = few;
	size_t n = 0, got = 0;

	/* All at once where there is room, so that a shared word is read
	 * once; else in batches. */
	if (d->nthreads > BATCH)
		/* NOLINTNEXTLINE(bugprone-sizeof-expression): pointers */
		ws = malloc(d->nthreads * sizeof(*ws));
	if (!ws)
		ws = few;
	for (size_t i = 0; i < d->nthreads; i++) {
		if (!d->threads[i].wait)
			continue;
		ws[n++] = d->threads[i].wait;
		if (ws == few && n == BATCH) {
			got += waitmem_fill(pid, ws, n);
			n = 0;
		}
	}
	if (n)
		got += waitmem_fill(pid, ws, n);
	if (ws != few)
		free(ws);
	return got;
}
