/*
 * test_low_stack.c - a thread near the end of its stack survives being
 * dumped (torture scenario 7).
 *
 * The kernel pushes a signal frame (AT_MINSIGSTKSZ: 3.6 kB with AVX-512)
 * on the interrupted stack, and our handler then needs HANDLER_STACK_NEED
 * more to unwind; a thread with less left would fault in the handler and
 * the whole process would die. Here:
 *
 *  - a thread parked on a roomy stack, the 64 kB below it filled with a
 *    pattern, is dumped; how deep the pattern was overwritten is what the
 *    handler really uses, and it must stay under HANDLER_STACK_NEED;
 *  - a thread parked with less room under its handler than unwinding needs
 *    (it would fault without the check), threads with 64 kB stacks, a
 *    thread deep in a small sigaltstack inside a larger buffer, and one on
 *    a roomy sigaltstack are dumped hundreds of times: the process
 *    survives, the low ones show the one placeholder frame, nothing below
 *    the sigaltstack is written, the others unwind to their start routine;
 *  - a thread with a 64 kB stack that spins is dumped back to back: caught
 *    again and again while still returning from the previous handler, it
 *    must not get a second handler nested on the first (each ~6 kB);
 *  - the main thread parked a few kB above the lowest page of [stack]
 *    unwinds (the kernel grows [stack] up to RLIMIT_STACK), and parked
 *    just above that limit shows the placeholder.
 *
 * Dumps are paced (each waits until every parked thread sleeps again, so
 * no handler is still returning) for the exact checks, then sent back to
 * back, where only survival and the statuses are checked.
 */
#define _GNU_SOURCE
#include <linux/futex.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

#include "model/dump.h"
#include "collector/signal/handler.h"
#include "collector/signal/stackmap.h"
#include "stackwatch.h"
#include "tap.h"
#include "testutil.h"

#define PAT 0xa5
#define MEASURE_SPAN (64 * 1024) /* patterned below the measured thread */
/*
 * Left under the low threads' handler: less than unwinding takes, more
 * than the handler's own frames and calls (far larger under ASan).
 */
#if defined(__SANITIZE_ADDRESS__)
#define LOW_ROOM 4096
#else
#define LOW_ROOM 1536
#endif
#define ALT_SIZE (64 * 1024)	/* the small sigaltstack */
#define ALT_BUF (256 * 1024)	/* the buffer it is the top of */
#define SMALL_STACK (64 * 1024) /* pthread_attr_setstacksize */
#define NSMALL 4
#define PACED 200
#define BURST 1000

/* Roles of the parked threads. */
enum {
	T_MEASURE,
	T_LOW,
	T_ALT_LOW,
	T_ALT_ROOMY,
	T_SMALL,
	NT = T_SMALL + NSMALL
};

static const char *const start_fn[NT] = {
	"measure_main", "low_main",   "alt_low_main", "alt_roomy_main",
	"small_main",	"small_main", "small_main",   "small_main",
};

static _Atomic uint32_t release_word; /* futex: nonzero lets threads go */
static atomic_int parked;
static pid_t tids[NT];
static size_t probe_frame; /* kernel signal frame + a small handler */
static _Atomic size_t probe_done;
static size_t low_use;	   /* deepest write under the low thread */
static size_t measure_use; /* deepest write under the measured one */
static unsigned char *alt_buf;
static bool alt_canary_ok = true;
static __thread int alt_role;

/* The stack pointer of the caller's frame (real, even with fake stacks). */
#define SP_HERE() ((uintptr_t)__builtin_frame_address(0))

static void probe(int signo, siginfo_t *si, void *ctx)
{
	ucontext_t *uc = ctx;

	(void)signo;
	(void)si;
	probe_frame = (uintptr_t)uc->uc_mcontext.gregs[REG_RSP] - SP_HERE();
	atomic_store(&probe_done, 1);
}

/* Sleeps until release_word is set (state 'S' meanwhile). */
__attribute__((noinline)) static void park(void)
{
	atomic_fetch_add(&parked, 1);
	while (!atomic_load(&release_word))
		syscall(SYS_futex, &release_word, FUTEX_WAIT_PRIVATE, 0, NULL,
			NULL, 0);
}

static void release_all(void)
{
	atomic_store(&release_word, 1);
	syscall(SYS_futex, &release_word, FUTEX_WAKE_PRIVATE, INT32_MAX, NULL,
		NULL, 0);
}

