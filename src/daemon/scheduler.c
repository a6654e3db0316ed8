/*
 * scheduler.c - one scheduler thread, a fixed pool of workers and a queue
 * that cannot grow past the number of targets (scheduler.h).
 */
#define _GNU_SOURCE /* POLLRDHUP */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "model/clock.h"
#include "cond.h"
#include "collector/signal/handler.h"
#include "log.h"
#include "notify.h"
#include "profile.h"
#include "scheduler.h"

#define MIN_PASS_NS 1000000ull	  /* each pass waits at least 1 ms */
#define MAX_PASS_NS 1000000000ull /* and at most 1 s: new targets */
#define WATCH_NS ((uint64_t)SCHED_WATCH_MS * 1000000ull)

struct scheduler {
	struct registry *reg;
	struct stacks *st;
	uint64_t interval_ns;	     /* agents; 0: none sampled */
	uint64_t ptrace_interval_ns; /* processes without: 0, none */
	uint64_t profile_ns;	     /* targets of profile runs: 0, none */
	int timeout_ms;

	pthread_mutex_t lock;  /* queue, stop */
	pthread_cond_t work;   /* a job was queued, or stop */
	pthread_cond_t tick;   /* wakes the scheduler early: stop */
	struct target **queue; /* ring of jobs, each holding a reference */
	size_t cap;
	size_t head;
	size_t len;
	size_t max_len;
	bool stop;
	struct profile_run *runs; /* in progress */
	size_t nruns;
	int per_user;		/* runs of one requester at a time */
	uint64_t next_watch_ns; /* when the runs' clients are looked at */

	pthread_t sched_thread;
	pthread_t workers[SCHED_WORKERS];
	int nworkers;
	bool sched_started;
};

static void abs_time(uint64_t ns, struct timespec *ts)
{
	ts->tv_sec = (time_t)(ns / 1000000000ull);
	ts->tv_nsec = (long)(ns % 1000000000ull);
}

/*
 * Queues t unless it has a job queued already (the flag). The ring has
 * room for every registered target, and each target has at most one job
 * in it, so it can never overflow; should it be full anyway, t waits for
 * the next pass. Called with s->lock held.
 */
static void enqueue(struct scheduler *s, struct target *t)
{
	if (atomic_exchange(&t->queued, true))
		return;
	if (s->len == s->cap) {
		atomic_store(&t->queued, false);
		return;
	}
	target_get(t);
	s->queue[(s->head + s->len) % s->cap] = t;
	s->len++;
	if (s->len > s->max_len)
		s->max_len = s->len;
	pthread_cond_signal(&s->work);
}

/*
 * How often t is sampled: agents and ptrace snapshots apart, and at the
 * profile rate while a run wants it. 0: not sampled.
 */
static uint64_t interval_of(const struct scheduler *s, const struct target *t)
{
	uint64_t ns = t->ptrace ? s->ptrace_interval_ns : s->interval_ns;

	if (atomic_load(&t->profiled) && s->profile_ns &&
	    (!ns || s->profile_ns < ns))
		ns = s->profile_ns;
	return ns;
}

/*
 * The turn after one due at due, taken at now: one interval after the turn
 * it was due, not after the moment a worker got to it, so the time a job
 * waits in the queue does not add up into a slower rate. A target behind by
 * a whole interval or more (a slow dump, a stopped process) skips the turns
 * it missed rather than taking them in a burst.
 */
static uint64_t next_due(uint64_t due, uint64_t now, uint64_t interval)
{
	uint64_t next = due + interval;

	return next > now ? next : now + interval;
}

/* Queues every due target of ts. Returns the earliest next due. */
static uint64_t pass_list(struct scheduler *s, uint64_t now, struct target **ts,
			  size_t n, uint64_t earliest)
{
	pthread_mutex_lock(&s->lock);
	for (size_t i = 0; i < n; i++) {
		struct target *t = ts[i];
		uint64_t due = atomic_load(&t->next_due_ns);

		if (atomic_load(&t->queued) || !interval_of(s, t))
			continue; /* its worker advances the ticker */
		if (due <= now) {
			enqueue(s, t); /* every due one, not just the first */
			due = now + interval_of(s, t); /* about when next */
		}
		if (due < earliest)
			earliest = due;
	}
	pthread_mutex_unlock(&s->lock);
	registry_put_all(ts, n);
	return earliest;
}

