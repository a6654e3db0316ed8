/*
 * dump.h - the dump structure shared by the collector, the symbolizer, the
 * grouper and the renderers.
 *
 * A dump starts raw: per thread its tid, name, state, CPU times, status and
 * raw instruction pointers, plus the module list of the process. The
 * symbolizer turns each thread's ips into frames (expanding inlined
 * functions), the grouper gathers threads with the same stack, and the
 * renderers read the result. The agent ships the raw part over the wire and
 * the daemon does the rest, so nothing here points into the target.
 */
#ifndef SW_DUMP_H
#define SW_DUMP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include "limits.h"
#include "stackwatch.h"

enum sw_status {
	SW_ST_OK = 0,
	SW_ST_TIMEOUT,
	SW_ST_EXITED,
	SW_ST_BLOCKED, /* "blocked-signal" */
	SW_ST_SKIPPED,
	SW_ST_ERROR,
	SW_ST_SECCOMP,	/* "seccomp": under a seccomp mode, never signalled */
	SW_ST_LOWSTACK, /* "low-stack": no room for a signal frame */
	SW_ST_COUNT
};

/*
 * One symbolized frame. Its strings belong to the dump (dump_strdup()) or
 * are literals, so frames are copied with memcpy and threads with the same
 * stack share one copy of each name.
 */
struct sw_frame {
	uint64_t ip;
	int module;	      /* index into dump->modules, -1 when unknown */
	uint64_t offset;      /* ip - module bias; ip when module is -1 */
	const char *function; /* demangled, NULL when unknown */
	const char *file;     /* absolute source path, NULL when unknown */
	int line;	      /* 0 when unknown */
	bool inlined;	      /* inlined into the next frame */
};

/*
 * The futex a thread slept on when it was caught, as the kernel had it
 * (the system call's arguments), and a copy of the memory around the
 * futex word taken at the same dump: enough for the lock that holds the
 * word (render/locks.h) to tell its owner. Raw, never a pointer into the
 * target.
 */
#define SW_WAIT_BEFORE 16 /* bytes copied before the futex word */
#define SW_WAIT_MEM 48	  /* bytes copied in all, at most */
struct sw_wait {
	uint64_t addr;	 /* the futex word's address */
	uint32_t op;	 /* the futex operation, as passed */
	uint32_t nmem;	 /* bytes of mem copied: 0 when none could be */
	uint64_t mem_at; /* the address of mem[0] */
	uint8_t mem[SW_WAIT_MEM];
	/*
	 * Caught just after a system call the kernel did not restart (a
	 * timed wait returns EINTR): its number is gone from the context,
	 * so /proc must say it is this futex again (the collector checks).
	 */
	bool unsure;
};

/* How one thread was read (JSON "method" of a thread). */
enum sw_read {
	SW_READ_NONE = 0, /* not read: its status says why */
	SW_READ_SIGNAL,	  /* the agent's handler, in the thread itself */
	SW_READ_KERNEL,	  /* blocked: its saved registers and stack */
	SW_READ_PERF,	  /* on a CPU: one perf sample of it */
	SW_READ_PTRACE,	  /* stopped for its copy */
	SW_READ_CORE,	  /* a core file's copy */
	SW_READ_COUNT
};

struct sw_thread {
	pid_t tid;
	/* The tid in the process's own pid namespace; 0: the same as tid. */
	pid_t ns_tid;
	char name[SW_COMM_MAX];
	char state; /* from /proc: R, S, D, T, t, Z, X, I; '?' unknown */
	uint64_t utime_ms;
	uint64_t stime_ms;
	enum sw_status status;
	char *error;	   /* reason when status is not ok, owned */
	uint32_t flags;	   /* SW_TF_* */
	enum sw_read read; /* how, with status ok */
	/* Its context-switch counts when read from the kernel, else 0. */
	uint64_t nvcsw, nivcsw;
	uint64_t captured_ns; /* CLOCK_MONOTONIC at capture, 0 unknown */
	size_t nips;
	uint64_t *ips; /* raw, innermost first; owned */
	/*
	 * Bit k set: ips[k] is where the thread was interrupted (the frame
	 * above a signal frame, or the trampoline itself), not a return
	 * address, so it is looked up as it is, not at ips[k] - 1. ips[0]
	 * is by SW_TF_FIRST_EXACT. Set by the offline unwinder; zero from
	 * agents.
	 */
	uint64_t exact[SW_MAX_FRAMES / 64];
	size_t nframes;
	/*
	 * After symbolization: in the dump's memory (dump_alloc()), shared
	 * by threads that stopped at the same ips, never changed once filled.
	 */
	struct sw_frame *frames;
	struct sw_wait *wait; /* in a futex wait when caught; owned, or NULL */
	int group;	      /* index into dump->groups, -1 for none */
	double unchanged_s;   /* seconds the stack stayed the same; < 0: n/a */
	/*
	 * Its schedstat when the daemon kept the dump (ns on a CPU, ns
	 * runnable but waiting for one), for the watchdog to tell a thread
	 * that wants the CPU from one only caught running; both 0: unknown.
	 */
	uint64_t run_ns, wait_ns;
};

