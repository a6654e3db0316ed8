/*
 * registry.h - the processes the daemon knows: agents that registered over
 * the unix socket, plus the daemon itself.
 *
 * A listener thread accepts agents, takes their pid and uid from
 * SO_PEERCRED (never from what they claim), opens a pidfd for them, reads
 * their HELLO and drops them on disconnect. Targets are reference counted:
 * a request keeps its target alive (and its socket open) even if the agent
 * goes away meanwhile. Nothing here watches any process that did not
 * register (the libuv lesson).
 */
#ifndef SWD_REGISTRY_H
#define SWD_REGISTRY_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include "model/dump.h"
#include "procid.h"
#include "ptracer.h"

#define REGISTRY_MAX_TARGETS 4096
#define REGISTRY_MAX_PENDING 256 /* connections that have not said HELLO */
#define REGISTRY_HELLO_MS 5000	 /* time allowed to say HELLO */

struct target {
	int kind; /* first: tells targets from pending connections */
	_Atomic int refs;
	pid_t pid; /* as the daemon sees it (SO_PEERCRED) */
	uid_t uid;
	_Atomic int signo; /* the agent's, as it last said */
	uint32_t features; /* the agent's HELLO's WIRE_FEAT_* bits */
	bool self;	   /* the daemon itself: dumped in-process */
	bool ptrace;	   /* no agent: dumped by ptrace snapshots */
	_Atomic uint64_t last_used_ms; /* ptrace: last asked for (monotonic) */
	uid_t opener;	      /* ptrace: whose request made the entry */
	bool opener_priority; /* ... with priority (root, the admin group) */
	struct procid id;     /* what the process was when it was first met */
	bool foreign_ns;      /* in another pid namespace: tids translated */
	char comm[SW_COMM_MAX];
	char *cmdline;
	struct timespec registered_at; /* CLOCK_REALTIME */
	int fd;			       /* agent connection, -1 for self */
	int pidfd;		       /* -1 when unavailable */
	int pidfd_kind;	   /* epoll tag of pidfd: its exit drops t */
	_Atomic bool dead; /* unregistered; requests fail */
	_Atomic uint64_t last_sample_ms; /* CLOCK_REALTIME ms, 0: never */
	_Atomic uint32_t last_threads;

	/* The dump service's state (stacks.c's), opaque here. */
	struct target_svc *svc;
	const struct registry_hooks *hooks;

	/* The scheduler's (scheduler.c). */
	_Atomic bool queued;	      /* a sampling job is queued */
	_Atomic uint64_t next_due_ns; /* CLOCK_MONOTONIC */
	_Atomic uint32_t profiled;    /* profile runs that want it */

	pthread_mutex_t io_lock; /* one request at a time on fd */
	uint32_t seq;		 /* under io_lock */
	uint8_t *rx; /* bytes received, not yet consumed; under io_lock */
	size_t rx_len;
	size_t rx_cap;
	size_t rx_skip;	   /* bytes of a message given up on, still to come */
	struct kept *kept; /* the last kernel read's threads; under io_lock */
	/* The symbols of its last dumps' stacks (symmemo.h); under
	 * memo_lock, which is taken for no longer than a copy of them. */
	pthread_mutex_t memo_lock;
	struct symmemo *memo;
	struct ran *ran;     /* the last sample's signal reads; under io_lock */
	struct tcred *tcred; /* threads of other credentials; under io_lock */
	struct target *next; /* registry list */
};

struct registry;

/*
 * What the service that dumps targets (stacks.c) keeps per target: made
 * with each target and freed when its last reference goes. The registry
 * knows nothing of what is inside.
 */
struct registry_hooks {
	struct target_svc *(*svc_new)(void); /* NULL: out of memory */
	void (*svc_free)(struct target_svc *svc);
};

/*
 * Creates the agent socket at path (its directory made 0755 if missing, a
 * stale socket replaced, the socket itself 0666 so any user's programs can
 * register) and starts the listener thread. The daemon's own entry is
 * registered first. Every target gets its service state from hooks.
 * Returns 0 or a negative errno.
 */
int registry_start(const char *path, const struct registry_hooks *hooks,
		   struct registry **out);

/* Stops the listener, unregisters everyone, removes the socket. */
void registry_stop(struct registry *r);

/*
 * The target with this pid (an agent's, else a process already dumped by
 * ptrace), with a reference; NULL when none.
 */
struct target *registry_get(struct registry *r, pid_t pid);

/*
 * registry_get(), or else a new entry for pid as a process without the
 * agent, dumped by ptrace snapshots (t->ptrace), pinned by a pidfd, made
 * for who. Such entries are listed nowhere (registry_list() is the
 * agents'), leave when their process exits, and are forgotten after
 * REGISTRY_PTRACE_IDLE_MS unasked, or REGISTRY_PTRACE_KEEP_MS with
 * registry_keep_ptraced(). One requester without priority keeps at most
 * max_ptraced_per_user of them (registry_set_limits()): one more replaces
 * their own least recently asked; all of them together leave
 * REGISTRY_PTRACED_RESERVE entries to requesters with priority, who may
 * replace anyone's least recently asked. NULL with *err: -ESRCH no such
 * process, -ENOMEM. The caller has checked that who may see pid.
 */
