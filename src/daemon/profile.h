/*
 * profile.h - wall-clock profiles (/debug/pprof/profile, /debug/fgprof):
 * what one request collects from the dumps the scheduler takes.
 *
 * A run names its targets and its window. The scheduler samples those
 * targets at the profile rate while any run wants them, and hands each
 * fresh dump to every run that wants its target (profile_feed()), so any
 * number of concurrent requests cost the targets one sampling. Each ok
 * thread of a dump adds one sample: samples/count 1, wall/nanoseconds the
 * time since the run's previous dump of that target (the nominal period
 * for the first), cpu/nanoseconds the thread's CPU time since its previous
 * sample in the run (0 for the first), labels pid, comm and thread.
 */
#ifndef SWD_PROFILE_H
#define SWD_PROFILE_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "access.h"
#include "registry.h"
#include "stacks.h"

struct pprof;
struct cpu_seen;

struct profile_run {
	struct profile_run *next; /* the scheduler's list */
	/* The scheduler's too: whose run it is, and its client. */
	char owner[64];	    /* the requester's key (peer.h) */
	bool all;	    /* the requester sees everything */
	struct access acc;  /* what of each dump it may read (access.h) */
	int fd;		    /* the client's socket; -1: none */
	bool abandoned;	    /* ended because the client hung up */
	struct target **ts; /* references, n of them */
	size_t n;
	uint64_t *last_ns; /* per target: mono_ns of the last dump fed */
	uint64_t period_ns;
	uint64_t start_ns, end_ns;  /* CLOCK_MONOTONIC */
	struct timespec started_at; /* CLOCK_REALTIME */
	pthread_mutex_t lock;	    /* what follows */
	struct pprof *b;
	struct cpu_seen *cpu; /* (pid, tid) -> CPU ms at its last sample */
	size_t ncpu, cpu_cap;
	int rc;		/* the first failure; then nothing more is added */
	uint64_t dumps; /* fed */
	void *out;	/* the profile once finished */
	size_t len;
	bool finished;
	void (*done)(void *arg); /* called once, when finished */
	void *arg;
};

/*
 * A run over ts (n targets, references taken) from now for seconds,
 * sampled every period_ns. NULL on out of memory.
 */
struct profile_run *profile_new(struct target **ts, size_t n, int seconds,
				uint64_t period_ns);

/*
 * Adds sd, a dump of t, to r if r wants t and has not had it yet: what
 * r's requester may read of it (access_view(), as a past sample). Reads
 * /proc for a requester who does not see everything.
 */
void profile_feed(struct profile_run *r, const struct target *t,
		  struct sdump *sd);

/*
 * Ends r: encodes what it has into r->out (r->rc on failure; nothing and
 * -ECONNABORTED when r->abandoned: no one is left to read it) and calls
 * r->done. Called once.
 */
void profile_finish(struct profile_run *r);

void profile_free(struct profile_run *r);

#endif /* SWD_PROFILE_H */
