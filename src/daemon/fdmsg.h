/*
 * fdmsg.h - one message with at most one descriptor riding on it, on a
 * SOCK_SEQPACKET socket: how a core answers the service (ptracer_msg.h).
 */
#ifndef SWD_FDMSG_H
#define SWD_FDMSG_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/*
 * Sends head (hlen bytes) then body (blen, may be 0) as one message on
 * sock, fd attached when it is not -1. Never blocks, never raises
 * SIGPIPE. 0 or a negative errno.
 */
int fdmsg_send(int sock, const void *head, size_t hlen, const void *body,
	       size_t blen, int fd);

/*
 * Waits until until_ns (CLOCK_MONOTONIC; a signal does not end the wait)
 * for one message on sock: up to size bytes into buf, the descriptor it
 * carries into *fd (-1: none; any other closed). Its length,
 * -ETIMEDOUT, or a negative errno.
 */
ssize_t fdmsg_recv(int sock, void *buf, size_t size, uint64_t until_ns,
		   int *fd);

/*
 * The descriptors a received message carries (SCM_RIGHTS), in order:
 * the first nfds into fds (-1 where fewer came), any more closed.
 */
struct msghdr;
void fdmsg_take_fds(struct msghdr *mh, int *fds, size_t nfds);

#endif /* SWD_FDMSG_H */
