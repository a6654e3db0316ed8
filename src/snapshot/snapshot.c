/*
 * snapshot.c - freeze, copy, thaw: one thread at a time (snapshot.h).
 */
#define _GNU_SOURCE
#include "snapshot.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "model/clock.h"
#include "model/procfs.h"
#include "model/waitmem.h"
#include "stackwatch.h"

#define SNAP_MAX_MAPS 65536	  /* mappings remembered to bound reads */
#define SNAP_MAPS_MAX (8u << 20)  /* bytes of /proc/PID/maps read */
#define SNAP_D_WAIT_NS 2000000ull /* a thread in D gets this long to stop */
#define SNAP_SPIN_NS 200000ull	  /* polled for its stop before sleeping */
#define SNAP_NOMAP_READ 16384u	  /* read at sp when no mapping is known */
#define SNAP_RT_PRIO 1		  /* SCHED_FIFO priority while freezing */
#define SNAP_RT_SPIN_NS 20000ull  /* the poll at that priority */
#define SNAP_BUSY_NS 1000000u	  /* a pause this long, */
#define SNAP_BUSY_PAUSES 4	  /* this often: the machine is busy */

struct range {
	uint64_t start, end;
	bool stack; /* readable and writable, anonymous or [stack] */
};

struct maps {
	struct range *v;
	size_t n;
};

static int cmp_range(const void *a, const void *b)
{
	const struct range *x = a, *y = b;

	return x->start < y->start ? -1 : x->start > y->start;
}

/* Every mapping's range, sorted, so that a read stops at its end. */
static int maps_read(pid_t pid, struct maps *m)
{
	char path[64];
	FILE *f;
	char line[512];
	size_t cap = 0, total = 0;

	m->v = NULL;
	m->n = 0;
	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	f = fopen(path, "re");
	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f)) {
		unsigned long long s, e;
		unsigned long ino = 0;
		char perms[5] = "";
		int at = 0;
		size_t len = strlen(line);

		total += len;
		if (total > SNAP_MAPS_MAX || m->n >= SNAP_MAX_MAPS)
			break;
		/* A long line (a long path) is read on in pieces: skip them. */
		if (len && line[len - 1] != '\n') {
			int c;

			while ((c = fgetc(f)) != EOF && c != '\n')
				total++;
		}
		if (sscanf(line, "%llx-%llx %4s %*x %*x:%*x %lu %n", &s, &e,
			   perms, &ino, &at) < 4 ||
		    e <= s)
			continue;
		if (m->n == cap) {
			size_t nc = cap ? cap * 2 : 256;
			struct range *nv = realloc(m->v, nc * sizeof(*nv));

			if (!nv) {
				fclose(f);
				free(m->v);
				m->v = NULL;
				return -ENOMEM;
			}
			m->v = nv;
			cap = nc;
		}
		m->v[m->n].start = s;
		m->v[m->n].end = e;
		m->v[m->n].stack =
			perms[0] == 'r' && perms[1] == 'w' &&
			(ino == 0 || strncmp(line + at, "[stack", 6) == 0);
		m->n++;
	}
	fclose(f);
	if (m->n)
		qsort(m->v, m->n, sizeof(*m->v), cmp_range);
	return 0;
}

/*
 * The end of the mapping holding addr, 0 when none does; *start gets its
 * start.
 */
static uint64_t maps_end(const struct maps *m, uint64_t addr, uint64_t *start)
{
	size_t lo = 0, hi = m->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (m->v[mid].end <= addr) {
			lo = mid + 1;
		} else if (m->v[mid].start > addr) {
			hi = mid;
		} else {
			*start = m->v[mid].start;
			return m->v[mid].end;
		}
	}
	return 0;
}

/* The mapping holding addr, or NULL. */
static const struct range *maps_find(const struct maps *m, uint64_t addr)
{
	uint64_t start;
	size_t lo = 0, hi = m->n;

	if (!maps_end(m, addr, &start))
		return NULL;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (m->v[mid].start < start)
			lo = mid + 1;
		else if (m->v[mid].start > start)
			hi = mid;
		else
			return &m->v[mid];
	}
	return NULL;
}

uint32_t snap_stack_limit(unsigned flags)
{
	return (flags & SNAP_DEEP) ? SNAP_STACK_HARD : SNAP_STACK_MAX;
}

/* Whether addr lies in one of t's copies. */
static bool in_copies(const struct snap_thread *t, uint64_t addr)
{
	if (addr >= t->sp && addr - t->sp < t->stack_len)
		return true;
	for (uint32_t i = 0; i < t->nmore; i++)
		if (addr >= t->more[i].at &&
		    addr - t->more[i].at < t->more[i].len)
			return true;
	return false;
}

/*
 * The next region of t's stack: where the copy last (of last_len bytes
 * at last_at, holding the sp *sp) says it goes on (snap_more_next()), if
 * that is in another stack mapping; its start (the interrupted sp less
 * the red zone, within its mapping) and length, capped at room, and *sp
 * the interrupted sp. Returns false when there is none; sets t->cut when
 * there is one that cannot be copied (no room left, not a stack mapping,
 * the regions used up), for the unwinder to say the stack was cut if it
 * wanted what is there.
 */
