/*
 * cores.h - the privileged core's processes, from the service's side.
 *
 * The core (the snapshot helper, helper.c) is the one part of the daemon
 * that may read other processes. Two of them run, each the keeper of
 * the other: when one dies, the other starts a new one at once (then
 * with a backoff while it keeps dying) and hands its control socket to
 * the service, while requests go to the one alive. Only the two first
 * are started here, by the service while it still may: from then on the
 * service gives up what starting a core takes, and the cores restart
 * each other. A core ends when the service does (its control socket
 * closes). With both gone, nothing can bring one back: the daemon says
 * it cannot do its job and stops feeding the systemd watchdog, which
 * restarts it.
 */
#ifndef SWD_CORES_H
#define SWD_CORES_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#define CORES 2

/*
 * Starts both cores (stackwatchd --snapshot-helper). Call it before any
 * thread. 0, or a negative errno when none could be started.
 */
int cores_start(bool kernel_reads);

/*
 * Starts the thread that watches the cores and takes the new ones in.
 * Call it once, after the process's own lockdown. 0 or a negative errno.
 */
int cores_supervise(void);

/*
 * Sends one request (hdr, then len bytes of body) with fds (nfds of
 * them, at most 2) to a core that is alive, the other when the first
 * one tried is found gone. 0, -EBUSY when its socket is full,
 * PTRACER_EGONE when no core is alive.
 */
int cores_send(const void *hdr, size_t hlen, const void *body, size_t len,
	       const int *fds, size_t nfds);

/* The pids of the cores alive now into pids (CORES at most); how many. */
size_t cores_pids(pid_t *pids);

/*
 * What is wrong with the cores now, as a sentence into why (size bytes):
 * 0 when both run; 1 when one is being replaced (reads go on); 2 when
 * none is alive (processes without the agent cannot be read).
 */
int cores_state(char *why, size_t size);

/* Ends the supervision and both cores, and reaps what it may. */
void cores_stop(void);

#endif /* SWD_CORES_H */
