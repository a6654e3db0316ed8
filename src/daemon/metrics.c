/*
 * metrics.c - /metrics in the Prometheus text format (metrics.h).
 */
#include <errno.h>
#include <stdlib.h>

#include "model/buf.h"
#include "metrics.h"
#include "watch.h"

static void head(struct buf *b, const char *name, const char *type,
		 const char *help)
{
	buf_addf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void histogram(struct buf *b, const struct stacks_metrics *m)
{
	const char *name = "stackwatch_dump_duration_seconds";

	head(b, name, "histogram", "Time to take one dump, symbols included.");
	for (int i = 0; i < STACKS_NBUCKETS; i++)
		buf_addf(b, "%s_bucket{le=\"%g\"} %llu\n", name,
			 stacks_buckets[i],
			 (unsigned long long)atomic_load(
				 &m->duration_buckets[i]));
	buf_addf(b, "%s_bucket{le=\"+Inf\"} %llu\n", name,
		 (unsigned long long)atomic_load(&m->duration_count));
	buf_addf(b, "%s_sum %.6f\n", name,
		 (double)atomic_load(&m->duration_sum_us) / 1e6);
	buf_addf(b, "%s_count %llu\n", name,
		 (unsigned long long)atomic_load(&m->duration_count));
}

static void counter(struct buf *b, const char *name, const char *help,
		    uint64_t v)
{
	head(b, name, "counter", help);
	buf_addf(b, "%s %llu\n", name, (unsigned long long)v);
}

static void gauge(struct buf *b, const char *name, const char *help, uint64_t v)
{
	head(b, name, "gauge", help);
	buf_addf(b, "%s %llu\n", name, (unsigned long long)v);
}

int metrics_render(struct stacks *st, struct registry *reg,
		   struct scheduler *sched, char **out)
{
	static const char *const results[RESULT_COUNT] = {
		[RESULT_OK] = "ok",
		[RESULT_TIMEOUT] = "timeout",
		[RESULT_ERROR] = "error",
	};
	const struct stacks_metrics *m = &st->m;
	uint64_t hits, misses;
	size_t stuck = 0;
	cJSON *doc = NULL;
	struct buf b;
	int rc;

	if (watch_stuck(st, reg, NULL, &doc, &stuck) == 0)
		cJSON_Delete(doc);
	stacks_sym_stats(st, &hits, &misses);
	buf_init(&b, 1 << 20);
	gauge(&b, "stackwatch_targets",
	      "Processes registered, the daemon itself included.",
	      registry_count(reg));
	head(&b, "stackwatch_dumps_total", "counter",
	     "Dumps asked of targets, by result.");
	for (int r = 0; r < RESULT_COUNT; r++)
		buf_addf(&b, "stackwatch_dumps_total{result=\"%s\"} %llu\n",
			 results[r],
			 (unsigned long long)atomic_load(&m->dumps[r]));
	histogram(&b, m);
	head(&b, "stackwatch_threads_dumped_total", "counter",
	     "Threads in dumps, by status.");
	for (int s = 0; s < SW_ST_COUNT; s++)
		buf_addf(
			&b,
			"stackwatch_threads_dumped_total{status=\"%s\"} %llu\n",
			dump_status_name((enum sw_status)s),
			(unsigned long long)atomic_load(&m->threads[s]));
	counter(&b, "stackwatch_signals_sent_total",
		"Dump signals sent to threads (each inside its own process).",
		atomic_load(&m->signals_sent));
	counter(&b, "stackwatch_ptrace_snapshots_total",
		"Dumps of processes without the agent by ptrace snapshot.",
		atomic_load(&m->snapshots));
	counter(&b, "stackwatch_requests_coalesced_total",
		"Requests that waited for a dump already in flight.",
		atomic_load(&m->coalesced));
	counter(&b, "stackwatch_requests_cached_total",
		"Requests answered with a dump younger than 1/max-dump-rate.",
		atomic_load(&m->cached));
	gauge(&b, "stackwatch_scheduler_queue_depth",
	      "Sampling jobs queued; never more than the targets.",
	      sched_queue_depth(sched));
	gauge(&b, "stackwatch_scheduler_queue_depth_max",
	      "The deepest the sampling queue has been.",
	      sched_queue_max(sched));
	gauge(&b, "stackwatch_stuck_threads", "Threads the watchdog flags now.",
	      stuck);
	counter(&b, "stackwatch_symbol_cache_hits_total",
		"Addresses symbolized from the cache.", hits);
	counter(&b, "stackwatch_symbol_cache_misses_total",
		"Addresses looked up in the debug information.", misses);
	rc = buf_detach(&b, out);
	if (rc < 0)
		buf_release(&b);
	return rc;
}
