/*
 * parsers.c - the daemon's pool of parser workers (parsers.h).
 *
 * The pool's lock covers its slots and its list of refused files only:
 * a request holds a worker, never the lock, while the worker parses.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "model/clock.h"
#include "model/procfs.h"
#include "dumpwire.h"
#include "msg.h"
#include "parsers.h"
#include "worker.h"
#include "stackwatch.h"
#include "symbols/perfmap.h"
#include "symbols/symbolize.h"

#define HELLO_NS (5000ull * 1000000ull) /* a new worker says hello */
#define IDLE_KEEP 2			/* workers kept however idle */
#define IDLE_NS (60ull * 1000000000ull) /* then the others go */
#define QUARANTINE_MAX 256
#define BACKOFF_MAX_MS 10000
#define REASON_MAX 160
#define PERFMAP_DEADLINE_NS (5000ull * 1000000ull) /* one perf map's parse */

enum { SLOT_NONE, SLOT_STARTING, SLOT_IDLE, SLOT_BUSY };

static parsers_log_fn log_fn;

void parsers_set_log(parsers_log_fn fn)
{
	log_fn = fn;
}

/* Says one line through the hook (nothing without one). */
__attribute__((format(printf, 2, 3))) static void say(bool warn,
						      const char *fmt, ...)
{
	char line[512];
	va_list ap;

	if (!log_fn)
		return;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	log_fn(warn, line);
}

struct worker {
	int state;
	pid_t pid;
	int pidfd, sock;
	struct worker_note *note;
	uint64_t idle_since_ns;
	char why[400]; /* its protections not in force, as it said */
};

/* A file that killed a worker: refused until until_ns. */
struct quarantined {
	dev_t dev;
	ino_t ino;
	uint64_t until_ns;
	char reason[REASON_MAX];
};

static struct {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool ready;
	uid_t uid;
	gid_t gid;
	parsers_spawn_fn spawn;
	struct worker w[PARSERS_MAX];
	struct quarantined q[QUARANTINE_MAX];
	size_t nq;
	unsigned failures;    /* starts that failed in a row */
	uint64_t retry_at_ns; /* no start tried before */
	char fail_why[200];
	struct parsers_stats st;
	/* The keeper: replaces workers that die idle, keeps one started. */
	pthread_t keeper;
	bool keeping, stopping;
	char died_why[160]; /* the last one that died idle, until replaced */
	/* Frames without symbols when no worker answers: parses nothing. */
	struct sym *bare;
	pthread_mutex_t bare_lock;
} pool = { .lock = PTHREAD_MUTEX_INITIALIZER,
	   .bare_lock = PTHREAD_MUTEX_INITIALIZER };

/* A file handed to the worker of a request, under the module at start. */
struct handed {
	uint64_t start;
	dev_t dev;
	ino_t ino;
};

/* One request under way in a worker. */
struct req {
	struct worker *w;
	const struct parse_files *f;
	struct sw_dump *d; /* symbolizing: the dump */
	struct handed *h;
	size_t nh, caph;
	uint64_t begin_ns, kill_at_ns;
	bool refused; /* a file was refused (quarantined) */
	/* Unwinding: the modules whose file was refused, and why. */
	struct {
		uint64_t start;
		char reason[REASON_MAX];
	} gone[8];
	unsigned ngone;
	char failure[REASON_MAX]; /* why the worker failed (failed()) */
	/* A core's read: a death is blamed on the file handed last (its
	 * modules are handed before any is parsed, no note tells them
	 * apart), and the files refused are named by path. */
	bool core;
	struct perfmap *pm; /* a perf map being built (parsers_perfmap()) */
	int pm_rc;	    /* the first error building it */
	struct {
		char path[256];
		char reason[REASON_MAX];
	} refused_paths[8];
	unsigned nrefused;
};

int parsers_init(uid_t uid, gid_t gid, parsers_spawn_fn spawn)
{
	pthread_condattr_t ca;

	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&pool.cond, &ca);
	pthread_condattr_destroy(&ca);
	pool.uid = uid;
	pool.gid = gid;
	pool.spawn = spawn;
	for (size_t i = 0; i < PARSERS_MAX; i++) {
		pool.w[i].pidfd = -1;
		pool.w[i].sock = -1;
	}
	if (sym_new(NULL, NULL, &pool.bare) != 0)
		return -ENOMEM;
	pool.ready = true;
	return 0;
}

/* Ends w's process and frees its slot. Called with the lock held. */
static void bury(struct worker *w)
{
	if (w->pidfd >= 0) {
		syscall(SYS_pidfd_send_signal, w->pidfd, SIGKILL, NULL, 0);
		close(w->pidfd);
	}
	if (w->sock >= 0)
		close(w->sock);
	if (w->note)
		munmap(w->note, sizeof(*w->note));
	w->pidfd = w->sock = -1;
	w->note = NULL;
	w->pid = 0;
	w->state = SLOT_NONE;
	pthread_cond_broadcast(&pool.cond);
}

void parsers_stop(void)
{
	if (!pool.ready)
		return;
	pthread_mutex_lock(&pool.lock);
	pool.stopping = true;
	pthread_cond_broadcast(&pool.cond);
	pthread_mutex_unlock(&pool.lock);
	if (pool.keeping)
		pthread_join(pool.keeper, NULL);
	pthread_mutex_lock(&pool.lock);
	for (size_t i = 0; i < PARSERS_MAX; i++)
		if (pool.w[i].state == SLOT_IDLE)
			bury(&pool.w[i]);
	pool.ready = false;
	pthread_mutex_unlock(&pool.lock);
	sym_free(pool.bare);
	pool.bare = NULL;
}