/*
 * Whether the client on fd hung up: end of stream (a close or a
 * shutdown of its sending side), or a reset. Does not block; fd is a
 * suspended connection's, which no one reads meanwhile.
 */
static bool client_gone(int fd)
{
	struct pollfd p = { .fd = fd, .events = POLLRDHUP };

	if (fd < 0 || poll(&p, 1, 0) != 1)
		return false;
	return p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL);
}

/*
 * Finishes the runs that ended by now (all of them when all), and those
 * whose client hung up (looked at every WATCH_NS): they leave the list
 * under the lock, so no worker feeds them any more, and are finished
 * outside it. A run's fd is looked at only while the run is in the list:
 * its connection stays suspended, and so open, until the run is
 * finished. Returns the earliest end of those left, or the next look at
 * their clients when sooner.
 */
static uint64_t end_runs(struct scheduler *s, uint64_t now, bool all)
{
	struct profile_run *done = NULL, **pp, *r;
	uint64_t earliest = UINT64_MAX;
	bool watch;

	pthread_mutex_lock(&s->lock);
	watch = !all && now >= s->next_watch_ns;
	if (watch)
		s->next_watch_ns = now + WATCH_NS;
	for (pp = &s->runs; (r = *pp);) {
		bool gone = watch && client_gone(r->fd);

		if (!all && !gone && r->end_ns > now) {
			if (r->end_ns < earliest)
				earliest = r->end_ns;
			pp = &r->next;
			continue;
		}
		r->abandoned = gone;
		*pp = r->next;
		s->nruns--;
		for (size_t i = 0; i < r->n; i++)
			atomic_fetch_sub(&r->ts[i]->profiled, 1);
		r->next = done;
		done = r;
	}
	if (s->runs && s->next_watch_ns < earliest)
		earliest = s->next_watch_ns;
	pthread_mutex_unlock(&s->lock);
	while ((r = done)) {
		done = r->next;
		r->next = NULL;
		if (r->abandoned)
			log_debug("a profile run of %s ends: its client hung "
				  "up",
				  r->owner);
		profile_finish(r); /* r may be freed from here on */
	}
	return earliest;
}

/* One pass: queues every due target. Returns the earliest next due. */
static uint64_t pass(struct scheduler *s, uint64_t now)
{
	uint64_t earliest = now + MAX_PASS_NS, end;
	bool profiling;
	struct target **ts;
	size_t n;

	end = end_runs(s, now, false);
	if (end < earliest)
		earliest = end;
	pthread_mutex_lock(&s->lock);
	profiling = s->nruns > 0;
	pthread_mutex_unlock(&s->lock);
	if (s->interval_ns || profiling) {
		if (registry_list(s->reg, &ts, &n) < 0)
			return now + MIN_PASS_NS;
		earliest = pass_list(s, now, ts, n, earliest);
	}
	/* Processes without the agent, opted in (--sample-ptrace). */
	if ((s->ptrace_interval_ns || profiling) &&
	    registry_list_ptraced(s->reg, &ts, &n) == 0)
		earliest = pass_list(s, now, ts, n, earliest);
	return earliest;
}

/* Hands a fresh dump of t to every run that wants t. */
static void feed_runs(struct scheduler *s, const struct target *t,
		      struct sdump *sd)
{
	if (!atomic_load(&t->profiled))
		return;
	pthread_mutex_lock(&s->lock);
	for (struct profile_run *r = s->runs; r; r = r->next)
		profile_feed(r, t, sd);
	pthread_mutex_unlock(&s->lock);
}

/*
 * Whether who may start one more run: 0, or sched_profile()'s refusal.
 * Its own share first: that is what it can do something about. Called
 * with s->lock held.
 */
