/*
 * stackmap.c - the table of stack-like mappings that tells the handler how
 * much stack it has left (stackmap.h).
 *
 * One writer, the dumper, under the collector's lock; readers are handlers,
 * which may run at any time (a late one from an abandoned dump, too). The
 * table is a seqlock: the writer makes the sequence odd, rewrites, makes it
 * even again; a reader that saw it odd or changed answers "unknown". Every
 * field is an atomic read and written with relaxed order between the
 * sequence's fences, so a racing reader sees no torn value it would trust.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "stackmap.h"
#include "sys.h"

/*
 * The kernel grows the main stack only while it stays this far above the
 * mapping below it (stack_guard_gap: 256 pages unless set on the kernel
 * command line).
 */
#define STACKMAP_GUARD_PAGES 256

struct range {
	_Atomic uint64_t lo; /* lowest usable address; bit 0: bounded */
	_Atomic uint64_t hi; /* one past the highest */
};

/*
 * bounded: the mapping's lowest address is where its stack ends, so the
 * room under a stack pointer in it is known: the main thread's [stack],
 * and any mapping right above a PROT_NONE one (a thread's guard page, a
 * coroutine library's guarded stack). Any other mapping (the heap, a
 * malloc'd block holding fiber stacks) may hold a stack of any size
 * anywhere inside.
 */
struct bounds {
	uint64_t lo, hi;
	bool bounded;
};

static struct range table[STACKMAP_MAX]; /* sorted, disjoint */
static _Atomic size_t table_len;
static _Atomic uint32_t table_seq; /* odd while being rewritten */

/* Skips one field of a maps line and the blanks after it. */
static const char *next_field(const char *p)
{
	while (*p && *p != ' ' && *p != '\n')
		p++;
	while (*p == ' ')
		p++;
	return p;
}

int stackmap_parse_line(const char *line, uint64_t *lo, uint64_t *hi,
			int *main_stack)
{
	const char *perms, *p;
	char *end;

	*main_stack = 0;
	*lo = strtoull(line, &end, 16);
	if (end == line || *end != '-')
		return -1;
	p = end + 1;
	*hi = strtoull(p, &end, 16);
	if (end == p || *end != ' ' || *hi <= *lo)
		return -1;
	perms = end + 1;
	if (strnlen(perms, 5) < 5 || perms[4] != ' ')
		return -1;
	p = next_field(perms); /* at the offset */
	p = next_field(p);     /* the device */
	p = next_field(p);     /* the inode */
	if (!*p)
		return -1;
	if (strtoull(p, &end, 10) != 0 || end == p)
		return 0;  /* a file's inode */
	p = next_field(p); /* the path, if any */
	if (perms[0] != 'r' || perms[1] != 'w' || perms[3] != 'p')
		return 0;
	if (*p && *p != '\n' && *p != '[')
		return 0; /* a deleted file, memfd... */
	*main_stack = strncmp(p, "[stack]", 7) == 0;
	return 1;
}

/*
 * The lowest address the main thread's stack [lo, hi) can reach: the
 * kernel grows it on demand while its size stays within RLIMIT_STACK and
 * it keeps the guard gap to the mapping below (ending at prev_hi). What is
 * already mapped stays usable even when the limit was lowered since.
 */
