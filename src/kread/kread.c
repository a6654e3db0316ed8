/*
 * kread.c - user side of the kernel reads (kread.h): loads the BPF task
 * iterator, runs it over one process, and turns its records into
 * threads with registers and stack copies.
 *
 * One run is one iterator link scoped to the process (or to one thread
 * for a second look), read to its end and closed: nothing stays
 * attached between reads, so a reader that dies leaves at most its
 * control entry behind (kread_forget()).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/types.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "kread.h"
#include "kread_abi.h"
#include "skel.h"

#define KREAD_RETRIES 64 /* threads looked at again, at most, per read */

struct kread {
	struct kread_skel *skel;
	int ctls_fd;
	int same_fd;
};

_Static_assert(KREAD_NREGS == KREAD_NREGS_USER, "register counts differ");
_Static_assert(KREAD_F_OK == KREAD_OK && KREAD_F_ONCPU == KREAD_ONCPU &&
		       KREAD_F_TORN == KREAD_TORN &&
		       KREAD_F_NOVMA == KREAD_NOVMA &&
		       KREAD_F_NOMM == KREAD_NOMM &&
		       KREAD_F_FAULT == KREAD_FAULT &&
		       KREAD_F_SAME == KREAD_SAME,
	       "flags differ");

/* libbpf's last complaint while loading, for kread_open()'s sentence. */
static char last_warning[160];

static int keep_warning(enum libbpf_print_level level, const char *fmt,
			va_list ap)
{
	if (level != LIBBPF_DEBUG) {
		vsnprintf(last_warning, sizeof(last_warning), fmt, ap);
		last_warning[strcspn(last_warning, "\n")] = '\0';
	}
	return 0;
}

int kread_slots(void)
{
	return KREAD_SLOTS;
}

/* What /proc/PID/stat would say of a task's state. */
static char state_char(uint32_t st, uint32_t exit_state)
{
	if (exit_state & 0x20)
		return 'Z';
	if (exit_state & 0x10)
		return 'X';
	if (st == 0)
		return 'R';
	if (st & 0x1)
		return 'S';
	if (st & 0x2)
		return (st & 0x400) ? 'I' : 'D';
	if (st & 0x4)
		return 'T';
	if (st & 0x8)
		return 't';
	if (st & 0x80)
		return 'X';
	if (st & 0x40)
		return 'P';
	return '?';
}

struct bytes {
	uint8_t *p;
	size_t len, cap;
};

/*
 * One run of the iterator for ctl (the process, or ctl->tid alone),
 * its output appended to b.
 */
static int run(struct kread *k, const struct kread_ctl *ctl, struct bytes *b)
{
	union bpf_iter_link_info li;
	struct bpf_link *link;
	__u32 reader = (__u32)getpid();
	int fd, r = 0;

	LIBBPF_OPTS(bpf_iter_attach_opts, o);
	memset(&li, 0, sizeof(li));
	if (ctl->tid)
		li.task.tid = ctl->tid;
	else
		li.task.pid = (__u32)ctl->tgid;
	o.link_info = &li;
	o.link_info_len = sizeof(li);
	if (bpf_map_update_elem(k->ctls_fd, &reader, ctl, BPF_ANY) != 0)
		return -errno;
	link = bpf_program__attach_iter(kread_skel_prog(k->skel), &o);
	if (!link) {
		r = -errno;
		goto out;
	}
	fd = bpf_iter_create(bpf_link__fd(link));
	if (fd < 0) {
		r = -errno;
		goto out_link;
	}
	for (;;) {
		ssize_t n;

		if (b->cap - b->len < 65536) {
			size_t cap = b->cap ? b->cap * 2 : 1u << 20;
			uint8_t *p = realloc(b->p, cap);

			if (!p) {
				r = -ENOMEM;
				break;
			}
			b->p = p;
			b->cap = cap;
		}
		n = read(fd, b->p + b->len, b->cap - b->len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			r = -errno;
			break;
		}
		if (n == 0)
			break;
		b->len += (size_t)n;
	}
	close(fd);
out_link:
	bpf_link__destroy(link);
out:
	bpf_map_delete_elem(k->ctls_fd, &reader);
	return r;
}

/*
 * The next record of b at *off, its stack bytes at *stack. Returns 1,
 * 0 at the end, or -EPROTO for bytes that are not records.
 */
