/*
 * metrics.c - /metrics in the Prometheus text format (metrics.h).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "model/buf.h"
#include "model/procfs.h"
#include "access.h"
#include "metrics.h"
#include "privsep/parsers.h"
#include "turns.h"
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

/* s as a label value: backslash, quote and newline escaped, as the text
 * format wants; other bytes that are not valid UTF-8 become '?'. */
static void label_value(struct buf *b, const char *s)
{
	for (; *s; s++) {
		if (*s == '\\' || *s == '"')
			buf_addf(b, "\\%c", *s);
		else if (*s == '\n')
			buf_adds(b, "\\n");
		else if ((unsigned char)*s < 0x20 || (unsigned char)*s >= 0x7f)
			buf_add(b, "?", 1);
		else
			buf_add(b, s, 1);
	}
}

/* The stuck threads of pid in doc ({"threads": [{"pid": ...}]}). */
static size_t stuck_of(const cJSON *doc, pid_t pid)
{
	const cJSON *th = cJSON_GetObjectItemCaseSensitive(doc, "threads");
	const cJSON *e;
	size_t n = 0;

	cJSON_ArrayForEach(e, th)
	{
		const cJSON *p = cJSON_GetObjectItemCaseSensitive(e, "pid");

		if (cJSON_IsNumber(p) && (pid_t)p->valuedouble == pid)
			n++;
	}
	return n;
}

/*
 * Per target a may see: its threads now (from /proc; the last dump's
 * count if /proc cannot tell) and its stuck threads, labelled pid and
 * comm. As many series as visible targets, which the registry bounds.
 */
static void per_target(struct buf *b, struct registry *reg,
		       const struct access *a, const cJSON *stuck)
{
	struct target **ts;
	size_t n;

	if (access_list(reg, a, &ts, &n) < 0)
		return;
	head(b, "stackwatch_target_threads", "gauge",
	     "Threads of each target the requester may see.");
	for (size_t i = 0; i < n; i++) {
		struct procfs_proc pp;
		long threads =
			procfs_read_proc(ts[i]->pid, &pp) == 0
				? pp.threads
				: (long)atomic_load(&ts[i]->last_threads);

		buf_addf(b, "stackwatch_target_threads{pid=\"%d\",comm=\"",
			 (int)ts[i]->pid);
		label_value(b, ts[i]->comm);
		buf_addf(b, "\"} %ld\n", threads);
	}
	head(b, "stackwatch_target_stuck_threads", "gauge",
	     "Threads of each target the watchdog flags now.");
	for (size_t i = 0; i < n; i++) {
		buf_addf(b,
			 "stackwatch_target_stuck_threads{pid=\"%d\",comm=\"",
			 (int)ts[i]->pid);
		label_value(b, ts[i]->comm);
		buf_addf(b, "\"} %zu\n", stuck_of(stuck, ts[i]->pid));
	}
	registry_put_all(ts, n);
}

