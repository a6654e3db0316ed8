/*
 * test_signal_safety.c - a trap for code in our signal handler that is not
 * async-signal-safe.
 *
 * This program defines malloc, calloc, realloc, free and pthread_mutex_lock
 * itself. Being in the executable (linked -rdynamic), its definitions are
 * the ones every library calls, libc's own internal callers included. Each
 * forwards to the next definition (libc's, or a sanitizer's) unless the
 * calling thread is inside our handler (handler_depth != 0, the
 * collector's initial-exec TLS counter): then it writes a message and
 * aborts, which fails the test.
 *
 * One exception, counted and reported: libunwind's own internal locks. Its
 * lock_acquire() blocks every signal and then takes a pthread mutex (for
 * example the pool of dwarf_cie_info in dwarf_search_unwind_table), so
 * the holder can never be interrupted by our handler and a handler waiting
 * for it waits only for a masked critical section. The design accepts
 * these; a call to pthread_mutex_lock whose caller is in libunwind is let
 * through unless SW_TRAP_LIBUNWIND_LOCKS=1.
 *
 * First, in child processes, the trap is shown to work: each function
 * called with handler_depth set aborts, so this test cannot pass merely
 * because the interposition was not in effect. Then worker threads busy in
 * allocation, locking, stdio and sleep are dumped thousands of times.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <execinfo.h>
#include <fcntl.h>
#include <link.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "model/dump.h"
#include "collector/signal/handler.h"
#include "stackwatch.h"
#include "tap.h"
#include "testutil.h"

/* ---- the trap ---- */

typedef void *(*malloc_fn)(size_t);
typedef void *(*calloc_fn)(size_t, size_t);
typedef void *(*realloc_fn)(void *, size_t);
typedef void (*free_fn)(void *);
typedef int (*lock_fn)(pthread_mutex_t *);

static malloc_fn real_malloc;
static calloc_fn real_calloc;
static realloc_fn real_realloc;
static free_fn real_free;
static lock_fn real_lock;

/*
 * The interposers run before a sanitizer runtime has set itself up (its
 * initialization calls dlsym, which calls malloc): they must not be
 * instrumented.
 */
#define NO_SANITIZE __attribute__((no_sanitize("address", "undefined")))

/*
 * dlsym may allocate before the real functions are known; those few early
 * requests come from this buffer and are never freed. Single-threaded: it
 * is only used while the process starts.
 */
static _Alignas(16) unsigned char boot_buf[64 * 1024];
static size_t boot_used;
static bool resolving;

NO_SANITIZE static bool in_boot(const void *p)
{
	return (const unsigned char *)p >= boot_buf &&
	       (const unsigned char *)p < boot_buf + sizeof(boot_buf);
}

NO_SANITIZE static void *boot_alloc(size_t n)
{
	size_t *hdr;

	n = (n + 15) & ~(size_t)15;
	if (boot_used + n + 16 > sizeof(boot_buf))
		return NULL;
	hdr = (size_t *)(void *)(boot_buf + boot_used);
	*hdr = n;
	boot_used += n + 16;
	return (unsigned char *)hdr + 16;
}

NO_SANITIZE static size_t boot_size(const void *p)
{
	return *(const size_t *)(const void *)((const unsigned char *)p - 16);
}

NO_SANITIZE static void resolve(void)
{
	union {
		void *p;
		malloc_fn m;
		calloc_fn c;
		realloc_fn r;
		free_fn f;
		lock_fn l;
	} u;

	if (real_malloc || resolving)
		return;
	resolving = true;
	u.p = dlsym(RTLD_NEXT, "calloc");
	real_calloc = u.c;
	u.p = dlsym(RTLD_NEXT, "realloc");
	real_realloc = u.r;
	u.p = dlsym(RTLD_NEXT, "free");
	real_free = u.f;
	u.p = dlsym(RTLD_NEXT, "pthread_mutex_lock");
	real_lock = u.l;
	u.p = dlsym(RTLD_NEXT, "malloc");
	real_malloc = u.m;
	resolving = false;
}