static bool more_region(const struct maps *m, struct snap_thread *t,
			const uint8_t *last, uint64_t last_at,
			uint32_t last_len, uint32_t room, uint64_t *sp,
			uint64_t *at, uint32_t *len, uint64_t *frame)
{
	uint64_t next =
		snap_more_next(last, last_at, last_len, *sp, frame, NULL);
	const struct range *r;
	uint64_t end;

	if (!next || in_copies(t, next))
		return false;
	*sp = next;
	r = maps_find(m, next);
	if (!r || !r->stack || t->nmore == SNAP_MORE_MAX || room == 0) {
		t->cut = true;
		return false;
	}
	*at = next - r->start >= SNAP_REDZONE ? next - SNAP_REDZONE : r->start;
	end = r->end;
	if (end - *at > room) {
		end = *at + room;
		t->cut = true;
	}
	*len = (uint32_t)(end - *at);
	return true;
}

/*
 * Ends t's first copy where its alternate signal stack ends, when it holds
 * a handler's frames there: an alternate stack is often a piece of a
 * larger mapping (the heap, a run of anonymous mappings the kernel merged)
 * and the copy, made to the mapping's end, would spend the room the
 * interrupted frames need on bytes of no stack. The cut its length limit
 * made, if any, was of those bytes.
 */
static void trim_to_altstack(struct snap_thread *t, const uint8_t *first)
{
	uint64_t end = 0;

	if (snap_more_next(first, t->sp, t->stack_len, t->regs[7], NULL,
			   &end) != 0 &&
	    end > t->regs[7] && end - t->sp < t->stack_len) {
		t->stack_len = (uint32_t)(end - t->sp);
		t->cut = false;
	}
}

/*
 * Copies the further regions of t's stack (more_region()) from the live
 * process into buf (room bytes), each recorded in t->more with bytes
 * pointing into buf, and the signal frame that led to it in frames[]
 * (SNAP_MORE_MAX; may be NULL). Either the thread is stopped, or the
 * caller checks afterwards that it did not run meanwhile
 * (more_still()). Returns the bytes used.
 */
static uint32_t copy_more(pid_t pid, const struct maps *m,
			  struct snap_thread *t, const uint8_t *first,
			  uint8_t *buf, uint32_t room, uint64_t *frames)
{
	const uint8_t *last = first;
	uint64_t last_at = t->sp, at, sp = t->regs[7], frame = 0;
	uint32_t last_len = t->stack_len, used = 0, len;

	while (more_region(m, t, last, last_at, last_len, room - used, &sp, &at,
			   &len, &frame)) {
		struct iovec local = { buf + used, len };
		struct iovec remote = { (void *)(uintptr_t)at, len };
		ssize_t got = process_vm_readv(pid, &local, 1, &remote, 1, 0);
		struct snap_region *g;

		if (got <= 0) {
			t->cut = true;
			break;
		}
		if (frames)
			frames[t->nmore] = frame;
		g = &t->more[t->nmore++];
		g->at = at;
		g->len = (uint32_t)got;
		g->bytes = buf + used;
		used += (uint32_t)got;
		last = g->bytes;
		last_at = g->at;
		last_len = g->len;
	}
	return used;
}

/* The region of t's copies that holds [addr, addr + n), or NULL. */
static const uint8_t *copied(const struct snap_thread *t, uint64_t addr,
			     uint32_t n)
{
	if (addr >= t->sp && addr - t->sp <= t->stack_len &&
	    t->stack_len - (addr - t->sp) >= n)
		return t->stack + (addr - t->sp);
	for (uint32_t i = 0; i < t->nmore; i++) {
		const struct snap_region *g = &t->more[i];

		if (addr >= g->at && addr - g->at <= g->len &&
		    g->len - (addr - g->at) >= n)
			return g->bytes + (addr - g->at);
	}
	return NULL;
}

static int keep_more(struct snap_thread *t);
/*
 * Whether the thread t, read while it was blocked (kernel) or running
 * (perf) and whose further regions were copied afterwards, is still in
 * the handlers that left them: each signal frame that led to a region
 * still holds what was copied of it. While a handler has not returned,
 * the code it interrupted cannot run, so what that code left on its
 * stack is as it was when the thread was read, even if the handler
 * itself ran on meanwhile; a handler that returned (or left by
 * longjmp) took its frame with it, and the next signal's frame holds
 * another interrupted context.
 */
static bool more_still(pid_t pid, const struct snap_thread *t,
		       const uint64_t *frames)
{
	for (uint32_t i = 0; i < t->nmore; i++) {
		uint8_t now[SNAP_SIGFRAME_LEN];
		const uint8_t *then = copied(t, frames[i], sizeof(now));
		struct iovec local = { now, sizeof(now) };
		struct iovec remote = { (void *)(uintptr_t)frames[i],
					sizeof(now) };

		if (!then ||
		    process_vm_readv(pid, &local, 1, &remote, 1, 0) !=
			    (ssize_t)sizeof(now) ||
		    memcmp(now, then, sizeof(now)) != 0)
			return false;
	}
	return true;
}

/*
 * The further regions of a thread read another way (kernel, perf), from
 * the live process once the read is over: kept only when more_still()
 * says nothing moved meanwhile; otherwise t->cut says that the stack
 * goes on where it was not copied.
 */
