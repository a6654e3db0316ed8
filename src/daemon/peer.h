/*
 * peer.h - who is asking: the identity of an HTTP client, from the kernel.
 *
 * Over the daemon's unix socket, SO_PEERCRED and SO_PEERGROUPS, and the
 * effective capabilities of the process pinned by SO_PEERPIDFD. Over TCP
 * from a loopback address, the process that holds the client's own
 * socket: the kernel's socket diagnostics (NETLINK_SOCK_DIAG) name that
 * socket by the connection's four addresses and ports, with its owner and
 * inode, as `ss -e` shows it, and a process of that owner that has the
 * inode open (/proc/PID/fd, as `ss -p` finds it) gives the groups and
 * capabilities. A connection whose owner cannot be proven so (no inode:
 * its client closed it and it is an orphan, which the kernel reports as
 * root's; a state in which no process holds it; no process of its owner
 * holds it) is anonymous, and so is anyone else (another host, a socket
 * the kernel will not attribute). Nothing a client says counts.
 *
 * Capabilities count only when the peer is in the daemon's own user
 * namespace: one in a namespace of its own holds them over that
 * namespace, not over the host. Its uids, gids and groups count wherever
 * it is, as the host sees them.
 */
#ifndef SWD_PEER_H
#define SWD_PEER_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#define PEER_MAX_GROUPS 64

struct peer {
	bool known; /* uid (and groups) came from the kernel */
	bool unix_socket;
	uid_t uid;     /* its effective uid */
	gid_t gid;     /* its effective gid */
	uint64_t caps; /* its effective capabilities over the host; 0 when
			unknown or in another user namespace */
	pid_t pid;     /* the process, when known; 0 otherwise */
	int ngroups;
	gid_t groups[PEER_MAX_GROUPS];
	char key[64]; /* "uid N", or the address of an anonymous one */
};

/*
 * Identifies the client connected on fd (an accepted socket). Fills *out;
 * out->known is false for an anonymous client. Returns 0, or a negative
 * errno when fd is no socket at all. Blocks for a netlink round trip and
 * a look through /proc at most (TCP), PEER_SCAN_MS in all.
 */
#define PEER_SCAN_MS 1000
int peer_identify(int fd, struct peer *out);

/*
 * The key a connection on fd counts under, for the limit of connections
 * per requester: "uid N" as the kernel names the socket's owner (not yet
 * proven: peer_identify() does that, at the cost of a look through
 * /proc), else the client's address or "anonymous"; *root when the
 * kernel says uid 0. Cheap: one netlink round trip at most. 0, or a
 * negative errno when fd is no socket at all.
 */
int peer_count_key(int fd, char *key, size_t size, bool *root);

/* Whether p is in group g (its primary group or one of the others). */
bool peer_in_group(const struct peer *p, gid_t g);

/*
 * Which process of user owner holds socket "socket:[inode]" (searched
 * in /proc for at most a few milliseconds), with *fdnum its number
 * there; 0 for none. Whether pid still holds it as fdnum. Both read
 * other users' descriptors: a privileged reader's (broker.h).
 */
pid_t peer_find_holder(uint32_t inode, uid_t owner, int *fdnum);
bool peer_holds(pid_t pid, int fdnum, uint32_t inode);

/* Has those two asked elsewhere from now on (a process that may not
 * read other users' descriptors asks a core: broker.h). Before any
 * thread identifies a peer. */
void peer_set_holder(pid_t (*find)(uint32_t inode, uid_t owner, int *fdnum),
		     bool (*holds)(pid_t pid, int fdnum, uint32_t inode));

#endif /* SWD_PEER_H */
