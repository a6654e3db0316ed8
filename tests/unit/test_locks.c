/*
 * test_locks.c - lock owners from dumps written by hand (src/render/locks.c):
 * glibc's mutex words (normal, recursive, robust: owner died, an unknown
 * kind), rwlocks waited on to read and to write, the functions that tell
 * a lock from a condition variable or a libc-internal lock, copies too
 * short to read, owners that exited, tids of another pid namespace,
 * cycles (ABBA, three, a thread waiting on itself) against chains, the
 * refusals (no glibc, musl, glibc older than 2.25); what an owner holds and
 * the text that names waiters, owners and the globals locks lie in; then the
 * wire's waits: a round trip, and every malformed wait refused.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/wire.h"
#include "render/group.h"
#include "render/locks.h"
#include "render/render.h"
#include "tap.h"

#define BASE 0x7f0000001000ull /* page-aligned: windows start 16 before */

static const char *const mutex_fns[] = { NULL, "__pthread_mutex_lock",
					 "worker" };
static const char *const cond_fns[] = { "__futex_abstimed_wait_common",
					"pthread_cond_wait", "worker" };
static const char *const rd_fns[] = { "__futex_abstimed_wait_common",
				      "pthread_rwlock_rdlock", "worker" };
static const char *const wr_fns[] = { "__futex_abstimed_wait_common",
				      "pthread_rwlock_wrlock", "worker" };
static const char *const internal_fns[] = { "__lll_lock_wait_private", "malloc",
					    "worker" };

static void put32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
	p[2] = (uint8_t)(v >> 16);
	p[3] = (uint8_t)(v >> 24);
}

/* A symbolized dump of n threads, tids 100, 101, ..., glibc 2.36. */
static struct sw_dump *dump_of(size_t n)
{
	struct sw_dump *d = dump_new();

	d->threads = calloc(n, sizeof(*d->threads));
	d->nthreads = n;
	d->symbolized = true;
	d->glibc_minor = 36;
	d->pid = 100;
	for (size_t i = 0; i < n; i++) {
		struct sw_thread *t = &d->threads[i];

		t->tid = (pid_t)(100 + i);
		snprintf(t->name, sizeof(t->name), "t%u", (unsigned)(i % 1000));
		t->status = SW_ST_OK;
		t->state = 'S';
		t->group = -1;
		t->nips = 1;
		t->ips = calloc(1, sizeof(uint64_t));
	}
	return d;
}

/* Thread i sleeps in fns (three frames) on the word at addr. */
static struct sw_wait *sleeps(struct sw_dump *d, size_t i,
			      const char *const *fns, uint64_t addr,
			      uint32_t op)
{
	struct sw_thread *t = &d->threads[i];
	struct sw_frame *f = dump_alloc(d, 3 * sizeof(*f));

	memset(f, 0, 3 * sizeof(*f));
	for (int k = 0; k < 3; k++) {
		f[k].function = fns[k];
		f[k].module = -1;
	}
	t->frames = f;
	t->nframes = 3;
	t->wait = calloc(1, sizeof(*t->wait));
	t->wait->addr = addr;
	t->wait->op = op;
	t->wait->mem_at = addr - SW_WAIT_BEFORE;
	t->wait->nmem = SW_WAIT_MEM;
	return t->wait;
}

/* The word at off from the futex word, in w's copy. */
static void word(struct sw_wait *w, int off, uint32_t v)
{
	put32(w->mem + SW_WAIT_BEFORE + off, v);
}

/* Thread i waits on a glibc mutex at addr: lock, count, owner, kind. */
static struct sw_wait *mutex(struct sw_dump *d, size_t i, uint64_t addr,
			     uint32_t lock, uint32_t count, uint32_t owner,
			     uint32_t kind)
{
	struct sw_wait *w = sleeps(d, i, mutex_fns, addr, 128);

	word(w, 0, lock);
	word(w, 4, count);
	word(w, 8, owner);
	word(w, 16, kind);
	return w;
}

