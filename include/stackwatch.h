/*
 * stackwatch.h - the public API of libstackwatch.
 *
 * libstackwatch collects the stack of every thread of the calling process
 * without stopping it: a dumper sends each thread a real-time signal, the
 * thread's async-signal-safe handler unwinds its own stack into a
 * preallocated slot and wakes the dumper through a futex. The result is a
 * dump that can be symbolized (elfutils libdwfl), grouped by identical
 * stacks and rendered as JSON, pstack-style text or folded stacks.
 *
 * Every function returns 0 on success or a negative error code: either a
 * negated errno value or one of the SW_E* codes below. sw_strerror() turns
 * any of them into a sentence.
 */
#ifndef STACKWATCH_H
#define STACKWATCH_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define SW_VERSION "0.1.0"

/*
 * Error codes of our own, below the errno range. A negated errno value
 * (-ENOMEM, -EINVAL, ...) may be returned as well.
 */
#define SW_EHANDLER (-20001)   /* our signal handler was replaced */
#define SW_ENOSIGNAL (-20002)  /* no free real-time signal to use */
#define SW_ENOTINIT (-20003)   /* the collector could not be installed */
#define SW_EBUSY (-20004)      /* every signal slot is still held */
#define SW_EFORMAT (-20005)    /* malformed input */
#define SW_ETOOBIG (-20006)    /* a size cap was reached */
#define SW_EINHANDLER (-20007) /* called from inside a signal handler */
#define SW_EVERSION (-20008)   /* another version's collector is loaded */

/* Default per-dump timeout, in milliseconds. */
#define SW_DEFAULT_TIMEOUT_MS 1000
/* Default number of signals in flight at once. */
#define SW_DEFAULT_WINDOW 64

/*
 * Options of one dump. Initialize with sw_dump_opts_init() and then change
 * what you need; the size field lets later versions of the library add
 * fields without breaking programs built against this one.
 */
struct sw_dump_opts {
	size_t size;	/* sizeof(struct sw_dump_opts), set by init */
	int timeout_ms; /* 1..600000; default SW_DEFAULT_TIMEOUT_MS */
	int symbolize;	/* nonzero: resolve functions, files, lines */
	int window;	/* signals in flight at once, 1..64 */
};

/* Fills opts with the defaults. Allocates nothing. */
void sw_dump_opts_init(struct sw_dump_opts *opts);

/* A collected dump of one process. Opaque; freed with sw_dump_free(). */
struct sw_dump;

/*
 * Dumps every thread of the calling process within opts->timeout_ms
 * (opts may be NULL for the defaults). The calling thread unwinds itself
 * directly and its stack starts at the caller of sw_dump_self(); every
 * other thread is signalled. A thread that does not answer in time is
 * reported with status "timeout"; the call itself never waits past the
 * deadline (plus the time to symbolize, when asked to).
 *
 * On success *out owns a dump the caller frees with sw_dump_free(). If the
 * application replaced our signal handler, no signal is sent and the call
 * fails with SW_EHANDLER. Safe to call from any thread and concurrently
 * (calls are serialized); never call it from a signal handler. Blocks for
 * at most the timeout.
 */
int sw_dump_self(const struct sw_dump_opts *opts, struct sw_dump **out);

/*
 * Renders d as JSON (the HTTP schema of one process), as pstack-style text
 * or as folded stacks. On success *out is a NUL-terminated string the
 * caller releases with free(). Never blocks; not async-signal-safe.
 */
int sw_dump_json(const struct sw_dump *d, char **out);
int sw_dump_text(const struct sw_dump *d, char **out);
int sw_dump_folded(const struct sw_dump *d, char **out);

/* Frees a dump and everything it owns. Accepts NULL. */
void sw_dump_free(struct sw_dump *d);

/*
 * A sentence describing err (an SW_E* code or a negated errno). The string
 * is static; never NULL.
 */
const char *sw_strerror(int err);

/*
 * The real-time signal the collector uses, or 0 when it is not installed.
 * The collector installs itself on the first sw_dump_self() (or when the
 * agent loads); the signal is STACKWATCH_SIGNAL when set, else the first
 * real-time signal from SIGRTMIN+4 up that has no handler.
 */
int sw_signal(void);

#ifdef __cplusplus
}
#endif

#endif /* STACKWATCH_H */
