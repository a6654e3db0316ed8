/*
 * callsite.h - whether the code just before a return address is a call
 * (x86-64), for telling a return address found on a stack by position
 * from any other word that points into code. Header-only and pure, so
 * that the signal handler (collector/signal) and the offline unwinder
 * (symbols) share it.
 *
 * An x86-64 call is e8 and a 32-bit displacement, or ff with a ModRM
 * byte whose reg field is 2 (call near, indirect): the operand a register
 * (mod 3), or memory with no displacement (mod 0; r/m 4 adds a SIB byte,
 * r/m 5 is rip-relative with 32 bits), 8 bits (mod 1) or 32 bits (mod 2).
 * A REX prefix may come first (it changes no length that matters here).
 * Each form is tried at the length it would have, ending right before the
 * return address.
 */
#ifndef SW_CALLSITE_H
#define SW_CALLSITE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Bytes before a return address that callsite_ends_call() looks at. */
#define CALLSITE_LOOKBACK 7

/* Whether code[at..n) is exactly one indirect call (ff /2 ...). */
static inline bool callsite_indirect_at(const uint8_t *code, size_t n,
					size_t at)
{
	size_t len = 2;
	uint8_t modrm, mod, rm;

	if (at + 2 > n || code[at] != 0xff)
		return false;
	modrm = code[at + 1];
	if (((modrm >> 3) & 7) != 2)
		return false;
	mod = modrm >> 6;
	rm = modrm & 7;
	if (mod != 3 && rm == 4)
		len++; /* SIB */
	if (mod == 1)
		len += 1;
	else if (mod == 2 || (mod == 0 && rm == 5))
		len += 4;
	else if (mod == 0 && rm == 4 && at + 2 < n && (code[at + 2] & 7) == 5)
		len += 4; /* SIB with no base: a 32-bit displacement */
	return at + len == n;
}

/*
 * Whether the n bytes of code (those just before a return address, the
 * last one right before it) end with a call instruction: a direct call
 * (e8 rel32), or an indirect one (ff /2) through a register or memory,
 * with or without a REX prefix, with any displacement. Async-signal-safe.
 */
static inline bool callsite_ends_call(const uint8_t *code, size_t n)
{
	if (!code)
		return false;
	if (n >= 5 && code[n - 5] == 0xe8)
		return true;
	for (size_t len = 2; len <= n && len <= CALLSITE_LOOKBACK; len++)
		if (callsite_indirect_at(code, n, n - len))
			return true;
	return false;
}

#endif /* SW_CALLSITE_H */