static int next_rec(const struct bytes *b, size_t *off, struct kread_rec *rec,
		    const uint8_t **stack)
{
	if (*off == b->len)
		return 0;
	if (b->len - *off < sizeof(*rec))
		return -EPROTO;
	memcpy(rec, b->p + *off, sizeof(*rec));
	if (rec->magic != KREAD_MAGIC || rec->stack_len > KREAD_CHUNK ||
	    b->len - *off - sizeof(*rec) < rec->stack_len || rec->tid <= 0)
		return -EPROTO;
	*stack = b->p + *off + sizeof(*rec);
	*off += sizeof(*rec) + rec->stack_len;
	return 1;
}

/* Fills t from a first record (its stack not yet). */
static void from_rec(struct kread_thread *t, const struct kread_rec *rec)
{
	memset(t, 0, sizeof(*t));
	t->tid = rec->tid;
	t->flags = rec->flags;
	t->state = state_char(rec->state, rec->exit_state);
	memcpy(t->comm, rec->comm, sizeof(t->comm));
	t->comm[sizeof(t->comm) - 1] = '\0';
	t->utime_ns = rec->utime_ns;
	t->stime_ns = rec->stime_ns;
	t->nvcsw = rec->nvcsw;
	t->nivcsw = rec->nivcsw;
	t->captured_ns = rec->ktime_ns;
	t->syscall = -1;
	if (!(rec->flags & (KREAD_OK | KREAD_NOVMA)))
		return;
	memcpy(t->regs, rec->regs, sizeof(t->regs));
	t->syscall = (int64_t)rec->orig_ax;
	t->sp = rec->sp;
	t->vm_start = rec->vm_start;
	t->vm_end = rec->vm_end;
}

/* Appends n bytes to t's stack copy. */
static int add_stack(struct kread_thread *t, const uint8_t *p, uint32_t n)
{
	uint8_t *s;

	if (!n)
		return 0;
	s = realloc(t->stack, (size_t)t->stack_len + n);
	if (!s)
		return -ENOMEM;
	memcpy(s + t->stack_len, p, n);
	t->stack = s;
	t->stack_len += n;
	return 0;
}

static void drop_stack(struct kread_thread *t, uint32_t flags)
{
	free(t->stack);
	t->stack = NULL;
	t->stack_len = 0;
	t->flags = flags;
}

/*
 * Copies the rest of t's stack, chunk after chunk, up to max_stack, each
 * chunk only while t has not run since the first (its counts, checked in
 * the kernel). A thread that ran loses its copy (KREAD_TORN).
 */
static int copy_rest(struct kread *k, pid_t pid, struct kread_thread *t,
		     size_t max_stack, struct bytes *b,
		     struct kread_stats *stats)
{
	while (t->flags & KREAD_OK && t->vm_end > t->sp &&
	       t->vm_end - t->sp > t->stack_len) {
		struct kread_ctl ctl = { .tgid = pid,
					 .tid = (__u32)t->tid,
					 .flags = KREAD_CTL_EXPECT,
					 .offset = t->stack_len,
					 .nvcsw = t->nvcsw,
					 .nivcsw = t->nivcsw };
		struct kread_rec rec;
		const uint8_t *stack;
		size_t off = 0;
		int r;

		if (t->stack_len >= max_stack) {
			t->flags |= KREAD_CUT;
			break;
		}
		b->len = 0;
		r = run(k, &ctl, b);
		if (r < 0)
			return r;
		stats->runs++;
		r = next_rec(b, &off, &rec, &stack);
		if (r <= 0 || rec.tid != t->tid || !(rec.flags & KREAD_OK) ||
		    rec.offset != t->stack_len || !rec.stack_len) {
			drop_stack(t, KREAD_TORN);
			break;
		}
		if (t->stack_len + rec.stack_len > max_stack)
			rec.stack_len = (uint32_t)(max_stack - t->stack_len);
		r = add_stack(t, stack, rec.stack_len);
		if (r < 0)
			return r;
	}
	return 0;
}

static int cmp_tid(const void *a, const void *b)
{
	const struct kread_thread *x = a, *y = b;

	return (x->tid > y->tid) - (x->tid < y->tid);
}

