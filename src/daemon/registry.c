/*
 * registry.c - agents, their connections and the listener thread
 * (registry.h).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <poll.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#include "model/clock.h"
#include "collector/collect.h"
#include "collector/signal/handler.h"
#include "gate.h"
#include "kept.h"
#include "symmemo.h"
#include "log.h"
#include "nspid.h"
#include "ptracer.h"
#include "model/procfs.h"
#include "ran.h"
#include "registry.h"
#include "tcred.h"
#include "model/wire.h"

#define GRACE_MS 500 /* the agent's deadline plus this, for the answer */
#define HELLO_MAX (WIRE_HDR_SIZE + WIRE_HELLO_MAX)

enum {
	KIND_PENDING = 1,
	KIND_TARGET = 2,
	KIND_LISTEN = 3,
	KIND_WAKE = 4,
	KIND_EXIT = 5, /* a target's pidfd: its process exited */
};

#ifndef SO_PEERPIDFD
#define SO_PEERPIDFD 77 /* Linux 6.5 */
#endif

/* A connection that has not said HELLO yet. */
struct pending {
	int kind;
	int fd;
	int pidfd;	/* the peer, pinned when it connected; -1: none */
	uint64_t start; /* its start time then (/proc/PID/stat) */
	pid_t pid;
	uid_t uid;
	uint64_t deadline_ms;
	size_t len;
	uint8_t buf[HELLO_MAX];
	struct pending *next;
};

struct registry {
	pthread_mutex_t lock; /* targets, ntargets, nptraced */
	struct target *targets;
	size_t ntargets; /* agents: ptrace entries are not counted */
	size_t nptraced;
	_Atomic bool keep_ptraced;
	struct target *graveyard; /* unlinked, put after the epoll batch */
	struct pending *pending;  /* listener thread only */
	size_t npending;
	int listen_fd;
	int wake_fd;
	int epfd;
	int listen_kind; /* epoll tags for the two fds */
	int wake_kind;
	char path[108];
	pthread_t thread;
	bool running;
	const struct registry_hooks *hooks;
};

/*
 * What one user may cost, root aside (registry_set_limits()); read by
 * every dumping thread, so atomics and not the registry's lock.
 */
static _Atomic int max_targets_per_user = 256;
static _Atomic int max_dump_addresses = 1 << 20;
static _Atomic int max_ptraced_per_user = 16;

void registry_set_limits(const struct registry_limits *l)
{
	atomic_store(&max_targets_per_user, l->max_targets_per_user);
	atomic_store(&max_dump_addresses, l->max_dump_addresses);
	if (l->max_ptraced_per_user > 0)
		atomic_store(&max_ptraced_per_user, l->max_ptraced_per_user);
}

static uint64_t now_ms(void)
{
	return clock_now_ns() / 1000000u;
}

void target_get(struct target *t)
{
	atomic_fetch_add(&t->refs, 1);
}

void target_put(struct target *t)
{
	if (!t || atomic_fetch_sub(&t->refs, 1) != 1)
		return;
	if (t->fd >= 0)
		close(t->fd);
	if (t->pidfd >= 0)
		close(t->pidfd);
	if (t->svc)
		t->hooks->svc_free(t->svc);
	pthread_mutex_destroy(&t->io_lock);
	pthread_mutex_destroy(&t->memo_lock);
	symmemo_free(t->memo);
	kept_free(t->kept);
	ran_free(t->ran);
	tcred_free(t->tcred);
	free(t->rx);
	free(t->cmdline);
	free(t);
}

bool target_alive(const struct target *t)
{
	struct pollfd p = { .fd = t->pidfd, .events = POLLIN };

	if (atomic_load(&t->dead))
		return false;
	if (t->self || t->pidfd < 0)
		return true;
	/*
	 * A pidfd turns readable when its process exits. poll() is never
	 * restarted after a signal handler, and the daemon's own threads get
	 * its dump signal whenever it lists itself: EINTR says nothing.
	 */
	for (;;) {
		int n = poll(&p, 1, 0);

		if (n >= 0)
			return n == 0;
		if (errno != EINTR)
			return true; /* the socket will tell */
	}
}

static struct target *target_new(const struct registry *r, pid_t pid, uid_t uid,
				 int fd)
{
	struct target *t = calloc(1, sizeof(*t));

	if (!t)
		return NULL;
	t->hooks = r->hooks;
	t->svc = r->hooks->svc_new();
	if (!t->svc) {
		free(t);
		return NULL;
	}
	t->kind = KIND_TARGET;
	t->refs = 1; /* the registry's */
	t->pid = pid;
	t->uid = uid;
	t->fd = fd;
	t->pidfd = -1;
	pthread_mutex_init(&t->io_lock, NULL);
	pthread_mutex_init(&t->memo_lock, NULL);
	clock_gettime(CLOCK_REALTIME, &t->registered_at);
	return t;
}

/*
 * Unlinks t (under r->lock). The registry's reference is dropped only
 * after the listener's current batch of events, which may still name t.
 */
static void unlink_target(struct registry *r, struct target *t)
{
	struct target **pp;

	for (pp = &r->targets; *pp; pp = &(*pp)->next) {
		if (*pp == t) {
			*pp = t->next;
			if (t->ptrace)
				r->nptraced--;
			else
				r->ntargets--;
			atomic_store(&t->dead, true);
			if (t->pidfd >= 0)
				epoll_ctl(r->epfd, EPOLL_CTL_DEL, t->pidfd,
					  NULL);
			if (t->fd >= 0) {
				epoll_ctl(r->epfd, EPOLL_CTL_DEL, t->fd, NULL);
				shutdown(t->fd, SHUT_RDWR);
			}
			t->next = r->graveyard;
			r->graveyard = t;
			return;
		}
	}
}

static void bury(struct registry *r)
{
	struct target *t, *next;

	pthread_mutex_lock(&r->lock);
	t = r->graveyard;
	r->graveyard = NULL;
	pthread_mutex_unlock(&r->lock);
	for (; t; t = next) {
		next = t->next;
		target_put(t);
	}
}

/*
 * Adds t, replacing an older connection of the same process. Returns 0,
 * -ENOSPC when the registry is full, or -EDQUOT when t's user (root
 * aside) has max_targets_per_user targets already.
 */
