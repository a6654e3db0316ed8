/*
 * ptracer_msg.h - the requests the daemon sends its snapshot helper
 * (ptracer.c sends them, helper.c serves them); private to the two.
 *
 * One request is one SOCK_SEQPACKET message on the helper's socket, with
 * one end of a fresh stream socket attached (SCM_RIGHTS) that carries its
 * answer alone: a snapshot (snapshot.h's bytes), for a check one byte
 * per task (1: the requester may read it), for a status one struct
 * helper_status.
 */
#ifndef SWD_PTRACER_MSG_H
#define SWD_PTRACER_MSG_H

#include <stdint.h>

#include "ptracer.h"

#define PTRACER_MAGIC 0x52545053u      /* "SPTR" */
#define PTRACER_FD 3		       /* the helper's request socket */
#define PTRACER_GRACE_NS 1000000000ull /* answer after the deadline */
#define PTRACER_MAX_MS 60000
#define PTRACER_MAX_CHILDREN 4 /* snapshots the helper takes at once */

/*
 * REQ_PEER: the service tells a core which process is its peer, the
 * other core it keeps (cores.h): the peer's pidfd comes as the request's
 * one descriptor, no answer.
 */
/*
 * REQ_WORKER: the core starts a parser worker (privsep/worker.h) as
 * rq.uid and rq.gid (when it may change its own; else as itself) on the
 * stream socket that comes as the second descriptor, and answers with
 * a struct worker_started, the new worker's pidfd attached.
 */
enum {
	REQ_SNAPSHOT = 1,
	REQ_CHECK = 2,
	REQ_STATUS = 3,
	REQ_PEER = 4,
	REQ_WORKER = 5,
	REQ_BROKER = 6 /* broker.h: rq.n says what, the body a path */
};

struct worker_started {
	int32_t pid; /* 0: none started */
	int32_t err; /* then why: -errno */
};

/*
 * What a core says to the service on its control socket, unasked: it
 * started a new peer (its pid), whose control socket comes attached.
 */
#define CORE_MSG_MAGIC 0x43524f43u /* "CORC" */
enum { CORE_NEW_PEER = 1 };
struct core_msg {
	uint32_t magic;
	uint32_t kind;
	int32_t pid;
	uint32_t pad;
};

/* request.flags of a snapshot */
#define REQF_KERNEL_ONLY 0x1 /* threads the kernel cannot give: skipped */
#define REQF_DEEP 0x2	     /* copies up to SNAP_STACK_HARD (SNAP_DEEP) */

/* The answer to REQ_STATUS: whether the helper reads from the kernel. */
struct helper_status {
	int32_t kread_err; /* 0: it does; else why not (-errno) */
	int32_t perf_err;  /* 0: it samples running threads by perf */
	char why[240];	   /* in words, when it does not */
	char perf_why[160];
	int32_t filter_err; /* 0: its seccomp filter is in force */
	char filter_why[200];
};

struct request {
	uint32_t magic;
	uint32_t kind;
	int32_t pid;	/* REQ_SNAPSHOT */
	uint32_t n;	/* REQ_CHECK: tasks that follow */
	uint32_t flags; /* REQ_SNAPSHOT: REQF_* */
	uint32_t pad;
	uint64_t deadline_ns; /* CLOCK_MONOTONIC: the host's one clock */
	uint32_t uid;	      /* REQ_CHECK: the requester's credentials */
	uint32_t gid;
	uint64_t caps;
};

struct request_task {
	int32_t pid;
	int32_t tid;
};

/*
 * After a REQ_SNAPSHOT, rq.n of these (at most PTRACER_SAME_MAX):
 * threads read from the kernel before, with their switch counts then.
 */
#define PTRACER_SAME_MAX 4096
struct request_same {
	int32_t tid;
	uint32_t wait_op; /* its futex wait then, when wait_addr */
	uint64_t nvcsw;
	uint64_t nivcsw;
	uint64_t wait_addr;
};

#endif /* SWD_PTRACER_MSG_H */
