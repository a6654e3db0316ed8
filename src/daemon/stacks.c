/*
 * stacks.c - dump, symbolize, group and count (stacks.h).
 */
#include <errno.h>
#include <string.h>
#include <time.h>

#include "group.h"
#include "handler.h"
#include "log.h"
#include "modfile.h"
#include "stacks.h"

const double stacks_buckets[STACKS_NBUCKETS] = {
	0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5,
};

static int open_module(void *arg, const struct sw_module *m)
{
	struct stacks *s = arg;

	return modfile_open(s->sym_pid, m);
}

int stacks_init(struct stacks *s, struct registry *reg)
{
	memset(s, 0, sizeof(*s));
	s->reg = reg;
	pthread_mutex_init(&s->sym_lock, NULL);
	return sym_new(open_module, s, &s->sym);
}

void stacks_release(struct stacks *s)
{
	sym_free(s->sym);
	s->sym = NULL;
	pthread_mutex_destroy(&s->sym_lock);
}

static void count(struct stacks *s, int rc, const struct sw_dump *d,
		  uint64_t us)
{
	enum stacks_result res = rc == 0	    ? RESULT_OK
				 : rc == -ETIMEDOUT ? RESULT_TIMEOUT
						    : RESULT_ERROR;

	atomic_fetch_add(&s->m.dumps[res], 1);
	for (int b = 0; b < STACKS_NBUCKETS; b++)
		if ((double)us / 1e6 <= stacks_buckets[b])
			atomic_fetch_add(&s->m.duration_buckets[b], 1);
	atomic_fetch_add(&s->m.duration_count, 1);
	atomic_fetch_add(&s->m.duration_sum_us, us);
	if (!d)
		return;
	for (size_t i = 0; i < d->nthreads; i++) {
		enum sw_status st = d->threads[i].status;

		atomic_fetch_add(&s->m.threads[st], 1);
		/* Exactly the ok and timed-out threads were signalled. */
		if (st == SW_ST_OK || st == SW_ST_TIMEOUT)
			atomic_fetch_add(&s->m.signals_sent, 1);
	}
}

int stacks_dump(struct stacks *s, struct target *t, int timeout_ms,
		bool symbols, struct sw_dump **out)
{
	uint64_t start = handler_now_ns();
	struct sw_dump *d = NULL;
	int rc;

	*out = NULL;
	rc = target_dump_raw(t, timeout_ms, &d);
	count(s, rc, d, (handler_now_ns() - start) / 1000);
	if (rc < 0) {
		log_info("dump of pid %d failed: %s", (int)t->pid,
			 sw_strerror(rc));
		return rc;
	}
	/* The pid as the daemon sees it, whatever the agent said. */
	d->pid = t->pid;
	atomic_store(&t->last_threads, (uint32_t)d->nthreads);
	atomic_store(&t->last_sample_ms,
		     (uint64_t)d->collected_at.tv_sec * 1000 +
			     (uint64_t)d->collected_at.tv_nsec / 1000000);
	pthread_mutex_lock(&s->sym_lock);
	s->sym_pid = t->pid;
	rc = sym_dump(s->sym, d, symbols);
	pthread_mutex_unlock(&s->sym_lock);
	if (rc == 0)
		rc = group_dump(d);
	if (rc < 0) {
		sw_dump_free(d);
		return rc;
	}
	*out = d;
	return 0;
}

void stacks_sym_stats(struct stacks *s, uint64_t *hits, uint64_t *misses)
{
	pthread_mutex_lock(&s->sym_lock);
	*hits = sym_cache_hits(s->sym);
	*misses = sym_cache_misses(s->sym);
	pthread_mutex_unlock(&s->sym_lock);
}
