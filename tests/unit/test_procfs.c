/*
 * test_procfs.c - the /proc parsers (src/model/procfs.c) on lines as the
 * kernel writes them and as a hostile thread name can make them: a name
 * holding ") (" and spaces, lines cut short, and the start time that pins
 * a process together with its pid.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
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

/* The fields by number, and the id lines of a status file. */
static void test_fields_and_ids(void)
{
	static const char stat[] =
		"9 (a) b) S 1 9 9 0 -1 4194560 1 0 0 0 2 3 0 0 20 0 1 0 77 "
		"4096 10 18446744073709551615 94000 95000 140000 0 0 0 0 0 0 "
		"0 0 0 17 1 0 0 0 0 0 96000 97000 98000 99000\n";
	static const char status[] = "Name:\tx\nUid:\t1000\t1001\t1002\t1003\n"
				     "Gid:\t5 6 7 8\nGroups:\t\nNgid:\t0\n";
	static const char groups[] = "Groups:\t4 24 27 \nX:\t1\n";
	static const char bad[] = "Uid:\t12x\n";
	uint64_t v = 0;
	uint32_t ids[8];
	int rc;

	rc = procfs_parse_stat_field(stat, sizeof(stat) - 1, 26, &v);
	TAP_OK(rc == 0 && v == 94000,
	       "field 26 (startcode) past a name with ')' (%llu)",
	       (unsigned long long)v);
	rc = procfs_parse_stat_field(stat, sizeof(stat) - 1, 47, &v);
	TAP_OK(rc == 0 && v == 98000, "field 47 (start_brk) (%llu)",
	       (unsigned long long)v);
	TAP_OK(procfs_parse_stat_field(stat, sizeof(stat) - 1, 60, &v) != 0,
	       "a field past the end of the line fails");
	TAP_OK(procfs_parse_status_ids(status, sizeof(status) - 1, "Uid", ids,
				       3) == 3 &&
		       ids[0] == 1000 && ids[1] == 1001 && ids[2] == 1002,
	       "the first three uids");
	TAP_OK(procfs_parse_status_ids(status, sizeof(status) - 1, "Gid", ids,
				       8) == 4 &&
		       ids[3] == 8,
	       "all four gids, blank-separated");
	TAP_OK(procfs_parse_status_ids(status, sizeof(status) - 1, "Groups",
				       ids, 8) == 0,
	       "an empty Groups line has no group");
	TAP_OK(procfs_parse_status_ids(groups, sizeof(groups) - 1, "Groups",
				       ids, 8) == 3 &&
		       ids[2] == 27,
	       "three groups");
	TAP_OK(procfs_parse_status_ids(bad, sizeof(bad) - 1, "Uid", ids, 8) ==
		       SW_EFORMAT,
	       "a malformed id fails");
	TAP_OK(procfs_parse_status_ids(bad, sizeof(bad) - 1, "Gid", ids, 8) ==
		       -ENOENT,
	       "a missing line is -ENOENT");
}

static int block_pipe[2];
static volatile uintptr_t blocker_local;
static volatile pid_t blocker_tid;

/* Notes where its stack is and its tid, then blocks in read(). */
static void *blocker(void *arg)
{
	char c;

	(void)arg;
	blocker_local = (uintptr_t)&c;
	blocker_tid = (pid_t)syscall(SYS_gettid);
	return read(block_pipe[0], &c, 1) < 0 ? NULL : arg;
}

/*
 * The syscall file of a thread blocked in read(): its sp just below the
 * thread's own locals, its pc set; a tid that does not exist is an
 * error.
 */
static void test_syscall(void)
{
	int taskfd = open("/proc/self/task", O_RDONLY | O_DIRECTORY);
	uint64_t sp = 0, pc = 0;
	pthread_t t;
	int rc = -1;

	if (pipe(block_pipe) < 0 || pthread_create(&t, NULL, blocker, NULL)) {
		TAP_OK(0, "a thread blocks in read()");
		return;
	}
	for (int i = 0; i < 2000; i++) {
		usleep(1000);
		if (blocker_tid &&
		    (rc = procfs_read_syscall(taskfd, blocker_tid, &sp, &pc)) ==
			    0)
			break;
	}
	TAP_OK(rc == 0 && sp < blocker_local && blocker_local - sp < 4096 &&
		       pc != 0,
	       "a thread in read(): sp 0x%llx just below its local at 0x%llx, "
	       "pc 0x%llx (rc %d)",
	       (unsigned long long)sp, (unsigned long long)blocker_local,
	       (unsigned long long)pc, rc);
	TAP_OK(procfs_read_syscall(taskfd, 0x7ffffff0, NULL, &pc) < 0,
	       "a thread that does not exist is an error");
	(void)!write(block_pipe[1], "x", 1);
	pthread_join(t, NULL);
	close(taskfd);
}

int main(void)
{
	test_stat_lines();
	test_start_time();
	test_fields_and_ids();
	test_syscall();
	return tap_done();
}
