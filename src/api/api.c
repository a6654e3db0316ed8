/*
 * api.c - the public entry points of libstackwatch (stackwatch.h) that tie
 * the collector, the symbolizer and the grouper together.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <string.h>

#include "collector/collect.h"
#include "render/group.h"
#include "collector/signal/handler.h"
#include "symbols/symbolize.h"

/* The in-process symbolizer, kept warm across dumps. */
static pthread_mutex_t sym_lock = PTHREAD_MUTEX_INITIALIZER;
static struct sym *self_sym;

void sw_dump_opts_init(struct sw_dump_opts *opts)
{
	memset(opts, 0, sizeof(*opts));
	opts->size = sizeof(*opts);
	opts->timeout_ms = SW_DEFAULT_TIMEOUT_MS;
	opts->symbolize = 1;
	opts->window = SW_DEFAULT_WINDOW;
}

/* Copies the fields the caller's struct has, defaults for the rest. */
static int read_opts(const struct sw_dump_opts *in, struct sw_dump_opts *o)
{
	sw_dump_opts_init(o);
	if (!in)
		return 0;
	if (in->size <
		    offsetof(struct sw_dump_opts, timeout_ms) + sizeof(int) ||
	    in->size > 4096)
		return -EINVAL;
	memcpy(o, in, in->size < sizeof(*o) ? in->size : sizeof(*o));
	o->size = sizeof(*o);
	if (o->timeout_ms < 1 || o->timeout_ms > 600000)
		return -EINVAL;
	if (o->window < 1 || o->window > HANDLER_SLOTS)
		return -EINVAL;
	return 0;
}

/*
 * A child of fork() may inherit the symbolizer mid-update from another
 * thread: it starts a fresh one (the parent's copy is left alone).
 */
static void atfork_child(void)
{
	pthread_mutex_init(&sym_lock, NULL);
	self_sym = NULL;
}

static void register_atfork(void)
{
	pthread_atfork(NULL, NULL, atfork_child);
}

static int symbolize_and_group(struct sw_dump *d, bool symbols)
{
	static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;
	int rc;

	pthread_once(&atfork_once, register_atfork);
	pthread_mutex_lock(&sym_lock);
	rc = self_sym ? 0 : sym_new(NULL, NULL, &self_sym);
	if (rc == 0)
		rc = sym_dump(self_sym, d, symbols);
	pthread_mutex_unlock(&sym_lock);
	if (rc < 0)
		return rc;
	return group_dump(d);
}

__attribute__((noinline)) int sw_dump_self(const struct sw_dump_opts *opts,
					   struct sw_dump **out)
{
	uint64_t self_ips[SW_MAX_FRAMES];
	struct collect_opts co = { 0 };
	struct sw_dump_opts o;
	struct sw_dump *d = NULL;
	size_t self_n;
	int rc;

	if (!out)
		return -EINVAL;
	*out = NULL;
	if (handler_on_stack())
		return SW_EINHANDLER;
	rc = read_opts(opts, &o);
	if (rc < 0)
		return rc;
	/* Our caller's frames only: skip sw_dump_self itself. */
	self_n = handler_unwind_self(self_ips, SW_MAX_FRAMES, 1);
	co.timeout_ms = o.timeout_ms;
	co.window = o.window;
	rc = collect_self(&co, self_ips, self_n, &d);
	if (rc < 0)
		return rc;
	rc = symbolize_and_group(d, o.symbolize != 0);
	if (rc < 0) {
		sw_dump_free(d);
		return rc;
	}
	*out = d;
	return 0;
}

int sw_signal(void)
{
	return collect_signal();
}
