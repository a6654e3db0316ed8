/*
 * procid.h - what a process is, for the access rules: its credentials and
 * which program image runs in it.
 *
 * Whether a requester may see a process is decided for the process as it
 * is at one moment; a set-uid exec, or credentials that change, make it
 * another process for that purpose under the same pid. A target is bound
 * to the procid it had when it was first met, and every read of it and
 * every access decision checks that the process still has that procid
 * (access.h, registry.h): a read that spans a change is discarded.
 *
 * The image is told by where the kernel put its code, stack and heap
 * (/proc/PID/stat's startcode, startstack and start_brk): every exec makes
 * a new address space, and a set-uid exec always randomizes its layout
 * anew (the kernel clears ADDR_NO_RANDOMIZE for it), so an image that
 * replaced another never has its procid.
 */
#ifndef SWD_PROCID_H
#define SWD_PROCID_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

struct procid {
	uid_t uid[3]; /* real, effective, saved */
	gid_t gid[3];
	uint64_t cap_prm;   /* permitted capabilities */
	bool dumpable;	    /* its /proc files belong to its euid */
	uint64_t layout[3]; /* startcode, startstack, start_brk */
	pid_t tid; /* the thread read: pid, or a live one if the leader exited
		    */
};

/*
 * Reads the procid of process pid from /proc. When its first thread has
 * exited (a zombie leader, the others running on), or is leaving (its
 * memory let go: its stat places no image), reads a live thread
 * instead: the process's credentials and image are theirs. Returns 0,
 * -ESRCH when it is gone or all of it is a zombie, or another negative
 * errno. Blocks for a few /proc reads.
 */
int procid_read(pid_t pid, struct procid *out);

/* Whether a and b are the same credentials and the same image. */
bool procid_same(const struct procid *a, const struct procid *b);

#endif /* SWD_PROCID_H */
