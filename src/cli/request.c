/*
 * request.c - how the subcommands talk to the daemon: one GET through
 * http.c (libcurl), with every way it can fail turned into the message and
 * the exit status that INTERFACE.md promises (1 for an error answer, 2
 * for a bad URL, 3 when the daemon cannot be reached).
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "cli.h"
#include "http.h"
#include "stackwatch.h"

/*
 * Copies the reason out of a plain-text error body, whose first line is
 * "error: <reason>" for the text and folded formats, into out (size
 * bytes). False when the body does not look like one (empty, binary,
 * HTML from a proxy).
 */
static bool text_reason(const struct http_response *resp, char *out,
			size_t size)
{
	const char *p = resp->body;
	size_t n = resp->body_len;
	const char *eol;

	if (n > 1024 || !n || memchr(p, '\0', n) || p[0] == '<')
		return false;
	eol = memchr(p, '\n', n);
	if (eol)
		n = (size_t)(eol - p);
	if (n > 7 && strncmp(p, "error: ", 7) == 0) {
		p += 7;
		n -= 7;
	}
	while (n && (p[n - 1] == '\r' || p[n - 1] == ' '))
		n--;
	if (!n || n >= size)
		return false;
	memcpy(out, p, n);
	out[n] = '\0';
	return true;
}

/*
 * Prints the daemon's error answer: the "error" string of its JSON body
 * ({"error": "...", "status": N}), else the first line of a text body,
 * else the status line.
 */
static void report_error_answer(const struct cli *cli,
				const struct http_response *resp)
{
	const cJSON *err = NULL;
	char line[1024];
	cJSON *root;

	root = cJSON_ParseWithLength(resp->body, resp->body_len);
	if (root)
		err = cJSON_GetObjectItemCaseSensitive(root, "error");
	fflush(stdout);
	if (err && cJSON_IsString(err) && err->valuestring[0]) {
		fputs("stackwatch: ", stderr);
		cli_put_safe(stderr, err->valuestring);
		fputc('\n', stderr);
	} else if (resp->status >= 400 &&
		   text_reason(resp, line, sizeof(line))) {
		fputs("stackwatch: ", stderr);
		cli_put_safe(stderr, line);
		fputc('\n', stderr);
	} else if (resp->status >= 400) {
		cli_error("the daemon at %s answered %d %s", cli->where,
			  resp->status, resp->reason);
	} else {
		cli_error("unexpected answer from %s: %d %s", cli->where,
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
	char why[128];
	int rc;

	if (cli->refused[0]) {
		cli_error("%s", cli->refused);
		return CLI_EREACH;
	}
	if (http_check_url(cli->url, why, sizeof(why)))
		return cli_usage_error("bad URL '%s': %s", cli->url, why);
	http_opts_init(&opts);
	opts.unix_socket = cli->unix_socket;
	rc = http_get(cli->unix_socket ? "http://localhost" : cli->url, target,
		      &opts, resp);
	/* A socket left by a daemon that is gone: try TCP after all. */
	if (cli->unix_socket && (rc == -ECONNREFUSED || rc == -ENOENT)) {
		opts.unix_socket = NULL;
		http_response_release(resp);
		rc = http_get(cli->url, target, &opts, resp);
	}
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
		cli_error("bad answer from %s: %s", cli->where, resp->error);
		return CLI_EREACH;
	default:
		cli_error("cannot reach the daemon at %s: %s", cli->where,
			  resp->error);
		return CLI_EREACH;
	}
	if (resp->status >= 200 && resp->status < 300)
		return CLI_OK;
	report_error_answer(cli, resp);
	http_response_release(resp);
	return CLI_EDAEMON;
}
