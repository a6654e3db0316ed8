/*
 * test_callsite.c - which code before a return address is a call
 * (src/model/callsite.h): the forms compilers emit for direct and
 * indirect calls, each ending right before the return address, and code
 * that merely ends there (a jump, an add, a ret, zeros).
 */
#include <stdint.h>
#include <string.h>

#include "model/callsite.h"
#include "tap.h"

/* code, right-aligned in the CALLSITE_LOOKBACK bytes before a return. */
static bool ends_call(const uint8_t *code, size_t n)
{
	uint8_t b[CALLSITE_LOOKBACK];

	memset(b, 0x90, sizeof(b)); /* nops before */
	memcpy(b + sizeof(b) - n, code, n);
	return callsite_ends_call(b, sizeof(b));
}

#define CALL(...)                                                            \
	do {                                                                 \
		static const uint8_t c[] = { __VA_ARGS__ };                  \
		TAP_OK(ends_call(c, sizeof(c)), "a call: %s", #__VA_ARGS__); \
	} while (0)
#define NOT_CALL(...)                                                          \
	do {                                                                   \
		static const uint8_t c[] = { __VA_ARGS__ };                    \
		TAP_OK(!ends_call(c, sizeof(c)), "no call: %s", #__VA_ARGS__); \
	} while (0)

int main(void)
{
	CALL(0xe8, 0x10, 0x20, 0x30, 0x40);		/* call rel32 */
	CALL(0xff, 0xd1);				/* call *%rcx */
	CALL(0x41, 0xff, 0xd1);				/* call *%r9 */
	CALL(0xff, 0x10);				/* call *(%rax) */
	CALL(0xff, 0x50, 0x10);				/* call *0x10(%rax) */
	CALL(0xff, 0x54, 0x24, 0x08);			/* call *0x8(%rsp) */
	CALL(0xff, 0x90, 0x00, 0x01, 0x00, 0x00);	/* call *0x100(%rax) */
	CALL(0xff, 0x15, 0x00, 0x10, 0x00, 0x00);	/* call *x(%rip) */
	CALL(0xff, 0x14, 0xc5, 0x00, 0x10, 0x00, 0x00); /* call *x(,%rax,8) */
	NOT_CALL(0xff, 0xe1);				/* jmp *%rcx */
	NOT_CALL(0x48, 0x83, 0xc4, 0x08);		/* add $8,%rsp */
	NOT_CALL(0xc3);					/* ret */
	NOT_CALL(0x48, 0x89, 0xe5);			/* mov %rsp,%rbp */
	NOT_CALL(0xff, 0x50, 0x10, 0x00); /* a call, then a byte */
	NOT_CALL(0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00);
	TAP_OK(!callsite_ends_call(NULL, CALLSITE_LOOKBACK) &&
		       !callsite_ends_call((const uint8_t *)"\xff", 1),
	       "nothing, or too little, is no call");
	return tap_done();
}
