/*
 * history.c - a target's samples as a ring (history.h).
 */
#include "history.h"

#include <errno.h>
#include <stdlib.h>

void sdump_get(struct sdump *sd)
{
	atomic_fetch_add(&sd->refs, 1);
}

void sdump_put(struct sdump *sd)
{
	if (!sd || atomic_fetch_sub(&sd->refs, 1) != 1)
		return;
	sw_dump_free(sd->d);
	free(sd);
}

struct sdump *history_at(const struct history *h, size_t i)
{
	return h->v[(h->head + i) % h->cap];
}

struct sdump *history_newest(const struct history *h)
{
	return h->n ? history_at(h, h->n - 1) : NULL;
}

/* Doubles the ring, its samples moved to the front in order. */
static int grow(struct history *h)
{
	size_t cap = h->cap ? h->cap * 2 : 16;
	struct sdump **v;

	/* NOLINTNEXTLINE(bugprone-sizeof-expression): pointers */
	v = malloc(cap * sizeof(*v));
	if (!v)
		return -ENOMEM;
	for (size_t i = 0; i < h->n; i++)
		v[i] = history_at(h, i);
	free(h->v);
	h->v = v;
	h->cap = cap;
	h->head = 0;
	return 0;
}

int history_push(struct history *h, struct sdump *sd)
{
	if (h->n == h->cap && grow(h) < 0)
		return -ENOMEM;
	h->v[(h->head + h->n) % h->cap] = sd;
	h->n++;
	return 0;
}

struct sdump *history_pop_oldest(struct history *h)
{
	struct sdump *sd;

	if (!h->n)
		return NULL;
	sd = h->v[h->head];
	h->head = (h->head + 1) % h->cap;
	h->n--;
	return sd;
}

struct sdump *history_pop_newest(struct history *h)
{
	struct sdump *sd;

	if (!h->n)
		return NULL;
	sd = history_at(h, h->n - 1);
	h->n--;
	return sd;
}

size_t history_find(const struct history *h, uint64_t mono_ns)
{
	size_t lo = 0, hi = h->n; /* the answer is lo - 1 */

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (history_at(h, mid)->mono_ns <= mono_ns)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo ? lo - 1 : SIZE_MAX;
}

void history_release(struct history *h)
{
	while (h->n)
		sdump_put(history_pop_oldest(h));
	free(h->v);
	h->v = NULL;
	h->cap = 0;
	h->head = 0;
}