#define REGISTRY_PTRACE_IDLE_MS 60000
#define REGISTRY_PTRACE_KEEP_MS (10 * 60000)
#define REGISTRY_MAX_PTRACED 1024
#define REGISTRY_PTRACED_RESERVE 64
struct target *registry_get_process(struct registry *r, pid_t pid,
				    const struct asker *who, int *err);

/*
 * Keep ptrace entries while their process lives and someone asked for it
 * within REGISTRY_PTRACE_KEEP_MS (--sample-ptrace).
 */
void registry_keep_ptraced(struct registry *r, bool keep);

/* The ptrace entries kept now, all requesters' together. */
size_t registry_count_ptraced_all(struct registry *r);

/*
 * Every live agent target, each with a reference, sorted by pid. *out is
 * malloc'd; release with registry_put_all(). registry_list_ptraced() is
 * the same for the entries of processes without the agent.
 */
int registry_list(struct registry *r, struct target ***out, size_t *n);
int registry_list_ptraced(struct registry *r, struct target ***out, size_t *n);
void registry_put_all(struct target **ts, size_t n);

/* Number of registered targets (agents), the daemon included. */
size_t registry_count(struct registry *r);

/* Number of registered targets of uid. */
size_t registry_count_uid(struct registry *r, uid_t uid);

/* What one user may cost; root's processes are not counted or capped. */
struct registry_limits {
	int max_targets_per_user; /* more registrations are refused */
	int max_dump_addresses;	  /* a dump with more is refused */
	int max_ptraced_per_user; /* ptrace entries a requester keeps */
};

/* Sets the limits for every registry (defaults: 256, 1048576, 16). */
void registry_set_limits(const struct registry_limits *l);

/* A dump of more addresses than max_dump_addresses allows. */
#define REGISTRY_EADDRS (-21001)
/*
 * The process ran another program or changed its credentials since it
 * became a target (procid.h): the target is forgotten.
 */
#define REGISTRY_ECHANGED (-21003)

void target_get(struct target *t);
void target_put(struct target *t);

/* True while the process behind t is the one that registered. */
bool target_alive(const struct target *t);

/*
 * Whether the process behind t still has the procid it had when it
 * became a target (its credentials, its program image). When it does
 * not, t is forgotten (dead, its agent's connection closed) and
 * REGISTRY_ECHANGED returned; -ECONNRESET when it is gone; else 0 with
 * *now (may be NULL) what was read. The daemon itself always is.
 */
int target_unchanged(struct target *t, struct procid *now);

/*
 * Asks t for a raw dump for who with a deadline of timeout_ms (the agent's
 * own) and waits at most timeout_ms + a grace for the answer. The process
 * must have t's procid before and after the read (target_unchanged()), or
 * the dump is discarded and REGISTRY_ECHANGED returned: nothing read
 * across a set-uid exec or a change of credentials is ever shown. Returns
 * 0 with *out a raw dump, -ETIMEDOUT when the agent did not answer in time (a
 * late answer is discarded when the next request reads past it), -ECONNRESET
 * when the agent is gone or broke the protocol (it is then dropped), or the
 * agent's own error (SW_EHANDLER...), or REGISTRY_EADDRS for a dump of a
 * process of a user other than root with more addresses than allowed.
 * A message half received when the deadline passes is dropped at once
 * and its rest discarded as it comes. For a target in another pid
 * namespace the
 * thread ids of *out are the daemon's (nspid.h). Serialized per target;
 * blocks.
 */
int target_dump_raw(struct target *t, const struct asker *who, int timeout_ms,
		    struct sw_dump **out);

/*
 * target_dump_raw() keeping max_frames frames per thread where the
 * threads are unwound here (kernel, perf and ptrace reads; as struct
 * snap's max_frames: 0 SW_MAX_FRAMES, at most SW_MAX_FRAMES_HARD). An
 * agent's own reads keep what its slots hold (SW_MAX_FRAMES): the
 * caller cuts them shorter if it must (stacks.h).
 */
int target_dump_raw_frames(struct target *t, const struct asker *who,
			   int timeout_ms, unsigned max_frames,
			   struct sw_dump **out);

/*
 * target_dump_raw() for a periodic sample: where the kernel path is not
 * used, an agent's threads that have not been on a CPU since the last
 * sample read them are not signalled, and their stacks of then are put
 * back, marked SW_TF_REUSED (ran.h). Everything else as target_dump_raw().
 */
int target_dump_raw_sample(struct target *t, const struct asker *who,
			   int timeout_ms, struct sw_dump **out);

/*
 * target_dump_raw(), leaving out the threads skip[0..nskip) (tids as the
 * daemon sees them, in any order, repeats allowed): threads read by other
 * means, which the agent must neither signal nor read nor report. *out
 * holds none of them, whatever the agent sends. For a target in another
 * pid namespace the tids are translated to the agent's first; one that
 * names no thread of the process is dropped. The daemon itself honours
 * the set too. Returns what target_dump_raw() returns, or, with nothing
 * sent: -EINVAL for a tid <= 0 or more than SW_MAX_THREADS of them
 * (whatever t is); -EOPNOTSUPP when t cannot leave threads out (its agent
 * did not say WIRE_FEAT_SKIP, or it is dumped by ptrace), for the caller
 * to dump it whole instead. nskip 0 is target_dump_raw(). Serialized per
 * target; blocks.
 */
int target_dump_raw_skip(struct target *t, const struct asker *who,
			 int timeout_ms, const pid_t *skip, size_t nskip,
			 struct sw_dump **out);

#endif /* SWD_REGISTRY_H */