static int add_target(struct registry *r, struct target *t)
{
	struct target *old = NULL, *o;
	int same_uid = 0;

	pthread_mutex_lock(&r->lock);
	/* A process registers once; a new connection replaces the old. */
	for (o = r->targets; o; o = o->next) {
		if (o->pid == t->pid && !o->self)
			old = o;
		else if (o->uid == t->uid && !o->self && !o->ptrace)
			same_uid++;
	}
	if (t->uid != 0 && same_uid >= atomic_load(&max_targets_per_user)) {
		pthread_mutex_unlock(&r->lock);
		return -EDQUOT;
	}
	if (r->ntargets - (old && !old->ptrace) >= REGISTRY_MAX_TARGETS) {
		pthread_mutex_unlock(&r->lock);
		return -ENOSPC;
	}
	if (old)
		unlink_target(r, old);
	t->next = r->targets;
	r->targets = t;
	r->ntargets++;
	pthread_mutex_unlock(&r->lock);
	return 0;
}

static void close_pending(struct registry *r, struct pending *p)
{
	struct pending **pp;

	for (pp = &r->pending; *pp; pp = &(*pp)->next) {
		if (*pp == p) {
			*pp = p->next;
			r->npending--;
			break;
		}
	}
	if (p->fd >= 0) {
		epoll_ctl(r->epfd, EPOLL_CTL_DEL, p->fd, NULL);
		close(p->fd);
	}
	if (p->pidfd >= 0)
		close(p->pidfd);
	free(p);
}

/*
 * The process behind an agent connection, pinned: the kernel's pidfd of
 * the peer as it connected (SO_PEERPIDFD), else one opened right now for
 * its pid. Every later look at /proc/PID for this target is checked
 * against it, so a pid that is reused by another process never speaks
 * for that process. -1 when neither is possible.
 */
static int pin_peer(int fd, pid_t pid)
{
	socklen_t len = sizeof(int);
	int pidfd = -1;

	if (getsockopt(fd, SOL_SOCKET, SO_PEERPIDFD, &pidfd, &len) == 0 &&
	    pidfd >= 0)
		return pidfd;
	return (int)syscall(SYS_pidfd_open, pid, 0);
}

/*
 * Whether the other end of agent socket fd is closed: the process that
 * connected is gone and nobody else holds its socket.
 */
static bool peer_closed(int fd)
{
	struct pollfd pf = { .fd = fd, .events = POLLRDHUP };

	return poll(&pf, 1, 0) == 1 && (pf.revents & (POLLRDHUP | POLLHUP));
}

static void accept_agents(struct registry *r)
{
	for (;;) {
		struct epoll_event ev = { .events = EPOLLIN | EPOLLRDHUP };
		struct ucred cred;
		socklen_t len = sizeof(cred);
		struct pending *p;
		int fd;

		fd = accept4(r->listen_fd, NULL, NULL,
			     SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno != EAGAIN && errno != EINTR)
				log_warn("accepting an agent: %s",
					 strerror(errno));
			return;
		}
		if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0 ||
		    cred.pid <= 0 || r->npending >= REGISTRY_MAX_PENDING) {
			log_info("refusing an agent connection (%s)",
				 cred.pid <= 0 ? "no credentials"
					       : "too many pending");
			close(fd);
			continue;
		}
		p = calloc(1, sizeof(*p));
		if (!p) {
			close(fd);
			continue;
		}
		p->kind = KIND_PENDING;
		p->fd = fd;
		p->pidfd = -1;
		p->pid = cred.pid;
		p->uid = cred.uid;
		p->pidfd = pin_peer(fd, cred.pid);
		if (p->pidfd < 0 || procfs_start_time(cred.pid, &p->start)) {
			/* Gone already, its socket with it (a fork child
			 * that exited or exec'd at once): no news. */
			log_msg(peer_closed(fd) ? LOG_LVL_DEBUG
						: LOG_LVL_NOTICE,
				__func__,
				"refusing an agent connection from pid %d: "
				"its process cannot be pinned",
				(int)cred.pid);
			if (p->pidfd >= 0)
				close(p->pidfd);
			close(fd);
			free(p);
			continue;
		}
		p->deadline_ms = now_ms() + REGISTRY_HELLO_MS;
		ev.data.ptr = p;
		if (epoll_ctl(r->epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
			close(fd);
			free(p);
			continue;
		}
		p->next = r->pending;
		r->pending = p;
		r->npending++;
	}
}

/* Turns a pending connection that said a valid HELLO into a target. */
static void register_agent(struct registry *r, struct pending *p,
			   const struct wire_hello *h)
{
	struct epoll_event ev = { .events = EPOLLRDHUP };
	struct target *t;
	struct procid id;
	uint64_t start = 0;
	int fd = p->fd, rc;

	/*
	 * A process that is gone, or that is not the one pinned (another
	 * start time under its pid), is refused: its pid may belong to
	 * another process by now, which this agent must never speak for.
	 */
	if (procid_read(p->pid, &id) < 0 || !procfs_pidfd_alive(p->pidfd) ||
	    procfs_start_time(p->pid, &start) || start != p->start) {
		/* Gone with its socket (a short-lived process) is no news;
		 * a socket someone else still holds, or another process
		 * under its pid, is worth a notice. */
		log_msg(peer_closed(fd) && !procfs_pidfd_alive(p->pidfd)
				? LOG_LVL_DEBUG
				: LOG_LVL_NOTICE,
			__func__,
			"refusing pid %d: the process that connected is gone",
			(int)p->pid);
		close_pending(r, p);
		return;
	}
	t = target_new(r, p->pid, p->uid, fd);
	if (!t) {
		close_pending(r, p);
		return;
	}
	t->id = id;
	/* Hand the fd over from the pending entry to the target. */
	epoll_ctl(r->epfd, EPOLL_CTL_DEL, fd, NULL);
	p->fd = -1;
	t->signo = h->signo;
	t->features = h->features;
	memcpy(t->comm, h->comm, sizeof(t->comm));
	t->cmdline = strdup(h->cmdline);
	t->pidfd = p->pidfd; /* handed over */
	p->pidfd = -1;
	/* The agent says its pid as its own pid namespace has it: one that
	 * is not SO_PEERCRED's, like another namespace inode, means that
	 * the tids of its dumps need translating. */
	t->foreign_ns = h->pid != p->pid || nspid_foreign(p->pid);
	close_pending(r, p); /* its fd is -1 now: only the entry goes */
	ev.data.ptr = t;
	rc = -ENOMEM;
	if (!t->cmdline || epoll_ctl(r->epfd, EPOLL_CTL_ADD, fd, &ev) < 0 ||
	    (rc = add_target(r, t)) < 0) {
		if (rc == -EDQUOT)
			log_notice("refusing pid %d (%s) of uid %d: that user "
				   "has %d registered processes already "
				   "(--max-targets-per-user)",
				   (int)t->pid, t->comm, (int)t->uid,
				   atomic_load(&max_targets_per_user));
		else if (rc == -ENOSPC)
			log_warn("refusing pid %d: %d processes are "
				 "registered already",
				 (int)t->pid, REGISTRY_MAX_TARGETS);
		else
			log_warn("cannot register pid %d", (int)t->pid);
		target_put(t);
		return;
	}
	/*
	 * The connection alone does not say when the process exits: a child
	 * that inherited it (a daemonizing fork) keeps it open. The pidfd
	 * does, the moment the process is gone.
	 */
	if (t->pidfd >= 0) {
		struct epoll_event xev = { .events = EPOLLIN,
					   .data.ptr = &t->pidfd_kind };

		t->pidfd_kind = KIND_EXIT;
		pthread_mutex_lock(&r->lock);
		if (!atomic_load(&t->dead))
			epoll_ctl(r->epfd, EPOLL_CTL_ADD, t->pidfd, &xev);
		pthread_mutex_unlock(&r->lock);
	}
	log_info("registered pid %d (%s), signal %d%s", (int)t->pid, t->comm,
		 t->signo, t->foreign_ns ? ", in another pid namespace" : "");
}

