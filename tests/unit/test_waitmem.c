/*
 * test_waitmem.c - the lock words copied around futex waits
 * (src/model/waitmem.c): a word many threads sleep on is read once and
 * its copy shared, and every wait still gets its own word's bytes: read
 * here from our own process, whose words we set.
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "model/dump.h"
#include "model/waitmem.h"
#include "tap.h"

static uint32_t words[4]
	__attribute__((aligned(64))) = { 0x11111111u, 0x22222222u, 0x33333333u,
					 0x44444444u };

/* The word at w->addr, as w's copy holds it; 0 when it does not. */
static uint32_t copied(const struct sw_wait *w)
{
	uint32_t v;

	if (!w->nmem || w->addr < w->mem_at ||
	    w->addr - w->mem_at + 4 > w->nmem)
		return 0;
	memcpy(&v, w->mem + (w->addr - w->mem_at), 4);
	return v;
}

static void test_shared(void)
{
	struct sw_wait w[6], *ws[6];
	size_t got;

	memset(w, 0, sizeof(w));
	w[0].addr = (uint64_t)(uintptr_t)&words[0];
	w[1].addr = (uint64_t)(uintptr_t)&words[2];
	w[2].addr = (uint64_t)(uintptr_t)&words[0];
	w[3].addr = (uint64_t)(uintptr_t)&words[0];
	w[4].addr = 0;					/* none */
	w[5].addr = (uint64_t)(uintptr_t)&words[1] + 1; /* misaligned */
	for (int i = 0; i < 6; i++) {
		ws[i] = &w[i];
		w[i].nmem = 99; /* stale from an earlier read */
	}
	got = waitmem_fill(getpid(), ws, 6);
	TAP_OK(got == 4, "four of six waits read (%zu)", got);
	TAP_OK(copied(&w[0]) == 0x11111111u && copied(&w[2]) == 0x11111111u &&
		       copied(&w[3]) == 0x11111111u,
	       "three waits on one word: each holds it");
	TAP_OK(w[2].mem_at == w[0].mem_at && w[3].nmem == w[0].nmem &&
		       !memcmp(w[3].mem, w[0].mem, w[0].nmem),
	       "... the same window, the same bytes");
	TAP_OK(copied(&w[1]) == 0x33333333u, "another word: its own bytes");
	TAP_OK(w[4].nmem == 0 && w[5].nmem == 0,
	       "no word and a misaligned one: nothing copied, nothing stale");
	TAP_OK(ws[0] == &w[0] && ws[5] == &w[5], "the caller's order is kept");
}

/* More waits than one batch holds, on two words: all read. */
static void test_many(void)
{
	enum { N = 700 };
	struct sw_dump d;
	struct sw_thread *t = calloc(N, sizeof(*t));
	struct sw_wait *w = calloc(N, sizeof(*w));
	size_t got, bad = 0;

	if (!t || !w) {
		TAP_OK(0, "memory");
		free(t);
		free(w);
		return;
	}
	memset(&d, 0, sizeof(d));
	d.threads = t;
	d.nthreads = N;
	for (size_t i = 0; i < N; i++) {
		if (i % 7 == 3)
			continue; /* a thread in no futex wait */
		w[i].addr = (uint64_t)(uintptr_t)&words[i % 2 ? 3 : 1];
		t[i].wait = &w[i];
	}
	got = waitmem_read(getpid(), &d);
	for (size_t i = 0; i < N; i++)
		if (t[i].wait &&
		    copied(&w[i]) != (i % 2 ? 0x44444444u : 0x22222222u))
			bad++;
	TAP_OK(got == N - N / 7 && bad == 0,
	       "%d waits on two words: %zu read, %zu wrong", N, got, bad);
	free(t);
	free(w);
}

int main(void)
{
	test_shared();
	test_many();
	return tap_done();
}
