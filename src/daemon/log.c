/*
 * log.c - one line per event on stderr (log.h). Each line goes out in one
 * write(2), so lines from different threads never interleave.
 *
 * When stderr is the journal's stream (systemd says so in JOURNAL_STREAM,
 * "DEVICE:INODE" of that stream), each line starts with its syslog
 * priority, "<4>", which journald takes as the line's priority and drops.
 * Anywhere else (a terminal, a file, a pipe) such a prefix would only be
 * noise: an error or a warning says so in words ("warning: ..."), the
 * other levels print the message alone.
 *
 * Messages carry what targets chose (thread and program names, command
 * lines, paths), so every byte that could forge or disguise a line is
 * written as \xNN: controls (C0 but the line's own end, DEL, C1), the
 * invisible and bidirectional formatting characters of utf8_unsafe(), and
 * each byte that is not valid UTF-8; a backslash is doubled, so that an
 * escape in the log always means a byte that was escaped. Valid UTF-8
 * otherwise stays as it is, so names in any script remain readable.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "log.h"
#include "model/utf8.h"

#define LOG_LINE 1024 /* bytes of one line, its newline included */

static volatile int max_level = LOG_LVL_NOTICE;
static volatile int to_journal = -1; /* -1: not yet known */

/* Whether stderr is the stream systemd connected to the journal. */
static bool stderr_is_journal(void)
{
	const char *env = getenv("JOURNAL_STREAM");
	unsigned long long dev, ino;
	struct stat st;
	char end;

	if (!env || sscanf(env, "%llu:%llu%c", &dev, &ino, &end) != 2 ||
	    fstat(STDERR_FILENO, &st) < 0)
		return false;
	return (unsigned long long)st.st_dev == dev &&
	       (unsigned long long)st.st_ino == ino;
}

void log_set_level(enum log_level lvl)
{
	max_level = (int)lvl;
	to_journal = stderr_is_journal();
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

/*
 * Appends the len bytes of msg to line, which holds n bytes and has room
 * for cap, escaped as the file comment says; stops before a character
 * whose bytes or escape would not fit whole. Returns the new length.
 * Async-signal-safe (no allocation, no locale).
 */
static size_t escape(char *line, size_t n, size_t cap, const char *msg,
		     size_t len)
{
	static const char hex[] = "0123456789abcdef";
	const unsigned char *s = (const unsigned char *)msg;
	size_t i = 0;

	while (i < len) {
		uint32_t cp = 0;
		/* msg is NUL-terminated: a sequence never reads past it. */
		size_t k = utf8_seq(s + i, &cp);
		bool bad = k == 0 || i + k > len || utf8_unsafe(cp);

		if (bad) {
			k = k == 0 || i + k > len ? 1 : k;
			if (n + 4 * k > cap)
				break;
			for (size_t j = 0; j < k; j++) {
				line[n++] = '\\';
				line[n++] = 'x';
				line[n++] = hex[s[i + j] >> 4];
				line[n++] = hex[s[i + j] & 0xf];
			}
		} else if (cp == '\\') {
			if (n + 2 > cap)
				break;
			line[n++] = '\\';
			line[n++] = '\\';
		} else {
			if (n + k > cap)
				break;
			memcpy(line + n, s + i, k);
			n += k;
		}
		i += k;
	}
	return n;
}

void log_msg(enum log_level lvl, const char *func, const char *fmt, ...)
{
	char msg[LOG_LINE], line[LOG_LINE];
	va_list ap;
	size_t n, len;
	int m;

	if ((int)lvl > max_level)
		return;
	va_start(ap, fmt);
	m = vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (m < 0)
		return;
	len = (size_t)m < sizeof(msg) ? (size_t)m : sizeof(msg) - 1;
	/* A message's own line end (libmicrohttpd's have one) is ours. */
	while (len > 0 && msg[len - 1] == '\n')
		msg[--len] = '\0';
	if (to_journal < 0)
		to_journal = stderr_is_journal();
	if (to_journal)
		m = snprintf(line, sizeof(line), "<%d>", (int)lvl);
	else
		m = snprintf(line, sizeof(line), "%s",
			     lvl <= LOG_LVL_ERR	      ? "error: "
			     : lvl == LOG_LVL_WARNING ? "warning: "
			     : lvl >= LOG_LVL_DEBUG   ? "debug: "
						      : "");
	n = (size_t)m;
	if (lvl >= LOG_LVL_DEBUG && func) {
		m = snprintf(line + n, sizeof(line) - n, "%s: ", func);
		n = m < 0 ? n : n + (size_t)m;
		if (n > sizeof(line) - 1)
			n = sizeof(line) - 1;
	}
	/* One line per event: no byte of it can end it or start another. */
	n = escape(line, n, sizeof(line) - 1, msg, len);
	line[n++] = '\n';
	(void)!write(STDERR_FILENO, line, n);
}
