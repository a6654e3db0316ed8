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
 *	paused_max_us M threads N ok K
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "model/clock.h"
#include "model/dump.h"
#include "render/group.h"
#include "snapshot/snapshot.h"
#include "stackwatch.h"
#include "symbols/symbolize.h"
#include "symbols/unwind.h"

int main(int argc, char **argv)
{
	struct sym *sym = NULL;
	int rounds;
	pid_t pid;

	if (argc != 3) {
		fprintf(stderr, "usage: bench_snapshot PID ROUNDS\n");
		return 2;
	}
	pid = (pid_t)atoi(argv[1]);
	rounds = atoi(argv[2]);
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
		rc = unwind_snapshot(s, NULL, NULL, &d);
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
		for (size_t i = 0; i < s->nthreads; i++)
			ok += s->threads[i].status == SW_ST_OK;
		printf("round %d snap_us %" PRIu64 " unwind_us %" PRIu64
		       " sym_us %" PRIu64 " total_us %" PRIu64
		       " paused_avg_us %.1f paused_max_us %" PRIu64
		       " threads %zu ok %zu\n",
		       r, (t1 - t0) / 1000, (t2 - t1) / 1000, (t3 - t2) / 1000,
		       (t3 - t0) / 1000,
		       s->nthreads ? (double)s->paused_total_ns / 1000.0 /
					     (double)s->nthreads
				   : 0.0,
		       s->paused_max_ns / 1000, s->nthreads, ok);
		fflush(stdout);
		snap_free(s);
		sw_dump_free(d);
	}
	sym_free(sym);
	return 0;
}