static int admit(const struct scheduler *s, const struct sched_requester *who)
{
	int mine = 0;

	if (!who->all) {
		for (const struct profile_run *r = s->runs; r; r = r->next)
			mine += !r->all && strcmp(r->owner, who->key) == 0;
		if (mine >= s->per_user)
			return -EDQUOT;
	}
	if (s->nruns >= SCHED_MAX_PROFILES)
		return -EAGAIN;
	if (!who->all && s->nruns >= SCHED_MAX_PROFILES - SCHED_PROFILE_RESERVE)
		return -ENOSPC;
	return 0;
}

void sched_set_profiles_per_user(struct scheduler *s, int n)
{
	if (!s)
		return;
	pthread_mutex_lock(&s->lock);
	s->per_user = n > 0 ? n : 1;
	pthread_mutex_unlock(&s->lock);
}

int sched_profiles_per_user(struct scheduler *s)
{
	int n;

	if (!s)
		return 0;
	pthread_mutex_lock(&s->lock);
	n = s->per_user;
	pthread_mutex_unlock(&s->lock);
	return n;
}

size_t sched_profiles(struct scheduler *s)
{
	size_t n;

	if (!s)
		return 0;
	pthread_mutex_lock(&s->lock);
	n = s->nruns;
	pthread_mutex_unlock(&s->lock);
	return n;
}

int sched_profile(struct scheduler *s, struct target **ts, size_t n,
		  int seconds, const struct sched_requester *who,
		  void (*done)(void *arg), void *arg, struct profile_run **out)
{
	struct profile_run *r;
	uint64_t now = clock_now_ns();
	int rc;

	*out = NULL;
	if (!s || !s->profile_ns)
		return -ENOTSUP;
	r = profile_new(ts, n, seconds, s->profile_ns);
	if (!r)
		return -ENOMEM;
	r->done = done;
	r->arg = arg;
	snprintf(r->owner, sizeof(r->owner), "%s", who->key);
	r->all = who->all;
	if (who->acc)
		r->acc = *who->acc;
	else
		r->acc.all = who->all;
	r->fd = who->fd;
	pthread_mutex_lock(&s->lock);
	rc = admit(s, who);
	if (rc < 0) {
		pthread_mutex_unlock(&s->lock);
		r->ts = NULL; /* still the caller's */
		r->n = 0;
		profile_free(r);
		return rc;
	}
	for (size_t i = 0; i < n; i++) {
		atomic_fetch_add(&ts[i]->profiled, 1);
		/* Sampled from now on, not at its next periodic turn. */
		if (!atomic_load(&ts[i]->queued))
			atomic_store(&ts[i]->next_due_ns, now);
	}
	r->next = s->runs;
	s->runs = r;
	s->nruns++;
	pthread_cond_broadcast(&s->tick);
	pthread_mutex_unlock(&s->lock);
	*out = r;
	return 0;
}

void sched_profile_end_all(struct scheduler *s)
{
	if (s)
		end_runs(s, clock_now_ns(), true);
}

static void *sched_main(void *arg)
{
	struct scheduler *s = arg;

	for (;;) {
		uint64_t now = clock_now_ns();
		uint64_t next = pass(s, now);
		struct timespec ts;

		/* A sampler feeds the watchdog; with only profiles to take,
		 * the notifier's own thread does (notify.c). */
		if (s->interval_ns || s->ptrace_interval_ns)
			notify_watchdog();
		/* At least 1 ms: never spin when everything is queued. */
		if (next < now + MIN_PASS_NS)
			next = now + MIN_PASS_NS;
		abs_time(next, &ts);
		pthread_mutex_lock(&s->lock);
		/* Woken early (a new run): a pass at once. */
		if (!s->stop)
			pthread_cond_timedwait(&s->tick, &s->lock, &ts);
		if (s->stop) {
			pthread_mutex_unlock(&s->lock);
			return NULL;
		}
		pthread_mutex_unlock(&s->lock);
	}
}

