/*
 * test_fd_untouched.c - a dump never touches the program's file
 * descriptors, whatever code its threads run.
 *
 * A classic daemon closes every descriptor above 2 once it has started
 * (after the collector installed itself) and opens its own files there:
 * here an input file it reads from and a log it appends to. One thread then
 * runs code without unwind information (a JIT's: `push rbp; mov rbp, rsp;
 * jmp .` in an anonymous executable mapping), so the unwinder falls back
 * to the frame chain, where libunwind's own address space checks each
 * address by writing it into a pipe it opened earlier: descriptors that
 * are now the program's. After the dumps, the input's offset and the log's
 * size must be what the program left them, and the thread's stack must end
 * in its caller. Then the program puts an empty blocking pipe of its own
 * on those descriptors: a handler that read from it would never return, so
 * every dump must still be answered.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "model/dump.h"
#include "stackwatch.h"
#include "tap.h"
#include "testutil.h"

#define DUMPS 20

static atomic_int spinning;
static _Atomic pid_t jit_tid;

/* push rbp; mov rbp, rsp; jmp . */
static const unsigned char jit_code[] = { 0x55, 0x48, 0x89, 0xe5, 0xeb, 0xfe };

__attribute__((noinline)) static void jit_caller(void (*code)(void))
{
	atomic_store(&spinning, 1);
	code();
	__asm__ volatile("" ::: "memory"); /* not a tail call */
}

static void *jit_thread(void *arg)
{
	atomic_store(&jit_tid, tu_gettid());
	jit_caller((void (*)(void))arg);
	return NULL;
}

/* One dump; the JIT thread's entry in *t. 0, or -1 when it failed. */
static int dump_jit(pid_t tid, struct sw_thread *out, bool symbolize)
{
	struct sw_dump_opts o;
	struct sw_dump *d = NULL;
	int rc = -1;

	sw_dump_opts_init(&o);
	o.symbolize = symbolize;
	o.timeout_ms = 1000;
	if (sw_dump_self(&o, &d) != 0)
		return -1;
	for (size_t i = 0; i < d->nthreads; i++) {
		const struct sw_thread *t = &d->threads[i];

		if (t->tid != tid)
			continue;
		out->status = t->status;
		out->flags = t->flags;
		out->nframes = 0;
		if (getenv("SW_DEBUG"))
			for (size_t k = 0; k < t->nframes; k++)
				fprintf(stderr, "  %zu %s\n", k,
					t->frames[k].function
						? t->frames[k].function
						: "?");
		for (size_t k = 0; k < t->nframes; k++)
			if (t->frames[k].function &&
			    strstr(t->frames[k].function, "jit_caller"))
				out->nframes = 1;
		rc = 0;
	}
	sw_dump_free(d);
	return rc;
}

int main(void)
{
	char in_path[] = "/tmp/sw-fd-in-XXXXXX",
	     log_path[] = "/tmp/sw-fd-log-XXXXXX";
	struct sw_thread t;
	struct stat st;
	pthread_t th;
	void *code;
	pid_t tid;
	int in, log, p[2], answered = 0, found = 0;
	off_t log_size;

	/* The collector installs itself, as the agent does at start-up. */
	TAP_OK(dump_jit(getpid(), &t, false) == 0, "a first dump installs");
	/* The daemon's start-up: every descriptor above 2 closed. */
	for (int fd = 3; fd < 1024; fd++)
		close(fd);
	in = mkstemp(in_path);
	log = mkstemp(log_path);
	if (in < 0 || log < 0 || write(in, "input data\n", 11) != 11 ||
	    lseek(in, 0, SEEK_SET) != 0 || write(log, "log\n", 4) != 4)
		return TAP_OK(0, "set up the program's files"), tap_done();
	unlink(in_path);
	unlink(log_path);
	log_size = lseek(log, 0, SEEK_CUR);

	code = mmap(NULL, 4096, PROT_READ | PROT_WRITE | PROT_EXEC,
		    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (code == MAP_FAILED)
		return TAP_OK(0, "map JIT code"), tap_done();
	memcpy(code, jit_code, sizeof(jit_code));
	pthread_create(&th, NULL, jit_thread, code);
	while (!atomic_load(&spinning))
		tu_sleep_ms(1);
	tu_sleep_ms(10);
	tid = atomic_load(&jit_tid);

	for (int i = 0; i < DUMPS; i++) {
		if (dump_jit(tid, &t, true) == 0 && t.status == SW_ST_OK) {
			answered++;
			found += t.nframes;
		}
	}
	TAP_OK(answered == DUMPS,
	       "every dump of the JIT thread answered (%d/%d)", answered,
	       DUMPS);
	TAP_OK(found == DUMPS, "its stack reaches its caller each time (%d/%d)",
	       found, DUMPS);
	TAP_OK(lseek(in, 0, SEEK_CUR) == 0,
	       "the input file's offset is unchanged (%lld)",
	       (long long)lseek(in, 0, SEEK_CUR));
	if (fstat(log, &st) < 0)
		st.st_size = -1;
	TAP_OK(st.st_size == log_size,
	       "nothing was written to the log (%lld bytes, was %lld)",
	       (long long)st.st_size, (long long)log_size);

	/*
	 * Now an empty blocking pipe of the program's own on fd 3, and its
	 * log on fd 4: what is written there never comes back to fd 3.
	 */
	if (pipe(p) < 0 || dup2(p[0], 3) < 0 || dup2(log, 4) < 0)
		return TAP_OK(0, "set up the pipe"), tap_done();
	/* A second JIT thread, at a pc no dump has seen yet. */
	memcpy((char *)code + 64, jit_code, sizeof(jit_code));
	atomic_store(&spinning, 0);
	pthread_create(&th, NULL, jit_thread, (char *)code + 64);
	while (!atomic_load(&spinning))
		tu_sleep_ms(1);
	tid = atomic_load(&jit_tid);
	answered = 0;
	for (int i = 0; i < DUMPS; i++)
		if (dump_jit(tid, &t, false) == 0 && t.status == SW_ST_OK)
			answered++;
	TAP_OK(answered == DUMPS,
	       "with a blocking pipe of its own on fd 3, every dump answered "
	       "(%d/%d)",
	       answered, DUMPS);
	return tap_done();
}