/*
 * Writes "signal-safety trap: NAME called inside the signal handler" and
 * the stack that called it, and aborts.
 */
NO_SANITIZE static void trap(const char *name)
{
	static const char a[] = "signal-safety trap: ";
	static const char b[] = " called inside the signal handler\n";
	void *bt[64];
	ssize_t rc;
	int n;

	rc = write(2, a, sizeof(a) - 1);
	rc = write(2, name, strlen(name));
	rc = write(2, b, sizeof(b) - 1);
	(void)rc;
	/* We are dying anyway: let the backtrace allocate if it must. */
	handler_depth = 0;
	n = backtrace(bt, 64);
	backtrace_symbols_fd(bt, n, 2);
	abort();
}

NO_SANITIZE void *malloc(size_t n)
{
	if (handler_depth)
		trap("malloc");
	resolve();
	if (!real_malloc)
		return boot_alloc(n);
	return real_malloc(n);
}

NO_SANITIZE void *calloc(size_t n, size_t size)
{
	if (handler_depth)
		trap("calloc");
	resolve();
	if (!real_calloc) {
		/* The buffer is zero and never reused. */
		if (size && n > SIZE_MAX / size)
			return NULL;
		return boot_alloc(n * size);
	}
	return real_calloc(n, size);
}

NO_SANITIZE void *realloc(void *p, size_t n)
{
	if (handler_depth)
		trap("realloc");
	resolve();
	if (in_boot(p) || !real_realloc) {
		void *q = malloc(n);
		if (q && p) {
			size_t old = in_boot(p) ? boot_size(p) : n;
			memcpy(q, p, old < n ? old : n);
		}
		return q;
	}
	return real_realloc(p, n);
}

NO_SANITIZE void free(void *p)
{
	if (handler_depth)
		trap("free");
	if (!p || in_boot(p))
		return;
	resolve();
	if (real_free)
		real_free(p);
}

/* libunwind's text, found before the first dump; see the top comment. */
static uintptr_t unwind_lo, unwind_hi;
static bool strict_locks;
static atomic_ulong unwind_locks;

NO_SANITIZE static bool called_from_libunwind(uintptr_t ra)
{
	return ra >= unwind_lo && ra < unwind_hi;
}

static int find_libunwind(struct dl_phdr_info *info, size_t size, void *data)
{
	(void)size;
	(void)data;
	if (!info->dlpi_name ||
	    !strstr(info->dlpi_name, "/libunwind-x86_64.so"))
		return 0;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		uintptr_t lo = info->dlpi_addr + ph->p_vaddr;

		if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X))
			continue;
		if (!unwind_lo || lo < unwind_lo)
			unwind_lo = lo;
		if (lo + ph->p_memsz > unwind_hi)
			unwind_hi = lo + ph->p_memsz;
	}
	return 1;
}

NO_SANITIZE int pthread_mutex_lock(pthread_mutex_t *m)
{
	if (handler_depth) {
		uintptr_t ra = (uintptr_t)__builtin_return_address(0);

		if (strict_locks || !called_from_libunwind(ra))
			trap("pthread_mutex_lock");
		atomic_fetch_add_explicit(&unwind_locks, 1,
					  memory_order_relaxed);
	}
	resolve();
	return real_lock ? real_lock(m) : ENOSYS;
}

/* ---- the trap works ---- */

enum probe { P_MALLOC, P_CALLOC, P_REALLOC, P_FREE, P_LOCK, P_FOPEN };
static const char *const probe_names[] = {
	"malloc",
	"calloc",
	"realloc",
	"free",
	"pthread_mutex_lock",
	"fopen (libc's internal malloc)",
};

static void *volatile sink;

