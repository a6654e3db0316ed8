/*
 * test_perfmap.c - the perf map parser (src/symbols/perfmap.c) on maps
 * written by hand: node's form (no 0x) and the JVM's (0x and padding),
 * lines that do not parse, code generated again at the same address (the
 * later line wins), overlaps, the range boundaries, names with control
 * characters and overlong names, and bytes that are not text at all.
 *
 * Then perfmap_read() on real files: lines across its 64 KiB reads, a
 * line longer than a read, the last 64 MiB of a longer (sparse) file with
 * the line cut at its start skipped; and a budget: a parse that would take
 * more stops with the budget's error having taken no more than allowed,
 * and one within it keeps what it took less what it gave back.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "symbols/perfmap.h"
#include "tap.h"

static const char *at(const struct perfmap *pm, uint64_t ip)
{
	const char *n = perfmap_lookup(pm, ip, NULL);

	return n ? n : "(none)";
}

/* A budget of max bytes that counts what it gave. */
struct budget {
	size_t max;
	size_t taken;
	int asked;
};

static int take(void *arg, size_t more)
{
	struct budget *b = arg;

	b->asked++;
	if (more > b->max - b->taken)
		return -EFBIG;
	b->taken += more;
	return 0;
}

/* A temp file holding len bytes of text; its fd (unlinked), or -1. */
static int temp_file(const char *text, size_t len)
{
	char path[] = "/tmp/sw-perfmap-XXXXXX";
	int fd = mkstemp(path);

	if (fd < 0)
		return -1;
	unlink(path);
	if (write(fd, text, len) != (ssize_t)len) {
		close(fd);
		return -1;
	}
	return fd;
}

/* perfmap_read() of all of fd with budget b (NULL: none). */
static int read_fd(int fd, struct budget *b, struct perfmap **pm)
{
	struct perfmap_budget pb = { take, b };
	off_t size = lseek(fd, 0, SEEK_END);

	return perfmap_read(fd, size, b ? &pb : NULL, pm);
}

/* 5000 lines of about 30 bytes: many straddle a 64 KiB read. */
static void test_read_pieces(void)
{
	size_t cap = 5000 * 40, len = 0;
	char *text = malloc(cap), name[32];
	struct perfmap *pm = NULL;
	int fd, rc, wrong = 0;

	for (int i = 0; i < 5000; i++)
		len += (size_t)snprintf(text + len, cap - len,
					"%x 10 piece%d\n", 0x100000 + i * 16,
					i);
	fd = temp_file(text, len);
	rc = fd >= 0 ? read_fd(fd, NULL, &pm) : -1;
	TAP_OK(rc == 0 && perfmap_count(pm) == 5000,
	       "a file of 5000 lines is read in pieces: %zu entries",
	       perfmap_count(pm));
	for (int i = 0; i < 5000; i++) {
		snprintf(name, sizeof(name), "piece%d", i);
		wrong += strcmp(at(pm, 0x100000 + (uint64_t)i * 16 + 3),
				name) != 0;
	}
	TAP_OK(!wrong,
	       "every line found whole, wherever the reads cut it "
	       "(%d wrong)",
	       wrong);
	perfmap_free(pm);
	if (fd >= 0)
		close(fd);
	free(text);
}

/* A line of 100,000 bytes between two ordinary ones. */
static void test_read_long_line(void)
{
	size_t len = 0, cap = 100200;
	char *text = malloc(cap);
	struct perfmap *pm = NULL;
	int fd;

	len += (size_t)snprintf(text, cap, "1000 10 before\n2000 10 ");
	memset(text + len, 'y', 100000);
	len += 100000;
	len += (size_t)snprintf(text + len, cap - len, "\n3000 10 after\n");
	fd = temp_file(text, len);
	TAP_OK(fd >= 0 && read_fd(fd, NULL, &pm) == 0 &&
		       !strcmp(at(pm, 0x1000), "before") &&
		       strlen(at(pm, 0x2000)) == PERFMAP_NAME_MAX &&
		       !strcmp(at(pm, 0x3000), "after"),
	       "a line longer than a read: cut, and the lines around it "
	       "whole");
	perfmap_free(pm);
	if (fd >= 0)
		close(fd);
	free(text);
}

