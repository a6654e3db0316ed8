/*
 * peer.c - who is asking (peer.h).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "model/clock.h"
#include "model/procfs.h"
#include "model/sockdiag.h"
#include "peer.h"

#define DIAG_TIMEOUT_MS 200

static void set_key_uid(struct peer *p)
{
	snprintf(p->key, sizeof(p->key), "uid %u", (unsigned)p->uid);
}

#ifndef SO_PEERPIDFD
#define SO_PEERPIDFD 77 /* Linux 6.5 */
#endif

/*
 * What the status file of pid says of its credentials: its effective uid
 * and gid, effective capabilities and, with groups, its other groups
 * (at most PEER_MAX_GROUPS). 0 or a negative errno.
 */
static int status_creds(pid_t pid, uid_t *euid, gid_t *egid, uint64_t *caps,
			gid_t *groups, int *ngroups)
{
	char path[64], buf[4096];
	uint32_t ids[PEER_MAX_GROUPS];
	ssize_t n;
	int k;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	n = procfs_read_at(AT_FDCWD, path, buf, sizeof(buf));
	if (n < 0)
		return (int)n;
	if (procfs_parse_status_ids(buf, (size_t)n, "Uid", ids, 2) != 2)
		return -EINVAL;
	*euid = (uid_t)ids[1];
	if (procfs_parse_status_ids(buf, (size_t)n, "Gid", ids, 2) != 2)
		return -EINVAL;
	*egid = (gid_t)ids[1];
	if (procfs_parse_status_hex(buf, (size_t)n, "CapEff", caps))
		return -EINVAL;
	if (!groups)
		return 0;
	k = procfs_parse_status_ids(buf, (size_t)n, "Groups", ids,
				    PEER_MAX_GROUPS);
	*ngroups = k > 0 ? k : 0;
	for (int i = 0; i < *ngroups; i++)
		groups[i] = (gid_t)ids[i];
	return 0;
}

#ifndef PIDFD_GET_USER_NAMESPACE
#define PIDFD_GET_USER_NAMESPACE _IO(0xFF, 9) /* Linux 6.11 */
#endif

/* The device and inode that name a user namespace. */
struct userns_id {
	dev_t dev;
	ino_t ino;
};

static pthread_once_t own_userns_once = PTHREAD_ONCE_INIT;
static struct userns_id own_userns;
static bool own_userns_known;

static void read_own_userns(void)
{
	struct stat st;

	if (stat("/proc/self/ns/user", &st) == 0) {
		own_userns.dev = st.st_dev;
		own_userns.ino = st.st_ino;
		own_userns_known = true;
	}
}

/*
 * Whether the process pinned by pidfd (pid, as the daemon's /proc names
 * it) is in the daemon's own user namespace. Asked of the pidfd itself
 * where the kernel can (PIDFD_GET_USER_NAMESPACE), so that no other
 * process can stand in for it; else of /proc/PID/ns/user, taken only
 * when the pinned process is still alive afterwards (its pid was not
 * handed to another meanwhile). False whenever it cannot be told.
 */
static bool in_own_userns(int pidfd, pid_t pid)
{
	struct stat st;
	char path[64];
	int ns;

	pthread_once(&own_userns_once, read_own_userns);
	if (!own_userns_known || pidfd < 0)
		return false;
	ns = ioctl(pidfd, PIDFD_GET_USER_NAMESPACE, 0);
	if (ns >= 0) {
		bool same = fstat(ns, &st) == 0 &&
			    st.st_dev == own_userns.dev &&
			    st.st_ino == own_userns.ino;

		close(ns);
		return same;
	}
	snprintf(path, sizeof(path), "/proc/%d/ns/user", (int)pid);
	if (procfs_stat(path, &st) < 0 || !procfs_pidfd_alive(pidfd))
		return false;
	return st.st_dev == own_userns.dev && st.st_ino == own_userns.ino;
}

/*
 * The capabilities that count of the process pinned by pidfd, whose
 * status said caps: those, when it is in the daemon's user namespace;
 * none otherwise. A process in a user namespace of its own (unshare -U)
 * holds every capability there and none over the host, yet its status
 * shows them all: they are over its namespace, not ours.
 */