static void read_hello(struct registry *r, struct pending *p)
{
	struct wire_hdr h;
	struct wire_hello hello;
	size_t need = WIRE_HDR_SIZE;
	ssize_t n;

	for (;;) {
		if (p->len >= WIRE_HDR_SIZE) {
			if (wire_parse_hdr(p->buf, &h) < 0 ||
			    h.type != WIRE_HELLO ||
			    h.length > sizeof(p->buf) - WIRE_HDR_SIZE)
				goto bad;
			need = WIRE_HDR_SIZE + h.length;
			if (p->len == need)
				break;
		}
		n = read(p->fd, p->buf + p->len, need - p->len);
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			return;
		if (n <= 0)
			goto bad;
		p->len += (size_t)n;
		if (p->len < need)
			continue;
	}
	if (wire_decode_hello(p->buf + WIRE_HDR_SIZE, h.length, &hello) < 0)
		goto bad;
	register_agent(r, p, &hello);
	return;
bad:
	log_info("dropping a connection from pid %d: no valid HELLO",
		 (int)p->pid);
	close_pending(r, p);
}

static void expire_pending(struct registry *r)
{
	uint64_t now = now_ms();
	struct pending *p = r->pending, *next;

	for (; p; p = next) {
		next = p->next;
		if (now >= p->deadline_ms)
			close_pending(r, p);
	}
}

static void expire_ptraced(struct registry *r);

static void *listener_main(void *arg)
{
	struct registry *r = arg;
	struct epoll_event evs[64];

	for (;;) {
		int n = epoll_wait(r->epfd, evs, 64, 1000);

		for (int i = 0; i < n; i++) {
			int kind = *(int *)evs[i].data.ptr;

			if (kind == KIND_WAKE) {
				bury(r);
				return NULL;
			}
			if (kind == KIND_LISTEN) {
				accept_agents(r);
			} else if (kind == KIND_PENDING) {
				read_hello(r, evs[i].data.ptr);
			} else if (kind == KIND_EXIT) {
				struct target *t =
					(struct target
						 *)((char *)evs[i].data.ptr -
						    offsetof(struct target,
							     pidfd_kind));

				log_info("pid %d (%s) exited", (int)t->pid,
					 t->comm);
				pthread_mutex_lock(&r->lock);
				unlink_target(r, t);
				pthread_mutex_unlock(&r->lock);
			} else {
				struct target *t = evs[i].data.ptr;

				log_info("pid %d (%s) disconnected",
					 (int)t->pid, t->comm);
				pthread_mutex_lock(&r->lock);
				unlink_target(r, t);
				pthread_mutex_unlock(&r->lock);
			}
		}
		bury(r);
		expire_pending(r);
		expire_ptraced(r);
	}
}

/*
 * Creates the socket's own directory (0755) when it is missing, as for
 * /run/stackwatch or $XDG_RUNTIME_DIR/stackwatch; never its ancestors: a
 * mistyped path fails instead of growing directories anywhere.
 */
static int make_dir(const char *path)
{
	char dir[108];
	char *slash;

	snprintf(dir, sizeof(dir), "%s", path);
	slash = strrchr(dir, '/');
	if (!slash || slash == dir)
		return 0;
	*slash = '\0';
	/* Searchable by all whatever the umask (the unit's is 077). */
	if (mkdir(dir, 0755) == 0)
		(void)chmod(dir, 0755);
	else if (errno != EEXIST)
		return -errno;
	return 0;
}

static int open_listener(struct registry *r, const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct stat st;
	int fd, rc;

	if (strlen(path) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	rc = make_dir(path);
	if (rc < 0)
		return rc;
	/* Replace a stale socket, never anything else. */
	if (lstat(path, &st) == 0) {
		if (!S_ISSOCK(st.st_mode))
			return -EEXIST;
		unlink(path);
	}
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	memcpy(sa.sun_path, path, strlen(path) + 1);
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    chmod(path, 0666) < 0 || listen(fd, 128) < 0) {
		rc = -errno;
		close(fd);
		return rc;
	}
	r->listen_fd = fd;
	snprintf(r->path, sizeof(r->path), "%s", path);
	return 0;
}

static int add_self(struct registry *r)
{
	struct target *t = target_new(r, getpid(), geteuid(), -1);
	char *cmdline = NULL;

	if (!t)
		return -ENOMEM;
	t->self = true;
	t->signo = collect_signal();
	snprintf(t->comm, sizeof(t->comm), "%s", program_invocation_short_name);
	if (procfs_read_cmdline(0, &cmdline) < 0)
		cmdline = strdup("stackwatchd");
	t->cmdline = cmdline;
	return add_target(r, t);
}

int registry_start(const char *path, const struct registry_hooks *hooks,
		   struct registry **out)
{
	struct epoll_event ev = { .events = EPOLLIN };
	struct registry *r = calloc(1, sizeof(*r));
	int rc;