/* Raises a worker's OOM score: the first killed when memory runs out. */
static void oom_first(pid_t pid)
{
	char path[48];
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/oom_score_adj", (int)pid);
	fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd >= 0) {
		(void)!write(fd, "1000", 4);
		close(fd);
	}
}

/*
 * Starts a worker into w (reserved, SLOT_STARTING), without the lock:
 * a core starts it as the pool's user; with no core running, this
 * process would have to, and cannot give it less than it holds, so
 * none is started. Waits for its hello and maps its note page.
 */
static int spawn(struct worker *w, char *why, size_t size)
{
	struct wire_in in;
	struct msg m;
	int sv[2], rc;

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) {
		snprintf(why, size, "socketpair: %s", strerror(errno));
		return -errno;
	}
	rc = pool.spawn(pool.uid, pool.gid, sv[1], &w->pid, &w->pidfd);
	close(sv[1]);
	if (rc < 0) {
		close(sv[0]);
		snprintf(why, size, "no snapshot helper could start one: %s",
			 sw_strerror(rc));
		return rc;
	}
	w->sock = sv[0];
	rc = msg_recv(w->sock, &m, clock_now_ns() + HELLO_NS);
	if (rc < 0) {
		snprintf(why, size, "it did not start: %s",
			 rc == -EPIPE ? "it exited" : sw_strerror(rc));
		return rc;
	}
	wire_in_init(&in, m.body, m.len);
	if (m.type != W_DONE || wire_get_u32(&in) != WORKER_HELLO ||
	    m.nfds != 1) {
		msg_release(&m);
		snprintf(why, size, "it did not say hello");
		return -EPROTO;
	}
	wire_get_str(&in, w->why, sizeof(w->why));
	if (in.err)
		snprintf(w->why, sizeof(w->why), "it did not say");
	w->note = mmap(NULL, sizeof(*w->note), PROT_READ, MAP_SHARED, m.fds[0],
		       0);
	msg_release(&m);
	if (w->note == MAP_FAILED) {
		w->note = NULL;
		snprintf(why, size, "its note page: %s", strerror(errno));
		return -EPROTO;
	}
	oom_first(w->pid);
	return 0;
}

/*
 * What a start of w (rc: spawn()'s, why) leaves: w idle and the backoff
 * reset, or w's slot free again and the next start later. With the lock
 * held; returns rc.
 */
static int started(struct worker *w, int rc, const char *why, uint64_t now)
{
	if (rc == 0) {
		pool.failures = 0;
		pool.fail_why[0] = '\0';
		pool.died_why[0] = '\0';
		pool.st.started++;
		w->state = SLOT_IDLE;
		w->idle_since_ns = clock_now_ns();
		pthread_cond_broadcast(&pool.cond);
		return 0;
	}
	bury(w);
	pool.failures++;
	snprintf(pool.fail_why, sizeof(pool.fail_why), "%s", why);
	pool.retry_at_ns =
		now + (uint64_t)(pool.failures > 6
					 ? BACKOFF_MAX_MS
					 : 250u << (pool.failures - 1)) *
			      1000000ull;
	say(true, "a parser worker could not start: %s", why);
	return rc;
}

/* Workers idle for long, beyond IDLE_KEEP, go. With the lock held. */
static void retire_idle(uint64_t now)
{
	size_t idle = 0;

	for (size_t i = 0; i < PARSERS_MAX; i++) {
		struct worker *w = &pool.w[i];

		if (w->state != SLOT_IDLE)
			continue;
		if (++idle > IDLE_KEEP && now - w->idle_since_ns > IDLE_NS)
			bury(w);
	}
}

/* The name of a signal, as the kernel's headers spell it. */
static const char *signame(int sig)
{
	switch (sig) {
	case SIGSEGV:
		return "SIGSEGV";
	case SIGBUS:
		return "SIGBUS";
	case SIGILL:
		return "SIGILL";
	case SIGFPE:
		return "SIGFPE";
	case SIGABRT:
		return "SIGABRT";
	case SIGSYS:
		return "SIGSYS";
	default:
		return "SIGKILL";
	}
}

/*
 * Whether idle w's process has ended (killed while it waited): then it
 * is buried, its slot free. With the lock held.
 */
static bool exited(struct worker *w)
{
	struct pollfd p = { .fd = w->pidfd, .events = POLLIN };

	if (poll(&p, 1, 0) != 1)
		return false;
	snprintf(pool.died_why, sizeof(pool.died_why),
		 "parser worker %d died idle (%s); another is starting",
		 (int)w->pid,
		 signame(w->note ? (int)atomic_load(&w->note->signo) : 0));
	say(true, "%s", pool.died_why);
	bury(w);
	return true;
}

/*
 * An idle worker for a request, started if need be, or NULL when none
 * is free by deadline_ns (why says so).
 */
static struct worker *acquire(uint64_t deadline_ns, char *why, size_t size)
{
	struct worker *w = NULL;

