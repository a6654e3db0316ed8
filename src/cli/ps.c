/*
 * ps.c - "stackwatch ps [--sort KEY] [--format text|json]": every process
 * the user may see, with the agent or without (GET /api/v1/processes), as
 * a table: PID USER NAME THREADS CPU% STATES STUCK DEADLOCK METHOD. A
 * field the daemon does not send (an older daemon) is shown as "-".
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "cli.h"
#include "commands.h"
#include "http.h"

#define STATES_MAX 48 /* "3 S, 1 R, ..." of one process */

struct prow {
	long long pid, threads, stuck;	  /* -1 when absent */
	double cpu;			  /* -1 when absent */
	const char *user, *comm, *method; /* into the parsed JSON, or NULL */
	int deadlock;			  /* 1, 0, or -1 when absent */
	char states[STATES_MAX];
};

enum sort_key {
	SORT_PID,
	SORT_CPU,
	SORT_THREADS,
	SORT_STUCK,
	SORT_USER,
	SORT_NAME
};

static const char *const sort_names[] = {
	[SORT_PID] = "pid",	    [SORT_CPU] = "cpu",
	[SORT_THREADS] = "threads", [SORT_STUCK] = "stuck",
	[SORT_USER] = "user",	    [SORT_NAME] = "name",
};

static enum sort_key sort_by;

static int cmp_num(double a, double b)
{
	return (a > b) - (a < b);
}

static int cmp_str(const char *a, const char *b)
{
	return strcmp(a ? a : "", b ? b : "");
}

/* The order of --sort: numbers largest first, names and pids ascending. */
static int by_key(const void *pa, const void *pb)
{
	const struct prow *a = pa, *b = pb;
	int c = 0;

	switch (sort_by) {
	case SORT_CPU:
		c = cmp_num(b->cpu, a->cpu);
		break;
	case SORT_THREADS:
		c = cmp_num((double)b->threads, (double)a->threads);
		break;
	case SORT_STUCK:
		c = cmp_num((double)b->stuck, (double)a->stuck);
		break;
	case SORT_USER:
		c = cmp_str(a->user, b->user);
		break;
	case SORT_NAME:
		c = cmp_str(a->comm, b->comm);
		break;
	default:
		break;
	}
	return c ? c : cmp_num((double)a->pid, (double)b->pid);
}

/*
 * thread_states ({"S": 3, "R": 1}) as "1R,3S" into out (STATES_MAX
 * bytes), the letters in the order ps(1) shows them; "-" when absent.
 */
static void states_of(const cJSON *o, char *out)
{
	static const char order[] = "RDSTtZXIPWK";
	const cJSON *st = cJSON_GetObjectItemCaseSensitive(o, "thread_states");
	size_t len = 0;

	snprintf(out, STATES_MAX, "-");
	if (!cJSON_IsObject(st))
		return;
	out[0] = '\0';
	for (const char *c = order; *c; c++) {
		char key[2] = { *c, '\0' };
		long long n = cli_json_number(st, key);
		int w;

		if (n <= 0)
			continue;
		w = snprintf(out + len, STATES_MAX - len, "%s%lld%c",
			     len ? "," : "", n, *c);
		if (w < 0 || (size_t)w >= STATES_MAX - len) {
			out[len] = '\0';
			break;
		}
		len += (size_t)w;
	}
	if (!len)
		snprintf(out, STATES_MAX, "-");
}

static void fill(struct prow *r, const cJSON *o)
{
	const cJSON *dl = cJSON_GetObjectItemCaseSensitive(o, "deadlock");
	const char *method = cli_json_string(o, "method");
	const cJSON *agent = cJSON_GetObjectItemCaseSensitive(o, "agent");

	r->pid = cli_json_number(o, "pid");
	r->threads = cli_json_number(o, "threads");
	r->stuck = cli_json_number(o, "stuck");
	r->cpu = cli_json_double(o, "cpu_pct");
	r->user = cli_json_string(o, "user");
	r->comm = cli_json_string(o, "comm");
	r->deadlock = cJSON_IsBool(dl) ? cJSON_IsTrue(dl) : -1;
	/* An older daemon says only whether the agent is loaded. */
	if (!method && cJSON_IsBool(agent))
		method = cJSON_IsTrue(agent) ? "agent" : "ptrace";
	r->method = method;
	states_of(o, r->states);
}

/* A cell of width w: s made terminal-safe, "-" for none, left-aligned. */
static void cell(const char *s, int w)
{
	int n = s ? (int)strlen(s) : 1;

	cli_put_safe(stdout, s ? s : "-");
	printf("%*s ", n < w ? w - n : 0, "");
}

static void number(long long n, int w)
{
	if (n < 0)
		printf("%*s ", w, "-");
	else
		printf("%*lld ", w, n);
}