static void *worker_main(void *arg)
{
	struct scheduler *s = arg;

	for (;;) {
		struct sdump *sd = NULL;
		struct target *t;
		int rc;

		pthread_mutex_lock(&s->lock);
		while (!s->stop && s->len == 0)
			pthread_cond_wait(&s->work, &s->lock);
		if (s->stop) {
			pthread_mutex_unlock(&s->lock);
			return NULL;
		}
		t = s->queue[s->head];
		s->head = (s->head + 1) % s->cap;
		s->len--;
		pthread_mutex_unlock(&s->lock);
		/* Clear the flag and advance the ticker before sampling. */
		atomic_store(&t->next_due_ns,
			     next_due(atomic_load(&t->next_due_ns),
				      clock_now_ns(), interval_of(s, t)));
		atomic_store(&t->queued, false);
		/* The process's own user's turn for a snapshot. */
		rc = stacks_get_flags(
			s->st, t, &(struct asker){ .uid = t->uid },
			s->timeout_ms, STACKS_NOWAIT | STACKS_SAMPLE, &sd);
		if (rc == 0)
			feed_runs(s, t, sd);
		if (rc < 0 && rc != -EBUSY)
			log_debug("sample of pid %d: %s", (int)t->pid,
				  sw_strerror(rc));
		sdump_put(sd);
		target_put(t);
	}
}

int sched_start(struct registry *reg, struct stacks *st, int interval_ms,
		int ptrace_interval_ms, int profile_hz, int timeout_ms,
		struct scheduler **out)
{
	struct scheduler *s;
	int rc;

	*out = NULL;
	if (interval_ms <= 0 && ptrace_interval_ms <= 0 && profile_hz <= 0)
		return 0;
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->reg = reg;
	s->st = st;
	s->interval_ns =
		interval_ms > 0 ? (uint64_t)interval_ms * 1000000ull : 0;
	s->ptrace_interval_ns =
		ptrace_interval_ms > 0
			? (uint64_t)ptrace_interval_ms * 1000000ull
			: 0;
	s->profile_ns =
		profile_hz > 0 ? 1000000000ull / (uint64_t)profile_hz : 0;
	s->timeout_ms = timeout_ms;
	s->per_user = SCHED_PROFILES_PER_USER;
	/* One slot per possible target: the flag keeps it to one each. */
	s->cap = REGISTRY_MAX_TARGETS + REGISTRY_MAX_PTRACED;
	/* an array of pointers */
	s->queue =
		calloc(s->cap,
		       sizeof(*s->queue)); // NOLINT(bugprone-sizeof-expression)
	if (!s->queue) {
		free(s);
		return -ENOMEM;
	}
	pthread_mutex_init(&s->lock, NULL);
	pthread_cond_init(&s->work, NULL);
	cond_init_monotonic(&s->tick);
	for (int i = 0; i < SCHED_WORKERS; i++) {
		rc = -pthread_create(&s->workers[i], NULL, worker_main, s);
		if (rc < 0)
			goto fail;
		s->nworkers++;
	}
	rc = -pthread_create(&s->sched_thread, NULL, sched_main, s);
	if (rc < 0)
		goto fail;
	s->sched_started = true;
	*out = s;
	return 0;
fail:
	sched_stop(s);
	return rc;
}

void sched_stop(struct scheduler *s)
{
	if (!s)
		return;
	end_runs(s, clock_now_ns(), true);
	pthread_mutex_lock(&s->lock);
	s->stop = true;
	pthread_cond_broadcast(&s->work);
	pthread_cond_broadcast(&s->tick);
	pthread_mutex_unlock(&s->lock);
	if (s->sched_started)
		pthread_join(s->sched_thread, NULL);
	for (int i = 0; i < s->nworkers; i++)
		pthread_join(s->workers[i], NULL);
	for (; s->len > 0; s->len--) {
		struct target *t = s->queue[s->head];

		atomic_store(&t->queued, false);
		target_put(t);
		s->head = (s->head + 1) % s->cap;
	}
	pthread_mutex_destroy(&s->lock);
	pthread_cond_destroy(&s->work);
	pthread_cond_destroy(&s->tick);
	free(s->queue);
	free(s);
}

size_t sched_queue_depth(struct scheduler *s)
{
	size_t n;

	if (!s)
		return 0;
	pthread_mutex_lock(&s->lock);
	n = s->len;
	pthread_mutex_unlock(&s->lock);
	return n;
}

size_t sched_queue_max(struct scheduler *s)
{
	size_t n;

	if (!s)
		return 0;
	pthread_mutex_lock(&s->lock);
	n = s->max_len;
	pthread_mutex_unlock(&s->lock);
	return n;
}