	pthread_mutex_lock(&pool.lock);
	while (pool.ready) {
		struct worker *none = NULL;
		uint64_t now = clock_now_ns();
		struct timespec ts;
		int rc;

		for (size_t i = 0; i < PARSERS_MAX && !w; i++) {
			if (pool.w[i].state == SLOT_IDLE && !exited(&pool.w[i]))
				w = &pool.w[i];
			else if (pool.w[i].state == SLOT_NONE && !none)
				none = &pool.w[i];
		}
		if (w) {
			w->state = SLOT_BUSY;
			break;
		}
		if (none && now >= pool.retry_at_ns) {
			char fwhy[200];

			none->state = SLOT_STARTING;
			pthread_mutex_unlock(&pool.lock);
			rc = spawn(none, fwhy, sizeof(fwhy));
			pthread_mutex_lock(&pool.lock);
			if (started(none, rc, fwhy, now) == 0) {
				w = none;
				w->state = SLOT_BUSY;
				break;
			}
			continue;
		}
		if (now >= deadline_ns)
			break;
		/* Busy all, or starting is backing off: wait for one. */
		if (none && pool.retry_at_ns < deadline_ns)
			deadline_ns = pool.retry_at_ns;
		ts.tv_sec = (time_t)(deadline_ns / 1000000000ull);
		ts.tv_nsec = (long)(deadline_ns % 1000000000ull);
		pthread_cond_timedwait(&pool.cond, &pool.lock, &ts);
	}
	if (!w)
		snprintf(why, size, "%s",
			 pool.fail_why[0] ? pool.fail_why
					  : "every parser was busy");
	pthread_mutex_unlock(&pool.lock);
	return w;
}

/* The memory a worker holds now, from /proc; 0 if unknown. */
static uint64_t rss_of(pid_t pid)
{
	char path[48], buf[128];
	unsigned long long size, res;
	ssize_t n;

	snprintf(path, sizeof(path), "/proc/%d/statm", (int)pid);
	n = procfs_read_at(AT_FDCWD, path, buf, sizeof(buf) - 1);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	if (sscanf(buf, "%llu %llu", &size, &res) != 2)
		return 0;
	return (uint64_t)res * (uint64_t)sysconf(_SC_PAGESIZE);
}

/*
 * Gives w back: idle again, or ended (dead: it died or broke its word;
 * or it holds more memory than PARSERS_RSS_MAX after its request).
 */
static void release(struct worker *w, bool dead)
{
	bool fat = !dead && rss_of(w->pid) > PARSERS_RSS_MAX;

	pthread_mutex_lock(&pool.lock);
	if (dead || fat || !pool.ready) {
		bury(w);
		if (fat)
			pool.st.recycled++;
	} else {
		w->state = SLOT_IDLE;
		w->idle_since_ns = clock_now_ns();
		retire_idle(w->idle_since_ns);
		pthread_cond_broadcast(&pool.cond);
	}
	pthread_mutex_unlock(&pool.lock);
}

/* The reason a file was refused, if it is; with the lock held. */
static const char *quarantined(dev_t dev, ino_t ino, uint64_t now)
{
	for (size_t i = 0; i < pool.nq; i++)
		if (pool.q[i].dev == dev && pool.q[i].ino == ino &&
		    now < pool.q[i].until_ns)
			return pool.q[i].reason;
	return NULL;
}

static void quarantine(dev_t dev, ino_t ino, const char *reason)
{
	uint64_t now = clock_now_ns();
	struct quarantined *q = NULL;

	pthread_mutex_lock(&pool.lock);
	for (size_t i = 0; i < pool.nq && !q; i++)
		if ((pool.q[i].dev == dev && pool.q[i].ino == ino) ||
		    now >= pool.q[i].until_ns)
			q = &pool.q[i];
	if (!q && pool.nq < QUARANTINE_MAX)
		q = &pool.q[pool.nq++];
	if (!q) { /* full: the one that ends first makes room */
		q = &pool.q[0];
		for (size_t i = 1; i < pool.nq; i++)
			if (pool.q[i].until_ns < q->until_ns)
				q = &pool.q[i];
	}
	q->dev = dev;
	q->ino = ino;
	q->until_ns = now + PARSERS_QUARANTINE_S * 1000000000ull;
	snprintf(q->reason, sizeof(q->reason), "%s", reason);
	pthread_mutex_unlock(&pool.lock);
}

/* The module of d at start, or NULL. */
static struct sw_module *module_at(struct sw_dump *d, uint64_t start)
{
	for (size_t i = 0; d && i < d->nmodules; i++)
		if (d->modules[i].start == start)
			return &d->modules[i];
	return NULL;
}

/* Says why m has no symbols (the first reason stays). */
static void module_error(struct sw_module *m, const char *reason)
{
	if (m && !m->symbols_error)
		m->symbols_error = strdup(reason);
}

static int answer(struct req *r, uint32_t type, int32_t err, const void *body,
		  size_t len, int fd)
{
	uint8_t buf[4];
	struct wire_out o;
	int rc;

	memcpy(buf, &err, sizeof(buf));
	if (!len)
		return msg_send(r->w->sock, type, buf, sizeof(buf),
				fd >= 0 ? &fd : NULL, fd >= 0, r->kill_at_ns);
	wire_out_init(&o);
	wire_put_bytes(&o, buf, sizeof(buf));
	wire_put_bytes(&o, body, len);
	rc = o.err ? o.err
		   : msg_send(r->w->sock, type, o.data, o.len,
			      fd >= 0 ? &fd : NULL, fd >= 0, r->kill_at_ns);
	wire_out_release(&o);
	return rc;
}

/*
 * Hands the worker fd (ours; closed here), the file of the module at
 * start, unless it is no regular file or it killed a worker before.
 */
static int answer_file_as(struct req *r, int fd, uint64_t start,
			  const char *real);

static int answer_file(struct req *r, int fd, uint64_t start)
{
	return answer_file_as(r, fd, start, NULL);
}