static uint64_t caps_that_count(int pidfd, pid_t pid, uint64_t caps)
{
	if (caps == 0 || !in_own_userns(pidfd, pid))
		return 0;
	return caps;
}

/*
 * The effective capabilities of the process on the other end of unix
 * socket fd, pinned by SO_PEERPIDFD: 0 when it cannot be pinned, is gone,
 * is no longer the uid that connected (then its capabilities are not
 * the ones it connected with), or is in another user namespace.
 */
static uint64_t unix_peer_caps(int fd, const struct ucred *cred)
{
	socklen_t len = sizeof(int);
	uint64_t caps = 0;
	uid_t euid;
	gid_t egid;
	int pidfd = -1;

	if (cred->pid <= 0 ||
	    getsockopt(fd, SOL_SOCKET, SO_PEERPIDFD, &pidfd, &len) < 0 ||
	    pidfd < 0)
		return 0;
	if (status_creds(cred->pid, &euid, &egid, &caps, NULL, NULL) < 0 ||
	    euid != cred->uid || !procfs_pidfd_alive(pidfd))
		caps = 0;
	caps = caps_that_count(pidfd, cred->pid, caps);
	close(pidfd);
	return caps;
}

static int identify_unix(int fd, struct peer *p)
{
	struct ucred cred;
	socklen_t len = sizeof(cred);

	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0)
		return 0; /* anonymous */
	p->known = true;
	p->unix_socket = true;
	p->uid = cred.uid;
	p->gid = cred.gid;
	p->pid = cred.pid;
	len = sizeof(p->groups);
	if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, p->groups, &len) == 0)
		p->ngroups = (int)(len / sizeof(gid_t));
	p->caps = unix_peer_caps(fd, &cred);
	set_key_uid(p);
	return 0;
}

/* Whether fd number fdnum of pid is the socket "socket:[inode]". */
static bool holds_socket(int pidfd_dir, const char *fdnum, const char *want)
{
	char link[64];
	ssize_t n = readlinkat(pidfd_dir, fdnum, link, sizeof(link) - 1);

	if (n <= 0)
		return false;
	link[n] = '\0';
	return strcmp(link, want) == 0;
}

/*
 * Looks through the open files of process pid (its /proc/PID/fd open at
 * dir) for want. Returns the fd's number, or -1.
 */
static int find_in_process(int dir, const char *want, uint64_t until)
{
	DIR *d;
	struct dirent *e;
	int found = -1, dfd = dup(dir);

	if (dfd < 0)
		return -1;
	d = fdopendir(dfd);
	if (!d) {
		close(dfd);
		return -1;
	}
	while (found < 0 && (e = readdir(d)) && clock_now_ns() < until)
		if (e->d_name[0] != '.' && holds_socket(dir, e->d_name, want))
			found = atoi(e->d_name);
	closedir(d);
	return found;
}

/*
 * The processes that last proved a connection of their user: a browser
 * or a program that makes many connections is found at once the next
 * time (the proof, prove_holder(), is made again all the same).
 */
#define HOLDERS_KEPT 16
static pthread_mutex_t holders_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
	uid_t uid;
	pid_t pid;
} holders[HOLDERS_KEPT];
static unsigned holders_next;

static void remember_holder(uid_t uid, pid_t pid)
{
	pthread_mutex_lock(&holders_lock);
	holders[holders_next % HOLDERS_KEPT].uid = uid;
	holders[holders_next % HOLDERS_KEPT].pid = pid;
	holders_next++;
	pthread_mutex_unlock(&holders_lock);
}

/* Whether process pid (under /proc, open at proc) holds want: *fdnum. */
static bool pid_holds(int proc, pid_t pid, const char *want, uint64_t until,
		      int *fdnum)
{
	char path[32];
	int dir;

	snprintf(path, sizeof(path), "%d/fd", (int)pid);
	dir = openat(proc, path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dir < 0)
		return false;
	*fdnum = find_in_process(dir, want, until);
	close(dir);
	return *fdnum >= 0;
}