int metrics_render(struct stacks *st, struct registry *reg,
		   struct scheduler *sched, struct turns *turns,
		   const struct access *a, char **out)
{
	static const char *const results[RESULT_COUNT] = {
		[RESULT_OK] = "ok",
		[RESULT_TIMEOUT] = "timeout",
		[RESULT_ERROR] = "error",
	};
	const struct stacks_metrics *m = &st->m;
	struct parsers_stats ps;
	uint64_t hits, misses;
	size_t stuck = 0;
	cJSON *doc = NULL, *mine = NULL;
	struct buf b;
	int rc;

	if (watch_stuck(st, reg, NULL, &doc, &stuck) < 0)
		doc = NULL;
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
	head(&b, "stackwatch_threads_read_total", "counter",
	     "Threads read whole, by how: kernel (blocked, no signal and no "
	     "stop), signal, perf, ptrace.");
	for (int r = SW_READ_SIGNAL; r < SW_READ_CORE; r++)
		buf_addf(&b,
			 "stackwatch_threads_read_total{method=\"%s\"} %llu\n",
			 dump_read_name((enum sw_read)r),
			 (unsigned long long)atomic_load(&m->reads[r]));
	counter(&b, "stackwatch_threads_reused_total",
		"Threads still blocked since the previous sample, whose "
		"previous unwind was kept (nothing copied).",
		atomic_load(&m->reused));
	counter(&b, "stackwatch_dumps_symbolized_from_memory_total",
		"Dumps whose every stack was named before, against the same "
		"modules: named again without a parser.",
		atomic_load(&m->memo_dumps));
	counter(&b, "stackwatch_kernel_reads_total",
		"Processes read from the kernel (BPF task iterator runs).",
		ptracer_kernel_reads());
	counter(&b, "stackwatch_signals_sent_total",
		"Dump signals sent to threads (each inside its own process).",
		atomic_load(&m->signals_sent));
	counter(&b, "stackwatch_ptrace_snapshots_total",
		"Dumps of processes without the agent by ptrace snapshot.",
		atomic_load(&m->snapshots));
	gauge(&b, "stackwatch_ptraced_processes",
	      "Processes without the agent kept for ptrace snapshots.",
	      registry_count_ptraced_all(reg));
	gauge(&b, "stackwatch_ptrace_waiting",
	      "Snapshot requests waiting for their turn at the helper.",
	      ptracer_waiting());
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
	gauge(&b, "stackwatch_profiles_in_progress",
	      "Profile runs (/debug/pprof/profile) in progress.",
	      sched_profiles(sched));
	if (turns) {
		uint64_t waiting, waited;

		turns_stats(turns, &waiting, &waited);
		gauge(&b, "stackwatch_http_requests_waiting_turn",
		      "Requests held until another of their requester's "
		      "finishes: each has a few at work at most.",
		      waiting);
		counter(&b, "stackwatch_http_turn_waits_total",
			"Requests that waited for their requester's turn.",
			waited);
	}
	gauge(&b, "stackwatch_stuck_threads", "Threads the watchdog flags now.",
	      stuck);
	gauge(&b, "stackwatch_deadlocks",
	      "Cycles of threads waiting for each other's locks, now.",
	      doc ? (size_t)cJSON_GetArraySize(
			    cJSON_GetObjectItem(doc, "deadlocks"))
		  : 0);
	counter(&b, "stackwatch_symbol_cache_hits_total",
		"Addresses symbolized from the cache.", hits);
	counter(&b, "stackwatch_symbol_cache_misses_total",
		"Addresses looked up in the debug information.", misses);
	parsers_stats(&ps);
	gauge(&b, "stackwatch_parsers",
	      "Parser workers running (they unwind and symbolize).",
	      ps.running);
	counter(&b, "stackwatch_parsers_started_total",
		"Parser workers started.", ps.started);
	head(&b, "stackwatch_parser_failures_total", "counter",
	     "Parser workers ended in a request, by why: crashed, overran "
	     "its time, broke off.");
	buf_addf(&b,
		 "stackwatch_parser_failures_total{reason=\"crashed\"} %llu\n"
		 "stackwatch_parser_failures_total{reason=\"overran\"} %llu\n"
		 "stackwatch_parser_failures_total{reason=\"broke\"} %llu\n",
		 (unsigned long long)ps.crashed, (unsigned long long)ps.overran,
		 (unsigned long long)ps.killed);
	counter(&b, "stackwatch_parsers_recycled_total",
		"Parser workers replaced for the memory they held.",
		ps.recycled);
	gauge(&b, "stackwatch_parser_refused_files",
	      "Files refused to the parsers for a while: one killed a "
	      "parser.",
	      ps.quarantined);
	counter(&b, "stackwatch_parser_refusals_total",
		"Times such a file was refused.", ps.refused);
	/* The per-target series: only the requester's visible targets. */
	if (doc && a && watch_stuck(st, reg, a, &mine, NULL) == 0) {
		per_target(&b, reg, a, mine);
		cJSON_Delete(mine);
	}
	cJSON_Delete(doc);
	rc = buf_detach(&b, out);
	if (rc < 0)
		buf_release(&b);
	return rc;
}