/* answer_file(), with the path it was resolved to (W_NEED_PATH). */
static int answer_file_as(struct req *r, int fd, uint64_t start,
			  const char *real)
{
	const char *why = NULL;
	struct stat st;
	int err = fd < 0 ? fd : 0, rc;

	if (fd >= 0 && (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)))
		err = -EINVAL;
	if (fd >= 0 && !err) {
		pthread_mutex_lock(&pool.lock);
		why = quarantined(st.st_dev, st.st_ino, clock_now_ns());
		if (why) {
			module_error(module_at(r->d, start), why);
			pool.st.refused++;
			if (!r->d && r->ngone < 8) {
				r->gone[r->ngone].start = start;
				snprintf(r->gone[r->ngone].reason,
					 sizeof(r->gone[0].reason), "%s", why);
				r->ngone++;
			}
		}
		pthread_mutex_unlock(&pool.lock);
		if (why) {
			err = -EPERM;
			r->refused = true;
		}
		if (why && real && r->nrefused < 8) {
			snprintf(r->refused_paths[r->nrefused].path,
				 sizeof(r->refused_paths[0].path), "%s", real);
			snprintf(r->refused_paths[r->nrefused].reason,
				 sizeof(r->refused_paths[0].reason), "%s", why);
			r->nrefused++;
		}
	}
	if (fd >= 0 && !err && r->nh == r->caph) {
		size_t cap = r->caph ? r->caph * 2 : 16;
		struct handed *h = realloc(r->h, cap * sizeof(*h));

		if (!h)
			err = -ENOMEM;
		else {
			r->h = h;
			r->caph = cap;
		}
	}
	if (fd >= 0 && !err)
		r->h[r->nh++] = (struct handed){ start, st.st_dev, st.st_ino };
	if (real && !err) {
		struct wire_out o;

		wire_out_init(&o);
		wire_put_str(&o, real, 4096);
		rc = o.err ? o.err : answer(r, W_FILE, 0, o.data, o.len, fd);
		wire_out_release(&o);
	} else {
		rc = answer(r, W_FILE, err, NULL, 0, err ? -1 : fd);
	}
	if (fd >= 0)
		close(fd);
	return rc;
}

/* The module of the dump the worker names by its index, or NULL. */
static const struct sw_module *named_module(struct req *r, const struct msg *m)
{
	uint32_t i;

	if (!r->d || m->len != sizeof(i))
		return NULL;
	memcpy(&i, m->body, sizeof(i));
	return i < r->d->nmodules ? &r->d->modules[i] : NULL;
}

static int answer_maps(struct req *r)
{
	const struct procmaps *pm = NULL;
	struct wire_out o;
	int err = r->f->maps ? r->f->maps(r->f->arg, &pm) : -ENOSYS, rc;

	wire_out_init(&o);
	wire_put_u32(&o, (uint32_t)err);
	wire_put_u64(&o, err ? 0 : pm->vdso_start);
	wire_put_u64(&o, err ? 0 : pm->vdso_end);
	wire_put_u32(&o, err ? 0 : (uint32_t)pm->n);
	for (size_t i = 0; !err && i < pm->n; i++) {
		wire_put_u64(&o, pm->v[i].start);
		wire_put_u64(&o, pm->v[i].end);
		wire_put_u64(&o, pm->v[i].offset);
		wire_put_u64(&o, (uint64_t)pm->v[i].dev);
		wire_put_u64(&o, pm->v[i].ino);
		wire_put_str(&o, pm->v[i].path, 4096);
	}
	rc = o.err ? o.err
		   : msg_send(r->w->sock, W_MAPS, o.data, o.len, NULL, 0,
			      r->kill_at_ns);
	wire_out_release(&o);
	return rc;
}

/* One question of the worker, answered. 0 or a negative errno. */
static int serve_one(struct req *r, const struct msg *m)
{
	const struct sw_module *mod;
	struct wire_in in;
	uint64_t start;
	char path[4097];
	void *image = NULL;
	size_t size = 0;
	int rc;

	switch (m->type) {
	case W_NEED_MODULE:
		mod = named_module(r, m);
		if (!mod)
			return -EPROTO;
		return answer_file(r,
				   r->f->open_module
					   ? r->f->open_module(r->f->arg, mod)
					   : -ENOSYS,
				   mod->start);
	case W_NEED_DEBUG:
		if (m->len < 2 || m->len > SW_BUILD_ID_MAX)
			return -EPROTO;
		return answer_file(r, sym_open_debug(m->body, m->len),
				   atomic_load(&r->w->note->start));
	case W_NEED_IMAGE:
		mod = named_module(r, m);
		if (!mod)
			return -EPROTO;
		rc = r->f->image ? r->f->image(r->f->arg, mod, &image, &size)
				 : -ENOSYS;
		if (rc == 0 && (!size || size > (64u << 20)))
			rc = -EFBIG;
		rc = answer(r, W_IMAGE, rc, rc ? NULL : image, rc ? 0 : size,
			    -1);
		free(image);
		return rc;
	case W_NEED_MAPS:
		return answer_maps(r);
	case W_SNAPPED:
		if (m->len != sizeof(int32_t))
			return -EPROTO;
		/* Read: unwinding it is all that is left. */
		if (r->kill_at_ns > clock_now_ns() + PARSERS_GRACE_NS)
			r->kill_at_ns = clock_now_ns() + PARSERS_GRACE_NS;
		if (r->f->snapped) {
			int32_t v;

			memcpy(&v, m->body, sizeof(v));
			r->f->snapped(r->f->arg, v);
		}
		return 0;
	case W_ENTRIES: {
		uint32_t n;

		if (!r->pm)
			return -EPROTO;
		wire_in_init(&in, m->body, m->len);
		n = wire_get_u32(&in);
		if (in.err || n > PERFMAP_MAX_ENTRIES)
			return -EPROTO;
		for (uint32_t i = 0; i < n; i++) {
			char name[PERFMAP_NAME_MAX + 1];
			uint64_t lo = wire_get_u64(&in), hi = wire_get_u64(&in);

			wire_get_str(&in, name, sizeof(name));
			if (in.err)
				return -EPROTO;
			/* Past the budget: the rest is read and dropped. */
			if (r->pm_rc == 0)
				r->pm_rc = perfmap_build_add(
					r->pm, lo, hi, name, strlen(name));
		}
		return in.left ? -EPROTO : 0;
	}
	case W_NEED_PATH: {
		char *real = NULL;
		int fd;

		wire_in_init(&in, m->body, m->len);
		wire_get_str(&in, path, sizeof(path));
		if (in.err || in.left)
			return -EPROTO;
		fd = r->f->open_path ? r->f->open_path(r->f->arg, path, &real)
				     : -ENOSYS;
		rc = answer_file_as(r, fd, atomic_load(&r->w->note->start),
				    real ? real : path);
		free(real);
		return rc;
	}
	case W_NEED_MAPPED:
		wire_in_init(&in, m->body, m->len);
		start = wire_get_u64(&in);
		wire_get_str(&in, path, sizeof(path));
		if (in.err || in.left)
			return -EPROTO;
		return answer_file(
			r,
			r->f->open_mapped
				? r->f->open_mapped(r->f->arg, start, path)
				: -ENOSYS,
			start);
	default:
		return -EPROTO;
	}
}

