/*
 * callsite.c - the calls a return address may follow (callsite.h).
 *
 * An x86-64 call is e8 and a 32-bit displacement, or ff with a ModRM
 * byte whose reg field is 2 (call near, indirect): the operand a register
 * (mod 3), or memory with no displacement (mod 0; r/m 4 adds a SIB byte,
 * r/m 5 is rip-relative with 32 bits), 8 bits (mod 1) or 32 bits (mod 2).
 * A REX prefix may come first (it changes no length that matters here).
 * Each form is tried at the length it would have, ending right before the
 * return address.
 */
#include "callsite.h"

/* Whether code[at..n) is exactly one indirect call (ff /2 ...). */
static bool indirect_call_at(const uint8_t *code, size_t n, size_t at)
{
	size_t len;
	uint8_t modrm, mod, rm;

	if (at + 2 > n || code[at] != 0xff)
		return false;
	modrm = code[at + 1];
	if (((modrm >> 3) & 7) != 2)
		return false;
	mod = modrm >> 6;
	rm = modrm & 7;
	len = 2;
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

bool callsite_ends_call(const uint8_t *code, size_t n)
{
	if (!code)
		return false;
	if (n >= 5 && code[n - 5] == 0xe8)
		return true;
	for (size_t len = 2; len <= n && len <= CALLSITE_LOOKBACK; len++) {
		size_t at = n - len;

		if (indirect_call_at(code, n, at))
			return true;
	}
	return false;
}