static uint64_t main_stack_floor(uint64_t lo, uint64_t hi, uint64_t prev_hi)
{
	uint64_t gap = STACKMAP_GUARD_PAGES * (uint64_t)sysconf(_SC_PAGESIZE);
	uint64_t floor = prev_hi + gap;
	struct rlimit rl;

	if (getrlimit(RLIMIT_STACK, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
	    rl.rlim_cur < hi && hi - rl.rlim_cur > floor)
		floor = hi - rl.rlim_cur;
	return floor < lo ? floor : lo;
}

/* Replaces the table by b[0..n). Readers racing it answer "unknown". */
static void publish(const struct bounds *b, size_t n)
{
	/*
	 * Odd while rewriting. Made odd from whatever it is: in the child of
	 * a fork() that came in the middle of a rewrite it is odd already.
	 */
	uint32_t seq =
		(atomic_load_explicit(&table_seq, memory_order_relaxed) + 1) |
		1;

	atomic_store_explicit(&table_seq, seq, memory_order_relaxed);
	atomic_thread_fence(memory_order_release);
	for (size_t i = 0; i < n; i++) {
		atomic_store_explicit(&table[i].lo, b[i].lo | b[i].bounded,
				      memory_order_relaxed);
		atomic_store_explicit(&table[i].hi, b[i].hi,
				      memory_order_relaxed);
	}
	atomic_store_explicit(&table_len, n, memory_order_relaxed);
	atomic_store_explicit(&table_seq, seq + 1, memory_order_release);
}

/* Growable list of bounds; the dumper's side only. */
struct blist {
	struct bounds *b;
	size_t len, cap;
	uint64_t prev_hi; /* end of the last mapping seen, of any kind */
	bool prev_none;	  /* and whether it was PROT_NONE */
};

/* Whether a maps line is a PROT_NONE mapping ("---"). */
static bool no_access(const char *line)
{
	const char *perms = strchr(line, ' ');

	return perms && strncmp(perms + 1, "---", 3) == 0;
}

/* Takes one maps line (NUL-terminated). 0 or -ENOMEM. */
static int take_line(struct blist *l, const char *line)
{
	uint64_t lo, hi;
	int main_stack;
	int kind = stackmap_parse_line(line, &lo, &hi, &main_stack);
	bool bounded = main_stack || (l->prev_none && l->prev_hi == lo);

	if (kind < 0)
		return 0;
	if (kind > 0 && main_stack)
		lo = main_stack_floor(lo, hi, l->prev_hi);
	l->prev_hi = hi;
	l->prev_none = no_access(line);
	if (kind == 0 || l->len == STACKMAP_MAX ||
	    (l->len > 0 && lo < l->b[l->len - 1].hi))
		return 0;
	if (l->len == l->cap) {
		size_t cap = l->cap ? 2 * l->cap : 256;
		struct bounds *bigger = realloc(l->b, cap * sizeof(*bigger));

		if (!bigger)
			return -ENOMEM;
		l->b = bigger;
		l->cap = cap;
	}
	l->b[l->len].lo = lo;
	l->b[l->len].hi = hi;
	l->b[l->len].bounded = bounded;
	l->len++;
	return 0;
}

/*
 * Reads the stack-like mappings from the maps file open at fd into l,
 * sorted, at most STACKMAP_MAX. Plain read()s into one buffer (a process
 * with a thousand threads has some 2000 lines: ~0.3 ms). 0 or -errno.
 */
static int read_maps(int fd, struct blist *l)
{
	enum { BUF = 64 * 1024 };
	char *buf = malloc(BUF);
	size_t have = 0;
	int rc = 0;

	if (!buf)
		return -ENOMEM;
	for (;;) {
		ssize_t n = read(fd, buf + have, BUF - 1 - have);
		char *line = buf, *nl;

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			rc = -errno;
			break;
		}
		have += (size_t)n;
		buf[have] = '\0';
		while (!rc &&
		       (nl = memchr(line, '\n', have - (size_t)(line - buf)))) {
			*nl = '\0';
			rc = take_line(l, line);
			line = nl + 1;
		}
		if (rc || n == 0)
			break;
		have -= (size_t)(line - buf);
		memmove(buf, line, have);
		if (have == BUF - 1)
			have = 0; /* a line longer than the buffer: drop it */
	}
	free(buf);
	return rc;
}

int stackmap_refresh(void)
{
	struct blist l = { 0 };
	int fd, rc;

	/* Our own thread's: the first thread may have exited. */
	fd = open("/proc/thread-self/maps", O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		rc = -errno;
		publish(NULL, 0);
		return rc;
	}
	rc = read_maps(fd, &l);
	close(fd);
	publish(l.b, rc < 0 ? 0 : l.len);
	free(l.b);
	return rc;
}

/*
 * The table's mapping holding addr: its bounds and whether it is bounded.
 * 0, or -1 when none holds it or the table is being rebuilt.
 */
static int lookup(uintptr_t addr, uint64_t *lo_out, uint64_t *hi_out,
		  bool *bounded)
{
	uint32_t seq;
	size_t n, a = 0, b;
	uint64_t lo = 0, hi = 0;

	seq = atomic_load_explicit(&table_seq, memory_order_acquire);
	if (seq & 1)
		return -1;
	n = atomic_load_explicit(&table_len, memory_order_relaxed);
	if (n > STACKMAP_MAX)
		n = 0;
	/* a ends one past the last entry starting at or below addr. */
	b = n;
	while (a < b) {
		size_t m = a + (b - a) / 2;

		if ((atomic_load_explicit(&table[m].lo, memory_order_relaxed) &
		     ~1ull) <= addr)
			a = m + 1;
		else
			b = m;
	}
	if (a > 0) {
		lo = atomic_load_explicit(&table[a - 1].lo,
					  memory_order_relaxed);
		hi = atomic_load_explicit(&table[a - 1].hi,
					  memory_order_relaxed);
	}
	atomic_thread_fence(memory_order_acquire);
	if (atomic_load_explicit(&table_seq, memory_order_relaxed) != seq)
		return -1;
	*bounded = lo & 1;
	lo &= ~1ull;
	if (a == 0 || addr < lo || addr >= hi)
		return -1;
	*lo_out = lo;
	*hi_out = hi;
	return 0;
}

int stackmap_bounds(uintptr_t addr, uint64_t *lo_out, uint64_t *hi_out)
{
	bool bounded;

	return lookup(addr, lo_out, hi_out, &bounded);
}

size_t stackmap_room(uintptr_t sp)
{
	stack_t ss;
	uint64_t lo = 0, hi = 0;
	bool bounded = false;

	ss.ss_flags = 0; /* (the kernel fills ss) */
	ss.ss_sp = NULL;
	/* Running on a sigaltstack: its own bounds, whatever holds it. */
	if (sys_call2(SYS_sigaltstack, NULL, &ss) == 0 &&
	    (ss.ss_flags & SS_ONSTACK)) {
		lo = (uintptr_t)ss.ss_sp;
		return sp > lo ? sp - lo : 0;
	}
	if (lookup(sp, &lo, &hi, &bounded) < 0 || !bounded)
		return STACKMAP_UNKNOWN;
	return sp - lo;
}