/* Fills [lo, hi) with the pattern (below sp: no ASan shadow there). */
__attribute__((no_sanitize_address)) static void fill(uintptr_t lo,
						      uintptr_t hi)
{
	for (volatile unsigned char *p = (unsigned char *)lo; (uintptr_t)p < hi;
	     p++)
		*p = PAT;
}

/* The lowest byte of [lo, hi) that no longer holds the pattern, or hi. */
__attribute__((no_sanitize_address)) static uintptr_t lowest_written(
	uintptr_t lo, uintptr_t hi)
{
	volatile unsigned char *p = (unsigned char *)lo;

	while ((uintptr_t)p < hi && *p == PAT)
		p++;
	return (uintptr_t)p;
}

typedef void park_fn(void);

/*
 * Recurses until the frame is within `room` bytes (+ one small step) of
 * floor, then patterns what is below and parks with park(). *use (if not
 * NULL) gets how far below the parked frame the stack was written.
 */
__attribute__((noinline)) static void descend_fine(uintptr_t floor, size_t room,
						   size_t *use, park_fn *parker)
{
	volatile char pad[16];
	uintptr_t sp = SP_HERE();

	pad[0] = 1;
	if (sp - floor > room) {
		descend_fine(floor, room, use, parker);
	} else {
		fill(floor + 64, sp - 256);
		parker();
		if (use)
			*use = sp - lowest_written(floor + 64, sp - 256);
	}
	pad[1] = pad[0];
}

__attribute__((noinline)) static void descend(uintptr_t floor, size_t room,
					      size_t *use, park_fn *parker)
{
	volatile char pad[256];

	pad[0] = 1;
	if (SP_HERE() - floor > room + 1024)
		descend(floor, room, use, parker);
	else
		descend_fine(floor, room, use, parker);
	pad[1] = pad[0];
}

static void own_stack(uintptr_t *lo, size_t *size)
{
	pthread_attr_t a;
	void *addr = NULL;

	*lo = 0;
	*size = 0;
	if (pthread_getattr_np(pthread_self(), &a) != 0)
		return;
	pthread_attr_getstack(&a, &addr, size);
	pthread_attr_destroy(&a);
	*lo = (uintptr_t)addr;
}

static _Atomic uint32_t measure_release;

__attribute__((noinline)) static void measure_park(void)
{
	atomic_fetch_add(&parked, 1);
	while (!atomic_load(&measure_release))
		syscall(SYS_futex, &measure_release, FUTEX_WAIT_PRIVATE, 0,
			NULL, NULL, 0);
}

static void *measure_main(void *arg)
{
	uintptr_t sp = SP_HERE() - 512;

	(void)arg;
	tids[T_MEASURE] = tu_gettid();
	fill(sp - MEASURE_SPAN, sp - 256);
	measure_park();
	measure_use = sp - lowest_written(sp - MEASURE_SPAN, sp - 256);
	return NULL;
}

static void *low_main(void *arg)
{
	uintptr_t lo;
	size_t size;

	(void)arg;
	tids[T_LOW] = tu_gettid();
	own_stack(&lo, &size);
	/* room for the kernel's frame, then LOW_ROOM under the handler */
	descend(lo, probe_frame + LOW_ROOM, &low_use, park);
	return NULL;
}

static void *small_main(void *arg)
{
	tids[T_SMALL + (int)(intptr_t)arg] = tu_gettid();
	park();
	return NULL;
}

/* SIGUSR1, on the sigaltstack: parks there, deep or not. */
static void on_alt(int signo)
{
	uintptr_t alt_lo = (uintptr_t)alt_buf + ALT_BUF - ALT_SIZE;

	(void)signo;
	if (alt_role == T_ALT_LOW)
		descend(alt_lo, probe_frame + LOW_ROOM, NULL, park);
	else
		park();
}

static void run_on_altstack(int role, void *buf, size_t size)
{
	stack_t ss = { .ss_sp = buf, .ss_size = size }, old;
	struct sigaction sa;

	alt_role = role;
	tids[role] = tu_gettid();
	sigaltstack(&ss, &old);
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_alt;
	sa.sa_flags = SA_ONSTACK;
	sigaction(SIGUSR1, &sa, NULL);
	pthread_kill(pthread_self(), SIGUSR1);
	/* back to the one before (ASan's own, which it frees at exit) */
	sigaltstack(&old, NULL);
}