/*
 * Answers the worker's questions until its W_DONE (into *done), its
 * death (-EPIPE), its overrun (-ETIMEDOUT) or a broken word (-EPROTO).
 */
static int serve(struct req *r, struct msg *done)
{
	for (;;) {
		struct msg m;
		int rc = msg_recv(r->w->sock, &m, r->kill_at_ns);

		if (rc < 0)
			return rc == -ENOMEM	  ? rc
			       : rc == -ETIMEDOUT ? rc
			       : rc == -EPIPE	  ? rc
						  : -EPROTO;
		if (m.type == W_DONE && m.len >= 4) {
			*done = m;
			return 0;
		}
		rc = serve_one(r, &m);
		msg_release(&m);
		if (rc < 0)
			return rc == -ETIMEDOUT || rc == -EPIPE ? rc : -EPROTO;
	}
}

/*
 * The worker of r failed (rc): ends it, and refuses from now on the
 * files of the module it was reading, whose symbols say why. Returns
 * whether a module was to blame (so that trying again may go further).
 */
static bool failed(struct req *r, int rc)
{
	struct worker *w = r->w;
	uint64_t start = w->note ? atomic_load(&w->note->start) : 0;
	char reason[REASON_MAX];
	int sig;

	/* A death is only sure once it is dead: kill, then read its note. */
	syscall(SYS_pidfd_send_signal, w->pidfd, SIGKILL, NULL, 0);
	sig = w->note ? (int)atomic_load(&w->note->signo) : 0;
	pthread_mutex_lock(&pool.lock);
	if (rc == -ETIMEDOUT)
		pool.st.overran++;
	else if (rc == -EPIPE)
		pool.st.crashed++;
	else
		pool.st.killed++;
	pthread_mutex_unlock(&pool.lock);
	if (rc == -ETIMEDOUT)
		snprintf(reason, sizeof(reason),
			 "the parser took longer than %llu ms",
			 (unsigned long long)((r->kill_at_ns - r->begin_ns) /
					      1000000u));
	else if (rc == -EPIPE)
		snprintf(reason, sizeof(reason), "the parser was killed (%s)",
			 signame(sig));
	else
		snprintf(reason, sizeof(reason), "the parser broke off (%s)",
			 sw_strerror(rc));
	say(true, "parser worker %d: %s%s", (int)w->pid, reason,
	    start ? "; the file it read is refused for a while" : "");
	snprintf(r->failure, sizeof(r->failure), "%s", reason);
	release(w, true);
	r->w = NULL;
	if (r->core && r->nh) {
		quarantine(r->h[r->nh - 1].dev, r->h[r->nh - 1].ino, reason);
		return true;
	}
	if (!start)
		return false;
	for (size_t i = 0; i < r->nh; i++)
		if (r->h[i].start == start)
			quarantine(r->h[i].dev, r->h[i].ino, reason);
	module_error(module_at(r->d, start), reason);
	return true;
}

/* Frames with module and offset only (parses nothing), and why. */
static int bare_frames(struct sw_dump *d, const char *why)
{
	char reason[REASON_MAX];
	int rc;

	pthread_mutex_lock(&pool.bare_lock);
	rc = sym_dump(pool.bare, d, false);
	pthread_mutex_unlock(&pool.bare_lock);
	d->symbolized = true;
	d->symbols_partial = true;
	snprintf(reason, sizeof(reason), "no parser could read it: %.120s",
		 why);
	for (size_t i = 0; i < d->nmodules; i++)
		module_error(&d->modules[i], reason);
	return rc;
}

/* Sends the request of type in o to a worker r has, and starts r. */
static int start(struct req *r, uint32_t type, const struct wire_out *o, int fd,
		 uint64_t deadline_ns)
{
	r->nh = 0;
	r->refused = false;
	r->begin_ns = clock_now_ns();
	r->kill_at_ns =
		(deadline_ns > r->begin_ns ? deadline_ns : r->begin_ns) +
		PARSERS_GRACE_NS;
	if (o->err)
		return o->err;
	return msg_send(r->w->sock, type, o->data, o->len, fd >= 0 ? &fd : NULL,
			fd >= 0, r->kill_at_ns);
}