/* Parses one run's records into v, replacing threads met before. */
static int take_recs(const struct bytes *b, struct kread_thread **v, size_t *n,
		     size_t *cap, size_t max_stack)
{
	const uint8_t *stack;
	struct kread_rec rec;
	size_t off = 0, before = *n;
	int r;

	while ((r = next_rec(b, &off, &rec, &stack)) == 1) {
		struct kread_thread *t = NULL;
		uint32_t len = rec.stack_len;

		/* A second look replaces the first; a run of the whole
		 * process sees each thread once (no search: a thousand
		 * threads would make it a million comparisons). */
		for (size_t i = 0; i < before && !t; i++)
			if ((*v)[i].tid == rec.tid)
				t = &(*v)[i];
		if (!t && *n > before && (*v)[*n - 1].tid == rec.tid)
			t = &(*v)[*n - 1];
		if (t) {
			drop_stack(t, 0);
		} else {
			if (*n == *cap) {
				size_t c = *cap ? *cap * 2 : 64;
				struct kread_thread *nv =
					realloc(*v, c * sizeof(**v));

				if (!nv)
					return -ENOMEM;
				*v = nv;
				*cap = c;
			}
			t = &(*v)[(*n)++];
		}
		from_rec(t, &rec);
		if (len > max_stack)
			len = (uint32_t)max_stack;
		if ((rec.flags & KREAD_OK) && add_stack(t, stack, len) < 0)
			return -ENOMEM;
	}
	return r;
}

int kread_process(struct kread *k, int slot, pid_t pid, size_t max_stack,
		  struct kread_thread **out, size_t *n,
		  struct kread_stats *stats)
{
	return kread_thread(k, slot, pid, 0, max_stack, out, n, stats);
}

size_t kread_same_max(void)
{
	return KREAD_SAME_MAX;
}

static int read_all(struct kread *k, int slot, pid_t pid, pid_t tid,
		    unsigned flags, size_t max_stack, struct kread_thread **out,
		    size_t *n, struct kread_stats *stats);

/* Puts e in set; false when its probes are all taken (left out). */
static bool same_put(struct kread_same_set *set, const struct kread_same_ent *e)
{
	__u32 h = kread_same_hash(e->tid);

	for (int i = 0; i < KREAD_SAME_PROBES; i++) {
		struct kread_same_ent *x =
			&set->e[(h + (__u32)i) & (KREAD_SAME_SLOTS - 1)];

		if (x->tid == 0 || x->tid == e->tid) {
			*x = *e;
			return true;
		}
	}
	return false;
}

int kread_process_same(struct kread *k, int slot, pid_t pid, size_t max_stack,
		       const struct kread_expect *same, size_t nsame,
		       struct kread_thread **out, size_t *n,
		       struct kread_stats *stats)
{
	struct kread_same_set *set;
	__u32 key = (__u32)slot;
	int r;

	if (!nsame)
		return kread_process(k, slot, pid, max_stack, out, n, stats);
	if (slot < 0 || slot >= KREAD_SLOTS)
		return -EINVAL;
	if (nsame > KREAD_SAME_MAX)
		nsame = KREAD_SAME_MAX;
	set = calloc(1, sizeof(*set));
	if (!set)
		return -ENOMEM;
	/* A thread left out is copied again, no more. */
	for (size_t i = 0; i < nsame; i++) {
		struct kread_same_ent e = { .tid = same[i].tid,
					    .nvcsw = same[i].nvcsw,
					    .nivcsw = same[i].nivcsw };

		if (e.tid > 0)
			same_put(set, &e);
	}
	/* The slot is this reader's alone while it reads: its set is
	 * written whole, and left for the next reader to overwrite. */
	if (bpf_map_update_elem(k->same_fd, &key, set, BPF_ANY) != 0) {
		r = -errno;
		free(set);
		return r;
	}
	free(set);
	return read_all(k, slot, pid, 0, KREAD_CTL_SAME, max_stack, out, n,
			stats);
}

int kread_thread(struct kread *k, int slot, pid_t pid, pid_t tid,
		 size_t max_stack, struct kread_thread **out, size_t *n,
		 struct kread_stats *stats)
{
	return read_all(k, slot, pid, tid, 0, max_stack, out, n, stats);
}

