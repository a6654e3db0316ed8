/*
 * log.c - priority-prefixed lines on stderr (log.h). Each line goes out in
 * one write(2), so lines from different threads never interleave.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "log.h"

static volatile int max_level = LOG_LVL_NOTICE;

void log_set_level(enum log_level lvl)
{
	max_level = (int)lvl;
}

int log_parse_level(const char *s, enum log_level *out)
{
	static const struct {
		const char *name;
		enum log_level lvl;
	} names[] = {
		{ "error", LOG_LVL_ERR },     { "warning", LOG_LVL_WARNING },
		{ "notice", LOG_LVL_NOTICE }, { "info", LOG_LVL_INFO },
		{ "debug", LOG_LVL_DEBUG },
	};

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		if (strcmp(s, names[i].name) == 0) {
			*out = names[i].lvl;
			return 0;
		}
	}
	return -EINVAL;
}

void log_msg(enum log_level lvl, const char *func, const char *fmt, ...)
{
	char line[1024];
	va_list ap;
	int n, m;

	if ((int)lvl > max_level)
		return;
	n = snprintf(line, sizeof(line), "<%d>", (int)lvl);
	if (lvl >= LOG_LVL_DEBUG && func)
		n += snprintf(line + n, sizeof(line) - (size_t)n, "%s: ", func);
	va_start(ap, fmt);
	m = vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
	va_end(ap);
	if (m < 0)
		return;
	n += m;
	if ((size_t)n > sizeof(line) - 2)
		n = (int)sizeof(line) - 2;
	/* One line per event: no embedded newline survives. */
	for (int i = 0; i < n; i++)
		if (line[i] == '\n')
			line[i] = ' ';
	line[n++] = '\n';
	(void)!write(STDERR_FILENO, line, (size_t)n);
}
