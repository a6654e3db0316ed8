/*
 * msg.h - messages between the service and a parser worker: a header
 * (magic, type, length) and a body of up to MSG_MAX bytes over a stream
 * socket, with up to MSG_MAX_FDS descriptors riding on the header.
 *
 * Either side may be the one that went wrong (a worker is what a hostile
 * file may take over), so every length is checked before anything is
 * read or allocated, and a malformed message ends the conversation.
 */
#ifndef SW_MSG_H
#define SW_MSG_H

#include <stddef.h>
#include <stdint.h>

#define MSG_MAGIC 0x57505753u /* "SWPW" */
#define MSG_MAX (256u << 20)  /* bytes in one body */
#define MSG_MAX_FDS 2

struct msg {
	uint32_t type;
	uint32_t len;
	uint8_t *body; /* malloc'd, len bytes (NULL when 0) */
	int fds[MSG_MAX_FDS];
	unsigned nfds;
};

/*
 * Sends one message of type with len bytes of body and nfds descriptors
 * on fd, blocking until it is all written or deadline_ns
 * (CLOCK_MONOTONIC; 0: none) passes. 0, -ETIMEDOUT, -EPIPE when the
 * other side is gone, or another negative errno.
 */
int msg_send(int fd, uint32_t type, const void *body, size_t len,
	     const int *fds, unsigned nfds, uint64_t deadline_ns);

/*
 * Receives one message from fd into *m (msg_release() it), waiting until
 * deadline_ns (0: for ever). 0; -EPIPE when the other side is gone;
 * -ETIMEDOUT; -EPROTO for a malformed one (then the stream is lost); or
 * another negative errno. Descriptors beyond MSG_MAX_FDS are closed.
 */
int msg_recv(int fd, struct msg *m, uint64_t deadline_ns);

/* Frees m's body and closes the descriptors it still holds (-1: taken). */
void msg_release(struct msg *m);

#endif /* SW_MSG_H */