static void test_mutexes(void)
{
	struct sw_dump *d = dump_of(8);
	struct locks l;

	mutex(d, 0, BASE + 0x100, 2, 0, 101, 0); /* normal, t1 owns */
	mutex(d, 2, BASE + 0x200, 2, 2, 103, 1); /* recursive, twice */
	mutex(d, 4, BASE + 0x300, 0x80000000u | 105, 1, 105, 16); /* robust */
	mutex(d, 5, BASE + 0x400, 0xc0000000u | 106, 1, 0x7fffffff, 16);
	mutex(d, 6, BASE + 0x500, 2, 0, 101, 0x10000); /* unknown kind */
	mutex(d, 7, BASE + 0x600, 2, 0, 999, 0);       /* owner exited */
	TAP_OK(locks_analyze(d, &l) == 0 && l.w && !l.unsupported,
	       "a dump with mutex waits is analyzed");
	TAP_OK(l.w[0].kind == LOCK_MUTEX && l.w[0].addr == BASE + 0x100 &&
		       l.w[0].owner == 101 && l.w[0].owner_index == 1 &&
		       l.w[0].cycle == -1,
	       "normal mutex: the owner from __owner, found among threads");
	TAP_OK(l.w[2].owner_index == 3 && l.w[2].held == 2,
	       "recursive mutex held twice: held 2 (got %u)", l.w[2].held);
	TAP_OK(l.w[4].owner == 105 && l.w[4].owner_index == 5 &&
		       !l.w[4].owner_died,
	       "robust mutex: the owner from __lock, less FUTEX_WAITERS");
	TAP_OK(l.w[5].owner == 106 && l.w[5].owner_index == 6 &&
		       l.w[5].owner_died,
	       "robust mutex after EOWNERDEAD: its heir, owner_died");
	TAP_OK(l.w[6].kind == LOCK_NONE,
	       "an unknown kind is no mutex we read: not reported");
	TAP_OK(l.w[7].kind == LOCK_MUTEX && l.w[7].owner == 999 &&
		       l.w[7].owner_index == -1,
	       "an owner that is no thread of the process: it exited");
	TAP_OK(l.nwaiting == 5 && l.ncycles == 0,
	       "five waits reported, no cycle (%zu, %zu)", l.nwaiting,
	       l.ncycles);
	locks_release(&l);
	sw_dump_free(d);
}

static void test_kinds(void)
{
	struct sw_dump *d = dump_of(6);
	struct sw_wait *w;
	struct locks l;

	/* A reader on __wrphase_futex (+8): the rwlock starts 8 before. */
	w = sleeps(d, 0, rd_fns, BASE + 0x108, 128 | 9);
	word(w, -8, 2 | 1); /* __readers: WRLOCKED, WRPHASE */
	word(w, 16, 105);   /* __cur_writer at +24 */
	/* A writer on __writers_futex (+12): the rwlock starts 12 before. */
	w = sleeps(d, 1, wr_fns, BASE + 0x10c, 128 | 9);
	word(w, -12, 2 | 1);
	word(w, 12, 105);
	/* Readers hold it: no owner. */
	w = sleeps(d, 2, rd_fns, BASE + 0x208, 128 | 9);
	word(w, -8, 8 << 3);
	/* A condition variable and libc's own lock: no owner. */
	w = sleeps(d, 3, cond_fns, BASE + 0x300, 128 | 9);
	word(w, 8, 101);
	w = sleeps(d, 4, internal_fns, BASE + 0x400, 128);
	word(w, 0, 2);
	word(w, 8, 101);
	TAP_OK(locks_analyze(d, &l) == 0, "rwlocks and others analyzed");
	TAP_OK(l.w[0].kind == LOCK_RWLOCK && !l.w[0].write &&
		       l.w[0].addr == BASE + 0x100 && l.w[0].owner_index == 5,
	       "a reader: the rwlock 8 before its word, the writer its owner");
	TAP_OK(l.w[1].kind == LOCK_RWLOCK && l.w[1].write &&
		       l.w[1].addr == BASE + 0x100 && l.w[1].owner_index == 5,
	       "a writer: the rwlock 12 before its word, the same writer");
	TAP_OK(l.w[2].kind == LOCK_RWLOCK && l.w[2].owner == 0,
	       "an rwlock readers hold: no owner");
	TAP_OK(l.w[3].kind == LOCK_NONE,
	       "a condition variable: not reported, whatever its memory");
	TAP_OK(l.w[4].kind == LOCK_NONE,
	       "libc's internal lock (malloc's): not reported");
	locks_release(&l);
	sw_dump_free(d);
}

static void test_short(void)
{
	struct sw_dump *d = dump_of(3);
	struct sw_wait *w;
	struct locks l;

	w = mutex(d, 0, BASE + 0x100, 2, 0, 101, 0);
	w->nmem = SW_WAIT_BEFORE + 12; /* __kind missing */
	w = mutex(d, 1, BASE, 2, 0, 100, 0);
	w->mem_at = BASE; /* at a page start: nothing before */
	memmove(w->mem, w->mem + SW_WAIT_BEFORE, SW_WAIT_MEM - SW_WAIT_BEFORE);
	w->nmem = SW_WAIT_MEM - SW_WAIT_BEFORE;
	w = mutex(d, 2, BASE + 0x300, 2, 0, 101, 0);
	w->nmem = 0; /* nothing could be read */
	TAP_OK(locks_analyze(d, &l) == 0, "short copies analyzed");
	TAP_OK(l.w[0].kind == LOCK_NONE, "a copy without __kind: not read");
	TAP_OK(l.w[1].kind == LOCK_MUTEX && l.w[1].owner_index == 0,
	       "a word at a page start: read from the word on");
	TAP_OK(l.w[2].kind == LOCK_NONE, "no copy: not reported");
	locks_release(&l);
	sw_dump_free(d);
}

