/*
 * buf.c - the capped, growable string buffer of buf.h, used by the text
 * renderers and anything else that builds output piece by piece. Growth
 * doubles the allocation; nothing grows past the cap given to buf_init(),
 * so a hostile or runaway input can make an append fail, never exhaust
 * memory.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "utf8.h"
#include "stackwatch.h"

#define BUF_MIN_ALLOC 256

void buf_init(struct buf *b, size_t max)
{
	b->data = NULL;
	b->len = 0;
	b->cap = 0;
	b->max = max;
}

void buf_release(struct buf *b)
{
	free(b->data);
	buf_init(b, b->max);
}

/*
 * Makes room for n more bytes plus the terminating NUL. Returns 0,
 * SW_ETOOBIG when len + n would pass the cap, or -ENOMEM; on failure the
 * buffer is unchanged.
 */
static int buf_reserve(struct buf *b, size_t n)
{
	size_t need, cap;
	char *p;

	if (n > b->max || b->len > b->max - n)
		return SW_ETOOBIG;
	need = b->len + n + 1;
	if (need <= b->cap)
		return 0;
	cap = b->cap ? b->cap : BUF_MIN_ALLOC;
	while (cap < need)
		cap = cap > SIZE_MAX / 2 ? need : cap * 2;
	if (cap > b->max + 1)
		cap = b->max + 1;
	p = realloc(b->data, cap);
	if (!p)
		return -ENOMEM;
	b->data = p;
	b->cap = cap;
	return 0;
}

/* Appends n bytes from p. Returns 0, SW_ETOOBIG or -ENOMEM. */
int buf_add(struct buf *b, const void *p, size_t n)
{
	int rc = buf_reserve(b, n);

	if (rc)
		return rc;
	if (n)
		memcpy(b->data + b->len, p, n);
	b->len += n;
	b->data[b->len] = '\0';
	return 0;
}

/* Appends the string s. Returns 0, SW_ETOOBIG or -ENOMEM. */
int buf_adds(struct buf *b, const char *s)
{
	return buf_add(b, s, strlen(s));
}

/* See buf.h. Returns 0, SW_ETOOBIG or -ENOMEM. */
int buf_adds_safe(struct buf *b, const char *s, const char *also)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t n = strlen(s), out = 0, len;
	int rc = buf_reserve(b, n); /* the result is never longer */
	uint32_t cp;

	if (rc)
		return rc;
	for (size_t i = 0; i < n; i += len) {
		len = utf8_seq(p + i, &cp);
		if (!len || utf8_unsafe(cp) ||
		    (cp < 0x80 && also && strchr(also, (int)cp))) {
			b->data[b->len + out++] = '?';
			len = len ? len : 1;
			continue;
		}
		memcpy(b->data + b->len + out, p + i, len);
		out += len;
	}
	b->len += out;
	b->data[b->len] = '\0';
	return 0;
}

/*
 * Appends printf-style output. Formats once into the free space and, when
 * that is too small, once more after growing. Returns 0, SW_ETOOBIG,
 * -ENOMEM, or -EINVAL when the format fails.
 */
int buf_vaddf(struct buf *b, const char *fmt, va_list ap)
{
	va_list aq;
	size_t room;
	int n, rc;

	room = b->cap > b->len ? b->cap - b->len : 0;
	va_copy(aq, ap);
	n = vsnprintf(room ? b->data + b->len : NULL, room, fmt, aq);
	va_end(aq);
	if (n < 0)
		goto out_undo;
	if ((size_t)n < room) {
		if (b->len + (size_t)n > b->max)
			goto out_toobig;
		b->len += (size_t)n;
		return 0;
	}
	rc = buf_reserve(b, (size_t)n);
	if (rc)
		goto out_fail;
	va_copy(aq, ap);
	n = vsnprintf(b->data + b->len, (size_t)n + 1, fmt, aq);
	va_end(aq);
	if (n < 0)
		goto out_undo;
	b->len += (size_t)n;
	return 0;

out_toobig:
	rc = SW_ETOOBIG;
	goto out_fail;
out_undo:
	rc = -EINVAL;
out_fail:
	/* A partial write past len is harmless; restore the terminator. */
	if (b->data)
		b->data[b->len] = '\0';
	return rc;
}

int buf_addf(struct buf *b, const char *fmt, ...)
{
	va_list ap;
	int rc;

	va_start(ap, fmt);
	rc = buf_vaddf(b, fmt, ap);
	va_end(ap);
	return rc;
}

/*
 * Hands the contents to the caller, who frees them with free(); the
 * buffer is left empty. An empty buffer yields a fresh "" so that *out is
 * never NULL on success. Returns 0 or -ENOMEM.
 */
int buf_detach(struct buf *b, char **out)
{
	if (!b->data) {
		*out = strdup("");
		return *out ? 0 : -ENOMEM;
	}
	*out = b->data;
	buf_init(b, b->max);
	return 0;
}