static int cmp_pid_desc(const void *a, const void *b)
{
	pid_t x = *(const pid_t *)a, y = *(const pid_t *)b;

	return (x < y) - (x > y);
}

/* The pids under /proc, newest first (*out malloc'd). 0 or -1. */
static int list_pids(DIR *proc, pid_t **out, size_t *n)
{
	struct dirent *e;
	size_t cap = 0;

	*out = NULL;
	*n = 0;
	while ((e = readdir(proc))) {
		if (e->d_name[0] < '1' || e->d_name[0] > '9')
			continue;
		if (*n == cap) {
			pid_t *p = realloc(*out,
					   (cap ? 2 * cap : 512) * sizeof(*p));

			if (!p) {
				free(*out);
				*out = NULL;
				return -1;
			}
			*out = p;
			cap = cap ? 2 * cap : 512;
		}
		(*out)[(*n)++] = (pid_t)atoi(e->d_name);
	}
	if (*n)
		qsort(*out, *n, sizeof(**out), cmp_pid_desc);
	return 0;
}

/* The newest pids looked at before any listing of /proc. */
#define RECENT_PIDS 32

/*
 * The pid of pid's process: itself, or its thread group's leader when
 * pid names a thread. 0 when it cannot be read.
 */
static pid_t tgid_of(pid_t pid)
{
	char path[64], buf[4096];
	int64_t v;
	ssize_t n;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	n = procfs_read_at(AT_FDCWD, path, buf, sizeof(buf));
	if (n < 0 || procfs_parse_status_dec(buf, (size_t)n, "Tgid", &v) != 0 ||
	    v <= 0)
		return 0;
	return (pid_t)v;
}

/*
 * The holder among the newest tasks, counted down from the pid the
 * kernel handed out last: a client has mostly just started (curl, a
 * script), and this costs a few lookups where listing /proc costs one
 * for every process of the host. 0 when none of them holds it.
 */
static pid_t find_recent(int proc, const char *want, uid_t owner, pid_t self,
			 uint64_t until, int *fdnum)
{
	char buf[32];
	ssize_t n = procfs_read_at(AT_FDCWD, "/proc/sys/kernel/ns_last_pid",
				   buf, sizeof(buf));
	long last = n > 0 ? strtol(buf, NULL, 10) : 0;

	for (long pid = last;
	     pid > 0 && pid > last - RECENT_PIDS && clock_now_ns() < until;
	     pid--) {
		char name[24];
		struct stat st;
		pid_t tgid;

		snprintf(name, sizeof(name), "%ld", pid);
		if (pid == self || fstatat(proc, name, &st, 0) < 0 ||
		    (st.st_uid != owner && st.st_uid != 0) ||
		    !pid_holds(proc, (pid_t)pid, want, until, fdnum))
			continue;
		/* A thread's files are its process's: name the process. */
		tgid = tgid_of((pid_t)pid);
		if (tgid > 0 && tgid != self)
			return tgid;
	}
	return 0;
}

/*
 * A process that holds the socket inode open: first those that proved
 * their user's connections lately, then the newest tasks by pid
 * (find_recent()), then, newest first (clients are
 * mostly young), the processes whose /proc entry belongs to owner (the
 * dumpable ones of that user), then those given to root (the ones that
 * are not dumpable); never ourselves; until PEER_SCAN_MS have passed.
 * Returns its pid with *fdnum, or 0.
 */
