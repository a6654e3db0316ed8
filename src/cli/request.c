/*
 * request.c - how the subcommands talk to the daemon: one GET through
 * http_client.c, with every way it can fail turned into the message and
 * the exit status that INTERFACE.md promises (1 for an error answer, 2
 * for a bad URL, 3 when the daemon cannot be reached).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include <cjson/cJSON.h>

#include "cli.h"
#include "http_client.h"
#include "stackwatch.h"

/*
 * Prints the daemon's error answer: the "error" string of its JSON body
 * ({"error": "...", "status": N}), else the status line.
 */
static void report_error_answer(const struct cli *cli,
				const struct http_response *resp)
{
	const cJSON *err = NULL;
	cJSON *root;

	root = cJSON_ParseWithLength(resp->body, resp->body_len);
	if (root)
		err = cJSON_GetObjectItemCaseSensitive(root, "error");
	fflush(stdout);
	if (cJSON_IsString(err) && err->valuestring[0]) {
		fputs("stackwatch: ", stderr);
		cli_put_safe(stderr, err->valuestring);
		fputc('\n', stderr);
	} else if (resp->status >= 400) {
		cli_error("the daemon at %s answered %d %s", cli->url,
			  resp->status, resp->reason);
	} else {
		cli_error("unexpected answer from %s: %d %s", cli->url,
			  resp->status, resp->reason);
	}
	if (resp->status == 401 && !getenv("STACKWATCH_TOKEN"))
		cli_error("the daemon wants a token: set STACKWATCH_TOKEN");
	cJSON_Delete(root);
}

int cli_get(const struct cli *cli, const char *target,
	    struct http_response *resp)
{
	struct http_opts opts;
	struct http_url url;
	char why[128];
	int rc;

	if (http_parse_url(cli->url, &url, why, sizeof(why)))
		return cli_usage_error("bad URL '%s': %s", cli->url, why);
	http_opts_init(&opts);
	rc = http_get(&url, target, &opts, resp);
	switch (rc) {
	case 0:
		break;
	case -EINVAL:
		cli_error("%s", resp->error);
		return CLI_EUSAGE;
	case -ENOMEM:
		cli_error("%s", sw_strerror(rc));
		return CLI_EDAEMON;
	case SW_EFORMAT:
	case SW_ETOOBIG:
		cli_error("bad answer from %s: %s", cli->url, resp->error);
		return CLI_EREACH;
	default:
		cli_error("cannot reach the daemon at %s: %s", cli->url,
			  resp->error);
		return CLI_EREACH;
	}
	if (resp->status >= 200 && resp->status < 300)
		return CLI_OK;
	report_error_answer(cli, resp);
	http_response_release(resp);
	return CLI_EDAEMON;
}
