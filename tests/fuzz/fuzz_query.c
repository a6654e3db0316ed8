/*
 * fuzz_query.c - libFuzzer target for the parameters of the daemon's HTTP
 * requests (src/daemon/query.c), which come from any local client.
 *
 * The input is a query string as the HTTP library hands it over, decoded:
 * "key=value" pairs joined by '&' (the first of a repeated key counts, as
 * in the library's lookup), then optionally a newline and the Accept
 * header. Beyond not crashing, every request the parsers accept must lie
 * within the ranges INTERFACE.md documents, and every refusal must come
 * with a reason; anything else aborts.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/daemon/query.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Sets *slot to value unless the key came before. */
static void take(const char **slot, const char *value)
{
	if (!*slot)
		*slot = value;
}

static void split(char *buf, struct query_args *a)
{
	char *nl = strchr(buf, '\n'), *kv, *next;

	if (nl) {
		*nl = '\0';
		a->accept = nl + 1;
	}
	for (kv = buf; kv; kv = next) {
		char *eq = strchr(kv, '=');
		const char *value = "";

		next = strchr(kv, '&');
		if (next)
			*next++ = '\0';
		if (eq) {
			*eq = '\0';
			value = eq + 1;
		}
		if (strcmp(kv, "pid") == 0)
			take(&a->pid, value);
		else if (strcmp(kv, "format") == 0)
			take(&a->format, value);
		else if (strcmp(kv, "symbols") == 0)
			take(&a->symbols, value);
		else if (strcmp(kv, "timeout_ms") == 0)
			take(&a->timeout_ms, value);
		else if (strcmp(kv, "since") == 0)
			take(&a->since, value);
		else if (strcmp(kv, "seconds") == 0)
			take(&a->seconds, value);
		else if (strcmp(kv, "debug") == 0)
			take(&a->debug, value);
		else if (strcmp(kv, "until") == 0)
			take(&a->until, value);
		else if (strcmp(kv, "mode") == 0)
			take(&a->mode, value);
	}
}

static void check_reason(const char *why)
{
	if (!why[0])
		abort();
}

static void check_stacks(const struct query_args *a, enum query_format dflt)
{
	struct query_stacks q;
	const char *why = query_parse_stacks(a, dflt, 1000, &q);

	if (q.format > QUERY_FOLDED ||
	    (q.format == QUERY_HTML && dflt != QUERY_HTML))
		abort();
	if (why) {
		check_reason(why);
		return;
	}
	if (q.pid < 0 || (q.pid == 0 && a->pid) || q.timeout_ms < 1 ||
	    q.timeout_ms > QUERY_MAX_TIMEOUT_MS ||
	    (!a->timeout_ms && q.timeout_ms != 1000) ||
	    (!a->symbols && !q.symbols))
		abort();
}

static void check_diff(const struct query_args *a)
{
	struct query_diff q;
	const char *why = query_parse_diff(a, 1000, &q);

	if (why) {
		check_reason(why);
		return;
	}
	if (!a->pid || !a->since || q.pid <= 0 || !(q.since >= 0) ||
	    q.since > QUERY_MAX_SINCE_S || q.timeout_ms < 1 ||
	    q.timeout_ms > QUERY_MAX_TIMEOUT_MS)
		abort();
}

static void check_profile(const struct query_args *a)
{
	struct query_profile q;
	const char *why = query_parse_profile(a, &q);

	if (why) {
		check_reason(why);
		return;
	}
	if (!a->pid || q.pid <= 0 || !(q.since >= 0) ||
	    q.since > QUERY_MAX_SINCE_S || !(q.until >= 0) ||
	    !(q.until < q.since) || (!a->mode && q.cpu))
		abort();
}

static void check_pprof(const struct query_args *a)
{
	struct query_pprof q;
	const char *why = query_parse_pprof(a, 1000, &q);

	if (why) {
		check_reason(why);
		return;
	}
	if (q.pid < 0 || (q.pid == 0 && a->pid) || q.timeout_ms < 1 ||
	    q.timeout_ms > QUERY_MAX_TIMEOUT_MS || q.seconds < 1 ||
	    q.seconds > QUERY_MAX_SECONDS || (!a->seconds && q.seconds != 30) ||
	    (q.format != QUERY_PPROF && q.format != QUERY_TEXT) ||
	    (!a->debug && q.format != QUERY_PPROF))
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct query_args a;
	char *buf = malloc(size + 1);

	if (!buf)
		return 0;
	memcpy(buf, data, size);
	buf[size] = '\0';
	memset(&a, 0, sizeof(a));
	split(buf, &a);
	check_stacks(&a, QUERY_HTML);
	check_stacks(&a, QUERY_JSON);
	check_diff(&a);
	check_pprof(&a);
	check_profile(&a);
	free(buf);
	return 0;
}