/*
 * A sparse file 4 KiB longer than PERFMAP_MAX_BYTES: the line that the
 * last 64 MiB cut is skipped, a line after it kept, 64 MiB of zeros (one
 * line that does not parse) skipped, and the last line, without a
 * newline, kept.
 */
static void test_read_tail(void)
{
	static const char cut[] = "a000 10 cutline\n",
			  kept[] = "b000 10 kept\n", last[] = "\nc000 10 last";
	off_t size = (off_t)PERFMAP_MAX_BYTES + 4096;
	struct perfmap *pm = NULL;
	char path[] = "/tmp/sw-perfmap-XXXXXX";
	int fd = mkstemp(path);
	size_t n;
	bool ok;

	if (fd >= 0)
		unlink(path);
	ok = fd >= 0 && ftruncate(fd, size) == 0 &&
	     pwrite(fd, cut, sizeof(cut) - 1, 4090) == sizeof(cut) - 1 &&
	     pwrite(fd, kept, sizeof(kept) - 1, 4090 + sizeof(cut) - 1) ==
		     sizeof(kept) - 1 &&
	     pwrite(fd, last, sizeof(last) - 1,
		    size - (off_t)sizeof(last) + 1) == sizeof(last) - 1;
	ok = ok && perfmap_read(fd, size, NULL, &pm) == 0;
	n = perfmap_count(pm);
	TAP_OK(ok && !perfmap_lookup(pm, 0xa000, NULL) &&
		       !strcmp(at(pm, 0xb000), "kept") &&
		       !strcmp(at(pm, 0xc000), "last") && n == 2,
	       "the last 64 MiB: the line cut at its start skipped, the "
	       "others kept (%zu)",
	       n);
	perfmap_free(pm);
	if (fd >= 0)
		close(fd);
}

/* 20,000 entries (about 1 MiB parsed) against budgets. */
static void test_budget(void)
{
	size_t cap = 20000 * 48, len = 0;
	char *text = malloc(cap);
	struct budget small = { 256 << 10, 0, 0 }, big = { 8 << 20, 0, 0 };
	struct perfmap *pm = NULL;
	int fd, rc;

	for (int i = 0; i < 20000; i++)
		len += (size_t)snprintf(text + len, cap - len,
					"%x 10 LazyCompile:*budget%d\n",
					0x100000 + i * 16, i);
	fd = temp_file(text, len);
	rc = fd >= 0 ? read_fd(fd, &small, &pm) : -1;
	TAP_OK(rc == -EFBIG && !pm && small.taken <= small.max,
	       "over a budget of 256 KiB: the budget's error, %zu bytes "
	       "taken (%d asks)",
	       small.taken, small.asked);
	rc = fd >= 0 ? read_fd(fd, &big, &pm) : -1;
	TAP_OK(rc == 0 && perfmap_count(pm) == 20000 &&
		       perfmap_bytes(pm) <= big.taken &&
		       perfmap_bytes(pm) > 20000 * 24,
	       "within 8 MiB: all of it, holding %zu of the %zu bytes taken",
	       perfmap_bytes(pm), big.taken);
	TAP_OK(!strcmp(at(pm, 0x100000 + 19999 * 16),
		       "LazyCompile:*budget19999"),
	       "and its last entry");
	perfmap_free(pm);
	if (fd >= 0)
		close(fd);
	free(text);
}

