/*
 * test_procfs.c - the /proc parsers (src/model/procfs.c) on lines as the
 * kernel writes them and as a hostile thread name can make them: a name
 * holding ") (" and spaces, lines cut short, and the start time that pins
 * a process together with its pid.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "model/procfs.h"
#include "tap.h"

static void test_stat_lines(void)
{
	static const char full[] =
		"1234 (a) (b) c) S 1 1234 1234 0 -1 4194560 100 0 0 0 "
		"17 23 0 0 20 0 3 0 987654 10000000 300 18446744073709551615\n";
	static const char short15[] = "7 (x) R 1 7 7 0 -1 0 0 0 0 0 5 6";
	struct procfs_task t;

	TAP_OK(procfs_parse_stat(full, sizeof(full) - 1, &t) == 0,
	       "a full line parses");
	TAP_OK(!strcmp(t.name, "a) (b) c") && t.state == 'S',
	       "the name runs to the last ')' (%s)", t.name);
	TAP_OK(t.utime_ticks == 17 && t.stime_ticks == 23,
	       "utime and stime (%llu %llu)", (unsigned long long)t.utime_ticks,
	       (unsigned long long)t.stime_ticks);
	TAP_OK(t.start_ticks == 987654, "the start time, field 22 (%llu)",
	       (unsigned long long)t.start_ticks);
	TAP_OK(procfs_parse_stat(short15, sizeof(short15) - 1, &t) == 0 &&
		       t.utime_ticks == 5 && t.start_ticks == 0,
	       "a line cut after stime: no start time");
	TAP_OK(procfs_parse_stat("1 (x", 4, &t) != 0, "an unclosed name fails");
	TAP_OK(procfs_parse_stat("1 (x) S 1", 9, &t) != 0,
	       "a line cut before utime fails");
}

static void test_start_time(void)
{
	char buf[1024], *p;
	unsigned long long want = 0;
	uint64_t got = 0;
	FILE *f = fopen("/proc/self/stat", "r");
	size_t n = f ? fread(buf, 1, sizeof(buf) - 1, f) : 0;

	if (f)
		fclose(f);
	buf[n] = '\0';
	p = strrchr(buf, ')');
	/* After ") ": state, then fields 4 to 22. */
	if (p)
		sscanf(p + 2,
		       "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u "
		       "%*d %*d %*d %*d %*d %*d %llu",
		       &want);
	int rc = procfs_start_time(getpid(), &got);

	TAP_OK(rc == 0 && got == want && want > 0,
	       "this process's start time (%llu, want %llu)",
	       (unsigned long long)got, want);
	TAP_OK(procfs_start_time(0x3fffffff, &got) < 0,
	       "a pid that does not exist has none");
}

int main(void)
{
	test_stat_lines();
	test_start_time();
	return tap_done();
}