static void more_given(pid_t pid, const struct maps *m, struct snap_thread *t,
		       uint32_t limit)
{
	uint64_t frames[SNAP_MORE_MAX] = { 0 };
	uint32_t room;
	uint8_t *buf;

	trim_to_altstack(t, t->stack);
	room = limit > t->stack_len ? limit - t->stack_len : 0;
	buf = room ? malloc(room) : NULL;
	if (!buf) {
		t->cut = true;
		return;
	}
	copy_more(pid, m, t, t->stack, buf, room, frames);
	if (t->nmore && (!more_still(pid, t, frames) || keep_more(t) != 0)) {
		t->nmore = 0;
		t->cut = true;
	}
	free(buf);
}

/* Whole seconds of CPU from clock ticks, in ms. */
static uint64_t ticks_ms(uint64_t ticks)
{
	static long hz;

	if (!hz) {
		hz = sysconf(_SC_CLK_TCK);
		if (hz <= 0)
			hz = 100;
	}
	return ticks * 1000 / (uint64_t)hz;
}

/*
 * Waits for tid's next ptrace stop or its exit until deadline_ns, with
 * SIGCHLD blocked: each stop of a tracee raises SIGCHLD at the tracer, so
 * sigtimedwait() sleeps exactly until something happened (a SIGCHLD left
 * from an earlier stop only costs one more look). It polls first for
 * spin_ns. Returns 1 with *status, 0 on timeout, or -errno.
 */
static int wait_stop(pid_t tid, uint64_t deadline_ns, uint64_t spin_ns,
		     int *status)
{
	sigset_t chld;
	uint64_t spin_until;

	sigemptyset(&chld);
	sigaddset(&chld, SIGCHLD);
	/*
	 * A thread stops within microseconds when it gets a CPU: poll for
	 * that first, yielding, so a thread that shares our CPU can run; a
	 * slow one is then waited for asleep.
	 */
	spin_until = clock_now_ns() + spin_ns;
	if (spin_until > deadline_ns)
		spin_until = deadline_ns;
	for (;;) {
		pid_t r = waitpid(tid, status, __WALL | WNOHANG);

		if (r == tid)
			return 1;
		if (r < 0 && errno != EINTR)
			return -errno;
		if (clock_now_ns() >= spin_until)
			break;
		sched_yield();
	}
	for (;;) {
		pid_t r = waitpid(tid, status, __WALL | WNOHANG);
		uint64_t now;
		struct timespec ts;

		if (r == tid)
			return 1;
		if (r < 0 && errno != EINTR)
			return -errno;
		now = clock_now_ns();
		if (now >= deadline_ns)
			return 0;
		ts.tv_sec = (time_t)((deadline_ns - now) / 1000000000ull);
		ts.tv_nsec = (long)((deadline_ns - now) % 1000000000ull);
		if (sigtimedwait(&chld, NULL, &ts) < 0 && errno != EAGAIN &&
		    errno != EINTR)
			return -errno;
	}
}

#if defined(__x86_64__)
/* user_regs_struct in the DWARF order of the x86-64 psABI. */
static void regs_to_dwarf(const struct user_regs_struct *r, uint64_t *d)
{
	d[0] = r->rax;
	d[1] = r->rdx;
	d[2] = r->rcx;
	d[3] = r->rbx;
	d[4] = r->rsi;
	d[5] = r->rdi;
	d[6] = r->rbp;
	d[7] = r->rsp;
	d[8] = r->r8;
	d[9] = r->r9;
	d[10] = r->r10;
	d[11] = r->r11;
	d[12] = r->r12;
	d[13] = r->r13;
	d[14] = r->r14;
	d[15] = r->r15;
	d[16] = r->rip;
}
#endif

/*
 * Copies a stopped thread's registers and stack into t, the stack into
 * scratch (limit bytes, already written to once: no page fault and no
 * allocation while the thread waits), the stack's further regions
 * (copy_more()) after it; keep_stack() moves them out once the thread
 * runs again.
 */
static int copy_thread(pid_t pid, const struct maps *m, struct snap_thread *t,
		       uint8_t *scratch, uint32_t limit)
{
#if defined(__x86_64__)
	struct user_regs_struct regs;
	struct iovec io = { &regs, sizeof(regs) };
	struct iovec local, remote;
	uint64_t end, len, start = 0;
	ssize_t got;

	if (ptrace(PTRACE_GETREGSET, t->tid, (void *)NT_PRSTATUS, &io) < 0)
		return -errno;
	regs_to_dwarf(&regs, t->regs);
	/*
	 * Stopped inside a system call: its number stays in orig_rax. A
	 * timed futex wait that a stop interrupted before (ours, a
	 * debugger's) goes on as restart_syscall, with the registers of the
	 * call: the thread's functions tell what it was (render/locks.c).
	 */
	t->waits = (long)regs.orig_rax == SYS_futex ||
		   (long)regs.orig_rax == SYS_restart_syscall;
	if (t->waits) {
		t->wait.addr = regs.rdi;
		t->wait.op = (uint32_t)regs.rsi;
	}
	/*
	 * From the red zone below sp, where its mapping allows: stopped on
	 * the ret after a leave, a frame's saved frame pointer is there,
	 * where its unwind rules still look for it.
	 */
	t->sp = regs.rsp;
	end = maps_end(m, t->sp, &start);
	if (end)
		t->sp = t->sp - start >= SNAP_REDZONE ? t->sp - SNAP_REDZONE
						      : start;
	len = end ? end - t->sp : SNAP_NOMAP_READ;
	if (len > limit) {
		len = limit;
		t->cut = end != 0;
	}
	local.iov_base = scratch;
	local.iov_len = len;
	remote.iov_base = (void *)(uintptr_t)t->sp;
	remote.iov_len = len;
	got = process_vm_readv(pid, &local, 1, &remote, 1, 0);
	t->stack_len = got > 0 ? (uint32_t)got : 0;
	/* Still stopped: what a handler on an alternate stack interrupted. */
	trim_to_altstack(t, scratch);
	copy_more(pid, m, t, scratch, scratch + t->stack_len,
		  limit - t->stack_len, NULL);
	return 0;
#else
	(void)pid;
	(void)m;
	(void)t;
	(void)scratch;
	(void)limit;
	return SNAP_EARCH;
#endif
}

