/*
 * perfmap.c - parsing and looking up perf maps (perfmap.h).
 *
 * Entries are sorted by start and looked up by binary search. Overlaps
 * are resolved once, after sorting: of entries with the same start the
 * one written last is kept, and an entry that runs into the next one is
 * cut where that one begins (JIT code that was freed and generated
 * again). So the table is a set of disjoint ranges.
 *
 * A map lives in two regions of pages of its own: its entries (24 bytes
 * each) and their names, packed one after another. A region grows by a
 * quarter at a time (mremap moves no bytes), each growth asked of the
 * budget before it is made, and shrinks to what it holds when the parse
 * ends; freeing a map hands its pages back to the system at once, whatever
 * the allocator would have kept. The file is read through one buffer of
 * 64 KiB, not at once.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "perfmap.h"

#define REGION_MIN 16384u /* the first mapping of a region */
#define READ_CHUNK 65536u /* bytes of the file read at a time */
#define PAGE_ROUND 4096u  /* regions are whole pages of at least this */

struct pm_entry {
	uint64_t start;
	uint64_t end;
	uint32_t line; /* order in the file: later wins */
	uint32_t name; /* offset of its name in names */
};

/* Pages mapped for one table; p NULL when size is 0. */
struct region {
	char *p;
	size_t size; /* mapped */
	size_t used;
};

struct perfmap {
	struct region entries; /* struct pm_entry[n] */
	struct region names;   /* NUL-terminated names */
	size_t n;
	uint32_t lines;			     /* seen so far */
	const struct perfmap_budget *budget; /* during the parse only */
};

static size_t round_page(size_t n)
{
	return (n + PAGE_ROUND - 1) & ~(size_t)(PAGE_ROUND - 1);
}

static int take(struct perfmap *pm, size_t more)
{
	if (!pm->budget || !pm->budget->take)
		return 0;
	return pm->budget->take(pm->budget->arg, more);
}

/* Moves r to size bytes (0: unmapped). 0 or -ENOMEM; r unchanged then. */
static int region_resize(struct region *r, size_t size)
{
	void *p;

	if (size == r->size)
		return 0;
	if (!size) {
		munmap(r->p, r->size);
		r->p = NULL;
		r->size = 0;
		return 0;
	}
	p = r->p ? mremap(r->p, r->size, size, MREMAP_MAYMOVE)
		 : mmap(NULL, size, PROT_READ | PROT_WRITE,
			MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return -ENOMEM;
	r->p = p;
	r->size = size;
	return 0;
}

/*
 * Room for more bytes in r: a quarter more than it has (at least what is
 * needed), or just what is needed when the budget has no room for the
 * quarter. The growth is taken from the budget before it is mapped; on
 * an error, what was taken stays taken (the caller gives it all back).
 */
static int region_room(struct perfmap *pm, struct region *r, size_t more)
{
	size_t need, want;
	int rc;

	if (r->size - r->used >= more)
		return 0;
	if (more > PERFMAP_MAX_BYTES * 2u)
		return -EFBIG;
	need = round_page(r->used + more);
	want = round_page(r->size + r->size / 4);
	if (want < REGION_MIN)
		want = REGION_MIN;
	if (want < need)
		want = need;
	rc = take(pm, want - r->size);
	if (rc < 0 && want > need) {
		want = need;
		rc = take(pm, want - r->size);
	}
	if (rc < 0)
		return rc;
	return region_resize(r, want);
}

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

/*
 * One line [s, end): appended to pm when it parses. 0, -ENOMEM, -EFBIG
 * (past what the table can index) or the budget's error.
 */
static int add_entry(struct perfmap *pm, uint32_t line, uint64_t start,
		     uint64_t size, const char *s, size_t n);

static int parse_line(struct perfmap *pm, const char *s, const char *end)
{
	uint32_t line = pm->lines;
	uint64_t start, size;

	if (pm->lines == UINT32_MAX)
		return -EFBIG;
	pm->lines++;
	if (!parse_hex(&s, end, &start) || s == end || *s != ' ')
		return 0;
	s++;
	if (!parse_hex(&s, end, &size) || s == end || *s != ' ' || !size ||
	    start + size < start)
		return 0;
	s++;
	while (end > s && (end[-1] == '\r' || end[-1] == ' '))
		end--;
	return add_entry(pm, line, start, size, s, (size_t)(end - s));
}

/*
 * Appends code [start, start + size) named by the n bytes at s (cut at
 * PERFMAP_NAME_MAX, control bytes replaced), as line number line: 0,
 * or -ENOMEM, -EFBIG, the budget's error. An empty name, an empty or
 * wrapping range, or a table full is skipped.
 */
static int add_entry(struct perfmap *pm, uint32_t line, uint64_t start,
		     uint64_t size, const char *s, size_t n)
{
	struct pm_entry *e;
	char *name;
	int rc;

	if (n == 0 || !size || start + size < start ||
	    pm->n >= PERFMAP_MAX_ENTRIES)
		return 0;
	if (n > PERFMAP_NAME_MAX)
		n = PERFMAP_NAME_MAX;
	if (pm->names.used + n + 1 > UINT32_MAX)
		return -EFBIG;
	rc = region_room(pm, &pm->entries, sizeof(*e));
	if (rc == 0)
		rc = region_room(pm, &pm->names, n + 1);
	if (rc < 0)
		return rc;
	name = pm->names.p + pm->names.used;
	for (size_t i = 0; i < n; i++) /* no NUL or control inside */
		name[i] = (unsigned char)s[i] < 0x20 ? '?' : s[i];
	name[n] = '\0';
	e = (struct pm_entry *)(void *)pm->entries.p + pm->n;
	e->start = start;
	e->end = start + size;
	e->line = line;
	e->name = (uint32_t)pm->names.used;
	pm->names.used += n + 1;
	pm->entries.used += sizeof(*e);
	pm->n++;
	return 0;
}

/* Every line of [p, end), the last one also without a newline. */
static int parse_lines(struct perfmap *pm, const char *p, const char *end)
{
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		int rc = parse_line(pm, p, nl ? nl : end);

		if (rc < 0)
			return rc;
		p = nl ? nl + 1 : end;
	}
	return 0;
}

