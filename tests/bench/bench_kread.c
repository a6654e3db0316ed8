/*
 * bench_kread.c - the kernel read of one process timed on its own: the
 * snapshot helper's part of a dump of a process whose threads are
 * blocked (src/kread/kread.h), without the daemon, the unwinding or the
 * HTTP around it.
 *
 *	bench_kread PID ROUNDS
 *
 * Loads the reader (root: CAP_BPF and CAP_PERFMON), then reads every
 * thread of PID ROUNDS times with kread_process() (stacks copied up to
 * SNAP_STACK_MAX each, as the helper does), then ROUNDS times with
 * kread_process_same() given the switch counts of the read before, as
 * the daemon passes those of its previous read of a target (kept.c):
 * the threads that did not run since are not copied. Prints
 *	full reads R median_us M min_us A max_us B threads N ok K
 *		bytes Y retried T
 *	same reads R median_us M min_us A max_us B threads N same S ok K
 *		bytes Y
 * (one line each; N, K, S, Y and T of the last round) and exits 0, or
 * says why on stderr and exits 1 (2 for usage).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kread/kread.h"
#include "model/clock.h"
#include "snapshot/snapshot.h"

struct figures {
	uint64_t *us; /* one per round */
	size_t n;
	size_t threads, ok, same;
	uint64_t bytes, retried;
};

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return (x > y) - (x < y);
}

/* Prints "KIND reads R median_us M min_us A max_us B" (no newline). */
static void print_times(const char *kind, struct figures *f)
{
	qsort(f->us, f->n, sizeof(*f->us), cmp_u64);
	printf("%s reads %zu median_us %llu min_us %llu max_us %llu", kind,
	       f->n, (unsigned long long)f->us[f->n / 2],
	       (unsigned long long)f->us[0],
	       (unsigned long long)f->us[f->n - 1]);
}

/*
 * The switch counts of every thread of v that was read (copied or left
 * as the same), for the next kread_process_same(). Returns 0 with *out
 * (free it) and *n, or -ENOMEM.
 */
static int expect_from(const struct kread_thread *v, size_t nv,
		       struct kread_expect **out, size_t *n)
{
	struct kread_expect *e = calloc(nv ? nv : 1, sizeof(*e));
	size_t k = 0;

	if (!e)
		return -ENOMEM;
	for (size_t i = 0; i < nv && k < kread_same_max(); i++) {
		if (!(v[i].flags & (KREAD_OK | KREAD_SAME)))
			continue;
		e[k].tid = v[i].tid;
		e[k].nvcsw = v[i].nvcsw;
		e[k].nivcsw = v[i].nivcsw;
		k++;
	}
	*out = e;
	*n = k;
	return 0;
}

/* Counts of one read into f (the last round's are printed). */
static void count(struct figures *f, const struct kread_thread *v, size_t nv,
		  const struct kread_stats *st)
{
	f->threads = nv;
	f->ok = 0;
	f->same = 0;
	for (size_t i = 0; i < nv; i++) {
		f->ok += !!(v[i].flags & KREAD_OK);
		f->same += !!(v[i].flags & KREAD_SAME);
	}
	f->bytes = st->bytes;
	f->retried = st->retried;
}

int main(int argc, char **argv)
{
	struct figures full = { 0 }, same = { 0 };
	struct kread_expect *e = NULL;
	struct kread *k = NULL;
	size_t ne = 0;
	char why[256];
	int rounds, r = 1;
	pid_t pid;

	if (argc != 3 || (pid = (pid_t)atoi(argv[1])) <= 0 ||
	    (rounds = atoi(argv[2])) < 1 || rounds > 100000) {
		fprintf(stderr, "usage: bench_kread PID ROUNDS\n");
		return 2;
	}
	if (kread_open(&k, why, sizeof(why)) != 0) {
		fprintf(stderr, "bench_kread: no kernel reads: %s\n", why);
		return 1;
	}
	full.us = calloc((size_t)rounds, sizeof(*full.us));
	same.us = calloc((size_t)rounds, sizeof(*same.us));
	if (!full.us || !same.us)
		goto out;
	for (int i = 0; i < rounds; i++) {
		struct kread_stats st = { 0 };
		struct kread_thread *v = NULL;
		uint64_t t0 = clock_now_ns();
		size_t nv = 0;
		int rc = kread_process(k, 0, pid, SNAP_STACK_MAX, &v, &nv, &st);

		full.us[full.n++] = (clock_now_ns() - t0) / 1000u;
		if (rc != 0) {
			fprintf(stderr, "bench_kread: read of %d: %s\n",
				(int)pid, strerror(-rc));
			goto out;
		}
		count(&full, v, nv, &st);
		/* The last full read gives the first reuse its counts. */
		if (i == rounds - 1 && expect_from(v, nv, &e, &ne) != 0) {
			kread_free(v, nv);
			goto out;
		}
		kread_free(v, nv);
	}
	for (int i = 0; i < rounds; i++) {
		struct kread_stats st = { 0 };
		struct kread_thread *v = NULL;
		uint64_t t0 = clock_now_ns();
		size_t nv = 0;
		int rc = kread_process_same(k, 0, pid, SNAP_STACK_MAX, e, ne,
					    &v, &nv, &st);

		same.us[same.n++] = (clock_now_ns() - t0) / 1000u;
		if (rc != 0) {
			fprintf(stderr, "bench_kread: same read of %d: %s\n",
				(int)pid, strerror(-rc));
			goto out;
		}
		count(&same, v, nv, &st);
		free(e);
		e = NULL;
		rc = expect_from(v, nv, &e, &ne);
		kread_free(v, nv);
		if (rc != 0)
			goto out;
	}
	print_times("full", &full);
	printf(" threads %zu ok %zu bytes %llu retried %llu\n", full.threads,
	       full.ok, (unsigned long long)full.bytes,
	       (unsigned long long)full.retried);
	print_times("same", &same);
	printf(" threads %zu same %zu ok %zu bytes %llu\n", same.threads,
	       same.same, same.ok, (unsigned long long)same.bytes);
	r = 0;
out:
	free(e);
	free(full.us);
	free(same.us);
	kread_close(k);
	return r;
}