int parsers_symbolize(struct sw_dump *d, uint64_t deadline_ns,
		      const struct parse_files *f)
{
	struct req r = { .f = f, .d = d };
	char why[200] = "";
	int rc = 0;

	/* A worker that died idle, or on a file now refused: another. */
	for (int tries = 0; tries < 3; tries++) {
		struct wire_out o;
		struct wire_in in;
		struct msg done;
		uint64_t hits, misses;
		int32_t rc32;

		if (tries && clock_now_ns() >= deadline_ns) {
			snprintf(why, sizeof(why), "no time was left");
			break;
		}
		r.w = acquire(deadline_ns, why, sizeof(why));
		if (!r.w)
			break;
		wire_out_init(&o);
		wire_put_u64(&o, deadline_ns);
		wire_put_u32(&o, 1);
		dumpwire_put(&o, d);
		rc = start(&r, W_SYMBOLIZE, &o, -1, deadline_ns);
		wire_out_release(&o);
		if (rc == 0)
			rc = serve(&r, &done);
		if (rc == -ENOMEM) {
			release(r.w, false);
			snprintf(why, sizeof(why), "out of memory");
			break;
		}
		if (rc < 0) {
			failed(&r, rc);
			snprintf(why, sizeof(why), "its parser failed (%s)",
				 sw_strerror(rc));
			continue;
		}
		wire_in_init(&in, done.body, done.len);
		rc32 = (int32_t)wire_get_u32(&in);
		hits = wire_get_u64(&in);
		misses = wire_get_u64(&in);
		rc = in.err	? SW_EFORMAT
		     : rc32 < 0 ? rc32
				: dumpwire_take_symbols(&in, d);
		msg_release(&done);
		pthread_mutex_lock(&pool.lock);
		pool.st.requests++;
		pool.st.cache_hits += hits;
		pool.st.cache_misses += misses;
		pthread_mutex_unlock(&pool.lock);
		/* A malformed answer: a worker not to trust again. */
		release(r.w, rc == SW_EFORMAT);
		r.w = NULL;
		if (rc == 0) {
			d->symbols_partial |= r.refused;
			free(r.h);
			return 0;
		}
		snprintf(why, sizeof(why), "%s", sw_strerror(rc));
		break;
	}
	free(r.h);
	return bare_frames(d, why[0] ? why : "it failed");
}

/*
 * The modules whose file was refused to the unwinder are left out of
 * its dump (it had no file to read them by): put back, with their
 * mappings' range and why, so that their frames name them.
 */
static int add_refused(struct sw_dump *d, const struct req *r)
{
	const struct procmaps *pm = NULL;

	if (!r->ngone || !r->f->maps || r->f->maps(r->f->arg, &pm) != 0)
		return 0;
	for (unsigned g = 0; g < r->ngone; g++) {
		const struct procmap *first =
			procmaps_find(pm, r->gone[g].start);
		struct sw_module *m, *v;
		uint64_t end;

		if (!first || module_at(d, first->start) ||
		    d->nmodules >= SW_MAX_MODULES)
			continue;
		end = first->end;
		for (const struct procmap *p = first + 1;
		     p < pm->v + pm->n && p->dev == first->dev &&
		     p->ino == first->ino;
		     p++)
			end = p->end;
		v = realloc(d->modules, (d->nmodules + 1) * sizeof(*v));
		if (!v)
			return -ENOMEM;
		d->modules = v;
		m = &d->modules[d->nmodules];
		memset(m, 0, sizeof(*m));
		m->path = strdup(first->path);
		m->symbols_error = strdup(r->gone[g].reason);
		if (!m->path || !m->symbols_error) {
			free(m->path);
			free(m->symbols_error);
			return -ENOMEM;
		}
		/* Its load bias, as for a file mapped from offset 0. */
		m->start = first->start;
		m->end = end;
		m->bias = first->start - first->offset;
		d->nmodules++;
	}
	return 0;
}

/*
 * Hands o (a request of type, with fd when not -1) to a worker r takes,
 * by deadline_ns; one that died idle before it took it is replaced, up
 * to three times. 0 or start()'s error with r->w; with none to take,
 * r->w NULL and why (size bytes) says why.
 */
static int hand_over(struct req *r, uint32_t type, const struct wire_out *o,
		     int fd, uint64_t deadline_ns, char *why, size_t size)
{
	int rc = -EPIPE;

	for (int tries = 0; tries < 3 && rc == -EPIPE; tries++) {
		r->w = acquire(deadline_ns, why, size);
		if (!r->w)
			return PARSERS_EBUSY;
		rc = start(r, type, o, fd, deadline_ns);
		if (rc == -EPIPE) {
			release(r->w, true);
			r->w = NULL;
		}
	}
	return rc;
}

int parsers_unwind(int stream, pid_t pid, unsigned max_frames,
		   uint64_t read_deadline_ns, const struct parse_files *f,
		   struct sw_dump **out, pid_t *tracer)
{
	struct req r = { .f = f };
	struct wire_out o;
	struct wire_in in;
	struct msg done;
	char why[200];
	int32_t rc32;
	int rc;

