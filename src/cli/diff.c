/*
 * diff.c - "stackwatch diff [--since DURATION] [--format text|json] PID":
 * what changed in a process between the daemon's sample nearest to
 * DURATION ago (default 60 s) and now (GET /api/v1/diff). The daemon
 * lists threads one by one; the text puts threads whose stacks changed
 * the same way, or that appeared with the same stack, under one heading,
 * as the dump's text groups identical stacks.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "cli.h"
#include "commands.h"
#include "http.h"

#define DIFF_DEFAULT_SINCE 60
#define DIFF_MAX_SINCE 86400 /* the daemon's bound: a day */
#define DIFF_NAMES 8	     /* thread names listed per heading */

/*
 * Parses a duration: whole seconds, or a number followed by s, m or h
 * ("90", "90s", "5m", "1h"), 0..DIFF_MAX_SINCE seconds. -1 when bad.
 */
static long parse_since(const char *s)
{
	long n = 0, unit = 1;

	if (*s < '0' || *s > '9')
		return -1;
	for (; *s >= '0' && *s <= '9'; s++) {
		n = n * 10 + (*s - '0');
		if (n > DIFF_MAX_SINCE)
			return -1;
	}
	switch (*s) {
	case 'h':
		unit = 3600;
		s++;
		break;
	case 'm':
		unit = 60;
		s++;
		break;
	case 's':
		s++;
		break;
	default:
		break;
	}
	if (*s || n * unit > DIFF_MAX_SINCE)
		return -1;
	return n * unit;
}

static const char *plural(int n)
{
	return n == 1 ? "" : "s";
}

/*
 * Prints the entries of list whose key arrays (key, and key2 when not
 * NULL) equal those of list's entry first, and marks them done: the
 * heading "N threads VERB: name (tid), ..." and then the stacks.
 */
static void print_group(const cJSON *list, int first, bool *done,
			const char *verb, const char *key, const char *key2)
{
	const cJSON *a = cJSON_GetArrayItem(list, first);
	const cJSON *ka = cJSON_GetObjectItemCaseSensitive(a, key);
	const cJSON *kb =
		key2 ? cJSON_GetObjectItemCaseSensitive(a, key2) : NULL;
	int n = cJSON_GetArraySize(list), count = 0, shown = 0;

	for (int pass = 0; pass < 2; pass++) {
		for (int j = first; j < n; j++) {
			const cJSON *b = cJSON_GetArrayItem(list, j);

			if (j != first &&
			    (done[j] ||
			     !cJSON_Compare(
				     ka,
				     cJSON_GetObjectItemCaseSensitive(b, key),
				     true) ||
			     (key2 &&
			      !cJSON_Compare(
				      kb,
				      cJSON_GetObjectItemCaseSensitive(b, key2),
				      true))))
				continue;
			if (pass == 0) {
				count++;
				continue;
			}
			done[j] = true;
			if (shown == 0)
				printf("%d thread%s %s: ", count, plural(count),
				       verb);
			if (shown < DIFF_NAMES) {
				fputs(shown ? ", " : "", stdout);
				cli_print_thread(stdout, b);
			} else if (shown == DIFF_NAMES) {
				fputs(", ...", stdout);
			}
			shown++;
		}
	}
	putchar('\n');
	if (key2) {
		puts("  before:");
		cli_print_frames(stdout, ka, "    ", 0);
		puts("  after:");
		cli_print_frames(stdout, kb, "    ", 0);
	} else {
		cli_print_frames(stdout, ka, "  ", 0);
	}
	putchar('\n');
}

/* Every entry of list, grouped as print_group() does. */
static void print_list(const cJSON *list, const char *verb, const char *key,
		       const char *key2)
{
	int n = list ? cJSON_GetArraySize(list) : 0;
	bool *done = calloc(n ? (size_t)n : 1, sizeof(*done));

	for (int i = 0; done && i < n; i++)
		if (!done[i])
			print_group(list, i, done, verb, key, key2);
	free(done);
}

