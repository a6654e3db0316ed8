/*
 * callsite.h - whether the code just before a return address is a call
 * (x86-64), for telling a return address found on a stack by position
 * from any other word that points into code.
 */
#ifndef SW_CALLSITE_H
#define SW_CALLSITE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Bytes before a return address that callsite_ends_call() looks at. */
#define CALLSITE_LOOKBACK 7

/*
 * Whether the n bytes of code (those just before a return address, the
 * last one right before it) end with a call instruction: a direct call
 * (e8 rel32), or an indirect one (ff /2) through a register or memory,
 * with or without a REX prefix, with any displacement. Pure.
 */
bool callsite_ends_call(const uint8_t *code, size_t n);

#endif /* SW_CALLSITE_H */