static void *alt_low_main(void *arg)
{
	(void)arg;
	/* the top ALT_SIZE of the buffer; the rest below is the canary */
	fill((uintptr_t)alt_buf, (uintptr_t)alt_buf + ALT_BUF - ALT_SIZE);
	run_on_altstack(T_ALT_LOW, alt_buf + ALT_BUF - ALT_SIZE, ALT_SIZE);
	alt_canary_ok =
		lowest_written((uintptr_t)alt_buf,
			       (uintptr_t)alt_buf + ALT_BUF - ALT_SIZE) ==
		(uintptr_t)alt_buf + ALT_BUF - ALT_SIZE;
	return NULL;
}

static void *alt_roomy_main(void *arg)
{
	static char roomy[256 * 1024];

	(void)arg;
	run_on_altstack(T_ALT_ROOMY, roomy, sizeof(roomy));
	return NULL;
}

/* The bounds of the main thread's [stack] mapping now. */
static bool main_stack_bounds(uintptr_t *lo, uintptr_t *hi)
{
	FILE *f = fopen("/proc/self/maps", "re");
	char line[512];
	bool found = false;

	if (!f)
		return false;
	while (!found && fgets(line, sizeof(line), f)) {
		unsigned long a, b;

		if (strstr(line, "[stack]") &&
		    sscanf(line, "%lx-%lx", &a, &b) == 2) {
			*lo = a;
			*hi = b;
			found = true;
		}
	}
	fclose(f);
	return found;
}

static bool is_placeholder(const struct sw_thread *t)
{
	if (t->status != SW_ST_OK || !(t->flags & SW_TF_LOW_STACK) ||
	    t->nips != 1)
		return false;
	return t->nframes == 1 && t->frames[0].function &&
	       strcmp(t->frames[0].function, "[stack nearly exhausted]") == 0;
}

static bool unwound_to(const struct sw_thread *t, const char *fn)
{
	return t->status == SW_ST_OK && !(t->flags & SW_TF_LOW_STACK) &&
	       tu_count_fn(t, fn) > 0;
}

/* Waits until each of the n threads sleeps (no handler left on them). */
static void wait_parked(const pid_t *tid, int n)
{
	for (int i = 0; i < n; i++)
		if (tid[i] > 0)
			tu_wait_state(tid[i], 'S');
}

/* One symbolized dump, or NULL. */
static struct sw_dump *dump_once(bool symbolize)
{
	struct sw_dump_opts o;
	struct sw_dump *d = NULL;

	sw_dump_opts_init(&o);
	o.symbolize = symbolize;
	if (sw_dump_self(&o, &d) != 0)
		return NULL;
	return d;
}

/* The main thread's phases: parked high above the rlimit, then near it. */
enum { MAIN_GROWS, MAIN_AT_LIMIT };

static _Atomic uint32_t main_release;
static atomic_int main_parked;
static int main_phase_ok;

__attribute__((noinline)) static void main_park(void)
{
	atomic_store(&main_parked, 1);
	while (!atomic_load(&main_release))
		syscall(SYS_futex, &main_release, FUTEX_WAIT_PRIVATE, 0, NULL,
			NULL, 0);
}