struct sw_module {
	char *path;	/* owned */
	uint64_t bias;	/* load bias: address minus link-time address */
	uint64_t start; /* lowest mapped address of its PT_LOAD segments */
	uint64_t end;	/* one past the highest */
	uint32_t build_id_len; /* 0 when the module has none */
	uint8_t build_id[SW_BUILD_ID_MAX];
	/* Why its symbols could not be read (its parser was killed, ...),
	 * or NULL; owned. Its frames then have no function. */
	char *symbols_error;
};

struct sw_group {
	size_t count;
	pid_t *tids; /* owned, count entries, ascending */
	size_t rep;  /* index of the thread whose frames stand for the group */
};

/*
 * A global variable of the process that holds a futex word some thread
 * waits on: what its lock is called in the program ("g_queue_lock").
 */
struct sw_addr_name {
	uint64_t start; /* its address in the process */
	uint64_t size;	/* its bytes */
	char *name;	/* owned */
};

#define SW_ADDR_NAMES_MAX 256 /* futex words of one dump given names */

struct dump_chunk; /* the memory of dump_alloc() */

/* How the stacks were taken (JSON "method"). */
enum sw_method {
	SW_METHOD_AGENT = 0, /* the agent's signal handlers, in the target */
	SW_METHOD_PTRACE,    /* a ptrace snapshot, one thread at a time */
	SW_METHOD_CORE,	     /* a core file */
};

/*
 * What a core file says of the crash that made it (none for a core
 * taken of a running process, as gcore's are): the fatal signal, as the
 * kernel's NT_SIGINFO note and the crashing thread's pr_cursig give it.
 */
struct sw_core_signal {
	int number;    /* 0: the core says of no fatal signal */
	int code;      /* si_code */
	bool has_addr; /* a fault's signal: addr is the faulting address */
	uint64_t addr;
	pid_t tid; /* the thread that got it; 0: not known */
};

struct sw_dump {
	pid_t pid;
	char comm[SW_COMM_MAX];
	char *cmdline;		      /* arguments joined by spaces; owned */
	struct timespec collected_at; /* CLOCK_REALTIME at start */
	uint64_t elapsed_us;
	uint64_t skew_us;
	int timeout_ms;
	enum sw_method method;
	uint64_t paused_us_max;	  /* ptrace: the longest one thread stopped */
	uint64_t paused_us_total; /* ptrace: all threads' stops together */
	bool symbolized;	  /* frames carry function/file/line */
	bool symbols_partial;	  /* symbolizing stopped at its time budget */
	/* Why the process's perf map was not used to name JIT frames (its
	 * owner's limit), or NULL; owned. */
	char *jit_map_refused;
	/* After symbolization: N of the process's glibc 2.N (the newest
	 * version its libc defines), 0 when no glibc was seen. */
	unsigned glibc_minor;
	/* After symbolization: glibc is linked into the program itself, so
	 * no libc.so tells its release. */
	bool glibc_static;
	/* A core: the signal of its crash, and how much of the file its
	 * segments need when that is past its end (core_cut_size, the
	 * file's size, below core_cut_need: the core was cut short). */
	struct sw_core_signal core_signal;
	uint64_t core_cut_size, core_cut_need;
	/* Threads left out of this copy: the requester may not read them
	 * (JSON "hidden_threads"; daemon/tcred.h). */
	size_t hidden_threads;
	size_t nthreads;
	struct sw_thread *threads;
	size_t nmodules;
	struct sw_module *modules;
	size_t ngroups;
	struct sw_group *groups;
	/* After symbolization: the global variables the waits' futex words
	 * lie in, sorted by start, none overlapping; owned. */
	size_t naddr_names;
	struct sw_addr_name *addr_names;
	struct dump_chunk *mem; /* frames and their strings; owned */
};