	if (!r)
		return -ENOMEM;
	r->hooks = hooks;
	pthread_mutex_init(&r->lock, NULL);
	r->listen_fd = r->wake_fd = r->epfd = -1;
	r->listen_kind = KIND_LISTEN;
	r->wake_kind = KIND_WAKE;
	rc = open_listener(r, path);
	if (rc < 0)
		goto fail;
	r->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	r->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (r->wake_fd < 0 || r->epfd < 0) {
		rc = -errno;
		goto fail;
	}
	ev.data.ptr = &r->listen_kind;
	epoll_ctl(r->epfd, EPOLL_CTL_ADD, r->listen_fd, &ev);
	ev.data.ptr = &r->wake_kind;
	epoll_ctl(r->epfd, EPOLL_CTL_ADD, r->wake_fd, &ev);
	rc = add_self(r);
	if (rc < 0)
		goto fail;
	rc = -pthread_create(&r->thread, NULL, listener_main, r);
	if (rc < 0)
		goto fail;
	r->running = true;
	*out = r;
	return 0;
fail:
	registry_stop(r);
	return rc;
}

void registry_stop(struct registry *r)
{
	if (!r)
		return;
	if (r->running) {
		uint64_t one = 1;

		(void)!write(r->wake_fd, &one, sizeof(one));
		pthread_join(r->thread, NULL);
	}
	while (r->pending)
		close_pending(r, r->pending);
	pthread_mutex_lock(&r->lock);
	while (r->targets)
		unlink_target(r, r->targets);
	pthread_mutex_unlock(&r->lock);
	bury(r);
	if (r->listen_fd >= 0) {
		close(r->listen_fd);
		unlink(r->path);
	}
	if (r->wake_fd >= 0)
		close(r->wake_fd);
	if (r->epfd >= 0)
		close(r->epfd);
	pthread_mutex_destroy(&r->lock);
	free(r);
}

/* The live target of pid, an agent's first; under r->lock. */
static struct target *find_locked(struct registry *r, pid_t pid)
{
	struct target *t, *found = NULL;

	for (t = r->targets; t; t = t->next)
		if (t->pid == pid && target_alive(t) && (!found || !t->ptrace))
			found = t;
	if (found) {
		target_get(found);
		if (found->ptrace)
			atomic_store(&found->last_used_ms, now_ms());
	}
	return found;
}

struct target *registry_get(struct registry *r, pid_t pid)
{
	struct target *t;

	pthread_mutex_lock(&r->lock);
	t = find_locked(r, pid);
	pthread_mutex_unlock(&r->lock);
	return t;
}

void registry_keep_ptraced(struct registry *r, bool keep)
{
	atomic_store(&r->keep_ptraced, keep);
}

/*
 * The least recently asked live ptrace entry (under r->lock): of the
 * requests of uid without priority when mine, of any request without
 * priority when users, else of anyone. NULL when there is none.
 */
enum lru_of { LRU_MINE, LRU_USERS, LRU_ANY };

static struct target *lru_ptraced(struct registry *r, enum lru_of of, uid_t uid)
{
	struct target *old = NULL;

	for (struct target *t = r->targets; t; t = t->next) {
		if (!t->ptrace || atomic_load(&t->dead))
			continue;
		if (of != LRU_ANY && t->opener_priority)
			continue;
		if (of == LRU_MINE && t->opener != uid)
			continue;
		if (!old || atomic_load(&t->last_used_ms) <
				    atomic_load(&old->last_used_ms))
			old = t;
	}
	return old;
}

/* Live ptrace entries made for uid without priority, or for any (under
 * r->lock). */
static size_t count_ptraced(struct registry *r, bool any_user, uid_t uid)
{
	size_t n = 0;

	for (struct target *t = r->targets; t; t = t->next)
		n += t->ptrace && !atomic_load(&t->dead) &&
		     !t->opener_priority && (any_user || t->opener == uid);
	return n;
}

size_t registry_count_ptraced_all(struct registry *r)
{
	size_t n;

	pthread_mutex_lock(&r->lock);
	n = r->nptraced;
	pthread_mutex_unlock(&r->lock);
	return n;
}

/*
 * Makes room for one more ptrace entry for who (under r->lock): a user at
 * their quota gives up their own least recently asked entry, users
 * together leave the reserve to requesters with priority, who may take
 * the least recently asked of anyone's. 0, or -ENOSPC.
 */
static int make_room(struct registry *r, const struct asker *who)
{
	struct target *old;

	for (struct target *t = r->targets, *next; t; t = next) {
		next = t->next;
		if (t->ptrace && atomic_load(&t->dead))
			unlink_target(r, t);
	}
	if (!who->priority) {
		if (count_ptraced(r, false, who->uid) >=
		    (size_t)atomic_load(&max_ptraced_per_user)) {
			old = lru_ptraced(r, LRU_MINE, who->uid);
			if (old)
				unlink_target(r, old);
		}
		if (count_ptraced(r, true, 0) >=
		    REGISTRY_MAX_PTRACED - REGISTRY_PTRACED_RESERVE) {
			old = lru_ptraced(r, LRU_USERS, 0);
			if (old)
				unlink_target(r, old);
		}
	}
	while (r->nptraced >= REGISTRY_MAX_PTRACED) {
		old = lru_ptraced(r, who->priority ? LRU_ANY : LRU_USERS, 0);
		if (!old)
			return -ENOSPC;
		unlink_target(r, old);
	}
	return 0;
}

struct target *registry_get_process(struct registry *r, pid_t pid,
				    const struct asker *who, int *err)
{
	struct epoll_event xev = { .events = EPOLLIN };
	struct target *t, *o;
	char path[64];
	uid_t uid;
	int pidfd, rc;

	*err = 0;
	t = registry_get(r, pid);
	if (t)
		return t;
	pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	if (pidfd < 0) {
		*err = -ESRCH;
		return NULL;
	}
	if (procfs_read_uid(pid, &uid) != 0) {
		close(pidfd);
		*err = -ESRCH;
		return NULL;
	}
	t = target_new(r, pid, uid, -1);
	if (!t) {
		close(pidfd);
		*err = -ENOMEM;
		return NULL;
	}
	t->ptrace = true;
	t->pidfd = pidfd;
	t->pidfd_kind = KIND_EXIT;
	t->signo = 0;
	t->opener = who->uid;
	t->opener_priority = who->priority;
	atomic_store(&t->last_used_ms, now_ms());
	snprintf(path, sizeof(path), "/proc/%d/comm", (int)pid);
	if (procfs_read_at(AT_FDCWD, path, t->comm, sizeof(t->comm)) > 0)
		t->comm[strcspn(t->comm, "\n")] = '\0';
	if (procfs_read_cmdline(pid, &t->cmdline) != 0)
		t->cmdline = strdup("");
	if (procid_read(pid, &t->id) < 0) {
		target_put(t);
		*err = -ESRCH;
		return NULL;
	}
	pthread_mutex_lock(&r->lock);
	/* Another request may have made it meanwhile. */
	o = find_locked(r, pid);
	if (o) {
		pthread_mutex_unlock(&r->lock);
		target_put(t);
		return o;
	}
	rc = make_room(r, who);
	if (rc < 0) {
		pthread_mutex_unlock(&r->lock);
		target_put(t);
		*err = rc;
		return NULL;
	}
	xev.data.ptr = &t->pidfd_kind;
	if (!t->cmdline ||
	    epoll_ctl(r->epfd, EPOLL_CTL_ADD, t->pidfd, &xev) < 0) {
		pthread_mutex_unlock(&r->lock);
		target_put(t);
		*err = -ENOMEM;
		return NULL;
	}
	t->next = r->targets;
	r->targets = t;
	r->nptraced++;
	target_get(t);
	pthread_mutex_unlock(&r->lock);
	/* Pinned now: still the process that was asked for? */
	if (!target_alive(t)) {
		target_put(t);
		*err = -ESRCH;
		return NULL;
	}
	return t;
}

