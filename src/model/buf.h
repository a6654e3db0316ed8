/*
 * buf.h - a growable string buffer with a size cap (after curl's dynbuf).
 * Appends fail with SW_ETOOBIG past the cap and -ENOMEM when allocation
 * fails; after a failure the buffer keeps what it had.
 */
#ifndef SW_BUF_H
#define SW_BUF_H

#include <stdarg.h>
#include <stddef.h>

struct buf {
	char *data; /* NUL-terminated when len > 0 */
	size_t len;
	size_t cap; /* allocated */
	size_t max; /* hard cap on len */
};

/* Initializes an empty buffer that may grow to max bytes. No allocation. */
void buf_init(struct buf *b, size_t max);
/* Frees the contents; the buffer is empty and usable again. */
void buf_release(struct buf *b);
int buf_add(struct buf *b, const void *p, size_t n);
int buf_adds(struct buf *b, const char *s);
int buf_addf(struct buf *b, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* buf_addf() with a va_list, which it leaves unused (va_copy inside). */
int buf_vaddf(struct buf *b, const char *fmt, va_list ap)
	__attribute__((format(printf, 2, 0)));
/*
 * Appends s with '?' for every character that could forge or disguise
 * what a reader sees: controls (C0, DEL, C1), the invisible and
 * bidirectional formatting characters of utf8_unsafe(), each byte that is
 * not valid UTF-8, and every ASCII character found in also (may be NULL).
 * Names taken from a target then cannot forge lines or fields of a text
 * format, nor reorder what is shown around them.
 */
int buf_adds_safe(struct buf *b, const char *s, const char *also);
/* Hands the contents to the caller (never NULL on success: "" when empty). */
int buf_detach(struct buf *b, char **out);

#endif /* SW_BUF_H */