/* The threads that went away: one line of names. */
static void print_gone(const cJSON *list)
{
	int n = list ? cJSON_GetArraySize(list) : 0, i = 0;
	const cJSON *th;

	if (n == 0)
		return;
	printf("%d thread%s gone: ", n, plural(n));
	cJSON_ArrayForEach(th, list)
	{
		fputs(i++ ? ", " : "", stdout);
		cli_print_thread(stdout, th);
	}
	fputs("\n\n", stdout);
}

/* The answer as text; CLI_EDAEMON when it is not of the documented shape. */
static int show_text(const struct cli *cli, const cJSON *doc)
{
	const cJSON *changed = cli_json_array(doc, "changed");
	const cJSON *appeared = cli_json_array(doc, "appeared");
	const cJSON *gone = cli_json_array(doc, "gone");
	const char *from = cli_json_string(doc, "from");
	const char *to = cli_json_string(doc, "to");
	long long same = cli_json_number(doc, "unchanged");

	if (!changed || !appeared || !gone) {
		cli_bad_answer(cli, "not a diff");
		return CLI_EDAEMON;
	}
	printf("Process %lld: from ", cli_json_number(doc, "pid"));
	cli_put_safe(stdout, from ? from : "?");
	fputs(" to ", stdout);
	cli_put_safe(stdout, to ? to : "?");
	printf(": %d changed, %d appeared, %d gone, %lld unchanged\n\n",
	       cJSON_GetArraySize(changed), cJSON_GetArraySize(appeared),
	       cJSON_GetArraySize(gone), same < 0 ? 0 : same);
	print_list(changed, "changed", "before", "after");
	print_list(appeared, "appeared", "frames", NULL);
	print_gone(gone);
	return CLI_OK;
}

int cmd_diff(const struct cli *cli, int argc, char **argv)
{
	const char *format = "text", *pid_arg = NULL;
	long since = DIFF_DEFAULT_SINCE, pid;
	struct http_response resp;
	char target[96];
	cJSON *doc;
	int i, rc;

	for (i = 1; i < argc; i++) {
		const char *a = argv[i], *v = NULL;

		if (strcmp(a, "--format") == 0 || strcmp(a, "--since") == 0) {
			if (i + 1 >= argc)
				return cli_usage_error("%s needs a value", a);
			v = argv[++i];
		} else if (strncmp(a, "--format=", 9) == 0) {
			v = a + 9;
		} else if (strncmp(a, "--since=", 8) == 0) {
			v = a + 8;
		} else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
			cli_usage(stdout);
			return cli_finish(CLI_OK);
		} else if (a[0] == '-') {
			return cli_usage_error("diff: unknown option '%s'", a);
		} else if (pid_arg) {
			return cli_usage_error("diff: more than one PID");
		} else {
			pid_arg = a;
		}
		if (v && a[2] == 'f')
			format = v;
		else if (v && (since = parse_since(v)) < 0)
			return cli_usage_error("diff: bad duration '%s' "
					       "(seconds, or 90s, 5m, 1h; at "
					       "most a day)",
					       v);
	}
	if (!cli_valid_format(format, false))
		return cli_usage_error("diff: unknown format '%s' (text or "
				       "json)",
				       format);
	if (!pid_arg)
		return cli_usage_error("diff: which PID?");
	if (cli_parse_pid(pid_arg, &pid))
		return cli_usage_error("diff: bad PID '%s'", pid_arg);
	snprintf(target, sizeof(target), "/api/v1/diff?pid=%ld&since=%ld", pid,
		 since);
	rc = cli_get(cli, target, &resp);
	if (rc)
		return rc;
	if (strcmp(format, "json") == 0) {
		fwrite(resp.body, 1, resp.body_len, stdout);
	} else {
		doc = cJSON_ParseWithLength(resp.body, resp.body_len);
		rc = show_text(cli, doc);
		cJSON_Delete(doc);
	}
	http_response_release(&resp);
	return cli_finish(rc);
}
