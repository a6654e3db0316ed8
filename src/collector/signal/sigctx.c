/*
 * sigctx.c - the storage of sigctx.h: the slot table, the done counter,
 * the handler's per-thread depth and the installed signal.
 */
#include "sigctx.h"

struct slot handler_slots[HANDLER_SLOTS];
_Atomic uint32_t handler_done_seq;
__thread volatile int handler_depth __attribute__((tls_model("initial-exec")));
__thread struct handler_tls handler_tls
	__attribute__((tls_model("initial-exec"))) = { .ticket = -1,
						       .slot = -1 };

volatile int handler_empty;
_Atomic int handler_want_name;
_Atomic int handler_signo;
_Atomic uint64_t handler_gen_first, handler_gen_next;
_Atomic uint32_t handler_recheck_epoch;
