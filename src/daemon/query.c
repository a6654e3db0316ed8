/*
 * query.c - request parameters, validated (query.h).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "query.h"

#include "model/limits.h"

/* Parses a positive decimal of at most 9 digits; -1 when invalid. */
static long parse_num(const char *s)
{
	long v = 0;
	int n = 0;

	if (!s || !*s)
		return -1;
	for (; *s; s++) {
		if (*s < '0' || *s > '9' || ++n > 9)
			return -1;
		v = v * 10 + (*s - '0');
	}
	return v;
}

/* Parses "since": seconds, a number from 0 up to a day. */
static bool parse_since(const char *s, double *out)
{
	char *end;
	double v;

	if (!s || !*s || strlen(s) > 16)
		return false;
	errno = 0;
	v = strtod(s, &end);
	if (errno || *end || !(v >= 0 && v <= QUERY_MAX_SINCE_S))
		return false;
	*out = v;
	return true;
}

/* Reads timeout_ms into *out when present. false when invalid. */
static bool parse_timeout(const char *s, int *out)
{
	long v;

	if (!s)
		return true;
	v = parse_num(s);
	if (v < 1 || v > QUERY_MAX_TIMEOUT_MS)
		return false;
	*out = (int)v;
	return true;
}

const char *query_parse_stacks(const struct query_args *a,
			       enum query_format dflt, int default_timeout_ms,
			       struct query_stacks *q)
{
	const char *fmt = a->format;
	long v;

	q->pid = 0;
	q->format = dflt;
	q->symbols = true;
	q->timeout_ms = default_timeout_ms;
	if (dflt == QUERY_HTML && a->accept &&
	    strstr(a->accept, "application/json") &&
	    !strstr(a->accept, "text/html"))
		q->format = QUERY_JSON;
	if (fmt) {
		if (strcmp(fmt, "json") == 0)
			q->format = QUERY_JSON;
		else if (strcmp(fmt, "text") == 0)
			q->format = QUERY_TEXT;
		else if (strcmp(fmt, "folded") == 0)
			q->format = QUERY_FOLDED;
		else if (strcmp(fmt, "html") == 0 && dflt == QUERY_HTML)
			q->format = QUERY_HTML;
		else
			return "format must be json, text or folded";
	}
	if (a->pid) {
		v = parse_num(a->pid);
		if (v <= 0)
			return "pid must be a positive integer";
		q->pid = (pid_t)v;
	}
	if (a->symbols) {
		if (strcmp(a->symbols, "0") == 0)
			q->symbols = false;
		else if (strcmp(a->symbols, "1") != 0)
			return "symbols must be 0 or 1";
	}
	if (!parse_timeout(a->timeout_ms, &q->timeout_ms))
		return "timeout_ms must be an integer from 1 to 10000";
	q->max_frames = -1;
	if (a->max_frames) {
		v = parse_num(a->max_frames);
		if (v < 0 || v > SW_MAX_FRAMES_HARD)
			return "max_frames must be an integer from 0 (all "
			       "frames, up to 4096) to 4096";
		q->max_frames = (int)v;
	}
	return NULL;
}

const char *query_parse_diff(const struct query_args *a, int default_timeout_ms,
			     struct query_diff *q)
{
	long v = parse_num(a->pid);

	q->timeout_ms = default_timeout_ms;
	if (v <= 0)
		return "pid must be a positive integer";
	q->pid = (pid_t)v;
	if (!parse_since(a->since, &q->since))
		return "since must be a number of seconds from 0 to 86400";
	if (!parse_timeout(a->timeout_ms, &q->timeout_ms))
		return "timeout_ms must be an integer from 1 to 10000";
	return NULL;
}

const char *query_parse_pprof(const struct query_args *a,
			      int default_timeout_ms, struct query_pprof *q)
{
	long v;

	q->pid = 0;
	q->format = QUERY_PPROF;
	q->timeout_ms = default_timeout_ms;
	q->seconds = 30;
	if (a->debug) {
		v = parse_num(a->debug);
		if (v < 0 || v > 2)
			return "debug must be 0, 1 or 2";
		if (v > 0)
			q->format = QUERY_TEXT;
	}
	if (a->pid) {
		v = parse_num(a->pid);
		if (v <= 0)
			return "pid must be a positive integer";
		q->pid = (pid_t)v;
	}
	if (a->seconds) {
		v = parse_num(a->seconds);
		if (v < 1 || v > QUERY_MAX_SECONDS)
			return "seconds must be an integer from 1 to 300";
		q->seconds = (int)v;
	}
	if (!parse_timeout(a->timeout_ms, &q->timeout_ms))
		return "timeout_ms must be an integer from 1 to 10000";
	return NULL;
}

const char *query_parse_profile(const struct query_args *a,
				struct query_profile *q)
{
	long v = parse_num(a->pid);

	q->since = QUERY_MAX_SINCE_S;
	q->until = 0;
	q->cpu = false;
	if (v <= 0)
		return "pid must be a positive integer";
	q->pid = (pid_t)v;
	if (a->since && !parse_since(a->since, &q->since))
		return "since must be a number of seconds from 0 to 86400";
	if (a->until && !parse_since(a->until, &q->until))
		return "until must be a number of seconds from 0 to 86400";
	if (!(q->until < q->since))
		return "until must be less than since";
	if (a->mode) {
		if (strcmp(a->mode, "cpu") == 0)
			q->cpu = true;
		else if (strcmp(a->mode, "wall") != 0)
			return "mode must be wall or cpu";
	}
	return NULL;
}