static void test_cycles(void)
{
	struct sw_dump *d = dump_of(9);
	struct locks l;
	int rc;

	/* 0 <-> 1; 2 -> 3 -> 4 -> 2; 5 on itself; 6 -> 7 -> 8 (a chain). */
	mutex(d, 0, BASE + 0x100, 2, 0, 101, 0);
	mutex(d, 1, BASE + 0x140, 2, 0, 100, 0);
	mutex(d, 2, BASE + 0x200, 2, 0, 103, 0);
	mutex(d, 3, BASE + 0x240, 2, 0, 104, 0);
	mutex(d, 4, BASE + 0x280, 2, 0, 102, 0);
	mutex(d, 5, BASE + 0x300, 2, 0, 105, 0);
	mutex(d, 6, BASE + 0x400, 2, 0, 107, 0);
	mutex(d, 7, BASE + 0x440, 2, 0, 108, 0);
	rc = locks_analyze(d, &l);
	TAP_OK(rc == 0 && l.ncycles == 3, "three cycles (got %zu)", l.ncycles);
	TAP_OK(l.w[0].cycle >= 0 && l.w[0].cycle == l.w[1].cycle &&
		       l.cycles[l.w[0].cycle].n == 2,
	       "ABBA: one cycle of two");
	TAP_OK(l.w[2].cycle >= 0 && l.w[2].cycle == l.w[3].cycle &&
		       l.w[3].cycle == l.w[4].cycle &&
		       l.cycles[l.w[2].cycle].n == 3,
	       "three threads in a ring: one cycle of three");
	TAP_OK(l.w[5].cycle >= 0 && l.cycles[l.w[5].cycle].n == 1,
	       "a thread waiting on a mutex it holds: a cycle of one");
	TAP_OK(l.w[6].cycle == -1 && l.w[7].cycle == -1 &&
		       locks_next(&l, 6) == 7 && locks_next(&l, 7) == 8 &&
		       locks_next(&l, 8) == -1,
	       "a chain of three is no cycle, and locks_next walks it");
	locks_release(&l);
	sw_dump_free(d);
}

static void test_namespace(void)
{
	struct sw_dump *d = dump_of(2);
	struct locks l;

	/* The process sees itself as tids 1 and 2; we see 100 and 101. */
	d->threads[0].ns_tid = 1;
	d->threads[1].ns_tid = 2;
	mutex(d, 0, BASE + 0x100, 2, 0, 2, 0);
	TAP_OK(locks_analyze(d, &l) == 0 && l.w[0].owner_index == 1,
	       "an owner of another pid namespace: found by its own tid");
	locks_release(&l);
	sw_dump_free(d);
}

static void test_refused(void)
{
	struct sw_dump *d = dump_of(2);
	struct locks l;

	mutex(d, 0, BASE + 0x100, 2, 0, 101, 0);
	d->glibc_minor = 0;
	TAP_OK(locks_analyze(d, &l) == 0 && !l.w && l.unsupported &&
		       strstr(l.unsupported, "no glibc"),
	       "no glibc seen: refused, with the reason");
	locks_release(&l);
	d->glibc_minor = 24;
	TAP_OK(locks_analyze(d, &l) == 0 && !l.w && l.unsupported &&
		       strstr(l.unsupported, "2.25"),
	       "glibc 2.24: refused, naming 2.25");
	locks_release(&l);
	d->glibc_minor = 36;
	d->modules = calloc(1, sizeof(*d->modules));
	d->modules[0].path = strdup("/lib/ld-musl-x86_64.so.1");
	d->nmodules = 1;
	TAP_OK(locks_analyze(d, &l) == 0 && !l.w && l.unsupported &&
		       strstr(l.unsupported, "musl"),
	       "musl: refused, naming it");
	locks_release(&l);
	d->symbolized = false;
	TAP_OK(locks_analyze(d, &l) == 0 && !l.w && !l.unsupported,
	       "a raw dump: nothing to say");
	locks_release(&l);
	sw_dump_free(d);
}