/*
 * Forgets ptrace entries nobody asked for in a while (longer with
 * --sample-ptrace), and entries whose process changed.
 */
static void expire_ptraced(struct registry *r)
{
	uint64_t now = now_ms(), idle = atomic_load(&r->keep_ptraced)
						? REGISTRY_PTRACE_KEEP_MS
						: REGISTRY_PTRACE_IDLE_MS;

	pthread_mutex_lock(&r->lock);
	for (struct target *t = r->targets, *next; t; t = next) {
		next = t->next;
		if (t->ptrace && (atomic_load(&t->dead) ||
				  now - atomic_load(&t->last_used_ms) > idle))
			unlink_target(r, t);
	}
	pthread_mutex_unlock(&r->lock);
}

static int cmp_target(const void *a, const void *b)
{
	pid_t x = (*(struct target *const *)a)->pid;
	pid_t y = (*(struct target *const *)b)->pid;

	return (x > y) - (x < y);
}

static int list(struct registry *r, bool ptraced, struct target ***out,
		size_t *n)
{
	struct target **ts, *t;
	size_t i = 0, cap;

	pthread_mutex_lock(&r->lock);
	cap = ptraced ? r->nptraced : r->ntargets;
	ts = malloc((cap ? cap : 1) * sizeof(struct target *));
	if (!ts) {
		pthread_mutex_unlock(&r->lock);
		return -ENOMEM;
	}
	for (t = r->targets; t; t = t->next) {
		/* Gone already, even if the listener has not seen it yet. */
		if (t->ptrace != ptraced || !target_alive(t) || i == cap)
			continue;
		target_get(t);
		ts[i++] = t;
	}
	pthread_mutex_unlock(&r->lock);
	qsort(ts, i, sizeof(struct target *), cmp_target);
	*out = ts;
	*n = i;
	return 0;
}

int registry_list(struct registry *r, struct target ***out, size_t *n)
{
	return list(r, false, out, n);
}

int registry_list_ptraced(struct registry *r, struct target ***out, size_t *n)
{
	return list(r, true, out, n);
}

void registry_put_all(struct target **ts, size_t n)
{
	for (size_t i = 0; i < n; i++)
		target_put(ts[i]);
	free(ts);
}

size_t registry_count(struct registry *r)
{
	size_t n;

	pthread_mutex_lock(&r->lock);
	n = r->ntargets;
	pthread_mutex_unlock(&r->lock);
	return n;
}

size_t registry_count_uid(struct registry *r, uid_t uid)
{
	size_t n = 0;

	pthread_mutex_lock(&r->lock);
	for (const struct target *t = r->targets; t; t = t->next)
		n += t->uid == uid && !t->ptrace;
	pthread_mutex_unlock(&r->lock);
	return n;
}

