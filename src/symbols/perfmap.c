/*
 * perfmap.c - parsing and looking up perf maps (perfmap.h).
 *
 * Entries are sorted by start and looked up by binary search. Overlaps
 * are resolved once, after sorting: of entries with the same start the
 * one written last is kept, and an entry that runs into the next one is
 * cut where that one begins (JIT code that was freed and generated
 * again). So the table is a set of disjoint ranges.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "perfmap.h"

struct pm_entry {
	uint64_t start;
	uint64_t end;
	size_t line; /* order in the file: later wins */
	char *name;
};

struct perfmap {
	struct pm_entry *e;
	size_t n;
};

/* Parses a hex number at *p (an optional 0x); false when there is none. */
static bool parse_hex(const char **p, const char *end, uint64_t *out)
{
	const char *s = *p;
	uint64_t v = 0;
	int digits = 0;

	if (end - s > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X'))
		s += 2;
	for (; s < end; s++) {
		int d;

		if (*s >= '0' && *s <= '9')
			d = *s - '0';
		else if (*s >= 'a' && *s <= 'f')
			d = *s - 'a' + 10;
		else if (*s >= 'A' && *s <= 'F')
			d = *s - 'A' + 10;
		else
			break;
		if (++digits > 16)
			return false;
		v = v << 4 | (uint64_t)d;
	}
	if (!digits)
		return false;
	*p = s;
	*out = v;
	return true;
}

/* One line [s, end): appended to pm when it parses. 0 or -ENOMEM. */
static int parse_line(struct perfmap *pm, size_t *cap, const char *s,
		      const char *end, size_t line)
{
	uint64_t start, size;
	struct pm_entry *e;
	size_t n;

	if (!parse_hex(&s, end, &start) || s == end || *s != ' ')
		return 0;
	s++;
	if (!parse_hex(&s, end, &size) || s == end || *s != ' ' || !size ||
	    start + size < start)
		return 0;
	s++;
	while (end > s && (end[-1] == '\r' || end[-1] == ' '))
		end--;
	if (s == end || pm->n >= PERFMAP_MAX_ENTRIES)
		return 0;
	if (pm->n == *cap) {
		size_t ncap = *cap ? *cap * 2 : 256;
		void *ne = realloc(pm->e, ncap * sizeof(*pm->e));

		if (!ne)
			return -ENOMEM;
		pm->e = ne;
		*cap = ncap;
	}
	n = (size_t)(end - s);
	if (n > PERFMAP_NAME_MAX)
		n = PERFMAP_NAME_MAX;
	e = &pm->e[pm->n];
	e->name = malloc(n + 1);
	if (!e->name)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) /* no NUL or control inside */
		e->name[i] = (unsigned char)s[i] < 0x20 ? '?' : s[i];
	e->name[n] = '\0';
	e->start = start;
	e->end = start + size;
	e->line = line;
	pm->n++;
	return 0;
}

static int by_start(const void *a, const void *b)
{
	const struct pm_entry *x = a, *y = b;

	if (x->start != y->start)
		return x->start < y->start ? -1 : 1;
	return x->line < y->line ? -1 : x->line > y->line;
}

/* Sorts and makes the ranges disjoint (see the top of the file). */
static void settle(struct perfmap *pm)
{
	size_t w = 0;

	if (pm->n)
		qsort(pm->e, pm->n, sizeof(*pm->e), by_start);
	for (size_t i = 0; i < pm->n; i++) {
		/* The last of a run with the same start wins. */
		if (i + 1 < pm->n && pm->e[i + 1].start == pm->e[i].start) {
			free(pm->e[i].name);
			continue;
		}
		pm->e[w++] = pm->e[i];
	}
	pm->n = w;
	for (size_t i = 0; i + 1 < pm->n; i++)
		if (pm->e[i].end > pm->e[i + 1].start)
			pm->e[i].end = pm->e[i + 1].start;
}

int perfmap_parse(const char *buf, size_t len, struct perfmap **out)
{
	struct perfmap *pm = calloc(1, sizeof(*pm));
	const char *p = buf, *end = buf + len;
	size_t cap = 0, line = 0;

	*out = NULL;
	if (!pm)
		return -ENOMEM;
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		const char *le = nl ? nl : end;

		if (parse_line(pm, &cap, p, le, line++) < 0) {
			perfmap_free(pm);
			return -ENOMEM;
		}
		p = nl ? nl + 1 : end;
	}
	settle(pm);
	*out = pm;
	return 0;
}

const char *perfmap_lookup(const struct perfmap *pm, uint64_t ip,
			   uint64_t *start)
{
	size_t lo = 0, hi = pm ? pm->n : 0;

	while (lo < hi) { /* the first entry starting after ip */
		size_t mid = lo + (hi - lo) / 2;

		if (pm->e[mid].start <= ip)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == 0 || ip >= pm->e[lo - 1].end)
		return NULL;
	if (start)
		*start = pm->e[lo - 1].start;
	return pm->e[lo - 1].name;
}

size_t perfmap_count(const struct perfmap *pm)
{
	return pm ? pm->n : 0;
}

void perfmap_range(const struct perfmap *pm, uint64_t *lo, uint64_t *hi)
{
	*lo = pm && pm->n ? pm->e[0].start : 0;
	*hi = pm && pm->n ? pm->e[pm->n - 1].end : 0;
}

void perfmap_free(struct perfmap *pm)
{
	if (!pm)
		return;
	for (size_t i = 0; i < pm->n; i++)
		free(pm->e[i].name);
	free(pm->e);
	free(pm);
}
