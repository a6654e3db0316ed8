/*
 * test_perfmap.c - the perf map parser (src/symbols/perfmap.c) on maps
 * written by hand: node's form (no 0x) and the JVM's (0x and padding),
 * lines that do not parse, code generated again at the same address (the
 * later line wins), overlaps, the range boundaries, names with control
 * characters and overlong names, and bytes that are not text at all.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "symbols/perfmap.h"
#include "tap.h"

static const char *at(const struct perfmap *pm, uint64_t ip)
{
	const char *n = perfmap_lookup(pm, ip, NULL);

	return n ? n : "(none)";
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
	return tap_done();
}
