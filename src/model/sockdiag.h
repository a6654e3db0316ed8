/*
 * sockdiag.h - who holds the other end of a TCP connection on this host,
 * from the kernel's socket diagnostics (NETLINK_SOCK_DIAG), as `ss -e`
 * shows it: the owner, the inode and the state of the socket named by a
 * connection's two addresses and ports.
 *
 * The daemon asks it of its clients' sockets (daemon/peer.h), the CLI of
 * the server's socket before it sends a token to 127.0.0.1 (cli/http.c):
 * an accepted socket belongs to the process that accepted it, one still
 * waiting to be accepted to the one that listens. Any user may ask; the
 * kernel answers for the sockets of its network namespace.
 */
#ifndef SW_SOCKDIAG_H
#define SW_SOCKDIAG_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

/* What the kernel says of one TCP socket. */
struct sockdiag_tcp {
	uid_t uid;
	uint32_t inode; /* 0: no file holds it (an orphan) */
	uint8_t state;	/* TCP_ESTABLISHED ... (SOCKDIAG_TCP_*) */
};

/* The TCP states of a connection still open on the socket's side. */
#define SOCKDIAG_TCP_ESTABLISHED 1
#define SOCKDIAG_TCP_FIN_WAIT1 4 /* half-closed by its side (shutdown) */
#define SOCKDIAG_TCP_FIN_WAIT2 5
#define SOCKDIAG_TCP_CLOSE_WAIT 8

/*
 * Asks the kernel for the TCP socket whose own address is src and whose
 * peer is dst (AF_INET or AF_INET6, both of one family): its owner, inode
 * and state into *out. Waits timeout_ms at most for the answer. 0, or a
 * negative errno (-ENOENT: no such socket).
 */
int sockdiag_tcp_socket(const struct sockaddr_storage *src,
			const struct sockaddr_storage *dst, int timeout_ms,
			struct sockdiag_tcp *out);

/* Whether ss is a loopback address (127/8, ::1, or ::ffff:127/104). */
bool sockdiag_loopback(const struct sockaddr_storage *ss);

#endif /* SW_SOCKDIAG_H */