static void run_probe(enum probe p)
{
	static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
	void *q = malloc(32);

	handler_depth = 1;
	switch (p) {
	case P_MALLOC:
		sink = malloc(16);
		break;
	case P_CALLOC:
		sink = calloc(2, 8);
		break;
	case P_REALLOC:
		sink = realloc(q, 64);
		break;
	case P_FREE:
		free(q);
		break;
	case P_LOCK:
		pthread_mutex_lock(&m);
		break;
	case P_FOPEN:
		/* Not strdup: ASan reimplements that one, fopen it wraps. */
		sink = fopen("/dev/null", "r");
		break;
	}
	handler_depth = 0;
}

static void test_trap_works(void)
{
	for (int p = P_MALLOC; p <= P_FOPEN; p++) {
		int status = 0;
		pid_t pid;

		fflush(stdout);
		pid = fork();
		if (pid == 0) {
			/* Keep the expected abort's message out of the log. */
			int null = dup2(open("/dev/null", O_WRONLY), 2);
			(void)null;
			run_probe((enum probe)p);
			_exit(0);
		}
		TAP_OK(pid > 0 && waitpid(pid, &status, 0) == pid &&
			       WIFSIGNALED(status) &&
			       WTERMSIG(status) == SIGABRT,
		       "the trap fires: %s with handler_depth set aborts",
		       probe_names[p]);
	}
}

/* ---- dumps of busy threads ---- */

#define DUMPS 3000
enum {
	W_MALLOC,
	W_MALLOC2,
	W_LOCK,
	W_LOCK2,
	W_STDIO,
	W_SLEEP,
	W_COND,
	W_MASKED,
	NWORKERS
};
static const char *const worker_names[NWORKERS] = {
	"malloc", "malloc", "lock", "lock", "stdio", "sleep", "cond", "masked",
};

static atomic_bool stop;
static atomic_int started;
static pid_t worker_tids[NWORKERS];
static pthread_mutex_t shared_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t cond_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond_cv = PTHREAD_COND_INITIALIZER;
static unsigned long shared_counter;

static void malloc_loop(unsigned seed)
{
	void *slots[64] = { 0 };

	while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
		unsigned i;

		seed = seed * 1103515245u + 12345u;
		i = (seed >> 8) % 64;
		if (slots[i]) {
			if (seed & 1) {
				void *q = realloc(slots[i],
						  (seed >> 4) % 4096 + 1);
				if (q)
					slots[i] = q;
			} else {
				free(slots[i]);
				slots[i] = NULL;
			}
		} else {
			slots[i] = (seed & 2)
					   ? calloc(1, (seed >> 12) % 512 + 1)
					   : malloc((seed >> 12) % 65536 + 1);
		}
	}
	for (int i = 0; i < 64; i++)
		free(slots[i]);
}

static void lock_loop(void)
{
	while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
		pthread_mutex_lock(&shared_mu);
		shared_counter++;
		pthread_mutex_unlock(&shared_mu);
	}
}

static void stdio_loop(void)
{
	FILE *f = fopen("/dev/null", "w");

	while (f && !atomic_load_explicit(&stop, memory_order_relaxed)) {
		fprintf(f, "%lu %s %f\n", shared_counter, "busy", 1.5);
		fflush(f);
	}
	if (f)
		fclose(f);
}

static void *worker_main(void *arg)
{
	int id = (int)(intptr_t)arg;
	char name[16];

	snprintf(name, sizeof(name), "w-%s", worker_names[id]);
	pthread_setname_np(pthread_self(), name);
	if (id == W_MASKED) {
		/* Raw: libc's calls keep the dump signal deliverable. */
		uint64_t all = ~0ull;
		syscall(SYS_rt_sigprocmask, SIG_BLOCK, &all, NULL, 8);
	}
	worker_tids[id] = tu_gettid();
	atomic_fetch_add(&started, 1);
	switch (id) {
	case W_MALLOC:
	case W_MALLOC2:
		malloc_loop((unsigned)id * 7919u + 1);
		break;
	case W_LOCK:
	case W_LOCK2:
		lock_loop();
		break;
	case W_STDIO:
		stdio_loop();
		break;
	case W_SLEEP:
	case W_MASKED:
		while (!atomic_load(&stop))
			tu_sleep_ms(1);
		break;
	case W_COND:
		pthread_mutex_lock(&cond_mu);
		while (!atomic_load(&stop))
			pthread_cond_wait(&cond_cv, &cond_mu);
		pthread_mutex_unlock(&cond_mu);
		break;
	}
	return NULL;
}