static int read_all(struct kread *k, int slot, pid_t pid, pid_t tid,
		    unsigned flags, size_t max_stack, struct kread_thread **out,
		    size_t *n, struct kread_stats *stats)
{
	struct kread_ctl ctl = { .tgid = pid,
				 .tid = (__u32)tid,
				 .flags = flags };
	struct kread_stats none = { 0 };
	struct kread_thread *v = NULL;
	struct bytes b = { 0 };
	size_t nv = 0, cap = 0, retries = 0;
	int r;

	*out = NULL;
	*n = 0;
	if (!stats)
		stats = &none;
	if (slot < 0 || slot >= KREAD_SLOTS || pid <= 0 || tid < 0)
		return -EINVAL;
	ctl.slot = (__u32)slot;
	r = run(k, &ctl, &b);
	if (r == -ENOENT)
		r = -ESRCH;
	if (r < 0)
		goto fail;
	stats->runs++;
	r = take_recs(&b, &v, &nv, &cap, max_stack);
	if (r < 0)
		goto fail;
	if (!nv) {
		r = -ESRCH; /* gone, or not a process: the link saw no task */
		goto fail;
	}
	/* Threads that ran are looked at once more, each on its own. */
	for (size_t i = 0; i < nv && retries < KREAD_RETRIES; i++) {
		struct kread_ctl one = ctl;

		if (!(v[i].flags & (KREAD_ONCPU | KREAD_TORN)))
			continue;
		one.tid = (__u32)v[i].tid;
		one.flags = 0;
		b.len = 0;
		retries++;
		stats->retried++;
		if (run(k, &one, &b) != 0)
			continue;
		stats->runs++;
		r = take_recs(&b, &v, &nv, &cap, max_stack);
		if (r < 0)
			goto fail;
	}
	for (size_t i = 0; i < nv; i++) {
		r = copy_rest(k, pid, &v[i], max_stack, &b, stats);
		if (r < 0)
			goto fail;
		if (v[i].flags & KREAD_OK) {
			stats->threads++;
			stats->bytes += v[i].stack_len;
		}
		stats->same += !!(v[i].flags & KREAD_SAME);
	}
	free(b.p);
	qsort(v, nv, sizeof(*v), cmp_tid);
	*out = v;
	*n = nv;
	return 0;
fail:
	free(b.p);
	kread_free(v, nv);
	return r;
}

void kread_free(struct kread_thread *v, size_t n)
{
	if (!v)
		return;
	for (size_t i = 0; i < n; i++)
		free(v[i].stack);
	free(v);
}

void kread_forget(struct kread *k, pid_t reader)
{
	__u32 ckey = (__u32)reader;

	if (k)
		bpf_map_delete_elem(k->ctls_fd, &ckey);
}

int kread_open(struct kread **out, char *why, size_t size)
{
	struct kread_thread *v = NULL;
	struct kread *k;
	size_t n = 0;
	int r;

	*out = NULL;
	if (size)
		why[0] = '\0';
	if (access("/sys/kernel/btf/vmlinux", R_OK) != 0) {
		snprintf(why, size,
			 "the kernel has no BTF (/sys/kernel/btf/vmlinux)");
		return -ENOENT;
	}
	k = calloc(1, sizeof(*k));
	if (!k)
		return -ENOMEM;
	last_warning[0] = '\0';
	libbpf_set_print(keep_warning);
	k->skel = kread_skel_load();
	r = k->skel ? 0 : -errno;
	if (r == 0) {
		k->ctls_fd = kread_skel_ctls(k->skel);
		k->same_fd = kread_skel_same(k->skel);
		/* Scoped sleepable task iterators work: read ourselves. */
		r = kread_process(k, 0, getpid(), 4096, &v, &n, NULL);
		kread_free(v, n);
	}
	libbpf_set_print(NULL);
	if (r == 0) {
		*out = k;
		return 0;
	}
	if (r == -EPERM || r == -EACCES)
		snprintf(why, size,
			 "no privilege for BPF (CAP_BPF and CAP_PERFMON, or "
			 "CAP_SYS_ADMIN)");
	else
		snprintf(why, size,
			 "the kernel refused the reader (%s; it needs Linux "
			 "6.1 or later)%s%s",
			 strerror(-r), last_warning[0] ? ": " : "",
			 last_warning);
	kread_close(k);
	return r;
}

void kread_close(struct kread *k)
{
	if (!k)
		return;
	kread_skel_free(k->skel);
	free(k);
}