/* Moves t's further regions out of a buffer that is not t's own. */
static int keep_more(struct snap_thread *t)
{
	for (uint32_t i = 0; i < t->nmore; i++) {
		uint8_t *b = malloc(t->more[i].len ? t->more[i].len : 1);

		if (!b) {
			for (uint32_t j = i; j < t->nmore; j++)
				t->more[j].bytes = NULL;
			t->nmore = i;
			return -ENOMEM;
		}
		memcpy(b, t->more[i].bytes, t->more[i].len);
		t->more[i].bytes = b;
	}
	return 0;
}

static int keep_stack(struct snap_thread *t, const uint8_t *scratch)
{
	t->stack = malloc(t->stack_len ? t->stack_len : 1);
	if (!t->stack) {
		t->stack_len = 0;
		t->nmore = 0;
		return -ENOMEM;
	}
	memcpy(t->stack, scratch, t->stack_len);
	return keep_more(t);
}

/* Reads name, state and CPU times of tid before it is stopped. */
static void read_task(int taskfd, struct snap_thread *t)
{
	struct procfs_task pt;

	t->state = '?';
	if (procfs_read_task(taskfd, t->tid, &pt, NULL) != 0)
		return;
	memcpy(t->name, pt.name, sizeof(t->name));
	t->state = pt.state;
	t->utime_ms = ticks_ms(pt.utime_ticks);
	t->stime_ms = ticks_ms(pt.stime_ticks);
}

/*
 * Detaches a stopped tracee, giving back the signal it stopped for, if
 * any. A thread in a group stop goes back to it.
 */
static void release(pid_t tid, int status)
{
	int sig = 0;

	if (WIFSTOPPED(status) && (status >> 16) == 0 &&
	    WSTOPSIG(status) != SIGTRAP)
		sig = WSTOPSIG(status); /* a signal-delivery stop */
	ptrace(PTRACE_DETACH, tid, NULL, (void *)(uintptr_t)sig);
}

/* Threads seized whose stop did not come in time: released when it does. */
struct late {
	pid_t *v;
	size_t n;
};

static void late_reap(struct late *l, uint64_t deadline_ns)
{
	size_t i = 0;

	while (i < l->n) {
		int st;
		int r = wait_stop(l->v[i], deadline_ns, 0, &st);

		if (r == 0) {
			i++;
			continue;
		}
		if (r > 0 && WIFSTOPPED(st))
			release(l->v[i], st);
		l->v[i] = l->v[--l->n];
	}
}

/*
 * The snapshotter's priority. While a thread is stopped, whatever
 * preempts us stops it longer: a time slice of someone else's
 * (milliseconds) lands inside a pause of tens of microseconds. So each
 * copy runs at the lowest real-time priority, where the kernel allows it
 * (root, CAP_SYS_NICE or RLIMIT_RTPRIO).
 *
 * The wait for a thread's stop is another matter. At normal priority we
 * poll and yield, so that a tracee woken on our CPU runs at once; at
 * real-time priority a yield gives the CPU to no ordinary thread, so we
 * poll briefly and then sleep, which costs a wake-up. On an idle machine
 * waiting at normal priority is cheaper (1000 threads: 35-38 us a thread
 * on average, against 50-54 us held at real-time priority); on a busy
 * one the yield hands the CPU to someone else's time slice (two CPU hogs:
 * 659-1160 pauses over 2 ms of 20040, against 19-27 held). So the whole
 * snapshot is held at real-time priority when the machine is busy at the
 * start (more runnable tasks than CPUs) or turns out to be (pauses over
 * SNAP_BUSY_NS, not one alone: a virtual machine's CPU can vanish for
 * milliseconds, idle or not), and only the copies otherwise.
 */
struct prio {
	bool ok;       /* real-time priority is allowed: we hold it or may */
	bool hold;     /* held for the waits too */
	bool rt;       /* what we run at now */
	unsigned slow; /* pauses over SNAP_BUSY_NS so far */
	int old_policy;
	struct sched_param old_param;
};

/* More runnable tasks than CPUs, besides us (/proc/loadavg's "R/T"). */
static bool machine_busy(void)
{
	char buf[128];
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	unsigned running = 0;
	const char *slash;

	if (procfs_read_at(AT_FDCWD, "/proc/loadavg", buf, sizeof(buf)) <= 0)
		return false;
	slash = strchr(buf, '/');
	if (!slash)
		return false;
	while (slash > buf && slash[-1] >= '0' && slash[-1] <= '9')
		slash--;
	running = (unsigned)strtoul(slash, NULL, 10);
	return cpus > 0 && running > (unsigned)cpus;
}

