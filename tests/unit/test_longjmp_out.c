/*
 * test_longjmp_out.c - a handler that never returns normally cannot wedge
 * the process: not the loader gate (every later dlclose), not the
 * thread's signal mask, not later dumps.
 *
 * Two ways out of our handler other than a return:
 *
 * - A fault inside it taken by the application, which long-jumps out, as
 *   a database that maps files and handles SIGBUS does. Here a thread
 *   parks inside a private copy of libz (in a zalloc callback of its
 *   inflateInit2_; inflateInit_ would call the program's libz), the
 *   copy's file is truncated, and a dump unwinds the
 *   thread through it: reading its unwind tables raises SIGBUS in our
 *   handler. The program's SIGBUS handler changes its mask (which must
 *   take effect, handler of ours below it or not) and siglongjmps back to
 *   before the call. Afterwards the thread's mask must be the one it
 *   saved, it must be dumpable again, a dlclose must return within a
 *   dump's timeout and dumps must go on.
 * - Asynchronous cancellation of a thread while it runs our handler:
 *   threads with PTHREAD_CANCEL_ASYNCHRONOUS spinning are cancelled at
 *   random moments of back-to-back dumps; then a dlclose must return.
 *
 * Each scenario runs in a child process with an alarm, so that a hang or
 * a crash is reported instead of ending the test.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include "model/dump.h"
#include "stackwatch.h"
#include "tap.h"
#include "testutil.h"

#define CANCELS 2000

typedef int (*inflate_init_fn)(z_streamp, int, const char *, int);

static sigjmp_buf env;
static _Atomic pid_t parked_tid;
static atomic_int parked, jumped, mask_in_handler, mask_after;

__attribute__((noinline)) static void *park_alloc(void *opaque, unsigned n,
						  unsigned size)
{
	(void)opaque;
	(void)n;
	(void)size;
	atomic_store(&parked, 1);
	for (;;)
		pause();
	return NULL;
}

/* This thread's blocked mask as the kernel has it, or ~0. */
static unsigned long long own_sigblk(void)
{
	char buf[4096], *p;
	int fd = open("/proc/thread-self/status", O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return ~0ull;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return ~0ull;
	buf[n] = '\0';
	p = strstr(buf, "SigBlk:");
	return p ? strtoull(p + 7, NULL, 16) : ~0ull;
}

#define BIT(sig) (1ull << ((sig)-1))

static void on_sigbus(int sig, siginfo_t *si, void *uc)
{
	sigset_t add;

	(void)sig;
	(void)si;
	(void)uc;
	if ((pid_t)tu_gettid() != atomic_load(&parked_tid))
		_exit(64); /* on another thread: not what this test set up */
	/* SIGTRAP: one that our handler's own mask leaves deliverable. */
	sigemptyset(&add);
	sigaddset(&add, SIGTRAP);
	pthread_sigmask(SIG_BLOCK, &add, NULL);
	atomic_store(&mask_in_handler, (own_sigblk() & BIT(SIGTRAP)) != 0);
	siglongjmp(env, 1);
}

static void *parker(void *arg)
{
	inflate_init_fn init = (inflate_init_fn)arg;
	z_stream strm;
	sigset_t usr1;

	atomic_store(&parked_tid, tu_gettid());
	/* The mask to come back to: SIGUSR1 alone. */
	sigemptyset(&usr1);
	sigaddset(&usr1, SIGUSR1);
	pthread_sigmask(SIG_SETMASK, &usr1, NULL);
	if (sigsetjmp(env, 1) == 0) {
		memset(&strm, 0, sizeof(strm));
		strm.zalloc = park_alloc;
		init(&strm, 15, ZLIB_VERSION, (int)sizeof(strm));
	}
	/* Mask calls made after the jump take effect. */
	sigemptyset(&usr1);
	sigaddset(&usr1, SIGUSR2);
	pthread_sigmask(SIG_BLOCK, &usr1, NULL);
	atomic_store(&mask_after, (own_sigblk() & BIT(SIGUSR2)) != 0);
	pthread_sigmask(SIG_UNBLOCK, &usr1, NULL);
	atomic_store(&jumped, 1);
	for (;;)
		pause();
	return NULL;
}

/* The thread's blocked mask from /proc, or ~0 when unreadable. */
static unsigned long long sigblk(pid_t tid)
{
	char path[64], line[256];
	unsigned long long v = ~0ull;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/self/task/%d/status", (int)tid);
	f = fopen(path, "r");
	if (!f)
		return v;
	while (fgets(line, sizeof(line), f))
		if (strncmp(line, "SigBlk:", 7) == 0)
			v = strtoull(line + 7, NULL, 16);
	fclose(f);
	return v;
}

/* Runs dlclose(h) in a thread; true when it returned within ms. */
static void *closer(void *h)
{
	dlclose(h);
	return NULL;
}

static bool dlclose_within(void *h, int ms)
{
	pthread_t th;

	pthread_create(&th, NULL, closer, h);
	for (int i = 0; i < ms; i++) {
		if (pthread_tryjoin_np(th, NULL) == 0)
			return true;
		tu_sleep_ms(1);
	}
	return false;
}

/* The end of the module's first loaded segment, rounded up to a page. */
static int first_end_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
	off_t *end = arg;

	(void)size;
	if (!strstr(info->dlpi_name, "libz-copy"))
		return 0;
	for (int i = 0; i < info->dlpi_phnum; i++)
		if (info->dlpi_phdr[i].p_type == PT_LOAD) {
			*end = (off_t)((info->dlpi_phdr[i].p_offset +
					info->dlpi_phdr[i].p_filesz + 4095) &
				       ~4095ul);
			return 1;
		}
	return 0;
}

