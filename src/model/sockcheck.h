/*
 * sockcheck.h - whether a unix socket may be trusted by the user about to
 * talk to it. The CLI sends its requests and its token to the daemon's
 * HTTP socket, the agent sends the program's stacks to the agent socket;
 * both first make sure that nobody but root or the user set up what they
 * are about to connect to, and that whoever listens really is root or
 * the user.
 *
 * The rule, for a socket at DIR/NAME and a caller of effective uid EUID:
 *
 * - NAME is a socket, not a symbolic link (lstat), owned by root or EUID;
 * - DIR is a directory, not a symbolic link itself (lstat), owned by root
 *   or EUID, and neither group nor others may write to it. There is no
 *   exception for the sticky bit: in a directory such as /tmp anyone may
 *   create the name first, so a socket directly in /tmp fails;
 * - the directories above DIR are not checked. The default directories
 *   are /run/stackwatch (root's), $XDG_RUNTIME_DIR/stackwatch (below the
 *   user's own 0700 runtime directory) and /tmp/stackwatch-UID (in a
 *   sticky /tmp owned by root, where no one else can rename or remove an
 *   entry of ours); a stranger who could swap an ancestor could only lead
 *   the connection to a server of his own, which the peer check below
 *   refuses. The path check is there to refuse a planted socket before
 *   connecting, with a reason a user can act on; the peer check, done on
 *   the connected socket before the first byte is sent, is what no race
 *   between the check and connect() can get around.
 *
 * After connect(): SO_PEERCRED of the socket (the credentials of the
 * process that called listen()) must name root or EUID.
 *
 * Both functions use system calls only: no allocation, no stdio, so the
 * agent can call them inside any program. They are thread-safe and do not
 * block (lstat of a local path aside).
 */
#ifndef SW_SOCKCHECK_H
#define SW_SOCKCHECK_H

#include <sys/types.h>

/* What made a path fail sockcheck_path(). */
enum sockcheck_fault {
	SOCKCHECK_OK = 0,
	SOCKCHECK_MISSING,    /* nothing at the path (or no such directory) */
	SOCKCHECK_BAD_PATH,   /* empty, ends in '/', or too long for sun_path */
	SOCKCHECK_NOT_SOCKET, /* something else than a socket (and no link) */
	SOCKCHECK_LINK,	      /* the socket's name is a symbolic link */
	SOCKCHECK_OWNER,      /* the socket belongs to someone else */
	SOCKCHECK_DIR_LINK,   /* the directory's name is a symbolic link */
	SOCKCHECK_DIR_NOT_DIR,	/* the directory part is no directory */
	SOCKCHECK_DIR_OWNER,	/* the directory belongs to someone else */
	SOCKCHECK_DIR_WRITABLE, /* group or others may write to it */
	SOCKCHECK_ERROR,	/* lstat failed otherwise (see the errno) */
};

/* The verdict of sockcheck_path(), for a message that says why. */
struct sockcheck {
	enum sockcheck_fault fault;
	uid_t uid;     /* the owner of what is at fault (OWNER, DIR_*) */
	mode_t mode;   /* its mode */
	char dir[108]; /* the directory that holds the socket ("." for none) */
};

/*
 * Checks the socket at path against the rule above for a caller of
 * effective uid euid. Returns 0 when it may be used; -ENOENT when nothing
 * is there; -ENOTSOCK when what is there is no socket; -ELOOP for a
 * symbolic link (the socket's or the directory's name); -ENOTDIR when the
 * directory part is no directory; -EPERM when an owner or the directory's
 * mode fails the rule; -EINVAL or -ENAMETOOLONG for a path that cannot be
 * a socket address; another negative errno when lstat fails. out, when
 * not NULL, says which part failed and how. Does not follow links, does
 * not allocate; async-signal-safe.
 */
int sockcheck_path(const char *path, uid_t euid, struct sockcheck *out);

/*
 * Checks the process that listens behind the connected unix socket fd
 * (SO_PEERCRED): 0 when its uid is 0 or euid, -EPERM otherwise, or the
 * negative errno of getsockopt(). *peer_uid, when peer_uid is not NULL,
 * gets the server's uid when it could be read. Async-signal-safe.
 */
int sockcheck_peer(int fd, uid_t euid, uid_t *peer_uid);

#endif /* SW_SOCKCHECK_H */