static int max_int(int a, int b)
{
	return a > b ? a : b;
}

static int slen(const char *s)
{
	return s ? (int)strlen(s) : 1;
}

static void print_table(struct prow *rows, size_t n)
{
	int wuser = 4, wname = 4, wstates = 6;

	qsort(rows, n, sizeof(*rows), by_key);
	for (size_t i = 0; i < n; i++) {
		wuser = max_int(wuser, slen(rows[i].user));
		wname = max_int(wname, slen(rows[i].comm));
		wstates = max_int(wstates, slen(rows[i].states));
	}
	printf("%7s %-*s %-*s %7s %6s %-*s %5s %8s METHOD\n", "PID", wuser,
	       "USER", wname, "NAME", "THREADS", "CPU%", wstates, "STATES",
	       "STUCK", "DEADLOCK");
	for (size_t i = 0; i < n; i++) {
		const struct prow *r = &rows[i];

		number(r->pid, 7);
		cell(r->user, wuser);
		cell(r->comm, wname);
		number(r->threads, 7);
		if (r->cpu < 0)
			printf("%6s ", "-");
		else
			printf("%6.1f ", r->cpu);
		cell(r->states, wstates);
		number(r->stuck, 5);
		printf("%8s ", r->deadlock < 0 ? "-"
			       : r->deadlock   ? "yes"
					       : "no");
		cli_put_safe(stdout, r->method ? r->method : "-");
		putchar('\n');
	}
}

/*
 * Prints the answer {"processes": [...]}. Returns CLI_OK, CLI_ENONE when
 * it lists nothing, CLI_EDAEMON for an answer of another shape.
 */
static int show(const struct cli *cli, const struct http_response *resp,
		const char *format)
{
	cJSON *root = cJSON_ParseWithLength(resp->body, resp->body_len);
	const cJSON *list = cli_json_array(root, "processes"), *o;
	struct prow *rows;
	size_t n = 0;
	int rc = CLI_EDAEMON;

	if (!list) {
		cli_bad_answer(cli, "no \"processes\" list");
		goto out_delete;
	}
	if (strcmp(format, "json") == 0) {
		fwrite(resp->body, 1, resp->body_len, stdout);
		rc = cJSON_GetArraySize(list) ? CLI_OK : CLI_ENONE;
		goto out_none;
	}
	rows = calloc((size_t)cJSON_GetArraySize(list) + 1, sizeof(*rows));
	if (!rows) {
		cli_error("out of memory");
		goto out_delete;
	}
	cJSON_ArrayForEach(o, list)
	{
		if (cJSON_IsObject(o))
			fill(&rows[n++], o);
	}
	if (n)
		print_table(rows, n);
	free(rows);
	rc = n ? CLI_OK : CLI_ENONE;
out_none:
	if (rc == CLI_ENONE)
		cli_error("no process you may see: the daemon shows a user "
			  "only its own processes; ask as root or as the "
			  "processes' user");
out_delete:
	cJSON_Delete(root);
	return rc;
}

int cmd_ps(const struct cli *cli, int argc, char **argv)
{
	const char *format = "text", *sort = "pid";
	struct http_response resp;
	int i, rc;
	size_t k;

	for (i = 1; i < argc; i++) {
		const char *a = argv[i], *v = NULL;

		if (strcmp(a, "--format") == 0 || strcmp(a, "--sort") == 0) {
			if (i + 1 >= argc)
				return cli_usage_error("%s needs a value", a);
			v = argv[++i];
		} else if (strncmp(a, "--format=", 9) == 0) {
			v = a + 9;
		} else if (strncmp(a, "--sort=", 7) == 0) {
			v = a + 7;
		} else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
			cli_usage(stdout);
			return cli_finish(CLI_OK);
		} else if (a[0] == '-') {
			return cli_usage_error("ps: unknown option '%s'", a);
		} else {
			return cli_usage_error("ps: unexpected argument '%s'",
					       a);
		}
		*(a[2] == 'f' ? &format : &sort) = v;
	}
	if (!cli_valid_format(format, false))
		return cli_usage_error("ps: unknown format '%s' (text or json)",
				       format);
	for (k = 0; k < sizeof(sort_names) / sizeof(sort_names[0]); k++)
		if (strcmp(sort, sort_names[k]) == 0)
			break;
	if (k == sizeof(sort_names) / sizeof(sort_names[0]))
		return cli_usage_error("ps: cannot sort by '%s' (pid, cpu, "
				       "threads, stuck, user or name)",
				       sort);
	sort_by = (enum sort_key)k;
	rc = cli_get(cli, "/api/v1/processes", &resp);
	if (rc)
		return rc;
	rc = show(cli, &resp, format);
	http_response_release(&resp);
	return cli_finish(rc);
}
