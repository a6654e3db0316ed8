/*
 * test_altstack.c - where a stack goes on past an alternate signal stack
 * (snap_more_next()), on real signal frames made by the kernel here: a
 * handler installed with SA_ONSTACK copies its own alternate stack from
 * its sp up, as a snapshot would, and notes the interrupted sp from its
 * ucontext; the copy must name that sp, and the frame where it found it
 * must be the kernel's. A handler on the thread's own stack, a copy
 * with its signal frame spoiled, and bytes that are no frame at all must
 * name nothing. Then the snapshot's bytes carry further regions.
 */
#define _GNU_SOURCE
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <ucontext.h>
#include <unistd.h>

#include "model/clock.h"
#include "snapshot/snapshot.h"
#include "stackwatch.h"
#include "tap.h"

#define ALT_SIZE (64u * 1024u)

static uint8_t altstack[ALT_SIZE] __attribute__((aligned(16)));
static uint8_t copy[ALT_SIZE];
static uint64_t copy_at, copy_sp, interrupted_sp;
static uint32_t copy_len;

/* Reads a stack byte by byte, as a snapshot reads another process's:
 * ASan's red zones between this build's frames are bytes like others. */
__attribute__((no_sanitize_address)) static void copy_stack(uint8_t *to,
							    uint64_t from,
							    uint32_t len)
{
	const volatile uint8_t *p = (const uint8_t *)(uintptr_t)from;

	for (uint32_t i = 0; i < len; i++)
		to[i] = p[i];
}

/* Copies the stack the handler runs on, from its sp to the top. */
static void on_signal(int sig, siginfo_t *si, void *ucv)
{
	const ucontext_t *uc = ucv;
	/* Built with frame pointers (-O0): within the handler's frame. */
	uint64_t sp = (uint64_t)(uintptr_t)__builtin_frame_address(0);
	uint64_t top = (uint64_t)(uintptr_t)(altstack + ALT_SIZE);

	(void)sig;
	(void)si;
	interrupted_sp = (uint64_t)uc->uc_mcontext.gregs[REG_RSP];
	copy_sp = sp;
	if (sp >= (uint64_t)(uintptr_t)altstack && sp < top) {
		copy_at = sp & ~(uint64_t)15;
		copy_len = (uint32_t)(top - copy_at);
	} else {
		/* On the thread's own stack: up to the signal frame's end
		 * (its siginfo follows the ucontext; the xsave area lies
		 * above), not past the top of the stack. */
		copy_at = sp & ~(uint64_t)15;
		copy_len = (uint32_t)((uint64_t)(uintptr_t)ucv +
				      sizeof(ucontext_t) + sizeof(siginfo_t) -
				      copy_at);
	}
	copy_stack(copy, copy_at, copy_len);
}

static void take(int flags)
{
	struct sigaction sa = { 0 };

	sa.sa_sigaction = on_signal;
	sa.sa_flags = SA_SIGINFO | flags;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGUSR1, &sa, NULL);
	copy_len = 0;
	raise(SIGUSR1);
}