static const struct pm_entry *entries(const struct perfmap *pm)
{
	return (const struct pm_entry *)(const void *)pm->entries.p;
}

static int by_start(const void *a, const void *b)
{
	const struct pm_entry *x = a, *y = b;

	if (x->start != y->start)
		return x->start < y->start ? -1 : 1;
	return x->line < y->line ? -1 : x->line > y->line;
}

/*
 * Sorts and makes the ranges disjoint (see the top of the file), then
 * gives back the pages the entries no longer need. The names of entries
 * dropped stay where they are: they were paid for.
 */
static void settle(struct perfmap *pm)
{
	struct pm_entry *e = (struct pm_entry *)(void *)pm->entries.p;
	size_t w = 0;

	if (pm->n)
		qsort(e, pm->n, sizeof(*e), by_start);
	for (size_t i = 0; i < pm->n; i++) {
		/* The last of a run with the same start wins. */
		if (i + 1 < pm->n && e[i + 1].start == e[i].start)
			continue;
		e[w++] = e[i];
	}
	pm->n = w;
	pm->entries.used = w * sizeof(*e);
	for (size_t i = 0; i + 1 < pm->n; i++)
		if (e[i].end > e[i + 1].start)
			e[i].end = e[i + 1].start;
	/* Shrinking never fails: a failure keeps the larger mapping. */
	(void)region_resize(&pm->entries, round_page(pm->entries.used));
	(void)region_resize(&pm->names, round_page(pm->names.used));
}

/* An empty map of budget (which may be NULL), its struct taken from it. */
static int begin(const struct perfmap_budget *budget, struct perfmap **out)
{
	struct perfmap *pm;
	int rc;

	*out = NULL;
	if (budget && budget->take) {
		rc = budget->take(budget->arg, sizeof(*pm));
		if (rc < 0)
			return rc;
	}
	pm = calloc(1, sizeof(*pm));
	if (!pm)
		return -ENOMEM;
	pm->budget = budget;
	*out = pm;
	return 0;
}

/* Ends pm's parse with rc: settled into *out, or freed. Returns rc. */
static int finish(struct perfmap *pm, int rc, struct perfmap **out)
{
	*out = NULL;
	if (rc < 0) {
		perfmap_free(pm);
		return rc;
	}
	pm->budget = NULL;
	settle(pm);
	*out = pm;
	return 0;
}

int perfmap_parse(const char *buf, size_t len, struct perfmap **out)
{
	struct perfmap *pm;
	int rc = begin(NULL, &pm);

	if (rc < 0)
		return rc;
	return finish(pm, parse_lines(pm, buf, buf + len), out);
}