static off_t first_segment_end(void *h)
{
	off_t end = 4096;

	(void)h;
	dl_iterate_phdr(first_end_cb, &end);
	return end;
}

/*
 * Exit status: 64 when the SIGBUS came on another thread; else bits: 1
 * no SIGBUS in the handler (set-up failed), 2 the mask
 * change inside the program's handler was lost, 4 the mask after the jump
 * is wrong, 8 the thread is not dumpable again, 16 dlclose hung, 32 a
 * later dump failed.
 */
static int scenario_fault(void)
{
	char dir[] = "/tmp/sw-ljmp-XXXXXX", copy[64], cmd[160];
	struct sw_dump_opts o;
	struct sigaction sa;
	pthread_t th;
	void *h, *other;
	int bad = 0, fd, ok_after = 0;

	if (!mkdtemp(dir))
		return 1;
	snprintf(copy, sizeof(copy), "%s/libz-copy.so", dir);
	snprintf(cmd, sizeof(cmd), "cp /lib/x86_64-linux-gnu/libz.so.1 %s",
		 copy);
	if (system(cmd) != 0)
		return 1;
	h = dlopen(copy, RTLD_NOW | RTLD_LOCAL);
	/* A second module to unload at the end. */
	other = dlopen("libz.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!h || !other)
		return 1;
	/*
	 * Installed before the module is cut (installing looks at every
	 * loaded module's name), and before the thread runs: no rule may be
	 * learnt for its frames, or the dump would not read the tables.
	 */
	sw_dump_opts_init(&o);
	o.symbolize = 0;
	o.timeout_ms = 1000;
	{
		struct sw_dump *d = NULL;

		if (sw_dump_self(&o, &d) == 0)
			sw_dump_free(d);
	}
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = on_sigbus;
	sa.sa_flags = SA_SIGINFO | SA_NODEFER;
	sigaction(SIGBUS, &sa, NULL);
	pthread_create(&th, NULL, parker, dlsym(h, "inflateInit2_"));
	while (!atomic_load(&parked))
		tu_sleep_ms(1);
	tu_sleep_ms(20);
	/*
	 * Cut after the first page-aligned segment: the headers, the
	 * build-id and the symbols stay (the dumper reads those), the code
	 * and the unwind tables go (the handler reads those).
	 */
	fd = open(copy, O_WRONLY);
	if (fd < 0 || ftruncate(fd, first_segment_end(h)) < 0)
		return 1;
	close(fd);
	unlink(copy);
	rmdir(dir);

	for (int i = 0; i < 5 && !atomic_load(&jumped); i++) {
		struct sw_dump *d = NULL;

		if (sw_dump_self(&o, &d) == 0)
			sw_dump_free(d);
		tu_sleep_ms(10);
	}
	if (!atomic_load(&jumped))
		return 1;
	if (!atomic_load(&mask_in_handler))
		bad |= 2;
	tu_sleep_ms(20);
	/*
	 * SIGUSR1, as sigsetjmp saved it, not the handler's full mask; and
	 * the thread's own mask calls since took effect.
	 */
	if (sigblk(atomic_load(&parked_tid)) != BIT(SIGUSR1) ||
	    !atomic_load(&mask_after))
		bad |= 4;
	for (int i = 0; i < 20; i++) {
		struct sw_dump *d = NULL;
		const struct sw_thread *t;

		if (sw_dump_self(&o, &d) != 0)
			continue;
		t = tu_find_thread(d, atomic_load(&parked_tid));
		if (t && t->status == SW_ST_OK)
			ok_after++;
		sw_dump_free(d);
	}
	if (ok_after == 0)
		bad |= 8;
	if (!dlclose_within(other, 2500))
		bad |= 16;
	for (int i = 0; i < 20; i++) {
		struct sw_dump *d = NULL;

		if (sw_dump_self(&o, &d) != 0) {
			bad |= 32;
			break;
		}
		for (size_t k = 0; k < d->nthreads; k++)
			if (d->threads[k].status != SW_ST_OK)
				bad |= 32;
		sw_dump_free(d);
	}
	return bad;
}

static void *spin_async(void *arg)
{
	(void)arg;
	pthread_setcanceltype(PTHREAD_CANCEL_ASYNCHRONOUS, NULL);
	for (;;)
		__asm__ volatile("" ::: "memory");
	return NULL;
}

static atomic_int stop_dumping;

static void *dump_loop(void *arg)
{
	struct sw_dump_opts o;

	(void)arg;
	sw_dump_opts_init(&o);
	o.symbolize = 0;
	o.timeout_ms = 200;
	while (!atomic_load(&stop_dumping)) {
		struct sw_dump *d = NULL;

		if (sw_dump_self(&o, &d) == 0)
			sw_dump_free(d);
	}
	return NULL;
}

/* Exit status: 0, or 16 when dlclose hung, 32 when a dump failed after. */
static int scenario_cancel(void)
{
	struct sw_dump_opts o;
	struct sw_dump *d = NULL;
	pthread_t dumper;
	void *h = dlopen("libz.so.1", RTLD_NOW | RTLD_LOCAL);
	int bad = 0;

	if (!h)
		return 1;
	pthread_create(&dumper, NULL, dump_loop, NULL);
	for (int i = 0; i < CANCELS; i++) {
		pthread_t th;

		pthread_create(&th, NULL, spin_async, NULL);
		usleep((useconds_t)(20 + (i * 37) % 300));
		pthread_cancel(th);
		pthread_join(th, NULL);
	}
	atomic_store(&stop_dumping, 1);
	pthread_join(dumper, NULL);
	if (!dlclose_within(h, 2500))
		bad |= 16;
	sw_dump_opts_init(&o);
	o.symbolize = 0;
	if (sw_dump_self(&o, &d) != 0)
		bad |= 32;
	sw_dump_free(d);
	return bad;
}

static int in_child(int (*fn)(void), int *status)
{
	pid_t pid;

	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		alarm(60);
		_exit(fn());
	}
	waitpid(pid, status, 0);
	return WIFEXITED(*status) ? WEXITSTATUS(*status) : -1;
}

