/*
 * stuck.c - "stackwatch stuck [--format text|json]": the threads the
 * daemon's watchdog flags now (GET /api/v1/stuck), each with why, for how
 * long and its innermost frames. Like grep(1), it exits 0 when it found
 * something and CLI_ENONE when no thread is flagged, so that a script can
 * write "if stackwatch stuck; then ...".
 */
#include <stdio.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "cli.h"
#include "commands.h"
#include "http.h"

#define STUCK_FRAMES 5 /* frames shown per thread in the text */

/* The deadlock a flagged thread is part of: "deadlock with 4251, 4252". */
static void print_deadlock(const cJSON *th)
{
	const cJSON *dl = cJSON_GetObjectItemCaseSensitive(th, "deadlock");
	const cJSON *tids = cli_json_array(dl, "threads"), *t;
	long long self = cli_json_number(th, "tid");
	const char *sep = "";

	if (!tids)
		return;
	fputs("    in a deadlock with thread", stdout);
	if (cJSON_GetArraySize(tids) > 2)
		putchar('s');
	putchar(' ');
	cJSON_ArrayForEach(t, tids)
	{
		if (!cJSON_IsNumber(t) || (long long)t->valuedouble == self)
			continue;
		printf("%s%.0f", sep, t->valuedouble);
		sep = ", ";
	}
	putchar('\n');
}

/*
 * The kernel's frames of a thread in state D: "kernel: a < b < c"; when
 * the daemon shows them not (they are CAP_SYS_ADMIN's), where it waits:
 * "waits in the kernel in NAME".
 */
static void print_kernel(const cJSON *th)
{
	const cJSON *k = cli_json_array(th, "kernel_frames"), *f;
	const char *wchan = cli_json_string(th, "wchan");
	const char *sep = "";

	if (!k || cJSON_GetArraySize(k) == 0) {
		if (wchan && *wchan) {
			fputs("    waits in the kernel in ", stdout);
			cli_put_safe(stdout, wchan);
			putchar('\n');
		}
		return;
	}
	fputs("    kernel: ", stdout);
	cJSON_ArrayForEach(f, k)
	{
		if (!cJSON_IsString(f))
			continue;
		fputs(sep, stdout);
		cli_put_safe(stdout, f->valuestring);
		sep = " < ";
	}
	putchar('\n');
}

/*
 * One flagged thread: "pid 4242, thread worker-3 (4250): spinning for
 * 12.0 s (state R, since ...)", then its innermost frames.
 */
static void print_one(const cJSON *th)
{
	long long pid = cli_json_number(th, "pid");
	const char *reason = cli_json_string(th, "reason");
	const char *state = cli_json_string(th, "state");
	const char *since = cli_json_string(th, "since");
	double for_s = cli_json_double(th, "unchanged_s");

	printf("pid %lld, thread ", pid);
	cli_print_thread(stdout, th);
	fputs(": ", stdout);
	cli_put_safe(stdout, reason ? reason : "stuck");
	if (for_s >= 0)
		printf(" for %.1f s", for_s);
	fputs(" (state ", stdout);
	cli_put_safe(stdout, state ? state : "?");
	if (since) {
		fputs(", unchanged since ", stdout);
		cli_put_safe(stdout, since);
	}
	fputs(")\n", stdout);
	print_deadlock(th);
	print_kernel(th);
	cli_print_frames(stdout, cJSON_GetObjectItemCaseSensitive(th, "frames"),
			 "    ", STUCK_FRAMES);
}

/*
 * Prints the answer {"threads": [...]} (format json: as it came). Returns
 * CLI_OK when a thread is flagged, CLI_ENONE when none is, CLI_EDAEMON
 * for an answer of another shape.
 */
static int show(const struct cli *cli, const struct http_response *resp,
		const char *format)
{
	cJSON *root = cJSON_ParseWithLength(resp->body, resp->body_len);
	const cJSON *list = cli_json_array(root, "threads"), *th;
	int n = list ? cJSON_GetArraySize(list) : 0;

	if (!list) {
		cli_bad_answer(cli, "no \"threads\" list");
		cJSON_Delete(root);
		return CLI_EDAEMON;
	}
	if (strcmp(format, "json") == 0) {
		fwrite(resp->body, 1, resp->body_len, stdout);
	} else {
		cJSON_ArrayForEach(th, list)
		{
			if (cJSON_IsObject(th))
				print_one(th);
		}
	}
	cJSON_Delete(root);
	if (n > 0)
		return CLI_OK;
	cli_error("no thread is stuck in the processes you may see");
	return CLI_ENONE;
}

int cmd_stuck(const struct cli *cli, int argc, char **argv)
{
	const char *format = "text";
	struct http_response resp;
	int i, rc;

	for (i = 1; i < argc; i++) {
		const char *a = argv[i];

		if (strcmp(a, "--format") == 0) {
			if (i + 1 >= argc)
				return cli_usage_error("--format needs a "
						       "value");
			format = argv[++i];
		} else if (strncmp(a, "--format=", 9) == 0) {
			format = a + 9;
		} else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
			cli_usage(stdout);
			return cli_finish(CLI_OK);
		} else if (a[0] == '-') {
			return cli_usage_error("stuck: unknown option '%s'", a);
		} else {
			return cli_usage_error("stuck: unexpected argument "
					       "'%s'",
					       a);
		}
	}
	if (!cli_valid_format(format, false))
		return cli_usage_error("stuck: unknown format '%s' (text or "
				       "json)",
				       format);
	rc = cli_get(cli, "/api/v1/stuck", &resp);
	if (rc)
		return rc;
	rc = show(cli, &resp, format);
	http_response_release(&resp);
	return cli_finish(rc);
}