int main(void)
{
	static const char map[] =
		"7f3480005f00 248 JS:*hotInner /tmp/hot.js:1:18\n"
		"0x00007fd6c0ec7600 0x0000000000000278 double Hot.inner(int)\n"
		"garbage line\n"
		"12345\n"
		"zz 10 bad start\n"
		"1000 0 empty size\n"
		"2000 10\n"
		"3000 100 old\n"
		"3000 100 new\r\n"
		"4000 100 outer\n"
		"4050 10 inner\n"
		"ffffffffffffffff 10 wraps past 2^64\n"
		"11111111111111111 10 too many digits\n"
		"5000 10 tab\there\n";
	char *big = malloc(PERFMAP_NAME_MAX * 2 + 64), junk[4096];
	struct perfmap *pm = NULL;
	uint64_t start = 0, lo, hi;
	const char *n;

	TAP_OK(perfmap_parse(map, sizeof(map) - 1, &pm) == 0 && pm,
	       "a map parses");
	TAP_OK(strcmp(at(pm, 0x7f3480006013ULL),
		      "JS:*hotInner /tmp/hot.js:1:18") == 0,
	       "node's line (no 0x): %s", at(pm, 0x7f3480006013ULL));
	n = perfmap_lookup(pm, 0x7fd6c0ec7600ULL + 0x277, &start);
	TAP_OK(n && !strcmp(n, "double Hot.inner(int)") &&
		       start == 0x7fd6c0ec7600ULL,
	       "the JVM's line (0x, padded), its last byte, its start");
	TAP_OK(!perfmap_lookup(pm, 0x7fd6c0ec7600ULL + 0x278, NULL),
	       "one past the end is outside");
	TAP_OK(!strcmp(at(pm, 0x3050), "new"),
	       "the same start again: the later line wins (and CR is cut)");
	TAP_OK(!strcmp(at(pm, 0x4020), "outer") &&
		       !strcmp(at(pm, 0x4055), "inner") &&
		       !strcmp(at(pm, 0x4070), "(none)"),
	       "an overlapping range is cut where the next begins");
	TAP_OK(!strcmp(at(pm, 0x1000), "(none)") &&
		       !strcmp(at(pm, 0x2005), "(none)"),
	       "a zero size or no name: skipped");
	TAP_OK(!strcmp(at(pm, 0x5000), "tab?here"),
	       "control characters in a name become ?");
	TAP_OK(perfmap_count(pm) == 6, "6 entries kept of 14 lines (got %zu)",
	       perfmap_count(pm));
	perfmap_range(pm, &lo, &hi);
	TAP_OK(lo == 0x3000 && hi == 0x7fd6c0ec7600ULL + 0x278,
	       "the range spans every entry");
	TAP_OK(!perfmap_lookup(NULL, 0x3000, NULL) &&
		       !perfmap_lookup(pm, 0, NULL),
	       "no map, or below every entry: nothing");
	perfmap_free(pm);

	/* A name past the cap is cut; bytes that are not text are lines
	 * that do not parse; an empty file is an empty map. */
	if (big) {
		int len = snprintf(big, 32, "a000 10 ");

		memset(big + len, 'x', PERFMAP_NAME_MAX * 2);
		big[len + PERFMAP_NAME_MAX * 2] = '\n';
		TAP_OK(perfmap_parse(big,
				     (size_t)len + PERFMAP_NAME_MAX * 2 + 1,
				     &pm) == 0 &&
			       strlen(at(pm, 0xa000)) == PERFMAP_NAME_MAX,
		       "a name is cut at %d bytes", PERFMAP_NAME_MAX);
		perfmap_free(pm);
	}
	srand(7);
	for (size_t i = 0; i < sizeof(junk); i++)
		junk[i] = (char)(rand() & 0xff);
	TAP_OK(perfmap_parse(junk, sizeof(junk), &pm) == 0,
	       "random bytes parse (to whatever lines they hold)");
	perfmap_free(pm);
	TAP_OK(perfmap_parse("", 0, &pm) == 0 && perfmap_count(pm) == 0,
	       "an empty file is an empty map");
	perfmap_free(pm);
	free(big);
	test_read_pieces();
	test_read_long_line();
	test_read_tail();
	test_budget();
	return tap_done();
}