static void prio_set(struct prio *p, bool rt)
{
	struct sched_param fifo = { .sched_priority = SNAP_RT_PRIO };

	if (!p->ok || p->rt == rt)
		return;
	if (rt)
		p->rt = sched_setscheduler(0, SCHED_FIFO | SCHED_RESET_ON_FORK,
					   &fifo) == 0;
	else
		p->rt = sched_setscheduler(0, p->old_policy, &p->old_param) !=
			0;
}

/* Takes real-time priority if allowed; p->ok says whether it was. */
static void prio_start(struct prio *p)
{
	memset(p, 0, sizeof(*p));
	p->old_policy = sched_getscheduler(0);
	if (p->old_policy < 0 ||
	    (p->old_policy & ~SCHED_RESET_ON_FORK) != SCHED_OTHER ||
	    sched_getparam(0, &p->old_param) != 0)
		return;
	p->ok = true;
	prio_set(p, true);
	p->ok = p->rt;
	p->hold = p->ok && machine_busy();
}

static void prio_end(struct prio *p)
{
	prio_set(p, false);
}

/*
 * One thread: seize, interrupt, wait, copy, detach. Fills t's status.
 * Returns SNAP_ETRACED when another tracer holds it, else 0.
 */
static int snap_one(pid_t pid, int taskfd, const struct maps *m,
		    uint64_t deadline_ns, struct prio *prio, uint8_t *scratch,
		    uint32_t limit, struct late *late, struct snap_thread *t,
		    bool *group_stop)
{
	uint64_t t0, wait_until;
	int st, r;

	read_task(taskfd, t);
	if (t->state == 'Z' || t->state == 'X') {
		t->status = SW_ST_EXITED;
		return 0;
	}
	/* The priority for the wait, set before the pause begins. */
	prio_set(prio, prio->hold);
	if (ptrace(PTRACE_SEIZE, t->tid, NULL, NULL) < 0) {
		r = -errno;
		if (r == -ESRCH) {
			t->status = SW_ST_EXITED;
			return 0;
		}
		t->status = SW_ST_ERROR;
		t->err = r;
		return r == -EPERM ? SNAP_ETRACED : 0;
	}
	t0 = clock_now_ns();
	if (ptrace(PTRACE_INTERRUPT, t->tid, NULL, NULL) < 0) {
		r = -errno;
		t->status = r == -ESRCH ? SW_ST_EXITED : SW_ST_ERROR;
		t->err = r;
		return 0;
	}
	wait_until = deadline_ns;
	if (t->state == 'D' && t0 + SNAP_D_WAIT_NS < wait_until)
		wait_until = t0 + SNAP_D_WAIT_NS;
	/*
	 * Held at real-time priority, a short poll catches a tracee that
	 * runs elsewhere (200 us of it made the median pause 220 us: a
	 * tracee woken on our CPU waited it out); sleeping then lets one on
	 * our CPU run, and its SIGCHLD preempts whatever runs next.
	 */
	r = wait_stop(t->tid, wait_until,
		      prio->rt ? SNAP_RT_SPIN_NS : SNAP_SPIN_NS, &st);
	prio_set(prio, true);
	if (r == 0) {
		t->status = SW_ST_TIMEOUT;
		late->v[late->n++] = t->tid;
		return 0;
	}
	if (r < 0 || !WIFSTOPPED(st)) {
		/* Gone meanwhile (exited or killed): nothing to release. */
		t->status = SW_ST_EXITED;
		return 0;
	}
	if ((st >> 16) == PTRACE_EVENT_STOP && WSTOPSIG(st) != SIGTRAP)
		*group_stop = true;
	t->captured_ns = clock_now_ns();
	r = copy_thread(pid, m, t, scratch, limit);
	release(t->tid, st);
	t->paused_ns = (uint32_t)(clock_now_ns() - t0);
	if (t->paused_ns > SNAP_BUSY_NS && ++prio->slow >= SNAP_BUSY_PAUSES)
		prio->hold = prio->ok;
	if (r == 0)
		r = keep_stack(t, scratch);
	if (r != 0) {
		t->status = SW_ST_ERROR;
		t->err = r;
	}
	return 0;
}

/*
 * The lock words of the threads caught in a futex wait, once every thread
 * runs again: nobody waits on these reads (model/waitmem.h).
 */
static void read_waits(struct snap *s)
{
	/* NOLINTNEXTLINE(bugprone-sizeof-expression): pointers */
	struct sw_wait **ws = malloc((s->nthreads ? s->nthreads : 1) *
				     sizeof(struct sw_wait *));
	size_t n = 0;

	if (!ws)
		return;
	for (size_t i = 0; i < s->nthreads; i++)
		if (s->threads[i].status == SW_ST_OK && s->threads[i].waits)
			ws[n++] = &s->threads[i].wait;
	waitmem_fill(s->pid, ws, n);
	free(ws);
}

static int cmp_thread(const void *a, const void *b)
{
	const struct snap_thread *x = a, *y = b;

	return (x->tid > y->tid) - (x->tid < y->tid);
}

