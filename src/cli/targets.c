/*
 * targets.c - "stackwatch targets": lists the processes registered with
 * the daemon (GET /api/v1/targets) as a table sorted by pid, the daemon's
 * own entry marked "(stackwatchd)".
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "cli.h"
#include "commands.h"
#include "http.h"

struct row {
	long long pid, uid, threads, signal; /* -1 when absent */
	const char *comm; /* points into the parsed JSON; may be NULL */
	const char *cmdline;
	bool self;
};

static int by_pid(const void *a, const void *b)
{
	const struct row *x = a, *y = b;

	return (x->pid > y->pid) - (x->pid < y->pid);
}

/* Prints n right-aligned in width columns, "-" when absent. */
static void print_number(long long n, int width)
{
	if (n < 0)
		printf("%*s ", width, "-");
	else
		printf("%*lld ", width, n);
}

static int digits(long long n)
{
	int d = 1;

	if (n < 0)
		return 1;
	while (n >= 10) {
		n /= 10;
		d++;
	}
	return d;
}

static int max_int(int a, int b)
{
	return a > b ? a : b;
}

/* Prints the table; rows are sorted in place. */
static void print_table(struct row *rows, size_t n)
{
	int wpid = 3, wuid = 3, wthr = 7, wsig = 6;
	size_t i;

	qsort(rows, n, sizeof(*rows), by_pid);
	for (i = 0; i < n; i++) {
		wpid = max_int(wpid, digits(rows[i].pid));
		wuid = max_int(wuid, digits(rows[i].uid));
		wthr = max_int(wthr, digits(rows[i].threads));
		wsig = max_int(wsig, digits(rows[i].signal));
	}
	printf("%*s %*s %*s %*s COMMAND\n", wpid, "PID", wuid, "UID", wthr,
	       "THREADS", wsig, "SIGNAL");
	for (i = 0; i < n; i++) {
		const struct row *r = &rows[i];

		print_number(r->pid, wpid);
		print_number(r->uid, wuid);
		print_number(r->threads, wthr);
		print_number(r->signal, wsig);
		if (r->cmdline && r->cmdline[0]) {
			cli_put_safe(stdout, r->cmdline);
		} else {
			putchar('[');
			cli_put_safe(stdout, r->comm ? r->comm : "?");
			putchar(']');
		}
		if (r->self)
			fputs(" (stackwatchd)", stdout);
		putchar('\n');
	}
}

/*
 * Turns the answer {"targets": [...]} into a table on stdout. Returns
 * the exit status, CLI_EDAEMON when the answer is not of that shape.
 */
static int show_targets(const struct cli *cli, const char *body, size_t len)
{
	const cJSON *list, *t;
	struct row *rows;
	cJSON *root;
	size_t n = 0;
	int rc = CLI_EDAEMON;

	root = cJSON_ParseWithLength(body, len);
	list = cJSON_GetObjectItemCaseSensitive(root, "targets");
	if (!cJSON_IsArray(list)) {
		cli_bad_answer(cli, "no \"targets\" list");
		goto out_delete;
	}
	rows = calloc((size_t)cJSON_GetArraySize(list) + 1, sizeof(*rows));
	if (!rows) {
		cli_error("out of memory");
		goto out_delete;
	}
	cJSON_ArrayForEach(t, list)
	{
		if (!cJSON_IsObject(t))
			continue;
		rows[n].pid = cli_json_number(t, "pid");
		rows[n].uid = cli_json_number(t, "uid");
		rows[n].threads = cli_json_number(t, "threads");
		rows[n].signal = cli_json_number(t, "signal");
		rows[n].comm = cli_json_string(t, "comm");
		rows[n].cmdline = cli_json_string(t, "cmdline");
		rows[n].self = cJSON_IsTrue(
			cJSON_GetObjectItemCaseSensitive(t, "self"));
		n++;
	}
	print_table(rows, n);
	free(rows);
	rc = CLI_OK;
out_delete:
	cJSON_Delete(root);
	return rc;
}

int cmd_targets(const struct cli *cli, int argc, char **argv)
{
	struct http_response resp;
	int rc;

	if (argc > 1) {
		if (strcmp(argv[1], "--help") == 0 ||
		    strcmp(argv[1], "-h") == 0) {
			cli_usage(stdout);
			return cli_finish(CLI_OK);
		}
		if (argv[1][0] == '-')
			return cli_usage_error("targets: unknown option '%s'",
					       argv[1]);
		return cli_usage_error("targets: unexpected argument '%s'",
				       argv[1]);
	}
	rc = cli_get(cli, "/api/v1/targets", &resp);
	if (rc)
		return rc;
	rc = show_targets(cli, resp.body, resp.body_len);
	http_response_release(&resp);
	return cli_finish(rc);
}