/* Dumps the parked main thread PACED times; counts the expected results. */
static void *main_dumper(void *arg)
{
	int phase = (int)(intptr_t)arg;
	pid_t main_tid = getpid();
	char desc[256];
	int notes = 0;

	while (!atomic_load(&main_parked))
		tu_sleep_ms(1);
	for (int i = 0; i < PACED; i++) {
		struct sw_dump *d;
		const struct sw_thread *t;
		bool ok;

		wait_parked(&main_tid, 1);
		d = dump_once(true);
		t = d ? tu_find_thread(d, main_tid) : NULL;
		ok = t && (phase == MAIN_AT_LIMIT ? is_placeholder(t)
						  : unwound_to(t, "main_park"));
		main_phase_ok += ok;
		if (!ok && notes++ < 3)
			TAP_NOTE("main, phase %d, dump %d: %s %s", phase, i,
				 t ? dump_status_name(t->status) : "missing",
				 t ? tu_describe_stack(t, desc, sizeof(desc))
				   : "");
		sw_dump_free(d);
	}
	atomic_store(&main_release, 1);
	syscall(SYS_futex, &main_release, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
	return NULL;
}

/*
 * Parks the main thread room bytes above floor while another thread dumps
 * it. Returns how many of the PACED dumps were as expected.
 */
static int main_phase(int phase, uintptr_t floor, size_t room)
{
	pthread_t th;

	main_phase_ok = 0;
	atomic_store(&main_parked, 0);
	atomic_store(&main_release, 0);
	if (pthread_create(&th, NULL, main_dumper, (void *)(intptr_t)phase))
		return -1;
	descend(floor, room, NULL, main_park);
	pthread_join(th, NULL);
	return main_phase_ok;
}

static void check_main_thread(void)
{
	uintptr_t lo, hi;
	struct rlimit saved, rl;
	int got;

	if (!main_stack_bounds(&lo, &hi)) {
		TAP_SKIP("no [stack] in /proc/self/maps");
		return;
	}
	TAP_NOTE("main thread: [stack] %#lx-%#lx", (unsigned long)lo,
		 (unsigned long)hi);
	/*
	 * A few kB above the lowest page [stack] has now: less than the
	 * handler needs in the mapping, plenty once the kernel grows it.
	 */
	got = main_phase(MAIN_GROWS, lo, probe_frame + HANDLER_STACK_NEED / 2);
	TAP_OK(got == PACED,
	       "main thread %zu bytes above the bottom of [stack] (which "
	       "grows): unwound in every dump (%d of %d)",
	       probe_frame + HANDLER_STACK_NEED / 2, got, PACED);

	/* Just above where RLIMIT_STACK stops the kernel from growing it. */
	if (!main_stack_bounds(&lo, &hi))
		return;
	getrlimit(RLIMIT_STACK, &saved);
	rl = saved;
	/* below what is mapped already: the kernel has to grow [stack] */
	rl.rlim_cur = (hi - SP_HERE()) + 128 * 1024;
	if (rl.rlim_cur < hi - lo + 64 * 1024)
		rl.rlim_cur = hi - lo + 64 * 1024;
	rl.rlim_cur &= ~(rlim_t)4095;
	if (setrlimit(RLIMIT_STACK, &rl) != 0) {
		TAP_SKIP("cannot lower RLIMIT_STACK");
		return;
	}
	got = main_phase(MAIN_AT_LIMIT, hi - rl.rlim_cur,
			 probe_frame + LOW_ROOM);
	setrlimit(RLIMIT_STACK, &saved);
	TAP_OK(got == PACED,
	       "main thread %d bytes above its RLIMIT_STACK: the placeholder "
	       "in every dump (%d of %d)",
	       (int)(probe_frame + LOW_ROOM), got, PACED);
}

/* stackmap_parse_line() on the kinds of lines /proc/PID/maps has. */
static void check_parse(void)
{
	static const struct {
		const char *line;
		int kind, main_stack;
		uint64_t lo, hi;
	} cases[] = {
		{ "7f0c1a000000-7f0c1a021000 rw-p 00000000 00:00 0 \n", 1, 0,
		  0x7f0c1a000000, 0x7f0c1a021000 },
		{ "7ffd5e5c4000-7ffd5e5e5000 rw-p 00000000 00:00 0"
		  "                          [stack]\n",
		  1, 1, 0x7ffd5e5c4000, 0x7ffd5e5e5000 },
		{ "55d0c0c00000-55d0c0c21000 rw-p 00000000 00:00 0"
		  "                          [heap]",
		  1, 0, 0x55d0c0c00000, 0x55d0c0c21000 },
		{ "7f0c19fff000-7f0c1a000000 ---p 00000000 00:00 0 \n", 0, 0,
		  0x7f0c19fff000, 0x7f0c1a000000 },
		{ "7f0c1b000000-7f0c1b002000 rw-p 001d3000 fe:00 332835"
		  "   /usr/lib/x86_64-linux-gnu/libc.so.6\n",
		  0, 0, 0x7f0c1b000000, 0x7f0c1b002000 },
		{ "7f0c1c000000-7f0c1c001000 rw-s 00000000 00:01 1234"
		  "   /dev/zero (deleted)\n",
		  0, 0, 0x7f0c1c000000, 0x7f0c1c001000 },
		{ "7f0c1a000000 rw-p 00000000 00:00 0\n", -1, 0, 0, 0 },
		{ "7f0c1a021000-7f0c1a000000 rw-p 00000000 00:00 0\n", -1, 0, 0,
		  0 },
		{ "", -1, 0, 0, 0 },
	};
	int wrong = 0;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		uint64_t lo = 0, hi = 0;
		int main_stack = 0;
		int kind = stackmap_parse_line(cases[i].line, &lo, &hi,
					       &main_stack);

		if (kind != cases[i].kind ||
		    (kind >= 0 && (lo != cases[i].lo || hi != cases[i].hi)) ||
		    (kind > 0 && main_stack != cases[i].main_stack)) {
			TAP_NOTE("maps line %zu: kind %d, main %d", i, kind,
				 main_stack);
			wrong++;
		}
	}
	TAP_OK(wrong == 0,
	       "maps lines: anonymous, [stack] and [heap] kept; guards, "
	       "files, shared and malformed lines not (%d wrong)",
	       wrong);
}