	*out = NULL;
	*tracer = 0;
	wire_out_init(&o);
	wire_put_u64(&o, read_deadline_ns);
	wire_put_u32(&o, max_frames);
	wire_put_u32(&o, (uint32_t)pid);
	/* A worker that died before it took the request: another. */
	rc = hand_over(&r, W_UNWIND, &o, stream, read_deadline_ns, why,
		       sizeof(why));
	wire_out_release(&o);
	close(stream);
	if (!r.w) {
		say(false, "no parser to unwind pid %d: %s", (int)pid, why);
		return PARSERS_EBUSY;
	}
	if (rc == 0 && f->early)
		f->early(f->arg);
	if (rc == 0)
		rc = serve(&r, &done);
	if (rc == -ENOMEM) {
		release(r.w, false);
		free(r.h);
		return rc;
	}
	if (rc < 0) {
		rc = failed(&r, rc) ? PARSERS_EAGAIN : PARSERS_EFAILED;
		free(r.h);
		return rc;
	}
	wire_in_init(&in, done.body, done.len);
	rc32 = (int32_t)wire_get_u32(&in);
	*tracer = (pid_t)wire_get_u32(&in);
	if (in.err)
		rc = SW_EFORMAT;
	else if (rc32 == 0)
		rc = dumpwire_get(&in, out);
	else
		rc = rc32 > 0 ? SW_EFORMAT : rc32;
	if (rc == 0 && in.left)
		rc = SW_EFORMAT;
	if (rc == SW_EFORMAT && *out) {
		sw_dump_free(*out);
		*out = NULL;
	}
	msg_release(&done);
	pthread_mutex_lock(&pool.lock);
	pool.st.requests++;
	pthread_mutex_unlock(&pool.lock);
	release(r.w, rc == SW_EFORMAT && rc32 == 0);
	free(r.h);
	if (rc == 0 && add_refused(*out, &r) < 0) {
		sw_dump_free(*out);
		*out = NULL;
		rc = -ENOMEM;
	}
	return rc;
}

int parsers_core(int fd, const char *name, const char *exe, unsigned max_frames,
		 uint64_t deadline_ns, const struct parse_files *f,
		 struct sw_dump **out, char *why, size_t size)
{
	struct req r = { .f = f, .core = true };
	struct wire_out o;
	struct wire_in in;
	struct msg done;
	int32_t rc32;
	int rc = 0;

	*out = NULL;
	why[0] = '\0';
	wire_out_init(&o);
	wire_put_u32(&o, max_frames);
	wire_put_str(&o, name, 4096);
	wire_put_u32(&o, exe != NULL);
	wire_put_str(&o, exe ? exe : "", 4096);
	rc = hand_over(&r, W_CORE, &o, fd, deadline_ns, why, size);
	wire_out_release(&o);
	if (!r.w)
		return PARSERS_EBUSY;
	if (rc == 0)
		rc = serve(&r, &done);
	if (rc == -ENOMEM) {
		release(r.w, false);
		free(r.h);
		return rc;
	}
	if (rc < 0) {
		rc = failed(&r, rc) ? PARSERS_EAGAIN : PARSERS_EFAILED;
		snprintf(why, size, "%s", r.failure);
		free(r.h);
		return rc;
	}
	wire_in_init(&in, done.body, done.len);
	rc32 = (int32_t)wire_get_u32(&in);
	wire_get_str(&in, why, size);
	if (in.err)
		rc = SW_EFORMAT;
	else if (rc32 == 0 && (rc = dumpwire_get(&in, out)) == 0)
		rc = dumpwire_take_symbols(&in, *out);
	else if (rc32 != 0)
		rc = rc32 > 0 ? SW_EFORMAT : rc32;
	if (rc == 0 && in.left)
		rc = SW_EFORMAT;
	if (rc != 0 && *out) {
		sw_dump_free(*out);
		*out = NULL;
	}
	msg_release(&done);
	pthread_mutex_lock(&pool.lock);
	pool.st.requests++;
	pthread_mutex_unlock(&pool.lock);
	release(r.w, rc == SW_EFORMAT && rc32 == 0);
	/* The modules whose file was refused: why their frames are bare. */
	for (size_t i = 0; rc == 0 && i < (*out)->nmodules; i++) {
		struct sw_module *m = &(*out)->modules[i];

		for (unsigned k = 0; m->path && k < r.nrefused; k++)
			if (strcmp(m->path, r.refused_paths[k].path) == 0)
				module_error(m, r.refused_paths[k].reason);
	}
	if (rc == 0)
		(*out)->symbols_partial |= r.refused;
	free(r.h);
	return rc;
}

int parsers_perfmap(int fd, off_t size, const struct perfmap_budget *budget,
		    struct perfmap **out)
{
	static const struct parse_files none = { 0 };
	struct req r = { .f = &none };
	struct perfmap *pm = NULL;
	struct wire_out o;
	struct wire_in in;
	struct msg done;
	struct stat st;
	char why[200];
	uint64_t deadline = clock_now_ns() + PERFMAP_DEADLINE_NS;
	int32_t rc32;
	int rc = 0;