/* Refuses zombies, kernel threads and processes traced by someone else. */
static int check_process(pid_t pid, struct snap *s)
{
	struct procfs_proc pp;
	pid_t tracer = 0;
	int r = procfs_read_proc(pid, &pp);

	if (r != 0)
		return r == SW_EFORMAT ? r : -ESRCH;
	if (pp.flags & PROCFS_PF_KTHREAD)
		return SNAP_EKTHREAD;
	if (procfs_tracer_pid(pid, &tracer) == 0 && tracer != 0) {
		s->tracer = tracer;
		return SNAP_ETRACED;
	}
	/* A zombie leader whose other threads still run is dumped. */
	if ((pp.state == 'Z' || pp.state == 'X') && pp.threads <= 1)
		return SNAP_EZOMBIE;
	return 0;
}

/*
 * Sorts v by tid, unless it is already (the usual case: listed or read
 * in order), which costs one pass instead of moving a thousand records
 * of 400 bytes about.
 */
static void sort_threads(struct snap_thread *v, size_t n)
{
	for (size_t i = 1; i < n; i++)
		if (v[i].tid < v[i - 1].tid) {
			qsort(v, n, sizeof(*v), cmp_thread);
			return;
		}
}

static int list_threads(int taskfd, struct snap *s)
{
	pid_t *tids = NULL;
	size_t n = 0;
	int r = procfs_list_tasks(taskfd, SW_MAX_THREADS, &tids, &n);

	if (r != 0)
		return r;
	s->threads = calloc(n ? n : 1, sizeof(*s->threads));
	if (!s->threads) {
		free(tids);
		return -ENOMEM;
	}
	for (size_t i = 0; i < n; i++)
		s->threads[i].tid = tids[i];
	s->nthreads = n;
	free(tids);
	return 0;
}

/* Threads that started after the list was read get their turn too. */
static int add_new_threads(int taskfd, struct snap *s, size_t *added)
{
	pid_t *tids = NULL;
	size_t n = 0, k = s->nthreads;
	struct snap_thread *nv;
	int r = procfs_list_tasks(taskfd, SW_MAX_THREADS, &tids, &n);

	*added = 0;
	if (r != 0)
		return 0; /* the process is going: keep what we have */
	nv = realloc(s->threads, (k + n + 1) * sizeof(*nv));
	if (!nv) {
		free(tids);
		return -ENOMEM;
	}
	s->threads = nv;
	for (size_t i = 0; i < n; i++) {
		struct snap_thread key = { .tid = tids[i] };

		if (bsearch(&key, s->threads, k, sizeof(key), cmp_thread))
			continue;
		memset(&s->threads[s->nthreads], 0, sizeof(key));
		s->threads[s->nthreads++].tid = tids[i];
		(*added)++;
	}
	free(tids);
	return 0;
}

/*
 * Moves the given threads into s's list (read from /proc): each replaces
 * its tid's entry, or is added when the thread left the list meanwhile.
 * Threads not given are skipped with SNAP_GIVEN_ONLY.
 */
static int merge_given(struct snap *s, struct snap_thread *given, size_t n,
		       unsigned flags)
{
	size_t k = s->nthreads;
	struct snap_thread *nv = realloc(s->threads, (k + n + 1) * sizeof(*nv));

	if (!nv)
		return -ENOMEM;
	s->threads = nv;
	sort_threads(s->threads, k);
	for (size_t i = 0; i < k && (flags & SNAP_GIVEN_ONLY); i++)
		s->threads[i].status = SW_ST_SKIPPED;
	for (size_t i = 0; i < n; i++) {
		struct snap_thread *t = bsearch(&given[i], s->threads, k,
						sizeof(*nv), cmp_thread);

		if (!t)
			t = &s->threads[s->nthreads++];
		*t = given[i];
		given[i].stack = NULL;
		given[i].stack_len = 0;
		given[i].nmore = 0;
	}
	sort_threads(s->threads, s->nthreads);
	return 0;
}

/* Whether t was read before snap_take_with() began (and is not again). */
static bool is_given(const struct snap_thread *t)
{
	return t->method != SNAP_M_PTRACE || t->status == SW_ST_SKIPPED;
}

/* Whether t was read another way, and its stack goes on elsewhere. */
static bool goes_on(const struct snap_thread *t)
{
	return is_given(t) && t->status == SW_ST_OK && !t->reused && t->stack &&
	       snap_more_next(t->stack, t->sp, t->stack_len, t->regs[7], NULL,
			      NULL) != 0;
}

/* Whether some thread of s read another way goes on elsewhere. */
static bool given_go_on(const struct snap *s)
{
	for (size_t i = 0; i < s->nthreads; i++)
		if (goes_on(&s->threads[i]))
			return true;
	return false;
}

/* The further regions of every thread of s read another way (m: maps). */
static void more_of_given(pid_t pid, const struct maps *m, struct snap *s,
			  uint32_t limit)
{
	for (size_t i = 0; i < s->nthreads; i++)
		if (goes_on(&s->threads[i]))
			more_given(pid, m, &s->threads[i], limit);
}

/*
 * What the copies of s need: the mappings (*m) where some thread is to
 * be stopped and copied, or one read another way goes on elsewhere
 * (those are copied now, more_of_given()); the scratch buffer (*scratch,
 * limit bytes, faulted in) and *need where some thread is to be stopped.
 * Returns 0 or a negative errno.
 */
