/*
 * test_symmemo.c - a target's known stacks (src/daemon/symmemo.c): a
 * dump named from them is the dump the symbolizer makes, frame for
 * frame, lock name for lock name; and nothing is served that might be
 * stale or was never looked up: a new stack, another module table (a
 * library mapped again elsewhere, another build), a futex word never
 * named, a module without a build-id, a partial result.
 *
 * The dumps are of this process (its real modules), named by the real
 * symbolizer, as a parser worker names a target's.
 */
#define _GNU_SOURCE
#include <execinfo.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collector/modules.h"
#include "daemon/symmemo.h"
#include "model/dump.h"
#include "symbols/symbolize.h"
#include "tap.h"

/* A lock word in a global, which the symbolizer names. */
int memo_test_lock_word;

static __attribute__((noinline)) size_t here(uint64_t *ips, size_t max)
{
	void *b[32];
	int n = backtrace(b, 32);

	for (int i = 0; i < n && (size_t)i < max; i++)
		ips[i] = (uint64_t)(uintptr_t)b[i];
	return (size_t)n < max ? (size_t)n : max;
}

static __attribute__((noinline)) size_t deeper(uint64_t *ips, size_t max)
{
	volatile size_t n = here(ips, max);

	return n;
}

/* Sets thread i of d: ips, and a wait on addr unless 0. */
static void set_thread(struct sw_dump *d, size_t i, const uint64_t *ips,
		       size_t n, uint64_t wait_addr)
{
	struct sw_thread *t = &d->threads[i];

	t->tid = (pid_t)(100 + i);
	t->status = SW_ST_OK;
	t->read = SW_READ_KERNEL;
	t->group = -1;
	t->unchanged_s = -1;
	t->nips = n;
	t->ips = malloc(n * sizeof(*t->ips));
	memcpy(t->ips, ips, n * sizeof(*t->ips));
	if (wait_addr) {
		t->wait = calloc(1, sizeof(*t->wait));
		t->wait->addr = wait_addr;
	}
}

static bool str_eq(const char *a, const char *b)
{
	return a && b ? strcmp(a, b) == 0 : a == b;
}

static bool frames_eq(const struct sw_thread *a, const struct sw_thread *b)
{
	if (a->nframes != b->nframes)
		return false;
	for (size_t i = 0; i < a->nframes; i++) {
		const struct sw_frame *x = &a->frames[i], *y = &b->frames[i];

		if (x->ip != y->ip || x->module != y->module ||
		    x->offset != y->offset || x->line != y->line ||
		    x->inlined != y->inlined ||
		    !str_eq(x->function, y->function) ||
		    !str_eq(x->file, y->file))
			return false;
	}
	return true;
}

static bool no_frames(const struct sw_dump *d)
{
	for (size_t i = 0; i < d->nthreads; i++)
		if (d->threads[i].frames || d->threads[i].nframes)
			return false;
	return !d->symbolized && !d->naddr_names;
}

static struct sw_dump *raw_copy(const struct sw_dump *d)
{
	struct sw_dump *c = NULL;

	if (dump_clone_raw(d, &c) != 0)
		return NULL;
	for (size_t i = 0; i < c->nthreads; i++)
		dump_thread_release_frames(&c->threads[i]);
	c->symbolized = false;
	dump_release_addr_names(c);
	return c;
}

/* The module of d that holds ip. */
static struct sw_module *module_of(struct sw_dump *d, uint64_t ip)
{
	int k = dump_find_module(d, ip);

	return k >= 0 ? &d->modules[k] : NULL;
}