static bool is_low(int role)
{
	return role == T_LOW || role == T_ALT_LOW;
}

/* Paced, symbolized dumps: counts per role the dumps that were right. */
static void paced_dumps(int *right)
{
	char desc[256];
	int notes = 0;

	for (int i = 0; i < PACED; i++) {
		struct sw_dump *d;

		wait_parked(tids, NT);
		d = dump_once(true);
		for (int r = 0; d && r < NT; r++) {
			const struct sw_thread *t = tu_find_thread(d, tids[r]);
			bool ok = t && (is_low(r) ? is_placeholder(t)
						  : unwound_to(t, start_fn[r]));

			right[r] += ok;
			if (!ok && notes++ < 5)
				TAP_NOTE("dump %d, %s: %s %s", i, start_fn[r],
					 t ? dump_status_name(t->status)
					   : "missing",
					 t ? tu_describe_stack(t, desc,
							       sizeof(desc))
					   : "");
		}
		sw_dump_free(d);
	}
}

static atomic_bool spin_stop;
static pid_t spinner_tid;

/*
 * Runs, never blocks: the thread a dump most often catches again while
 * it is still returning from the handler of the dump before (preempted
 * right after the handler's wake). Nesting a handler there each time
 * grew the stack by ~6 kB a dump, which a 64 kB stack does not survive.
 */
static void *spinner_main(void *arg)
{
	(void)arg;
	spinner_tid = tu_gettid();
	while (!atomic_load_explicit(&spin_stop, memory_order_relaxed))
		;
	return NULL;
}

/*
 * Back-to-back raw dumps of every role but the measured one (released by
 * then), and of a spinner with a 64 kB stack. A low thread may also be
 * blocked-signal: it blocks our signal for the last instructions of its
 * handler.
 */
static int burst_dumps(int *failed, int *spinner_ok)
{
	int wrong = 0, notes = 0;

	for (int i = 0; i < BURST; i++) {
		struct sw_dump *d = dump_once(false);
		const struct sw_thread *st;

		if (!d) {
			(*failed)++;
			continue;
		}
		st = tu_find_thread(d, spinner_tid);
		*spinner_ok += st && st->status == SW_ST_OK;
		for (int r = T_LOW; r < NT; r++) {
			const struct sw_thread *t = tu_find_thread(d, tids[r]);
			bool ok;

			if (!t)
				ok = false;
			else if (is_low(r))
				ok = t->status == SW_ST_BLOCKED ||
				     (t->status == SW_ST_OK &&
				      (t->flags & SW_TF_LOW_STACK));
			else
				ok = t->status == SW_ST_OK && t->nips > 1 &&
				     !(t->flags & SW_TF_LOW_STACK);
			wrong += !ok;
			if (!ok && notes++ < 5)
				TAP_NOTE("burst dump %d, %s: %s", i,
					 start_fn[r],
					 t ? dump_status_name(t->status)
					   : "missing");
		}
		sw_dump_free(d);
	}
	return wrong;
}

static void attr_small(pthread_attr_t *a)
{
	pthread_attr_init(a);
	pthread_attr_setstacksize(a, SMALL_STACK);
}

static int start_threads(pthread_t *th)
{
	static void *(*const mains[NT])(void *) = {
		measure_main, low_main,	  alt_low_main, alt_roomy_main,
		small_main,   small_main, small_main,	small_main,
	};
	pthread_attr_t small, low;
	int rc = 0;

	attr_small(&small);
	pthread_attr_init(&low);
	pthread_attr_setstacksize(&low, 256 * 1024);
	for (int r = 0; r < NT && !rc; r++)
		rc = pthread_create(&th[r],
				    r >= T_SMALL ? &small
				    : r == T_LOW ? &low
						 : NULL,
				    mains[r], (void *)(intptr_t)(r - T_SMALL));
	pthread_attr_destroy(&small);
	pthread_attr_destroy(&low);
	return rc;
}

