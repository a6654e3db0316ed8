/*
 * broker.h - what the service, which holds no privilege, asks the core
 * for: the reads under /proc that only a privileged reader may make.
 *
 * The service runs as an unprivileged user with no capability (main.c
 * drops them once its sockets are bound). What it still needs of other
 * users' processes goes to a core as one REQ_BROKER request each: a
 * descriptor of /proc/PID/maps or auxv, of a namespace link (for its
 * identity), of a mapped file through map_files, of a perf map in the
 * process's own root, the text of wchan, stack, syscall or stat as a
 * privileged reader sees it, and which process holds a TCP socket. The
 * core answers only paths of those shapes (anything else: EPERM), so
 * the service cannot make it open a file no process maps, write
 * anything, or read outside /proc/PID. It makes no access decision: the
 * service asks only for processes its requester may read (access.h).
 */
#ifndef SWD_BROKER_H
#define SWD_BROKER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct request;

/* What the service asks of a core (request.n of a REQ_BROKER). */
enum {
	BROKER_OPEN_READ = 1, /* procfs.h's PROCFS_HOW_* */
	BROKER_OPEN_PATH = 2,
	BROKER_OPEN_MODULE = 3,
	BROKER_OPEN_IN_ROOT = 4,
	BROKER_READ = 10,   /* the file's text */
	BROKER_HOLDER = 11, /* who holds socket inode (request.flags),
			     * a process of user request.uid */
	BROKER_HOLDS = 12   /* whether request.pid still holds it as fd
			     * number request.gid */
};

#define BROKER_PATH_MAX 512   /* the body: a path (two for IN_ROOT) */
#define BROKER_READ_MAX 16384 /* the longest text answered */

/* The answer's head; a descriptor comes attached when rc is one. */
struct broker_answer {
	int32_t rc;    /* 0 or the length read, else -errno */
	int32_t pid;   /* BROKER_HOLDER */
	int32_t fdnum; /* BROKER_HOLDER */
	uint32_t mode; /* a refused file's type (st_mode) */
};

/*
 * The service's side: from now on, what /proc refuses us goes to the
 * cores (procfs_set_broker()). Called once, after the privileges went.
 */
void broker_use(void);

/* Whether broker_use() was called. */
bool broker_in_use(void);

/* Through a core: peer.h's holder search and check. */
pid_t broker_find_holder(uint32_t inode, uid_t owner, int *fdnum);
bool broker_holds(pid_t pid, int fdnum, uint32_t inode);

/*
 * The core's side: answers rq (a REQ_BROKER with len bytes of body) on
 * answer_fd.
 */
void broker_serve(const struct request *rq, const uint8_t *body, size_t len,
		  int answer_fd);

#endif /* SWD_BROKER_H */
