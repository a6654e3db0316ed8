/*
 * peer.h - who is asking: the identity of an HTTP client, from the kernel.
 *
 * Over the daemon's unix socket, SO_PEERCRED and SO_PEERGROUPS. Over TCP
 * from a loopback address, the owner of the client's own socket, which the
 * kernel's socket diagnostics (NETLINK_SOCK_DIAG) tell by the connection's
 * four addresses and ports, as `ss -e` shows it: a browser or a curl on
 * this host is its user. Anyone else (another host, a socket the kernel
 * will not attribute) is anonymous. Nothing a client says counts.
 */
#ifndef SWD_PEER_H
#define SWD_PEER_H

#include <stdbool.h>
#include <sys/types.h>

#define PEER_MAX_GROUPS 64

struct peer {
	bool known; /* uid (and groups) came from the kernel */
	bool unix_socket;
	uid_t uid;
	gid_t gid;
	pid_t pid; /* over the unix socket; 0 otherwise */
	int ngroups;
	gid_t groups[PEER_MAX_GROUPS];
	char key[64]; /* "uid N", or the address of an anonymous one */
};

/*
 * Identifies the client connected on fd (an accepted socket). Fills *out;
 * out->known is false for an anonymous client. Returns 0, or a negative
 * errno when fd is no socket at all. Blocks for a netlink round trip at
 * most (TCP).
 */
int peer_identify(int fd, struct peer *out);

/* Whether p is in group g (its primary group or one of the others). */
bool peer_in_group(const struct peer *p, gid_t g);

/*
 * The kernel's view of process pid: its real, effective and saved uids,
 * and whether it is dumpable (its /proc entry then belongs to its
 * effective uid, else to root). Returns 0, or a negative errno when it
 * is gone or unreadable.
 */
int peer_process_uids(pid_t pid, uid_t uids[3], bool *dumpable);

#endif /* SWD_PEER_H */
