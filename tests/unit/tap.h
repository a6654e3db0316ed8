/*
 * tap.h - a tiny header-only test harness in the spirit of TAP.
 *
 * Each check prints one line to stdout, "ok - message" or
 * "not ok - message (file:line)", and flushes it at once so that a test
 * that crashes later still leaves every line it got to. tests/run.sh
 * counts these lines. tap_done() ends a test program: it returns the exit
 * status, 0 when every check passed and 1 otherwise.
 *
 *	TAP_OK(n == 3, "three threads (got %d)", n);
 *	TAP_SKIP("no IPv6 on this host");
 *	return tap_done();
 *
 * Everything is static, so each test program has its own counters.
 * Not thread-safe: call the macros from one thread at a time.
 */
#ifndef SW_TAP_H
#define SW_TAP_H

#include <stdarg.h>
#include <stdio.h>

static int tap_passed;
static int tap_failed;

/* Prints one result line and counts it. Returns ok, for chaining. */
static inline int tap_report(int ok, const char *file, int line,
			     const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static inline int tap_report(int ok, const char *file, int line,
			     const char *fmt, ...)
{
	va_list ap;

	fputs(ok ? "ok - " : "not ok - ", stdout);
	va_start(ap, fmt);
	vfprintf(stdout, fmt, ap);
	va_end(ap);
	if (!ok)
		fprintf(stdout, " (%s:%d)", file, line);
	fputc('\n', stdout);
	fflush(stdout);
	if (ok)
		tap_passed++;
	else
		tap_failed++;
	return ok;
}

/* Prints a skipped check, which counts as passed. */
static inline void tap_skip(const char *fmt, ...)
	__attribute__((format(printf, 1, 2)));

static inline void tap_skip(const char *fmt, ...)
{
	va_list ap;

	fputs("ok - # SKIP ", stdout);
	va_start(ap, fmt);
	vfprintf(stdout, fmt, ap);
	va_end(ap);
	fputc('\n', stdout);
	fflush(stdout);
	tap_passed++;
}

/* Prints a diagnostic line ("# ..."), which run.sh does not count. */
static inline void tap_note(const char *fmt, ...)
	__attribute__((format(printf, 1, 2)));

static inline void tap_note(const char *fmt, ...)
{
	va_list ap;

	fputs("# ", stdout);
	va_start(ap, fmt);
	vfprintf(stdout, fmt, ap);
	va_end(ap);
	fputc('\n', stdout);
	fflush(stdout);
}

/* Number of failed checks so far. */
static inline int tap_failures(void)
{
	return tap_failed;
}

/* Prints a summary comment; returns 0 if nothing failed, else 1. */
static inline int tap_done(void)
{
	fprintf(stdout, "# %d passed, %d failed\n", tap_passed, tap_failed);
	fflush(stdout);
	return tap_failed ? 1 : 0;
}

#define TAP_OK(cond, ...) tap_report(!!(cond), __FILE__, __LINE__, __VA_ARGS__)
#define TAP_SKIP(...) tap_skip(__VA_ARGS__)
#define TAP_NOTE(...) tap_note(__VA_ARGS__)

#endif /* SW_TAP_H */
