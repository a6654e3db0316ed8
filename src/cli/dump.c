/*
 * dump.c - "stackwatch dump [--format text|json|folded] [PID]": asks the
 * daemon for a fresh dump of one process (or of every target) and copies
 * the answer to stdout as it came, so that the output is exactly the
 * daemon's format. With --local or --core the stacks are taken here
 * instead (offline.c).
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "cli.h"
#include "commands.h"
#include "http.h"
#include "model/limits.h"

/*
 * --max-frames N: 0 (as many as there are, up to SW_MAX_FRAMES_HARD) to
 * SW_MAX_FRAMES_HARD, in decimal. Returns 0 with *out, or -1.
 */
static int parse_max_frames(const char *s, long *out)
{
	char *end;
	long v;

	if (!s || *s < '0' || *s > '9' || strlen(s) > 6)
		return -1;
	v = strtol(s, &end, 10);
	if (*end || v < 0 || v > SW_MAX_FRAMES_HARD)
		return -1;
	*out = v;
	return 0;
}

/*
 * Whether the dump of every target (resp, in format) showed anything:
 * CLI_ENONE, said on stderr, when the daemon has no process with the agent
 * that the user may see; else CLI_OK.
 */
static int check_all(const struct http_response *resp, const char *format)
{
	bool none;

	if (strcmp(format, "json") == 0) {
		cJSON *root = cJSON_ParseWithLength(resp->body, resp->body_len);
		const cJSON *list =
			cJSON_GetObjectItemCaseSensitive(root, "processes");

		none = cJSON_IsArray(list) && cJSON_GetArraySize(list) == 0;
		cJSON_Delete(root);
	} else {
		none = resp->body_len == strspn(resp->body, " \n");
	}
	if (!none || resp->partial > 0)
		return CLI_OK;
	cli_error("no process with the agent that you may see: start one "
		  "with 'stackwatch run -- CMD', or name any process you may "
		  "see: stackwatch dump PID ('stackwatch ps' lists them)");
	return CLI_ENONE;
}

int cmd_dump(const struct cli *cli, int argc, char **argv)
{
	const char *format = "text", *pid_arg = NULL, *core = NULL, *exe = NULL;
	const char *max_arg = NULL;
	bool local = false;
	struct http_response resp;
	bool options = true;
	char target[128], extra[32] = "";
	long pid = 0, max_frames = -1;
	int i, rc;

	for (i = 1; i < argc; i++) {
		const char *a = argv[i];

		if (options && strcmp(a, "--") == 0) {
			options = false;
		} else if (options && strcmp(a, "--format") == 0) {
			if (i + 1 >= argc)
				return cli_usage_error("--format needs a "
						       "value");
			format = argv[++i];
		} else if (options && strncmp(a, "--format=", 9) == 0) {
			format = a + 9;
		} else if (options && strcmp(a, "--max-frames") == 0) {
			if (i + 1 >= argc)
				return cli_usage_error("--max-frames needs a "
						       "number");
			max_arg = argv[++i];
		} else if (options && strncmp(a, "--max-frames=", 13) == 0) {
			max_arg = a + 13;
		} else if (options && strcmp(a, "--local") == 0) {
			local = true;
		} else if (options && (strcmp(a, "--core") == 0 ||
				       strcmp(a, "--exe") == 0)) {
			if (i + 1 >= argc)
				return cli_usage_error("%s needs a file", a);
			*(a[2] == 'c' ? &core : &exe) = argv[++i];
		} else if (options &&
			   (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0)) {
			cli_usage(stdout);
			return cli_finish(CLI_OK);
		} else if (options && a[0] == '-' && a[1]) {
			return cli_usage_error("dump: unknown option '%s'", a);
		} else if (pid_arg) {
			return cli_usage_error("dump: more than one PID");
		} else {
			pid_arg = a;
		}
	}
	if (!cli_valid_format(format, true))
		return cli_usage_error("dump: unknown format '%s' (text, json "
				       "or folded)",
				       format);
	if (pid_arg && cli_parse_pid(pid_arg, &pid))
		return cli_usage_error("dump: bad PID '%s'", pid_arg);
	if (max_arg && parse_max_frames(max_arg, &max_frames))
		return cli_usage_error("dump: --max-frames takes 0 (all, up to "
				       "%d) to %d, not '%s'",
				       SW_MAX_FRAMES_HARD, SW_MAX_FRAMES_HARD,
				       max_arg);
	if (exe && !core)
		return cli_usage_error("dump: --exe goes with --core");
	if (core && (local || pid_arg))
		return cli_usage_error("dump: --core takes no PID");
	if (core)
		return cli_dump_core(core, exe, format, max_frames);
	if (local && !pid_arg)
		return cli_usage_error("dump: --local needs a PID");
	if (local)
		return cli_dump_local(pid, format, max_frames);

	if (max_frames >= 0)
		snprintf(extra, sizeof(extra), "&max_frames=%ld", max_frames);
	if (pid_arg)
		snprintf(target, sizeof(target),
			 "/api/v1/stacks?pid=%ld&format=%s%s", pid, format,
			 extra);
	else
		snprintf(target, sizeof(target), "/api/v1/stacks?format=%s%s",
			 format, extra);
	rc = cli_get(cli, target, &resp);
	if (rc)
		return rc;
	fwrite(resp.body, 1, resp.body_len, stdout);
	rc = pid_arg ? CLI_OK : check_all(&resp, format);
	if (rc == CLI_OK && resp.partial > 0) {
		cli_error("%ld of the processes or threads asked for could "
			  "not be read (each says why above); ask again, or "
			  "read one with stackwatch dump --local PID",
			  resp.partial);
		rc = CLI_EPARTIAL;
	}
	http_response_release(&resp);
	return cli_finish(rc);
}