static int prepare(pid_t pid, struct snap *s, uint32_t limit, struct maps *m,
		   uint8_t **scratch, bool *need)
{
	int r = 0;

	*need = false;
	for (size_t i = 0; i < s->nthreads && !*need; i++)
		*need = !is_given(&s->threads[i]);
	if (*need || given_go_on(s)) {
		r = maps_read(pid, m);
		if (r == -EACCES) /* what ptrace's read rule says of the maps */
			r = -EPERM;
	}
	if (r == 0 && m->n)
		more_of_given(pid, m, s, limit);
	if (r == 0 && *need) {
		*scratch = malloc(limit);
		if (*scratch)
			memset(*scratch, 0, limit); /* faulted in now */
		else
			r = -ENOMEM;
	}
	return r;
}

int snap_take(pid_t pid, int timeout_ms, struct snap **out)
{
	return snap_take_with(pid, timeout_ms, NULL, 0, 0, out);
}

int snap_take_with(pid_t pid, int timeout_ms, struct snap_thread *given,
		   size_t ngiven, unsigned flags, struct snap **out)
{
	struct prio prio;
	uint8_t *scratch = NULL;
	struct snap *s;
	struct maps m = { 0 };
	struct late late = { 0 };
	sigset_t chld, old;
	char path[64];
	int taskfd, r;
	uint64_t deadline_ns;
	uint32_t limit = snap_stack_limit(flags);
	size_t first = 0, added = 0;
	bool traced = false, need = false;

	*out = NULL;
#if !defined(__x86_64__)
	(void)pid;
	(void)timeout_ms;
	return SNAP_EARCH;
#endif
	if (pid <= 0)
		return -ESRCH;
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->pid = pid;
	s->started_ns = clock_now_ns();
	deadline_ns = s->started_ns +
		      (uint64_t)(timeout_ms > 0 ? timeout_ms : 1) * 1000000ull;
	r = check_process(pid, s);
	if (r != 0) {
		*out = s; /* for the tracer's pid */
		return r;
	}
	snprintf(path, sizeof(path), "/proc/%d/comm", (int)pid);
	if (procfs_read_at(AT_FDCWD, path, s->comm, sizeof(s->comm)) > 0)
		s->comm[strcspn(s->comm, "\n")] = '\0';
	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	taskfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (taskfd < 0) {
		r = -errno;
		goto fail;
	}
	if (flags & SNAP_LISTED) {
		s->threads = calloc(1, sizeof(*s->threads));
		r = s->threads ? 0 : -ENOMEM;
	} else {
		r = list_threads(taskfd, s);
	}
	if (r == 0 && (ngiven || (flags & SNAP_GIVEN_ONLY)))
		r = merge_given(s, given, ngiven, flags);
	if (r == 0)
		r = prepare(pid, s, limit, &m, &scratch, &need);
	if (r != 0)
		goto fail_fd;
	sigemptyset(&chld);
	sigaddset(&chld, SIGCHLD);
	pthread_sigmask(SIG_BLOCK, &chld, &old);
	memset(&prio, 0, sizeof(prio));
	if (need)
		prio_start(&prio); /* someone is stopped after all */
	s->realtime = prio.ok;
	for (int pass = 0; pass < 2 && need; pass++) {
		pid_t *lv = realloc(late.v, s->nthreads * sizeof(*lv) + 1);

		if (!lv) {
			r = -ENOMEM;
			break;
		}
		late.v = lv;
		for (size_t i = first; i < s->nthreads; i++) {
			struct snap_thread *t = &s->threads[i];

			if (is_given(t))
				continue;
			if (clock_now_ns() >= deadline_ns) {
				t->status = SW_ST_TIMEOUT;
				continue;
			}
			if (snap_one(pid, taskfd, &m, deadline_ns, &prio,
				     scratch, limit, &late, t,
				     &s->stopped) == SNAP_ETRACED)
				traced = true;
			if (late.n)
				late_reap(&late, 0);
		}
		if (pass == 1 || clock_now_ns() >= deadline_ns)
			break;
		first = s->nthreads;
		if (add_new_threads(taskfd, s, &added) != 0 || !added)
			break;
	}
	if (late.v)
		late_reap(&late, deadline_ns);
	prio_end(&prio);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	free(late.v);
	free(scratch);
	free(m.v);
	close(taskfd);
	if (r != 0) {
		snap_free(s);
		return r;
	}
	sort_threads(s->threads, s->nthreads);
	s->elapsed_ns = clock_now_ns() - s->started_ns;
	read_waits(s);
	for (size_t i = 0; i < s->nthreads; i++) {
		uint64_t p = s->threads[i].paused_ns;

		s->paused_total_ns += p;
		if (p > s->paused_max_ns)
			s->paused_max_ns = p;
	}
	/* Every thread refused: someone else traces the process. */
	if (traced) {
		size_t ok = 0;

		for (size_t i = 0; i < s->nthreads; i++)
			ok += s->threads[i].status == SW_ST_OK;
		if (!ok) {
			procfs_tracer_pid(pid, &s->tracer);
			*out = s;
			return s->tracer ? SNAP_ETRACED : -EPERM;
		}
	}
	*out = s;
	return 0;

fail_fd:
	close(taskfd);
	free(m.v);
fail:
	snap_free(s);
	return r;
}

