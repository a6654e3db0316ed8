/*
 * worker.h - a parser worker: the process that reads what a target
 * controls (its programs' ELF, DWARF and call frame information, its
 * separate debug files, a snapshot's stack copies) and holds nothing
 * else: no capability, an unprivileged uid, no_new_privs, a seccomp
 * allow-list without open, ptrace, process_vm_*, bpf, perf_event_open,
 * sockets or execve, a memory limit, and only the descriptors its daemon
 * hands it. It is stackwatchd again, run with --parser-worker by the
 * daemon (privsep/parsers.h), which kills it when it takes too long and
 * starts another when it dies: a file that crashes it costs one request.
 *
 * It talks to the daemon on fd WORKER_FD (msg.h's messages) and notes in
 * the page of fd WORKER_NOTE_FD which module it reads at each moment, so
 * that the daemon knows which file to blame when it dies.
 *
 * A request and its answer, the worker asking for each file as it needs
 * it (the daemon answers every W_NEED_* with W_FILE, W_IMAGE or W_MAPS):
 *
 *   W_SYMBOLIZE  u64 deadline_ns, u32 symbols, the raw dump (dumpwire.h)
 *                -> W_DONE i32 rc, then dumpwire_put_symbols() of it
 *   W_UNWIND     u64 deadline_ns (of reading the snapshot), u32
 *                max_frames, i32 pid; its one descriptor: the stream a
 *                core writes the snapshot of pid to
 *                -> W_DONE i32 rc, i32 tracer, then unless rc
 *                   dumpwire_put() of the raw dump unwound
 *   W_CORE       u32 max_frames, str the core's name, u32 has_exe,
 *                str exe; its one descriptor: the core file. Unwound
 *                and symbolized here (images of modules without a file
 *                from the core itself)
 *                -> W_DONE i32 rc, str why, then unless rc
 *                   dumpwire_put() and dumpwire_put_symbols() of it
 *   W_PERFMAP    u64 the file's size; its one descriptor: a perf map
 *                (symbols/perfmap.h), parsed here
 *                -> W_ENTRIES (unasked, as many as it takes: u32 n,
 *                   n entries of u64 start, u64 end, str name; at most
 *                   WORKER_CHUNK bytes each, so that the side building
 *                   the map never holds more than its budget and one
 *                   chunk), then W_DONE i32 rc
 *   W_SNAPPED     i32 rc: the snapshot is read (no answer)
 *   W_NEED_MAPS   (nothing): the process's file mappings -> W_MAPS
 *   W_NEED_MODULE u32 index of the dump's module   -> W_FILE
 *   W_NEED_MAPPED u64 start, str path (a mapping)  -> W_FILE
 *   W_NEED_DEBUG  the build-id's bytes              -> W_FILE
 *   W_NEED_IMAGE  u32 index of the dump's module   -> W_IMAGE
 *   W_NEED_PATH   str path a core names (modopen_resolved()) -> W_FILE,
 *                 its body then also the path resolved
 *   W_FILE        i32 err; the file's descriptor unless err
 *   W_IMAGE       i32 err; the image's bytes
 *   W_MAPS        i32 err, u64 vdso_start, u64 vdso_end, u32 n, each
 *                 mapping: u64 start, end, offset, dev, ino, str path
 *
 * Its first message, unasked: W_DONE, i32 WORKER_HELLO, str why (its
 * protections that are not in force; "" when all are), with the note
 * page's memfd attached.
 */
#ifndef SW_WORKER_H
#define SW_WORKER_H

#include <stdatomic.h>
#include <stdint.h>

#define WORKER_FD 3
#define WORKER_NOTE_FD 4

enum worker_msg {
	W_SYMBOLIZE = 1,
	W_UNWIND,
	W_NEED_MODULE,
	W_NEED_MAPPED,
	W_NEED_DEBUG,
	W_NEED_IMAGE,
	W_FILE,
	W_IMAGE,
	W_DONE,
	W_NEED_MAPS,
	W_MAPS,
	W_SNAPPED,
	W_CORE,
	W_NEED_PATH,
	W_PERFMAP,
	W_ENTRIES,
};

#define WORKER_CHUNK (256u << 10) /* bytes of one W_ENTRIES */

/* The page a worker notes what it reads in (shared with the daemon). */
struct worker_note {
	_Atomic uint64_t start; /* the module's start address; 0: none */
	_Atomic uint32_t signo; /* the fatal signal it got, 0: none */
	_Atomic uint32_t pad;
};

#define WORKER_MAX_MAPS 65536 /* mappings in one W_UNWIND */

/*
 * The worker's process: stackwatchd --parser-worker, started by a core
 * as the unprivileged user it is to be. Sandboxes itself, then answers
 * requests until its socket closes. The exit status: 0, or 2 when it was
 * not started by the daemon.
 */
int worker_main(int argc, char **argv);

/* The hello's rc: a worker that started, sandboxed as it could be. */
#define WORKER_HELLO 0x48454c4f

#endif /* SW_WORKER_H */