/* "agent", "ptrace", "core". */
const char *dump_method_name(enum sw_method m);

/* "signal", "kernel", "perf", "ptrace", "core"; NULL for none. */
const char *dump_read_name(enum sw_read r);

/* "ok", "timeout", "exited", "blocked-signal", "skipped", "error",
 * "seccomp", "low-stack". */
const char *dump_status_name(enum sw_status st);

/* Allocates an empty dump (calloc). NULL when out of memory. */
struct sw_dump *dump_new(void);

/*
 * Detaches the symbolized frames of t (not its ips). Their memory is the
 * dump's: it is freed with the dump, by dump_release_mem() or by
 * dump_compact().
 */
void dump_thread_release_frames(struct sw_thread *t);

/*
 * Memory for d's frames (size bytes, aligned for any type) that lives as
 * long as d, or until dump_release_mem() or dump_compact(). Allocations
 * are packed into large blocks, so the frames of a thousand threads cost
 * a few calls to malloc, not thousands. NULL on out of memory.
 */
void *dump_alloc(struct sw_dump *d, size_t size);

/* About how much memory d holds, in bytes: what it costs to keep. */
size_t dump_bytes(const struct sw_dump *d);

/* A copy of s in d's memory, as dump_alloc(). NULL on out of memory. */
const char *dump_strdup(struct sw_dump *d, const char *s);

/*
 * Frees the memory of dump_alloc() and dump_strdup(); every thread's
 * frames must have been released first.
 */
void dump_release_mem(struct sw_dump *d);

/* Frees the groups of d and marks every thread ungrouped. */
void dump_release_groups(struct sw_dump *d);

/*
 * The name of the global of d->addr_names that holds addr, and addr's
 * offset in it in *off; NULL when none does.
 */
const char *dump_addr_name(const struct sw_dump *d, uint64_t addr,
			   uint64_t *off);

/* Frees d->addr_names. */
void dump_release_addr_names(struct sw_dump *d);

/* Index of the module holding ip, or -1. Linear; modules are few. */
int dump_find_module(const struct sw_dump *d, uint64_t ip);

/*
 * A copy of d's raw part: process fields, modules, and per thread
 * everything but frames and groups. *out is freed with sw_dump_free().
 * Returns 0 or -ENOMEM.
 */
int dump_clone_raw(const struct sw_dump *d, struct sw_dump **out);

/*
 * A copy of d with only the threads whose keep[i] is set: the raw part
 * as dump_clone_raw() has it, and each thread's frames (its own, or its
 * group's representative's in a compacted dump) with their strings in
 * the copy's memory. The copy has no groups (render/group.h makes them)
 * and no lock names. *out is freed with sw_dump_free(). 0 or -ENOMEM.
 */
int dump_clone_some(const struct sw_dump *d, const bool *keep,
		    struct sw_dump **out);

/*
 * Makes the frames in d's modules whose hide[i] is set say nothing of
 * their module's insides: no function, file or line, and the frames
 * inlined there left out. d's groups must be made again afterwards
 * (render/group.h). Frames arrays shared by threads are done once. 0 or
 * -ENOMEM (then d is unchanged).
 */
int dump_strip_modules(struct sw_dump *d, const bool *hide);

/*
 * Drops the frames of every thread that does not stand for its group:
 * the renderers, the grouper's comparisons and the history need only the
 * group's representative. The representatives' frames and strings move to
 * fresh memory of their size and the rest is freed (on out of memory
 * everything is kept, which is correct, only larger). Keeps ips.
 */
void dump_compact(struct sw_dump *d);

/* Sets t->error to a copy of reason (NULL on out of memory). */
void dump_thread_set_error(struct sw_thread *t, enum sw_status st,
			   const char *reason);

/*
 * Whether a frame of some thread of d is in module i, for each module:
 * a malloc'd array of d->nmodules, or NULL (none, or out of memory).
 */
bool *dump_modules_used(const struct sw_dump *d);

#endif /* SW_DUMP_H */