/*
 * Reads [from, size) of fd through buf (READ_CHUNK bytes) into pm, line
 * by line; skip: the first line is cut, and dropped. A line longer than
 * the buffer is parsed from its first READ_CHUNK bytes (its name is cut
 * far sooner) and the rest of it skipped.
 */
static int read_lines(struct perfmap *pm, int fd, off_t from, off_t size,
		      char *buf, bool skip)
{
	size_t have = 0;
	off_t pos = from;
	int rc = 0;

	while (pos < size && rc == 0) {
		size_t want = READ_CHUNK - have;
		const char *p = buf, *end, *nl;
		ssize_t r;

		if ((off_t)want > size - pos)
			want = (size_t)(size - pos);
		r = pread(fd, buf + have, want, pos);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		pos += r;
		end = buf + have + r;
		if (skip) { /* up to the end of a cut or overlong line */
			nl = memchr(p, '\n', (size_t)(end - p));
			p = nl ? nl + 1 : end;
			skip = !nl;
		}
		nl = memrchr(p, '\n', (size_t)(end - p));
		if (nl) {
			rc = parse_lines(pm, p, nl + 1);
			p = nl + 1;
		} else if (p == buf && end == buf + READ_CHUNK) {
			rc = parse_line(pm, p, end);
			p = end;
			skip = true;
		}
		have = (size_t)(end - p);
		memmove(buf, p, have);
	}
	if (rc == 0 && have && !skip)
		rc = parse_line(pm, buf, buf + have);
	return rc;
}

int perfmap_read(int fd, off_t size, const struct perfmap_budget *budget,
		 struct perfmap **out)
{
	off_t from = size > (off_t)PERFMAP_MAX_BYTES
			     ? size - (off_t)PERFMAP_MAX_BYTES
			     : 0;
	struct perfmap *pm;
	char *buf;
	int rc;

	*out = NULL;
	buf = malloc(READ_CHUNK);
	if (!buf)
		return -ENOMEM;
	rc = begin(budget, &pm);
	if (rc == 0)
		rc = finish(pm, read_lines(pm, fd, from, size, buf, from > 0),
			    out);
	free(buf);
	return rc;
}

int perfmap_build_begin(const struct perfmap_budget *budget,
			struct perfmap **pm)
{
	return begin(budget, pm);
}

int perfmap_build_add(struct perfmap *pm, uint64_t start, uint64_t end,
		      const char *name, size_t n)
{
	if (end <= start || pm->lines == UINT32_MAX)
		return 0;
	return add_entry(pm, pm->lines++, start, end - start, name, n);
}

int perfmap_build_end(struct perfmap *pm, int rc, struct perfmap **out)
{
	return finish(pm, rc, out);
}

bool perfmap_entry(const struct perfmap *pm, size_t i, uint64_t *start,
		   uint64_t *end, const char **name)
{
	const struct pm_entry *e;

	if (!pm || i >= pm->n)
		return false;
	e = entries(pm) + i;
	*start = e->start;
	*end = e->end;
	*name = pm->names.p + e->name;
	return true;
}

const char *perfmap_lookup(const struct perfmap *pm, uint64_t ip,
			   uint64_t *start)
{
	size_t lo = 0, hi = pm ? pm->n : 0;
	const struct pm_entry *e = pm ? entries(pm) : NULL;

	while (lo < hi) { /* the first entry starting after ip */
		size_t mid = lo + (hi - lo) / 2;

		if (e[mid].start <= ip)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == 0 || ip >= e[lo - 1].end)
		return NULL;
	if (start)
		*start = e[lo - 1].start;
	return pm->names.p + e[lo - 1].name;
}

size_t perfmap_count(const struct perfmap *pm)
{
	return pm ? pm->n : 0;
}

void perfmap_range(const struct perfmap *pm, uint64_t *lo, uint64_t *hi)
{
	*lo = pm && pm->n ? entries(pm)[0].start : 0;
	*hi = pm && pm->n ? entries(pm)[pm->n - 1].end : 0;
}

size_t perfmap_bytes(const struct perfmap *pm)
{
	return pm ? sizeof(*pm) + pm->entries.size + pm->names.size : 0;
}

void perfmap_free(struct perfmap *pm)
{
	if (!pm)
		return;
	(void)region_resize(&pm->entries, 0);
	(void)region_resize(&pm->names, 0);
	free(pm);
}