static void test_dumps(void)
{
	pthread_t th[NWORKERS];
	int failed = 0, not_ok = 0, masked_wrong = 0, first_rc = 0;
	char first_bad[256] = "";
	uint64_t t0;

	for (int i = 0; i < NWORKERS; i++)
		pthread_create(&th[i], NULL, worker_main, (void *)(intptr_t)i);
	while (atomic_load(&started) < NWORKERS)
		tu_sleep_ms(1);

	t0 = tu_now_ns();
	for (int i = 0; i < DUMPS; i++) {
		struct sw_dump_opts o;
		struct sw_dump *d = NULL;
		int rc;

		sw_dump_opts_init(&o);
		o.symbolize = i % 100 == 0;
		rc = sw_dump_self(&o, &d);
		if (rc != 0 || !d) {
			if (!failed++)
				first_rc = rc;
			continue;
		}
		for (size_t j = 0; j < d->nthreads; j++) {
			const struct sw_thread *t = &d->threads[j];
			if (t->tid == worker_tids[W_MASKED]) {
				masked_wrong += t->status != SW_ST_BLOCKED;
			} else if (t->status != SW_ST_OK) {
				if (!not_ok++)
					snprintf(first_bad, sizeof(first_bad),
						 "dump %d: %s (%d) is %s: %s",
						 i, t->name, (int)t->tid,
						 dump_status_name(t->status),
						 t->error ? t->error : "");
			}
		}
		sw_dump_free(d);
	}
	TAP_NOTE("%d dumps of %d busy threads in %.1f s", DUMPS, NWORKERS + 1,
		 (tu_now_ns() - t0) / 1e9);
	atomic_store(&stop, true);
	pthread_mutex_lock(&cond_mu);
	pthread_cond_broadcast(&cond_cv);
	pthread_mutex_unlock(&cond_mu);
	for (int i = 0; i < NWORKERS; i++)
		pthread_join(th[i], NULL);

	TAP_OK(failed == 0,
	       "%d dumps of busy threads all succeed (%d failed, "
	       "first: %s)",
	       DUMPS, failed, sw_strerror(first_rc));
	TAP_OK(not_ok == 0, "every thread was ok in every dump (%d not%s%s)",
	       not_ok, not_ok ? "; first: " : "", first_bad);
	TAP_OK(masked_wrong == 0,
	       "the thread that blocks every signal was blocked-signal each "
	       "time (%d not)",
	       masked_wrong);
	TAP_NOTE("no handler called malloc, calloc, realloc, free or "
		 "pthread_mutex_lock: the trap would have aborted");
}

int main(void)
{
	const char *strict = getenv("SW_TRAP_LIBUNWIND_LOCKS");

	strict_locks = strict && !strcmp(strict, "1");
	/* The collector loads libunwind privately when it installs. */
	TAP_OK(handler_install() > 0, "the collector installs (signal %d)",
	       handler_signal());
	dl_iterate_phdr(find_libunwind, NULL);
	TAP_OK(unwind_lo && unwind_hi > unwind_lo,
	       "found libunwind's code (%#lx-%#lx)", (unsigned long)unwind_lo,
	       (unsigned long)unwind_hi);
	test_trap_works();
	test_dumps();
	TAP_NOTE("libunwind took its internal (signal-masked) locks %lu times "
		 "inside the handler%s",
		 atomic_load(&unwind_locks),
		 strict_locks ? ""
			      : " (allowed; SW_TRAP_LIBUNWIND_LOCKS=1 traps "
				"them)");
	return tap_done();
}