int main(void)
{
	pthread_t th[NT], spinner;
	pthread_attr_t small;
	struct sigaction sa;
	int right[NT] = { 0 }, failed = 0, wrong, spinner_ok = 0;
	size_t unwind_use;

#if defined(__SANITIZE_THREAD__)
	TAP_SKIP("ThreadSanitizer runs handlers at its own points, on its "
		 "own terms: stack depths mean nothing there");
	return tap_done();
#endif
	check_parse();
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = probe;
	sa.sa_flags = SA_SIGINFO;
	sigaction(SIGUSR2, &sa, NULL);
	pthread_kill(pthread_self(), SIGUSR2);
	TAP_OK(atomic_load(&probe_done) && probe_frame > 0,
	       "the kernel's signal frame is %zu bytes (AT_MINSIGSTKSZ %lu)",
	       probe_frame, getauxval(AT_MINSIGSTKSZ));
	alt_buf = mmap(NULL, ALT_BUF, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (alt_buf == MAP_FAILED || start_threads(th) != 0) {
		TAP_OK(0, "set up the threads");
		return tap_done();
	}
	while (atomic_load(&parked) < NT)
		tu_sleep_ms(1);

	paced_dumps(right);
	atomic_store(&measure_release, 1);
	syscall(SYS_futex, &measure_release, FUTEX_WAKE_PRIVATE, 1, NULL, NULL,
		0);
	pthread_join(th[T_MEASURE], NULL);
	unwind_use = measure_use > probe_frame ? measure_use - probe_frame : 0;
	TAP_NOTE("handler stack use, measured: %zu bytes below the parked "
		 "frame, %zu of them under the handler (kernel frame %zu)",
		 measure_use, unwind_use, probe_frame);
	TAP_OK(right[T_MEASURE] == PACED && unwind_use > 0 &&
		       unwind_use <= HANDLER_STACK_NEED,
	       "the handler unwinds in %zu bytes, within HANDLER_STACK_NEED "
	       "(%d) (%d of %d dumps unwound)",
	       unwind_use, HANDLER_STACK_NEED, right[T_MEASURE], PACED);
	TAP_OK(LOW_ROOM < unwind_use,
	       "the low threads leave their handler %d bytes: unwinding "
	       "there would run off the stack",
	       LOW_ROOM);

	attr_small(&small);
	if (pthread_create(&spinner, &small, spinner_main, NULL) != 0) {
		TAP_OK(0, "start the spinner");
		return tap_done();
	}
	pthread_attr_destroy(&small);
	while (!spinner_tid)
		tu_sleep_ms(1);
	wrong = burst_dumps(&failed, &spinner_ok);
	atomic_store(&spin_stop, true);
	pthread_join(spinner, NULL);
	release_all();
	for (int r = T_LOW; r < NT; r++)
		pthread_join(th[r], NULL);

	TAP_OK(right[T_LOW] == PACED,
	       "a thread %zu bytes above its guard page: the placeholder in "
	       "every dump (%d of %d)",
	       probe_frame + LOW_ROOM, right[T_LOW], PACED);
	TAP_NOTE("what that thread's dumps wrote below it: %zu bytes", low_use);
	TAP_OK(low_use > 0 && low_use < probe_frame + LOW_ROOM,
	       "a dump that falls short stays within the room (%zu < %zu)",
	       low_use, probe_frame + LOW_ROOM);
	TAP_OK(right[T_ALT_LOW] == PACED,
	       "deep in a %d kB sigaltstack: the placeholder in every dump "
	       "(%d of %d)",
	       ALT_SIZE / 1024, right[T_ALT_LOW], PACED);
	TAP_OK(alt_canary_ok,
	       "nothing was written below that sigaltstack (the rest of its "
	       "buffer)");
	TAP_OK(right[T_ALT_ROOMY] == PACED,
	       "on a roomy sigaltstack: unwound through the signal frame to "
	       "its start routine in every dump (%d of %d)",
	       right[T_ALT_ROOMY], PACED);
	for (int r = T_SMALL; r < NT; r++)
		TAP_OK(right[r] == PACED,
		       "64 kB stack #%d: unwound to small_main in every dump "
		       "(%d of %d)",
		       r - T_SMALL, right[r], PACED);
	TAP_OK(failed == 0 && wrong == 0,
	       "%d dumps back to back: every one succeeded (%d failed), every "
	       "thread as expected (%d not)",
	       BURST, failed, wrong);
	TAP_OK(spinner_ok == BURST,
	       "a spinning thread with a 64 kB stack answered all %d of them "
	       "(%d)",
	       BURST, spinner_ok);

	check_main_thread();
	TAP_OK(1, "the process survived %d dumps", PACED * 3 + BURST);
	return tap_done();
}
