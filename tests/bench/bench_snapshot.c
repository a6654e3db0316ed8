/*
 * bench_snapshot.c - the phases of a ptrace snapshot of a process without
 * the agent, timed one by one: freeze-copy-thaw (snapshot/), unwinding
 * from the copies (symbols/unwind.h) and symbolizing with a long-lived
 * symbolizer (cold on the first round, warm after), as the daemon does.
 *
 *	bench_snapshot PID ROUNDS
 *
 * Prints one line per round:
 *	round R snap_us S unwind_us U sym_us Y total_us T paused_avg_us A
 *	paused_max_us M threads N ok K realtime 0|1
 * (realtime: the freeze ran at SCHED_FIFO, snapshot.c), then one line over
 *every thread's pause in every round, to tell a rare long pause (the machine
 *taking the CPU away from the snapshotter while a thread is stopped) from a
 *slow snapshot: pauses N p50_us A p99_us B p999_us C max_us D over_2ms E
 *	named_max_us F
 * where F is the longest pause of a thread named by BENCH_SNAPSHOT_NAME
 * (default "heartbeat": bench_target's 1 ms heartbeat).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/clock.h"
#include "model/dump.h"
#include "render/group.h"
#include "snapshot/snapshot.h"
#include "stackwatch.h"
#include "symbols/symbolize.h"
#include "symbols/unwind.h"

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return (x > y) - (x < y);
}

/* The pause at quantile q of the n sorted pauses, in microseconds. */
static uint32_t quantile_us(const uint32_t *v, size_t n, double q)
{
	size_t i = (size_t)(q * (double)(n - 1) + 0.5);

	return n ? v[i] / 1000u : 0;
}

int main(int argc, char **argv)
{
	const char *named = getenv("BENCH_SNAPSHOT_NAME");
	struct sym *sym = NULL;
	uint32_t *pauses = NULL, named_max = 0;
	size_t npauses = 0, cap = 0, over = 0;
	int rounds;
	pid_t pid;

	if (argc != 3) {
		fprintf(stderr, "usage: bench_snapshot PID ROUNDS\n");
		return 2;
	}
	pid = (pid_t)atoi(argv[1]);
	rounds = atoi(argv[2]);
	if (!named)
		named = "heartbeat";
	if (sym_new(NULL, NULL, &sym) != 0)
		return 1;
	for (int r = 0; r < rounds; r++) {
		struct snap *s = NULL;
		struct sw_dump *d = NULL;
		uint64_t t0 = clock_now_ns(), t1, t2, t3;
		size_t ok = 0;
		int rc = snap_take(pid, 5000, &s);

		t1 = clock_now_ns();
		if (rc != 0) {
			fprintf(stderr, "snapshot: %s\n", sw_strerror(rc));
			return 1;
		}
		rc = unwind_snapshot(s, NULL, NULL, NULL, &d);
		t2 = clock_now_ns();
		if (rc == 0)
			rc = sym_dump(sym, d, true);
		if (rc == 0)
			rc = group_dump(d);
		t3 = clock_now_ns();
		if (rc != 0) {
			fprintf(stderr, "unwind: %s\n", sw_strerror(rc));
			return 1;
		}
		if (npauses + s->nthreads > cap) {
			uint32_t *v;

			cap = 2 * (npauses + s->nthreads);
			v = realloc(pauses, cap * sizeof(*pauses));
			if (!v)
				return 1;
			pauses = v;
		}
		for (size_t i = 0; i < s->nthreads; i++) {
			const struct snap_thread *t = &s->threads[i];

			ok += t->status == SW_ST_OK;
			if (t->status != SW_ST_OK)
				continue;
			pauses[npauses++] = t->paused_ns;
			over += t->paused_ns > 2000000u;
			if (strcmp(t->name, named) == 0 &&
			    t->paused_ns > named_max)
				named_max = t->paused_ns;
		}
		printf("round %d snap_us %" PRIu64 " unwind_us %" PRIu64
		       " sym_us %" PRIu64 " total_us %" PRIu64
		       " paused_avg_us %.1f paused_max_us %" PRIu64
		       " threads %zu ok %zu realtime %d\n",
		       r, (t1 - t0) / 1000, (t2 - t1) / 1000, (t3 - t2) / 1000,
		       (t3 - t0) / 1000,
		       s->nthreads ? (double)s->paused_total_ns / 1000.0 /
					     (double)s->nthreads
				   : 0.0,
		       s->paused_max_ns / 1000, s->nthreads, ok,
		       (int)s->realtime);
		fflush(stdout);
		snap_free(s);
		sw_dump_free(d);
	}
	if (npauses)
		qsort(pauses, npauses, sizeof(*pauses), cmp_u32);
	printf("pauses %zu p50_us %" PRIu32 " p99_us %" PRIu32
	       " p999_us %" PRIu32 " max_us %" PRIu32 " over_2ms %zu"
	       " named_max_us %" PRIu32 "\n",
	       npauses, quantile_us(pauses, npauses, 0.5),
	       quantile_us(pauses, npauses, 0.99),
	       quantile_us(pauses, npauses, 0.999),
	       quantile_us(pauses, npauses, 1.0), over, named_max / 1000u);
	free(pauses);
	sym_free(sym);
	return 0;
}