int main(void)
{
	int st, rc;

	rc = in_child(scenario_fault, &st);
	TAP_OK(rc >= 0,
	       "a SIGBUS in our handler, long-jumped out: the "
	       "process lives on (%s %d)",
	       WIFSIGNALED(st) ? "signal" : "exit",
	       WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
	TAP_OK(rc >= 0 && rc != 64 && !(rc & 1),
	       "the fault was raised inside our handler and taken by the "
	       "program");
	TAP_OK(rc >= 0 && rc < 64 && !(rc & 2) && !(rc & 1),
	       "a mask change in the program's handler above ours takes "
	       "effect");
	TAP_OK(rc >= 0 && rc < 64 && !(rc & 4) && !(rc & 1),
	       "after siglongjmp the thread has the mask it saved, and its "
	       "mask calls take effect");
	TAP_OK(rc >= 0 && rc < 64 && !(rc & 8) && !(rc & 1),
	       "and is dumped again with its stack");
	TAP_OK(rc >= 0 && rc < 64 && !(rc & 16) && !(rc & 1),
	       "a dlclose afterwards returns within a dump's timeout");
	TAP_OK(rc >= 0 && rc < 64 && !(rc & 32) && !(rc & 1),
	       "later dumps answer for every thread");

	rc = in_child(scenario_cancel, &st);
	TAP_OK(rc == 0,
	       "%d threads cancelled asynchronously while dumped: "
	       "dlclose and dumps go on (%s %d)",
	       CANCELS, WIFSIGNALED(st) ? "signal" : "exit",
	       WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
	return tap_done();
}
