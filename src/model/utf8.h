/*
 * utf8.h - reading UTF-8 that comes from a target (thread names, command
 * lines, paths) or from debug info, where any bytes may appear.
 */
#ifndef SW_UTF8_H
#define SW_UTF8_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * The length of the valid UTF-8 sequence at s (1 to 4) with its code
 * point in *cp, or 0 when s does not start one: a stray continuation
 * byte, an overlong form, a surrogate, past U+10FFFF, or cut short (a
 * NUL inside the sequence).
 */
size_t utf8_seq(const unsigned char *s, uint32_t *cp);

/*
 * Whether cp must never be shown as it is, because it is invisible or
 * changes how the text around it reads: controls (C0, DEL, C1), the
 * bidirectional marks, embeddings, overrides and isolates (U+061C,
 * U+200E-F, U+202A-E, U+2066-9), zero-width and other format characters
 * (U+200B-D, U+2060-4, U+FEFF), line and paragraph separators (U+2028-9)
 * and the interlinear annotations (U+FFF9-B).
 */
bool utf8_unsafe(uint32_t cp);

#endif /* SW_UTF8_H */
