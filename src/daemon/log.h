/*
 * log.h - the daemon's log: one line per event on stderr, prefixed with a
 * syslog priority "<N>" when stderr is the journal (JOURNAL_STREAM), with
 * "error: " or "warning: " elsewhere. Thread-safe. Bytes of
 * a message that could forge or disguise a line (controls, bidirectional
 * and invisible characters, invalid UTF-8) are written as \xNN (log.c).
 */
#ifndef SWD_LOG_H
#define SWD_LOG_H

enum log_level {
	LOG_LVL_ERR = 3,
	LOG_LVL_WARNING = 4,
	LOG_LVL_NOTICE = 5,
	LOG_LVL_INFO = 6,
	LOG_LVL_DEBUG = 7,
};

/* Lines above this level are dropped. Default: notice. */
void log_set_level(enum log_level lvl);

/* Parses "error", "warning", "notice", "info", "debug". 0 or -EINVAL. */
int log_parse_level(const char *s, enum log_level *out);

void log_msg(enum log_level lvl, const char *func, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

#define log_err(...) log_msg(LOG_LVL_ERR, __func__, __VA_ARGS__)
#define log_warn(...) log_msg(LOG_LVL_WARNING, __func__, __VA_ARGS__)
#define log_notice(...) log_msg(LOG_LVL_NOTICE, __func__, __VA_ARGS__)
#define log_info(...) log_msg(LOG_LVL_INFO, __func__, __VA_ARGS__)
#define log_debug(...) log_msg(LOG_LVL_DEBUG, __func__, __VA_ARGS__)

#endif /* SWD_LOG_H */
