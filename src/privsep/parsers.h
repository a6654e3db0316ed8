/*
 * parsers.h - a pool of parser workers (worker.h): the processes that
 * unwind snapshots and symbolize dumps, so that no byte a target controls
 * is parsed by the process that holds privileges (the daemon's service,
 * a CLI run as root).
 *
 * A request takes an idle worker (another is started when all are busy,
 * up to PARSERS_MAX; past that it waits, within its deadline), hands it
 * each file it asks for, opened here, and waits for its answer until its
 * deadline and a grace. A worker that dies or overruns is killed and
 * replaced; the file it was reading (device and inode) is refused to
 * every worker for PARSERS_QUARANTINE_S, and the module says why its
 * symbols are missing ("the parser was killed (SIGSEGV)"). No lock is
 * held across a parse: requests run side by side, one per worker.
 */
#ifndef SW_PARSERS_H
#define SW_PARSERS_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include <cjson/cJSON.h>

#include "model/dump.h"
#include "model/procmaps.h"

#define PARSERS_MAX 6		 /* workers at once */
#define PARSERS_QUARANTINE_S 600 /* a file that killed one, refused */
#define PARSERS_GRACE_NS (2000ull * 1000000ull) /* past a deadline */
#define PARSERS_RSS_MAX ((uint64_t)512 << 20)	/* then it is replaced */

/* Where the files a worker asks for come from (the target's own). */
struct parse_files {
	void *arg;
	/* The file of a module of the dump being symbolized. */
	int (*open_module)(void *arg, const struct sw_module *m);
	/* A module without a file (the vDSO): its image, malloc'd. */
	int (*image)(void *arg, const struct sw_module *m, void **image,
		     size_t *size);
	/* The process's file mappings, read once (unwinding). */
	int (*maps)(void *arg, const struct procmaps **pm);
	/* The file mapped at start, named path by the kernel. */
	int (*open_mapped)(void *arg, uint64_t start, const char *path);
	/* Unwinding: the snapshot was read (rc: snap_read()'s). */
	void (*snapped)(void *arg, int rc);
	/* Unwinding: the worker has the request and the snapshot is being
	 * taken; a time to read what the worker will ask for. */
	void (*early)(void *arg);
	/* A core's module by the path it names (modopen_resolved()). */
	int (*open_path)(void *arg, const char *path, char **real);
};

/*
 * How a worker is started on sock, as uid and gid: by a daemon's
 * snapshot helper (ptracer_spawn_worker()), or by the CLI itself; either
 * may change its user. 0 with its pid and pidfd, or a negative errno.
 */
typedef int (*parsers_spawn_fn)(uid_t uid, gid_t gid, int sock, pid_t *pid,
				int *pidfd);

/*
 * Prepares the pool, its workers to be started by spawn as uid and gid.
 * Workers start on demand (and the keeper's, parsers_start()).
 */
int parsers_init(uid_t uid, gid_t gid, parsers_spawn_fn spawn);

/*
 * Starts the pool's keeper (a thread: after the lockdown), which starts
 * a first worker, replaces those that die idle and backs off while
 * starts fail. 0 or a negative errno.
 */
int parsers_start(void);

/* Where the pool says what went wrong (a worker that died, could not
 * start): one line, warn or for information. None by default. */
typedef void (*parsers_log_fn)(bool warn, const char *line);
void parsers_set_log(parsers_log_fn fn);

/* Kills every worker and frees the pool. */
void parsers_stop(void);

/*
 * Symbolizes d in a worker (as sym_dump_until() would, symbols on),
 * by deadline_ns. Modules whose file a worker may not read, or that
 * killed the worker reading them, get frames without function and a
 * symbols_error; d->symbols_partial says some are missing. Only when no
 * worker could answer at all are d's frames module and offset only.
 * 0, or -ENOMEM.
 */
int parsers_symbolize(struct sw_dump *d, uint64_t deadline_ns,
		      const struct parse_files *f);

/*
 * Unwinds, in a worker, the snapshot of pid a core writes to stream
 * (closed here): as unwind_snapshot() into *out, the snapshot's error
 * otherwise (with *tracer for SNAP_ETRACED). read_deadline_ns bounds
 * the snapshot's reading, and unwinding it may take PARSERS_GRACE_NS
 * more. PARSERS_EAGAIN: the worker died on a file of the process
 * (refused from now on); a new snapshot may be tried. A module whose
 * file is refused is in the dump all the same, with its symbols_error.
 */
#define PARSERS_EAGAIN (-21301)
/* The worker failed with no file to blame; or no worker was free. */
#define PARSERS_EFAILED (-21302)
#define PARSERS_EBUSY (-21303)
int parsers_unwind(int stream, pid_t pid, unsigned max_frames,
		   uint64_t read_deadline_ns, const struct parse_files *f,
		   struct sw_dump **out, pid_t *tracer);

/*
 * Reads the core file open at fd (ours still: the worker gets a copy)
 * in a worker: unwound and symbolized there as unwind_core_max() and
 * sym_dump() would (name: the core's, for what it says; exe: --exe or
 * NULL), its modules opened here by f->open_path(), into *out. By
 * deadline_ns, and PARSERS_GRACE_NS more. Else a negative errno or
 * PARSERS_*, with why (size bytes) when there is one to say.
 */
int parsers_core(int fd, const char *name, const char *exe, unsigned max_frames,
		 uint64_t deadline_ns, const struct parse_files *f,
		 struct sw_dump **out, char *why, size_t size);

/*
 * Parses the perf map open at fd (size bytes) in a worker, as
 * perfmap_read() would, into *out built here within budget (a
 * jitcache_reader_fn). A file that kills or stalls a worker is refused
 * for PARSERS_QUARANTINE_S: -EPERM. Else 0, -EAGAIN (no worker free),
 * -ENOMEM, the budget's error or SW_EFORMAT.
 */
struct perfmap;
struct perfmap_budget;
int parsers_perfmap(int fd, off_t size, const struct perfmap_budget *budget,
		    struct perfmap **out);

/* The workers, for /api/v1/status's "processes" (guard.c). */
void parsers_processes(cJSON *arr,
		       cJSON *(*entry)(const char *role, pid_t pid,
				       uint64_t allowed, const char *why));

/* Why the pool cannot work now ("" and 0 when it can). */
int parsers_state(char *why, size_t size);

/* Counters for /metrics. */
struct parsers_stats {
	uint64_t started, killed, crashed, overran, recycled;
	uint64_t requests, refused;
	uint64_t cache_hits, cache_misses; /* the workers' symbolizers */
	size_t running, quarantined;
};
void parsers_stats(struct parsers_stats *st);

#endif /* SW_PARSERS_H */