/* Sends all of buf before the deadline. */
static int send_all(int fd, const uint8_t *p, size_t n, uint64_t deadline)
{
	while (n > 0) {
		struct pollfd pf = { .fd = fd, .events = POLLOUT };
		uint64_t now = now_ms();
		ssize_t w;

		if (now >= deadline)
			return -ETIMEDOUT;
		if (poll(&pf, 1, (int)(deadline - now)) < 0 && errno != EINTR)
			return -errno;
		w = send(fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (w < 0) {
			if (errno == EAGAIN || errno == EINTR)
				continue;
			return -ECONNRESET;
		}
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

/*
 * Looks at the bytes received so far. Returns 1 with *h and the payload at
 * t->rx + WIRE_HDR_SIZE when a whole message is there, 0 when more is
 * needed (*need: the size to hold it), SW_EFORMAT for garbage.
 */
static int whole_message(struct target *t, struct wire_hdr *h, size_t *need)
{
	*need = WIRE_HDR_SIZE;
	if (t->rx_len < WIRE_HDR_SIZE)
		return 0;
	if (wire_parse_hdr(t->rx, h) < 0 ||
	    (h->type != WIRE_DUMP_RESP && h->type != WIRE_SIGNAL))
		return SW_EFORMAT;
	*need = WIRE_HDR_SIZE + h->length;
	return t->rx_len >= *need;
}

static void consume(struct target *t, size_t n)
{
	memmove(t->rx, t->rx + n, t->rx_len - n);
	t->rx_len -= n;
}

/*
 * Reads what is there, growing rx toward need; first throws away what is
 * left of a message given up on (rx_skip).
 */
static int receive(struct target *t, size_t need)
{
	ssize_t n;

	if (t->rx_skip) {
		uint8_t junk[16384];
		size_t want =
			t->rx_skip < sizeof(junk) ? t->rx_skip : sizeof(junk);

		n = read(t->fd, junk, want);
		if (n < 0)
			return (errno == EAGAIN || errno == EINTR)
				       ? 0
				       : -ECONNRESET;
		if (n == 0)
			return -ECONNRESET;
		t->rx_skip -= (size_t)n;
		return 0;
	}

	if (need > t->rx_cap) {
		/* Grow with what arrives, not with what is announced. */
		size_t cap = t->rx_cap ? t->rx_cap : 65536;
		uint8_t *bigger;

		while (cap < need && cap < t->rx_len + (1u << 20))
			cap *= 2;
		if (cap > need)
			cap = need;
		bigger = realloc(t->rx, cap);
		if (!bigger)
			return -ENOMEM;
		t->rx = bigger;
		t->rx_cap = cap;
	}
	if (t->rx_len == t->rx_cap)
		return 0;
	n = read(t->fd, t->rx + t->rx_len, t->rx_cap - t->rx_len);
	if (n < 0)
		return (errno == EAGAIN || errno == EINTR) ? 0 : -ECONNRESET;
	if (n == 0)
		return -ECONNRESET;
	t->rx_len += (size_t)n;
	return 0;
}

/* Waits for the answer to seq, skipping late answers to older requests. */
static int await_answer(struct target *t, uint32_t seq, uint64_t deadline,
			struct sw_dump **out)
{
	for (;;) {
		struct pollfd pf = { .fd = t->fd, .events = POLLIN };
		struct wire_hdr h;
		size_t need = WIRE_HDR_SIZE;
		uint64_t now;
		int rc, status;

		rc = t->rx_skip ? 0 : whole_message(t, &h, &need);
		if (rc < 0)
			return -ECONNRESET;
		if (rc == 1 && h.type == WIRE_SIGNAL) {
			int signo;

			rc = wire_decode_signal(t->rx + WIRE_HDR_SIZE, h.length,
						&signo);
			consume(t, need);
			if (rc < 0)
				return -ECONNRESET;
			if (signo != atomic_load(&t->signo))
				log_info("pid %d (%s) now uses signal %d: the "
					 "program claimed %d",
					 (int)t->pid, t->comm, signo,
					 atomic_load(&t->signo));
			atomic_store(&t->signo, signo);
			continue;
		}
		if (rc == 1) {
			if (h.seq != seq) {
				consume(t, need); /* a late answer */
				continue;
			}
			rc = wire_decode_dump_resp(t->rx + WIRE_HDR_SIZE,
						   h.length, &status, out);
			consume(t, need);
			if (rc < 0)
				return rc == -ENOMEM ? rc : -ECONNRESET;
			return status;
		}
		now = now_ms();
		if (now >= deadline)
			return -ETIMEDOUT;
		rc = poll(&pf, 1, (int)(deadline - now));
		if (rc < 0 && errno != EINTR)
			return -errno;
		if (rc > 0) {
			rc = receive(t, need);
			if (rc < 0)
				return rc;
		}
	}
}

static int dump_self(int timeout_ms, const pid_t *skip, size_t nskip,
		     struct sw_dump **out)
{
	uint64_t ips[SW_MAX_FRAMES];
	struct collect_opts co = { .timeout_ms = timeout_ms,
				   .window = SW_DEFAULT_WINDOW,
				   .skip = skip,
				   .nskip = nskip };
	size_t n = handler_unwind_self(ips, SW_MAX_FRAMES, 0);

	return collect_self(&co, ips, n, out);
}

/*
 * Turns the tids of *out, the agent's, into the daemon's. When that
 * fails the dump is freed and the error returned (-ECONNRESET when the
 * process is gone): ids that name other processes are never shown.
 */
static int translate_tids(struct target *t, struct sw_dump **out)
{
	int rc = nspid_translate(t->pid, *out);

	if (rc == 0)
		return 0;
	log_info("pid %d: cannot translate its thread ids: %s", (int)t->pid,
		 sw_strerror(rc));
	sw_dump_free(*out);
	*out = NULL;
	return rc == -ESRCH ? -ECONNRESET : rc;
}

/*
 * After a request given up on: the message half received is dropped and
 * its rest thrown away as it arrives (rx_skip), so that a peer that stops
 * in the middle of 64 MiB does not keep them here.
 */
static void drop_partial(struct target *t)
{
	struct wire_hdr h;

	if (t->rx_len < WIRE_HDR_SIZE || wire_parse_hdr(t->rx, &h) < 0)
		return;
	if (t->rx_len < WIRE_HDR_SIZE + (size_t)h.length) {
		t->rx_skip = WIRE_HDR_SIZE + (size_t)h.length - t->rx_len;
		t->rx_len = 0;
	}
}

/* The addresses of a raw dump, all threads together. */
static size_t dump_addresses(const struct sw_dump *d)
{
	size_t n = 0;

	for (size_t i = 0; i < d->nthreads; i++)
		n += d->threads[i].nips;
	return n;
}

/*
 * A process without the agent: a snapshot through the helper, keeping
 * max_frames frames (0: SW_MAX_FRAMES). Threads kept from the last read
 * (kept.h) are reused only at the usual depth: theirs is that one.
 */
static int dump_ptrace(struct target *t, const struct asker *who,
		       int timeout_ms, unsigned max_frames,
		       struct sw_dump **out)
{
	bool usual = max_frames == 0 || max_frames == SW_MAX_FRAMES;
	pid_t tracer = 0;
	int rc;

	struct ptracer_same *same = NULL;
	size_t nsame = 0;

	/* One snapshot of a process at a time. */
	pthread_mutex_lock(&t->io_lock);
	if (usual)
		kept_offer(t->kept, &same, &nsame);
	rc = ptracer_dump_frames(t->pid, t->pidfd, who, timeout_ms, false, same,
				 nsame, max_frames, out, &tracer);
	free(same);
	if (rc == 0 && usual) {
		kept_fill(t->kept, *out);
		kept_update(&t->kept, *out);
	}
	pthread_mutex_unlock(&t->io_lock);
	if (rc == 0 && !target_alive(t)) {
		sw_dump_free(*out);
		*out = NULL;
		rc = -ECONNRESET;
	}
	if (rc == -ESRCH)
		rc = -ECONNRESET;
	if (rc == 0)
		(*out)->timeout_ms = timeout_ms;
	return rc;
}

int target_unchanged(struct target *t, struct procid *now)
{
	struct procid id;
	int rc;

	if (t->self)
		return 0;
	if (!now)
		now = &id;
	rc = procid_read(t->pid, now);
	if (rc < 0 || !target_alive(t))
		return -ECONNRESET;
	if (procid_same(now, &t->id))
		return 0;
	if (!atomic_exchange(&t->dead, true)) {
		log_info("pid %d (%s) runs another program or has other "
			 "credentials now: forgotten",
			 (int)t->pid, t->comm);
		/* An agent's connection: the listener drops it on the hangup.
		 */
		if (t->fd >= 0)
			shutdown(t->fd, SHUT_RDWR);
	}
	return REGISTRY_ECHANGED;
}

static int cmp_pid(const void *a, const void *b)
{
	pid_t x = *(const pid_t *)a, y = *(const pid_t *)b;

	return (x > y) - (x < y);
}

/*
 * Drops from d every thread whose tid is in skip[0..nskip) (ascending):
 * the agent was asked to leave them out, and the caller has them from
 * elsewhere; a thread reported twice is never shown.
 */
static void drop_skipped(struct sw_dump *d, const pid_t *skip, size_t nskip)
{
	size_t k = 0;

	if (!d || !nskip)
		return;
	for (size_t i = 0; i < d->nthreads; i++) {
		struct sw_thread *t = &d->threads[i];

		if (bsearch(&t->tid, skip, nskip, sizeof(*skip), cmp_pid)) {
			free(t->ips);
			free(t->error);
			free(t->wait);
			continue;
		}
		d->threads[k++] = *t;
	}
	d->nthreads = k;
}

/*
 * An agent's process: a request over its connection. skip[0..nskip)
 * (ascending, the daemon's tids, only for an agent that said
 * WIRE_FEAT_SKIP) is left out of the dump.
 */
static int dump_agent(struct target *t, const struct asker *who, int timeout_ms,
		      const pid_t *skip, size_t nskip, struct sw_dump **out)
{
	struct wire_dump_req req = { .timeout_ms = (uint32_t)timeout_ms,
				     .window = SW_DEFAULT_WINDOW };
	pid_t *inner = NULL;
	struct wire_out o;
	uint64_t deadline;
	size_t ninner = 0;
	int rc;

	/* The agent knows its threads by its own pid namespace's ids. */
	if (nskip && t->foreign_ns) {
		rc = nspid_to_inner(t->pid, skip, nskip, &inner, &ninner);
		if (rc < 0)
			return rc == -ESRCH ? -ECONNRESET : rc;
		req.skip = inner;
		req.nskip = (uint32_t)ninner;
	} else {
		req.skip = (pid_t *)skip;
		req.nskip = (uint32_t)nskip;
	}
	pthread_mutex_lock(&t->io_lock);
	gate_hold(t->pid, "agent", who->uid, timeout_ms);
	deadline = now_ms() + (uint64_t)timeout_ms + GRACE_MS;
	wire_out_init(&o);
	rc = wire_encode_dump_req(&o, ++t->seq, &req);
	if (rc == 0)
		rc = send_all(t->fd, o.data, o.len, deadline);
	wire_out_release(&o);
	if (rc == 0)
		rc = await_answer(t, t->seq, deadline, out);
	if (rc == -ETIMEDOUT)
		drop_partial(t);
	if (rc == 0 && *out && t->uid != 0 &&
	    dump_addresses(*out) > (size_t)atomic_load(&max_dump_addresses)) {
		log_notice("pid %d (%s) of uid %d sent a dump of %zu "
			   "addresses, more than the %d allowed "
			   "(--max-dump-addresses)",
			   (int)t->pid, t->comm, (int)t->uid,
			   dump_addresses(*out),
			   atomic_load(&max_dump_addresses));
		sw_dump_free(*out);
		*out = NULL;
		/* Hand what the refused dump took back to the system. */
		malloc_trim(0);
		rc = REGISTRY_EADDRS;
	}
	if (rc == 0 && t->foreign_ns)
		rc = translate_tids(t, out);
	if (rc == 0)
		drop_skipped(*out, skip, nskip);
	if (rc == -ECONNRESET) {
		/* Gone or broken: the listener drops it on the hangup. */
		atomic_store(&t->dead, true);
		shutdown(t->fd, SHUT_RDWR);
	}
	/* Keep a large buffer only while it is in use. */
	if (t->rx_len == 0 && t->rx_cap > (64u << 10)) {
		free(t->rx);
		t->rx = NULL;
		t->rx_cap = 0;
	}
	pthread_mutex_unlock(&t->io_lock);
	free(inner);
	return rc;
}

static int cmp_thread_tid(const void *a, const void *b)
{
	const struct sw_thread *x = a, *y = b;

	return (x->tid > y->tid) - (x->tid < y->tid);
}

/*
 * Moves the threads kd read (status ok) into ad, the agent's dump of
 * the others, and frees kd. Returns 0, or -ENOMEM (both freed).
 */
static int merge_reads(struct sw_dump *kd, struct sw_dump *ad)
{
	size_t ok = 0;
	struct sw_thread *nv;

	for (size_t i = 0; i < kd->nthreads; i++)
		ok += kd->threads[i].status == SW_ST_OK;
	nv = realloc(ad->threads, (ad->nthreads + ok + 1) * sizeof(*nv));
	if (!nv) {
		sw_dump_free(kd);
		return -ENOMEM;
	}
	ad->threads = nv;
	for (size_t i = 0; i < kd->nthreads; i++) {
		struct sw_thread *t = &kd->threads[i];

		if (t->status != SW_ST_OK)
			continue;
		ad->threads[ad->nthreads++] = *t;
		memset(t, 0, sizeof(*t)); /* moved: kd frees nothing of it */
		t->status = SW_ST_SKIPPED;
	}
	qsort(ad->threads, ad->nthreads, sizeof(*ad->threads), cmp_thread_tid);
	if (kd->skew_us > ad->skew_us)
		ad->skew_us = kd->skew_us;
	sw_dump_free(kd);
	return 0;
}

/*
 * An agent's process, its blocked threads read from the kernel by the
 * helper (no signal: nothing of theirs returns early) and only the rest
 * by the agent's signal path. Threads that did not run since the last
 * read are not even copied (kept.h). -EOPNOTSUPP when the kernel path
 * cannot be used: the caller dumps it all through the agent.
 */
static int dump_agent_kernel(struct target *t, const struct asker *who,
			     int timeout_ms, unsigned max_frames,
			     struct sw_dump **out)
{
	bool usual = max_frames == 0 || max_frames == SW_MAX_FRAMES;
	uint64_t start = now_ms();
	struct ptracer_same *same = NULL;
	struct sw_dump *kd = NULL;
	pid_t *skip = NULL, tracer;
	size_t nsame = 0, nskip = 0;
	int rc, left;

	*out = NULL;
	pthread_mutex_lock(&t->io_lock);
	if (usual)
		kept_offer(t->kept, &same, &nsame);
	pthread_mutex_unlock(&t->io_lock);
	/* One read of the agent's process, held once (gate.h). */
	gate_hold(t->pid, "agent", who->uid, timeout_ms);
	gate_held(true);
	rc = ptracer_dump_frames(t->pid, t->pidfd, who, timeout_ms, true, same,
				 nsame, max_frames, &kd, &tracer);
	free(same);
	if (rc != 0) {
		if (rc != -EOPNOTSUPP)
			log_info("pid %d (%s): no kernel read (%s): its agent "
				 "reads every thread",
				 (int)t->pid, t->comm, sw_strerror(rc));
		return rc == -ETIMEDOUT ? rc : -EOPNOTSUPP;
	}
	pthread_mutex_lock(&t->io_lock);
	kept_fill(t->kept, kd);
	if (usual)
		kept_update(&t->kept, kd);
	pthread_mutex_unlock(&t->io_lock);
	skip = malloc((kd->nthreads ? kd->nthreads : 1) * sizeof(*skip));
	if (!skip) {
		sw_dump_free(kd);
		return -ENOMEM;
	}
	for (size_t i = 0; i < kd->nthreads; i++)
		if (kd->threads[i].status == SW_ST_OK)
			skip[nskip++] = kd->threads[i].tid;
	qsort(skip, nskip, sizeof(*skip), cmp_pid);
	left = timeout_ms - (int)(now_ms() - start);
	rc = dump_agent(t, who, left > 0 ? left : 1, skip, nskip, out);
	free(skip);
	if (rc == 0 && *out)
		rc = merge_reads(kd, *out);
	else
		sw_dump_free(kd);
	if (rc == 0 && !*out)
		rc = SW_EFORMAT; /* answered with nothing */
	if (rc == 0)
		(*out)->elapsed_us = (now_ms() - start) * 1000;
	else if (*out) {
		sw_dump_free(*out);
		*out = NULL;
	}
	return rc;
}

/*
 * An agent's process sampled without the kernel path: the threads that
 * have not run since the last sample read them are left out of the
 * request (no signal) and put back as they were then (ran.h); what this
 * read finds asleep where it was caught is kept for the next.
 */
static int dump_agent_ran(struct target *t, const struct asker *who,
			  int timeout_ms, struct sw_dump **out)
{
	pid_t *skip = NULL;
	size_t nskip = 0;
	int rc;

	pthread_mutex_lock(&t->io_lock);
	rc = ran_skip(t->ran, t->pid, &skip, &nskip);
	pthread_mutex_unlock(&t->io_lock);
	if (rc < 0)
		return rc;
	rc = dump_agent(t, who, timeout_ms, skip, nskip, out);
	if (rc == 0 && !*out)
		rc = SW_EFORMAT; /* answered with nothing */
	pthread_mutex_lock(&t->io_lock);
	if (rc == 0)
		rc = ran_fill(t->ran, skip, nskip, *out);
	if (rc >= 0) {
		ran_update(&t->ran, t->pid, *out);
		rc = 0;
	}
	pthread_mutex_unlock(&t->io_lock);
	free(skip);
	if (rc < 0) {
		sw_dump_free(*out);
		*out = NULL;
	}
	return rc;
}

/*
 * target_dump_raw(), target_dump_raw_skip() and target_dump_raw_sample():
 * skip[0..nskip) is ascending and unique, and empty unless t can leave
 * threads out; sample: a periodic sample's read.
 */
static int dump_raw(struct target *t, const struct asker *who, int timeout_ms,
		    const pid_t *skip, size_t nskip, bool sample,
		    unsigned max_frames, struct sw_dump **out)
{
	int rc;

	*out = NULL;
	if (t->self)
		return dump_self(timeout_ms, skip, nskip, out);
	if (!target_alive(t))
		return -ECONNRESET;
	/*
	 * The process must be the one the requester was allowed to see
	 * before the read and still after it, whatever the method: a
	 * set-uid exec in between would show a process that nobody but
	 * root may read.
	 */
	rc = target_unchanged(t, NULL);
	if (rc < 0)
		return rc;
	if (t->ptrace)
		rc = dump_ptrace(t, who, timeout_ms, max_frames, out);
	else if (!nskip && (t->features & WIRE_FEAT_SKIP) &&
		 (rc = dump_agent_kernel(t, who, timeout_ms, max_frames,
					 out)) != -EOPNOTSUPP)
		; /* read from the kernel, the rest by the agent */
	else if (sample && !nskip && (t->features & WIRE_FEAT_SKIP))
		rc = dump_agent_ran(t, who, timeout_ms, out);
	else
		rc = dump_agent(t, who, timeout_ms, skip, nskip, out);
	gate_held(false); /* dump_agent_kernel() held it for both parts */
	if (rc == 0)
		rc = target_unchanged(t, NULL);
	if (rc == 0) {
		pthread_mutex_lock(&t->io_lock);
		tcred_mark(&t->tcred, &t->id, t->pid, *out);
		pthread_mutex_unlock(&t->io_lock);
	}
	if (rc < 0) {
		sw_dump_free(*out);
		*out = NULL;
	}
	return rc;
}

int target_dump_raw(struct target *t, const struct asker *who, int timeout_ms,
		    struct sw_dump **out)
{
	return dump_raw(t, who, timeout_ms, NULL, 0, false, 0, out);
}

int target_dump_raw_frames(struct target *t, const struct asker *who,
			   int timeout_ms, unsigned max_frames,
			   struct sw_dump **out)
{
	return dump_raw(t, who, timeout_ms, NULL, 0, false, max_frames, out);
}

int target_dump_raw_sample(struct target *t, const struct asker *who,
			   int timeout_ms, struct sw_dump **out)
{
	return dump_raw(t, who, timeout_ms, NULL, 0, true, 0, out);
}

int target_dump_raw_skip(struct target *t, const struct asker *who,
			 int timeout_ms, const pid_t *skip, size_t nskip,
			 struct sw_dump **out)
{
	pid_t *set;
	size_t n = 0;
	int rc;

	*out = NULL;
	if (nskip == 0)
		return target_dump_raw(t, who, timeout_ms, out);
	if (!skip || nskip > SW_MAX_THREADS)
		return -EINVAL;
	for (size_t i = 0; i < nskip; i++)
		if (skip[i] <= 0)
			return -EINVAL;
	if (t->ptrace || (!t->self && !(t->features & WIRE_FEAT_SKIP)))
		return -EOPNOTSUPP;
	/* The wire wants the set ascending, without repeats. */
	set = malloc(nskip * sizeof(*set));
	if (!set)
		return -ENOMEM;
	memcpy(set, skip, nskip * sizeof(*set));
	qsort(set, nskip, sizeof(*set), cmp_pid);
	for (size_t i = 0; i < nskip; i++)
		if (n == 0 || set[i] != set[n - 1])
			set[n++] = set[i];
	rc = dump_raw(t, who, timeout_ms, set, n, false, 0, out);
	free(set);
	return rc;
}