	*out = NULL;
	if (fstat(fd, &st) < 0)
		return -errno;
	pthread_mutex_lock(&pool.lock);
	if (quarantined(st.st_dev, st.st_ino, clock_now_ns())) {
		pool.st.refused++;
		rc = -EPERM;
	}
	pthread_mutex_unlock(&pool.lock);
	if (rc)
		return rc;
	rc = perfmap_build_begin(budget, &pm);
	if (rc < 0)
		return rc;
	r.pm = pm;
	wire_out_init(&o);
	wire_put_u64(&o, (uint64_t)size);
	rc = hand_over(&r, W_PERFMAP, &o, fd, deadline, why, sizeof(why));
	wire_out_release(&o);
	if (!r.w) {
		perfmap_build_end(pm, -EAGAIN, out);
		return -EAGAIN;
	}
	if (rc == 0)
		rc = serve(&r, &done);
	if (rc == -ENOMEM) {
		release(r.w, false);
		perfmap_build_end(pm, rc, out);
		return rc;
	}
	if (rc < 0) {
		/* The file did it: not parsed again for a while. */
		failed(&r, rc);
		quarantine(st.st_dev, st.st_ino, r.failure);
		free(r.h);
		perfmap_build_end(pm, -EPERM, out);
		return -EPERM;
	}
	wire_in_init(&in, done.body, done.len);
	rc32 = (int32_t)wire_get_u32(&in);
	rc = in.err || in.left || rc32 > 0 ? SW_EFORMAT : rc32;
	if (rc == 0)
		rc = r.pm_rc;
	rc = perfmap_build_end(pm, rc, out);
	msg_release(&done);
	pthread_mutex_lock(&pool.lock);
	pool.st.requests++;
	pthread_mutex_unlock(&pool.lock);
	release(r.w, rc == SW_EFORMAT);
	free(r.h);
	return rc;
}

void parsers_processes(cJSON *arr,
		       cJSON *(*entry)(const char *role, pid_t pid,
				       uint64_t allowed, const char *why))
{
	struct {
		pid_t pid;
		char why[400];
	} v[PARSERS_MAX];
	size_t n = 0;

	pthread_mutex_lock(&pool.lock);
	for (size_t i = 0; i < PARSERS_MAX; i++)
		if (pool.w[i].state == SLOT_IDLE ||
		    pool.w[i].state == SLOT_BUSY) {
			v[n].pid = pool.w[i].pid;
			snprintf(v[n].why, sizeof(v[n].why), "%s",
				 pool.w[i].why);
			n++;
		}
	pthread_mutex_unlock(&pool.lock);
	for (size_t i = 0; i < n; i++) {
		cJSON *o = entry("parser", v[i].pid, 0, v[i].why);

		if (o)
			cJSON_AddItemToArray(arr, o);
	}
}

int parsers_state(char *why, size_t size)
{
	size_t running = 0;
	int rc = 0;

	pthread_mutex_lock(&pool.lock);
	for (size_t i = 0; i < PARSERS_MAX; i++)
		running += pool.w[i].state == SLOT_IDLE ||
			   pool.w[i].state == SLOT_BUSY;
	if (size)
		why[0] = '\0';
	if (!running && pool.failures) {
		snprintf(why, size, "no parser worker can start (%u tries): %s",
			 pool.failures, pool.fail_why);
		rc = 1;
	} else if (!running && pool.died_why[0]) {
		snprintf(why, size, "%s", pool.died_why);
		rc = 1;
	}
	pthread_mutex_unlock(&pool.lock);
	return rc;
}

void parsers_stats(struct parsers_stats *st)
{
	uint64_t now = clock_now_ns();

	pthread_mutex_lock(&pool.lock);
	*st = pool.st;
	st->running = 0;
	st->quarantined = 0;
	for (size_t i = 0; i < PARSERS_MAX; i++)
		st->running += pool.w[i].state == SLOT_IDLE ||
			       pool.w[i].state == SLOT_BUSY;
	for (size_t i = 0; i < pool.nq; i++)
		st->quarantined += now < pool.q[i].until_ns;
	pthread_mutex_unlock(&pool.lock);
}

/*
 * Buries the idle workers whose process ended (their pidfd polled
 * readable), saying why. With the lock held.
 */
static void bury_dead(const struct pollfd *p, const pid_t *pids,
		      const size_t *slot, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		struct worker *w = &pool.w[slot[i]];
		int sig;

		if (!p[i].revents || w->state != SLOT_IDLE || w->pid != pids[i])
			continue;
		sig = w->note ? (int)atomic_load(&w->note->signo) : 0;
		snprintf(pool.died_why, sizeof(pool.died_why),
			 "parser worker %d died idle (%s); another is starting",
			 (int)w->pid, signame(sig));
		say(true, "%s", pool.died_why);
		bury(w);
	}
}

/*
 * The keeper's thread: watches the idle workers, buries those that die
 * and keeps one started (so that a request does not wait for a start),
 * backing off while starts fail.
 */
static void *keep(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&pool.lock);
	while (!pool.stopping) {
		struct pollfd p[PARSERS_MAX];
		pid_t pids[PARSERS_MAX];
		size_t slot[PARSERS_MAX], n = 0, running = 0;
		uint64_t now = clock_now_ns();
		struct worker *none = NULL;

		for (size_t i = 0; i < PARSERS_MAX; i++) {
			struct worker *w = &pool.w[i];

			running += w->state != SLOT_NONE;
			if (w->state == SLOT_NONE && !none)
				none = w;
			if (w->state != SLOT_IDLE)
				continue;
			p[n] = (struct pollfd){ .fd = w->pidfd,
						.events = POLLIN };
			pids[n] = w->pid;
			slot[n++] = i;
		}
		if (!running && none && now >= pool.retry_at_ns) {
			char why[200];
			int rc;

			none->state = SLOT_STARTING;
			pthread_mutex_unlock(&pool.lock);
			rc = spawn(none, why, sizeof(why));
			pthread_mutex_lock(&pool.lock);
			started(none, rc, why, now);
			continue;
		}
		pthread_mutex_unlock(&pool.lock);
		poll(p, n, 250);
		pthread_mutex_lock(&pool.lock);
		bury_dead(p, pids, slot, n);
	}
	pthread_mutex_unlock(&pool.lock);
	return NULL;
}

int parsers_start(void)
{
	int rc = pthread_create(&pool.keeper, NULL, keep, NULL);

	pool.keeping = rc == 0;
	return -rc;
}