/* Encodes d, then decodes it: the decoder's status. */
static int round_trip(const struct sw_dump *d, struct sw_dump **out)
{
	struct wire_out o;
	int st = 0, rc;

	wire_out_init(&o);
	rc = wire_encode_dump_resp(&o, 1, 0, d);
	if (rc == 0)
		rc = wire_decode_dump_resp(o.data + WIRE_HDR_SIZE,
					   o.len - WIRE_HDR_SIZE, &st, out);
	wire_out_release(&o);
	return rc;
}

static void test_wire(void)
{
	struct sw_dump *d = dump_of(2), *e = NULL;
	struct sw_wait *w;
	int rc;

	d->timeout_ms = 1000;
	w = mutex(d, 1, BASE + 0x100, 2, 0, 100, 0);
	rc = round_trip(d, &e);
	TAP_OK(rc == 0 && !e->threads[0].wait && e->threads[1].wait &&
		       memcmp(e->threads[1].wait, w, sizeof(*w)) == 0,
	       "a wait crosses the wire whole, and only where there is one "
	       "(%d)",
	       rc);
	sw_dump_free(e);
	e = NULL;
	w->nmem = 3;
	TAP_OK(round_trip(d, &e) == SW_EFORMAT, "a copy of 3 bytes: refused");
	w->nmem = SW_WAIT_MEM;
	w->mem_at = w->addr + 4;
	TAP_OK(round_trip(d, &e) == SW_EFORMAT,
	       "a copy that starts past the word: refused");
	w->mem_at = w->addr - SW_WAIT_MEM;
	TAP_OK(round_trip(d, &e) == SW_EFORMAT,
	       "a copy that ends before the word: refused");
	w->mem_at = w->addr - SW_WAIT_BEFORE;
	d->threads[1].status = SW_ST_TIMEOUT;
	d->threads[1].nips = 0;
	TAP_OK(round_trip(d, &e) == SW_EFORMAT,
	       "a wait of a thread that did not answer: refused");
	sw_dump_free(d);
}

/* Three waiters on one mutex in a global, its owner, and a bystander. */
static void test_holds(void)
{
	struct sw_dump *d = dump_of(5);
	struct lock_held held[LOCKS_HELD_MAX];
	struct locks l;
	char *text = NULL, want[256];
	uint64_t off = 0;

	for (size_t i = 0; i < 3; i++)
		mutex(d, i, BASE + 0x110, 2, 0, 103, 0);
	d->addr_names = calloc(1, sizeof(*d->addr_names));
	d->addr_names[0] =
		(struct sw_addr_name){ BASE + 0x100, 0x40, strdup("g_pool") };
	d->naddr_names = 1;
	TAP_OK(!dump_addr_name(d, BASE + 0x140, &off) &&
		       !dump_addr_name(d, BASE + 0xff, &off) &&
		       dump_addr_name(d, BASE + 0x110, &off) && off == 0x10,
	       "an address is named by the global that holds it, and only");
	TAP_OK(locks_analyze(d, &l) == 0 && l.w && l.w[3].waiters == 3 &&
		       l.w[4].waiters == 0,
	       "the owner counts its three waiters, the bystander none");
	TAP_OK(locks_held(&l, 3, held, LOCKS_HELD_MAX) == 1 &&
		       held[0].addr == BASE + 0x110 && held[0].waiters == 3 &&
		       held[0].kind == LOCK_MUTEX &&
		       locks_held(&l, 0, held, LOCKS_HELD_MAX) == 0,
	       "the owner holds one mutex with 3 waiters; a waiter holds none");
	locks_release(&l);
	TAP_OK(group_dump(d) == 0 && render_text(d, &text) == 0 && text,
	       "the dump renders as text");
	snprintf(want, sizeof(want),
		 "\nt0 (100), t1 (101), t2 (102): waiting for mutex 0x%llx "
		 "(g_pool+0x10) held by t3 (103)\n",
		 BASE + 0x110);
	TAP_OK(text && strstr(text, want),
	       "one wait line names the three waiters and the global");
	snprintf(want, sizeof(want),
		 "\nt3 (103): holds mutex 0x%llx (g_pool+0x10), 3 threads "
		 "waiting\n",
		 BASE + 0x110);
	TAP_OK(text && strstr(text, want), "the owner says what it holds");
	if (text && !strstr(text, want))
		printf("# %s", text);
	free(text);
	sw_dump_free(d);
}

int main(void)
{
	test_mutexes();
	test_kinds();
	test_short();
	test_cycles();
	test_namespace();
	test_refused();
	test_holds();
	test_wire();
	return tap_done();
}