static void test_frames(void)
{
	stack_t ss = { .ss_sp = altstack, .ss_size = ALT_SIZE };
	uint64_t frame = 0, end = 0, next;

	TAP_OK(sigaltstack(&ss, NULL) == 0, "an alternate signal stack");
	take(SA_ONSTACK);
	TAP_OK(copy_sp >= (uint64_t)(uintptr_t)altstack &&
		       copy_sp < (uint64_t)(uintptr_t)altstack + ALT_SIZE,
	       "the handler ran on it");
	next = snap_more_next(copy, copy_at, copy_len, copy_sp, &frame, &end);
	TAP_OK(next == interrupted_sp && next != 0,
	       "the copy names the interrupted sp (%#llx, it was %#llx)",
	       (unsigned long long)next, (unsigned long long)interrupted_sp);
	TAP_OK(end == (uint64_t)(uintptr_t)altstack + ALT_SIZE,
	       "and where the alternate stack ends (%#llx)",
	       (unsigned long long)end);
	TAP_OK(frame >= copy_at &&
		       frame - copy_at + SNAP_SIGFRAME_LEN <= copy_len,
	       "and the signal frame lies in the copy");
	/* The kernel's code segment spoiled: no frame there any more. */
	if (frame >= copy_at) {
		size_t cs = (size_t)(frame - copy_at) + 8 +
			    offsetof(ucontext_t, uc_mcontext.gregs) +
			    REG_CSGSFS * 8;

		copy[cs] ^= 0xff;
		TAP_OK(snap_more_next(copy, copy_at, copy_len, copy_sp, NULL,
				      NULL) == 0,
		       "a frame with another code segment is none");
		copy[cs] ^= 0xff;
	}
	TAP_OK(snap_more_next(copy, copy_at, copy_len,
			      (uint64_t)(uintptr_t)altstack + ALT_SIZE + 4096,
			      NULL, NULL) == 0,
	       "nor is one whose alternate stack does not hold the sp");
	TAP_OK(snap_more_next(copy, interrupted_sp - 64, copy_len, copy_sp,
			      NULL, NULL) == 0,
	       "an sp the copy holds itself goes nowhere else");
	/* SA_ONSTACK off: the handler runs where the thread was. */
	take(0);
	TAP_OK(copy_len && snap_more_next(copy, copy_at, copy_len, copy_sp,
					  NULL, NULL) == 0,
	       "a handler on the thread's own stack: nowhere else to go");
	memset(copy, 0xa5, sizeof(copy));
	TAP_OK(snap_more_next(copy, copy_at, sizeof(copy), copy_sp, NULL,
			      NULL) == 0,
	       "bytes that are no frame name nothing");
	TAP_OK(snap_more_next(NULL, 0, 0, 0, NULL, NULL) == 0 &&
		       snap_more_next(copy, copy_at, 16, copy_sp, NULL, NULL) ==
			       0,
	       "nothing, or too little, names nothing");
	ss.ss_flags = SS_DISABLE;
	sigaltstack(&ss, NULL);
}

/* A snapshot of one thread with a further region, through a socket. */
static void test_wire(void)
{
	static uint8_t a[64], b[32];
	struct snap_thread t = { .tid = 42, .status = SW_ST_OK };
	struct snap s = { .pid = 42, .nthreads = 1, .threads = &t };
	struct snap *got = NULL;
	int sv[2], r;

	memset(a, 1, sizeof(a));
	memset(b, 2, sizeof(b));
	t.sp = 0x1000;
	t.stack = a;
	t.stack_len = sizeof(a);
	t.nmore = 1;
	t.more[0].at = 0x9000;
	t.more[0].len = sizeof(b);
	t.more[0].bytes = b;
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) {
		TAP_OK(0, "a socket pair");
		return;
	}
	TAP_OK(snap_write(sv[1], 0, &s) == 0, "a snapshot with a region "
					      "is written");
	r = snap_read(sv[0], clock_now_ns() + 2000000000ull, &got);
	TAP_OK(r == 0 && got && got->nthreads == 1 &&
		       got->threads[0].nmore == 1 &&
		       got->threads[0].more[0].at == 0x9000 &&
		       got->threads[0].more[0].len == sizeof(b) &&
		       memcmp(got->threads[0].more[0].bytes, b, sizeof(b)) ==
			       0 &&
		       got->threads[0].stack_len == sizeof(a),
	       "and read back whole (%d)", r);
	snap_free(got);
	got = NULL;
	/* As many regions as a thread may have. */
	t.nmore = SNAP_MORE_MAX;
	t.more[1] = t.more[0];
	TAP_OK(snap_write(sv[1], 0, &s) == 0, "%d regions are written",
	       SNAP_MORE_MAX);
	r = snap_read(sv[0], clock_now_ns() + 2000000000ull, &got);
	TAP_OK(r == 0 && got && got->threads[0].nmore == SNAP_MORE_MAX,
	       "and read (%d)", r);
	snap_free(got);
	close(sv[0]);
	close(sv[1]);
}

int main(void)
{
	test_frames();
	test_wire();
	return tap_done();
}