pid_t peer_find_holder(uint32_t inode, uid_t owner, int *fdnum)
{
	uint64_t until = clock_now_ns() + PEER_SCAN_MS * 1000000ull;
	pid_t cached[HOLDERS_KEPT], found = 0, self = getpid(), *pids;
	size_t ncached = 0, n;
	char want[40];
	DIR *proc;

	snprintf(want, sizeof(want), "socket:[%u]", (unsigned)inode);
	proc = opendir("/proc");
	if (!proc)
		return 0;
	pthread_mutex_lock(&holders_lock);
	for (unsigned i = 0; i < HOLDERS_KEPT; i++)
		if (holders[i].pid > 0 && holders[i].uid == owner)
			cached[ncached++] = holders[i].pid;
	pthread_mutex_unlock(&holders_lock);
	for (size_t i = 0; i < ncached && !found; i++)
		if (pid_holds(dirfd(proc), cached[i], want, until, fdnum))
			found = cached[i];
	if (!found)
		found = find_recent(dirfd(proc), want, owner, self, until,
				    fdnum);
	if (!found && list_pids(proc, &pids, &n) == 0) {
		for (int pass = 0; pass < 2 && !found; pass++) {
			uid_t uid = pass == 0 ? owner : 0;

			if (pass == 1 && owner == 0)
				break;
			for (size_t i = 0;
			     i < n && !found && clock_now_ns() < until; i++) {
				char name[16];
				struct stat st;

				snprintf(name, sizeof(name), "%d",
					 (int)pids[i]);
				if (pids[i] == self ||
				    fstatat(dirfd(proc), name, &st, 0) < 0 ||
				    st.st_uid != uid)
					continue;
				if (pid_holds(dirfd(proc), pids[i], want, until,
					      fdnum))
					found = pids[i];
			}
		}
		free(pids);
	}
	closedir(proc);
	if (found)
		remember_holder(owner, found);
	return found;
}

bool peer_holds(pid_t pid, int fdnum, uint32_t inode)
{
	char path[64], want[40];
	bool still;
	int dir;

	snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
	snprintf(want, sizeof(want), "socket:[%u]", (unsigned)inode);
	dir = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dir < 0)
		return false;
	snprintf(path, sizeof(path), "%d", fdnum);
	still = holds_socket(dir, path, want);
	close(dir);
	return still;
}

/*
 * How holders are found: here, or by a core (peer_set_holder()), set
 * while other threads may be asking: atomic, both at once.
 */
struct holder {
	pid_t (*find)(uint32_t inode, uid_t owner, int *fdnum);
	bool (*holds)(pid_t pid, int fdnum, uint32_t inode);
};
static const struct holder holder_here = { peer_find_holder, peer_holds };
static struct holder holder_set;
static const struct holder *_Atomic holder_at = &holder_here;

void peer_set_holder(pid_t (*find)(uint32_t inode, uid_t owner, int *fdnum),
		     bool (*holds)(pid_t pid, int fdnum, uint32_t inode))
{
	holder_set.find = find;
	holder_set.holds = holds;
	atomic_store_explicit(&holder_at, &holder_set, memory_order_release);
}

/*
 * Proves who holds the client's socket s: a process that has it open
 * and whose effective uid is its owner; its gid, groups and capabilities
 * are the requester's, its capabilities only in the daemon's user
 * namespace (caps_that_count()). Pins the process, reads its credentials,
 * then checks that it still holds the socket and lives (its pid was not
 * reused meanwhile). 0, or -1 when nothing proves it.
 */
static int prove_holder(const struct sockdiag_tcp *s, struct peer *p)
{
	const struct holder *h =
		atomic_load_explicit(&holder_at, memory_order_acquire);
	uid_t euid;
	gid_t egid;
	pid_t pid;
	int fdnum = -1, pidfd;
	bool still;

	/*
	 * An orphan (its client closed it, no file holds it: inode 0) is
	 * what the kernel reports as root's; so is any socket in a state
	 * where no process can hold it.
	 */
	if (s->inode == 0 || (s->state != SOCKDIAG_TCP_ESTABLISHED &&
			      s->state != SOCKDIAG_TCP_CLOSE_WAIT &&
			      s->state != SOCKDIAG_TCP_FIN_WAIT1 &&
			      s->state != SOCKDIAG_TCP_FIN_WAIT2))
		return -1;
	pid = h->find(s->inode, s->uid, &fdnum);
	if (!pid)
		return -1;
	/* Pinned first: what is read next is of this process or of none. */
	pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	if (pidfd < 0)
		return -1;
	if (status_creds(pid, &euid, &egid, &p->caps, p->groups, &p->ngroups) <
		    0 ||
	    euid != s->uid)
		goto out_close;
	p->caps = caps_that_count(pidfd, pid, p->caps);
	still = h->holds(pid, fdnum, s->inode) && procfs_pidfd_alive(pidfd);
	if (!still)
		goto out_close;
	close(pidfd);
	p->uid = euid;
	p->gid = egid;
	p->pid = pid;
	return 0;

out_close:
	close(pidfd);
	return -1;
}