void snap_free(struct snap *s)
{
	if (!s)
		return;
	for (size_t i = 0; i < s->nthreads; i++) {
		free(s->threads[i].stack);
		for (uint32_t j = 0; j < s->threads[i].nmore; j++)
			free(s->threads[i].more[j].bytes);
	}
	free(s->threads);
	free(s);
}

int snap_keep_pinned(struct snap *s, pid_t pid, int pidfd)
{
	char path[64];

	for (size_t i = 0; s && i < s->nthreads; i++) {
		struct snap_thread *t = &s->threads[i];

		if (t->status != SW_ST_OK || t->reused ||
		    t->method == SNAP_M_KERNEL)
			continue;
		snprintf(path, sizeof(path), "/proc/%d/task/%d", (int)pid,
			 (int)t->tid);
		if (faccessat(AT_FDCWD, path, F_OK, 0) == 0)
			continue;
		free(t->stack);
		t->stack = NULL;
		t->stack_len = 0;
		for (uint32_t j = 0; j < t->nmore; j++)
			free(t->more[j].bytes);
		t->nmore = 0;
		t->status = SW_ST_EXITED;
		t->err = -ESRCH;
	}
	if (pidfd >= 0 && !procfs_pidfd_alive(pidfd))
		return -ESRCH;
	return 0;
}

/* CAP_SYS_PTRACE in this process's effective set. */
static bool have_cap_ptrace(void)
{
	char buf[2048];
	uint64_t eff = 0;

	if (procfs_read_at(AT_FDCWD, "/proc/self/status", buf, sizeof(buf)) < 0)
		return false;
	if (procfs_parse_status_hex(buf, strlen(buf), "CapEff", &eff) != 0)
		return false;
	return (eff >> 19) & 1; /* CAP_SYS_PTRACE */
}

static void comm_of(pid_t pid, char *buf, size_t size)
{
	char path[64];

	snprintf(path, sizeof(path), "/proc/%d/comm", (int)pid);
	if (procfs_read_at(AT_FDCWD, path, buf, size) <= 0)
		snprintf(buf, size, "?");
	buf[strcspn(buf, "\n")] = '\0';
	for (char *p = buf; *p; p++)
		if ((unsigned char)*p < 0x20 || (unsigned char)*p >= 0x7f)
			*p = '?';
}

void snap_why(pid_t pid, int err, pid_t tracer, char *buf, size_t size)
{
	char tmp[128], comm[SW_COMM_MAX];
	long uid = -1;
	uid_t owner;
	int scope = -1;
	bool cap;

	switch (err) {
	case SNAP_ETRACED:
		if (tracer <= 0 && procfs_tracer_pid(pid, &tracer) != 0)
			tracer = 0;
		if (tracer > 0) {
			comm_of(tracer, comm, sizeof(comm));
			snprintf(buf, size,
				 "process %d is already traced by process %d "
				 "(%s): a process has one tracer at a time",
				 (int)pid, (int)tracer, comm);
		} else {
			snprintf(buf, size,
				 "process %d is already traced by another "
				 "process",
				 (int)pid);
		}
		return;
	case SNAP_EZOMBIE:
		snprintf(buf, size,
			 "process %d is a zombie: it has exited and has no "
			 "stacks left",
			 (int)pid);
		return;
	case SNAP_EKTHREAD:
		snprintf(buf, size,
			 "process %d is a kernel thread: it has no user-space "
			 "stack",
			 (int)pid);
		return;
	case SNAP_EARCH:
		snprintf(buf, size,
			 "ptrace snapshots are supported on x86-64 only");
		return;
	case -ESRCH:
	case -ENOENT:
		snprintf(buf, size, "no process %d", (int)pid);
		return;
	case -EPERM:
	case -EACCES:
		break;
	default:
		snprintf(buf, size, "process %d: %s", (int)pid,
			 sw_strerror(err));
		return;
	}
	cap = have_cap_ptrace();
	if (procfs_read_at(AT_FDCWD, "/proc/sys/kernel/yama/ptrace_scope", tmp,
			   sizeof(tmp)) > 0)
		scope = atoi(tmp);
	if (procfs_read_uid(pid, &owner) == 0)
		uid = (long)owner;
	if (scope == 3) {
		snprintf(buf, size,
			 "Yama forbids every ptrace attach on this host "
			 "(kernel.yama.ptrace_scope = 3)");
	} else if (scope == 2 && !cap) {
		snprintf(buf, size,
			 "Yama lets only CAP_SYS_PTRACE trace processes "
			 "(kernel.yama.ptrace_scope = 2); run as root");
	} else if (!cap && uid >= 0 && (uid_t)uid != geteuid()) {
		snprintf(buf, size,
			 "process %d belongs to uid %ld: tracing another "
			 "user's process needs CAP_SYS_PTRACE",
			 (int)pid, uid);
	} else if (scope == 1 && !cap) {
		snprintf(buf, size,
			 "Yama lets a process trace only its own descendants "
			 "(kernel.yama.ptrace_scope = 1): run as root, or set "
			 "kernel.yama.ptrace_scope = 0");
	} else if (!cap) {
		snprintf(buf, size,
			 "process %d is not dumpable (setuid, or "
			 "PR_SET_DUMPABLE 0): tracing it needs CAP_SYS_PTRACE",
			 (int)pid);
	} else {
		snprintf(buf, size,
			 "the kernel refused to trace process %d (a security "
			 "module, or a seccomp filter)",
			 (int)pid);
	}
}