int main(void)
{
	uint64_t a[32], b[32], heap_word = 0;
	size_t na = deeper(a, 32), nb = here(b, 32);
	struct symmemo *m = NULL;
	struct sw_dump *d, *c;
	struct sym *s;
	uint64_t hits;
	int rc;

	if (sym_new(NULL, NULL, &s) != 0)
		return 1;
	d = dump_new();
	if (!d || modules_read_self(d) != 0 || !module_of(d, a[0]) ||
	    !module_of(d, a[0])->build_id_len) {
		TAP_SKIP("this test program has no build-id to go by");
		return tap_done();
	}
	d->nthreads = 4;
	d->threads = calloc(4, sizeof(*d->threads));
	set_thread(d, 0, a, na, (uint64_t)(uintptr_t)&memo_test_lock_word);
	set_thread(d, 1, a, na, 0);
	set_thread(d, 2, b, nb, (uint64_t)(uintptr_t)&heap_word);
	set_thread(d, 3, b, nb, 0);
	rc = sym_dump(s, d, true);
	TAP_OK(rc == 0 && d->symbolized && !d->symbols_partial,
	       "the symbolizer named the dump whole");
	TAP_OK(d->naddr_names == 1 &&
		       str_eq(d->addr_names[0].name, "memo_test_lock_word"),
	       "its lock word is named by its global");

	/* Nothing known yet: nothing filled. */
	c = raw_copy(d);
	TAP_OK(symmemo_fill(m, c, &hits) == 0 && no_frames(c),
	       "an empty memory names nothing");
	sw_dump_free(c);

	symmemo_update(&m, d);
	TAP_OK(symmemo_stacks(m) == 2, "two stacks kept (%zu)",
	       symmemo_stacks(m));

	/* The same stacks, raw: named as the symbolizer named them. */
	c = raw_copy(d);
	rc = symmemo_fill(m, c, &hits);
	TAP_OK(rc == 1, "a dump of known stacks is named from memory");
	TAP_OK(c->symbolized && !c->symbols_partial, "it is symbolized, whole");
	for (size_t i = 0; i < 4; i++)
		TAP_OK(frames_eq(&c->threads[i], &d->threads[i]),
		       "thread %zu: the symbolizer's frames, %zu of them", i,
		       c->threads[i].nframes);
	TAP_OK(c->threads[0].frames == c->threads[1].frames,
	       "threads of one stack share their frames");
	TAP_OK(hits == na + nb,
	       "hits count each stack's addresses once "
	       "(%llu of %zu)",
	       (unsigned long long)hits, na + nb);
	TAP_OK(c->naddr_names == 1 &&
		       str_eq(c->addr_names[0].name, "memo_test_lock_word") &&
		       c->addr_names[0].start == d->addr_names[0].start,
	       "the lock word's name too");
	TAP_OK(c->glibc_minor == d->glibc_minor &&
		       c->glibc_static == d->glibc_static,
	       "and the glibc release (%u)", c->glibc_minor);
	sw_dump_free(c);

	/* A stack never seen: the whole dump goes to a parser. */
	c = raw_copy(d);
	c->threads[3].ips[0] += 1;
	TAP_OK(symmemo_fill(m, c, &hits) == 0 && no_frames(c),
	       "one unknown stack: nothing named from memory");
	sw_dump_free(c);

	/* A wait on a word never looked up. */
	c = raw_copy(d);
	c->threads[1].wait = calloc(1, sizeof(*c->threads[1].wait));
	c->threads[1].wait->addr = (uint64_t)(uintptr_t)&hits;
	TAP_OK(symmemo_fill(m, c, &hits) == 0 && no_frames(c),
	       "a futex word never named: nothing named from memory");
	sw_dump_free(c);

	/* The module of the stacks elsewhere, or another build of it. */
	c = raw_copy(d);
	module_of(c, a[0])->bias += 4096;
	TAP_OK(symmemo_fill(m, c, &hits) == 0 && no_frames(c),
	       "the module at another load bias: nothing named");
	sw_dump_free(c);
	c = raw_copy(d);
	module_of(c, a[0])->build_id[0] ^= 0xff;
	TAP_OK(symmemo_fill(m, c, &hits) == 0 && no_frames(c),
	       "another build-id: nothing named");
	sw_dump_free(c);
	c = raw_copy(d);
	free(c->modules[c->nmodules - 1].path);
	c->modules[c->nmodules - 1].path = strdup("/elsewhere/lib.so");
	TAP_OK(symmemo_fill(m, c, &hits) == 0 && no_frames(c),
	       "a module of another path: nothing named");
	sw_dump_free(c);

	/* A partial result is not kept. */
	c = raw_copy(d);
	c->threads[3].ips[0] += 1;
	TAP_OK(sym_dump(s, c, true) == 0, "a dump with a third stack");
	c->symbols_partial = true;
	symmemo_update(&m, c);
	TAP_OK(symmemo_stacks(m) == 2, "partial: nothing of it kept (%zu)",
	       symmemo_stacks(m));
	c->symbols_partial = false;
	symmemo_update(&m, c);
	TAP_OK(symmemo_stacks(m) == 3, "whole: its new stack kept (%zu)",
	       symmemo_stacks(m));
	sw_dump_free(c);

	/* A module without a build-id: its stacks are not kept. */
	c = raw_copy(d);
	module_of(c, a[0])->build_id_len = 0;
	TAP_OK(sym_dump(s, c, true) == 0, "a dump whose module has no id");
	symmemo_update(&m, c);
	TAP_OK(symmemo_stacks(m) == 0,
	       "other modules: the memory started over, and kept none "
	       "of a module without a build-id (%zu)",
	       symmemo_stacks(m));
	sw_dump_free(c);
	c = raw_copy(d);
	module_of(c, a[0])->build_id_len = 0;
	TAP_OK(symmemo_fill(m, c, &hits) == 0 && no_frames(c),
	       "so such a dump is always named by a parser");
	sw_dump_free(c);

	/* Bounded: endless new stacks start it over, never past its bounds. */
	symmemo_update(&m, d);
	for (size_t k = 0; k < SYMMEMO_MAX_STACKS + 100; k++) {
		c = raw_copy(d);
		c->threads[0].ips[0] += 1 + k;
		free(c->threads[0].wait);
		c->threads[0].wait = NULL;
		if (sym_dump(s, c, false) == 0) {
			c->symbolized = true;
			symmemo_update(&m, c);
		}
		sw_dump_free(c);
	}
	TAP_OK(symmemo_stacks(m) > 0 &&
		       symmemo_stacks(m) <= SYMMEMO_MAX_STACKS &&
		       symmemo_bytes(m) <= SYMMEMO_MAX_BYTES,
	       "within its bounds: %zu stacks, %zu bytes", symmemo_stacks(m),
	       symmemo_bytes(m));

	symmemo_free(m);
	sw_dump_free(d);
	sym_free(s);
	return tap_done();
}
