/*
 * testutil.h - small helpers shared by the collector's tests: thread ids,
 * /proc readers, the monotonic clock, and queries on a dump's frames.
 *
 * Header-only (static inline), like tap.h. None of it is async-signal-safe
 * and none of it is meant for signal context.
 */
#ifndef SW_TESTUTIL_H
#define SW_TESTUTIL_H

#include <dirent.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "model/dump.h"
#include "stackwatch.h"

static inline pid_t tu_gettid(void)
{
	return (pid_t)syscall(SYS_gettid);
}

/* CLOCK_MONOTONIC in nanoseconds. */
static inline uint64_t tu_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline void tu_sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) != 0)
		;
}

/* The scheduler state letter of one of our threads, or '?' when gone. */
static inline char tu_thread_state(pid_t tid)
{
	char path[64], buf[512];
	FILE *f;
	char *p;

	snprintf(path, sizeof(path), "/proc/self/task/%d/stat", (int)tid);
	f = fopen(path, "r");
	if (!f)
		return '?';
	p = fgets(buf, sizeof(buf), f);
	fclose(f);
	if (!p || !(p = strrchr(buf, ')')) || p[1] != ' ')
		return '?';
	return p[2];
}

/*
 * Polls until thread tid is in state `want` (e.g. 'S' asleep, 'D' in an
 * uninterruptible wait). A readiness check, not a timing assumption: gives
 * up only after 30 s, which means something is broken. Returns true when
 * the state was reached.
 */
static inline bool tu_wait_state(pid_t tid, char want)
{
	for (int i = 0; i < 30000; i++) {
		if (tu_thread_state(tid) == want)
			return true;
		tu_sleep_ms(1);
	}
	return false;
}

/* Number of entries in /proc/self/task, or -1. */
static inline int tu_count_tasks(void)
{
	DIR *dir = opendir("/proc/self/task");
	struct dirent *e;
	int n = 0;

	if (!dir)
		return -1;
	while ((e = readdir(dir)) != NULL)
		if (e->d_name[0] != '.')
			n++;
	closedir(dir);
	return n;
}

/* True when name is fn, or fn followed by a C++ parameter list. */
static inline bool tu_name_is(const char *name, const char *fn)
{
	size_t n = strlen(fn);

	if (!name || strncmp(name, fn, n) != 0)
		return false;
	return name[n] == '\0' || name[n] == '(';
}

/* The thread with this tid in d, or NULL. */
static inline const struct sw_thread *tu_find_thread(const struct sw_dump *d,
						     pid_t tid)
{
	for (size_t i = 0; i < d->nthreads; i++)
		if (d->threads[i].tid == tid)
			return &d->threads[i];
	return NULL;
}

/* The first thread of d named name, or NULL. */
static inline const struct sw_thread *tu_thread_named(const struct sw_dump *d,
						      const char *name)
{
	for (size_t i = 0; i < d->nthreads; i++)
		if (strcmp(d->threads[i].name, name) == 0)
			return &d->threads[i];
	return NULL;
}

/* A dump of this process (symbolized or raw), or NULL when it failed. */
static inline struct sw_dump *tu_dump_self(int symbolize, int timeout_ms)
{
	struct sw_dump_opts o;
	struct sw_dump *d = NULL;

	sw_dump_opts_init(&o);
	o.symbolize = symbolize;
	o.timeout_ms = timeout_ms;
	if (sw_dump_self(&o, &d) != 0)
		return NULL;
	return d;
}

/* How many of t's frames are function fn (see tu_name_is). */
static inline int tu_count_fn(const struct sw_thread *t, const char *fn)
{
	int n = 0;

	for (size_t i = 0; i < t->nframes; i++)
		if (tu_name_is(t->frames[i].function, fn))
			n++;
	return n;
}

/* True when one of t's frames has a function name containing s. */
static inline bool tu_has_fn_substr(const struct sw_thread *t, const char *s)
{
	for (size_t i = 0; i < t->nframes; i++)
		if (t->frames[i].function && strstr(t->frames[i].function, s))
			return true;
	return false;
}

/* The first frame names of t joined by " < ", for diagnostics. */
static inline const char *tu_describe_stack(const struct sw_thread *t,
					    char *buf, size_t size)
{
	size_t len = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < t->nframes && i < 8 && len + 1 < size; i++) {
		int n = snprintf(buf + len, size - len, "%s%s", i ? " < " : "",
				 t->frames[i].function ? t->frames[i].function
						       : "?");
		if (n < 0)
			break;
		len += (size_t)n;
	}
	if (t->nframes == 0)
		snprintf(buf, size, "(no frames, %zu ips)", t->nips);
	return buf;
}

#endif /* SW_TESTUTIL_H */