/*
 * What the kernel's socket diagnostics say of the client of TCP socket
 * fd, into *ds; p->key gets the client's address. 0, or -1 when the
 * client is not on this host or the kernel does not say.
 */
static int tcp_client(int fd, struct peer *p, struct sockdiag_tcp *ds)
{
	struct sockaddr_storage client = { 0 }, server = { 0 };
	socklen_t clen = sizeof(client), slen = sizeof(server);
	char host[INET6_ADDRSTRLEN] = "?";

	if (getpeername(fd, (struct sockaddr *)&client, &clen) < 0 ||
	    getsockname(fd, (struct sockaddr *)&server, &slen) < 0)
		return -1;
	if (client.ss_family == AF_INET)
		inet_ntop(AF_INET, &((struct sockaddr_in *)&client)->sin_addr,
			  host, sizeof(host));
	else if (client.ss_family == AF_INET6)
		inet_ntop(AF_INET6,
			  &((struct sockaddr_in6 *)&client)->sin6_addr, host,
			  sizeof(host));
	snprintf(p->key, sizeof(p->key), "address %s", host);
	if (!sockdiag_loopback(&client) ||
	    sockdiag_tcp_socket(&client, &server, DIAG_TIMEOUT_MS, ds) < 0)
		return -1;
	return 0;
}

static int identify_tcp(int fd, struct peer *p)
{
	struct sockdiag_tcp ds;

	if (tcp_client(fd, p, &ds) < 0 || prove_holder(&ds, p) < 0) {
		/* anonymous: nothing of what was read counts */
		p->caps = 0;
		p->ngroups = 0;
		return 0;
	}
	p->known = true;
	set_key_uid(p);
	return 0;
}

int peer_count_key(int fd, char *key, size_t size, bool *root)
{
	struct sockaddr_storage ss = { 0 };
	socklen_t len = sizeof(ss);
	struct peer p = { 0 };
	struct sockdiag_tcp ds;

	*root = false;
	snprintf(key, size, "anonymous");
	if (getsockname(fd, (struct sockaddr *)&ss, &len) < 0)
		return -errno;
	if (ss.ss_family == AF_UNIX) {
		struct ucred cred;

		len = sizeof(cred);
		if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0)
			return 0;
		p.uid = cred.uid;
	} else if (ss.ss_family != AF_INET && ss.ss_family != AF_INET6) {
		return 0;
	} else if (tcp_client(fd, &p, &ds) < 0) {
		snprintf(key, size, "%s", p.key);
		return 0;
	} else {
		p.uid = ds.uid;
	}
	set_key_uid(&p);
	snprintf(key, size, "%s", p.key);
	*root = p.uid == 0;
	return 0;
}

int peer_identify(int fd, struct peer *out)
{
	struct sockaddr_storage ss = { 0 };
	socklen_t len = sizeof(ss);

	memset(out, 0, sizeof(*out));
	snprintf(out->key, sizeof(out->key), "anonymous");
	if (getsockname(fd, (struct sockaddr *)&ss, &len) < 0)
		return -errno;
	if (ss.ss_family == AF_UNIX)
		return identify_unix(fd, out);
	if (ss.ss_family == AF_INET || ss.ss_family == AF_INET6)
		return identify_tcp(fd, out);
	return 0;
}

bool peer_in_group(const struct peer *p, gid_t g)
{
	if (!p->known)
		return false;
	if (p->gid == g)
		return true;
	for (int i = 0; i < p->ngroups; i++)
		if (p->groups[i] == g)
			return true;
	return false;
}
