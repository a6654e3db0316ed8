/*
 * request.c - how the subcommands talk to the daemon: one GET through
 * http.c (libcurl), with every way it can fail turned into the message,
 * what to do next, and the exit status that INTERFACE.md promises (1 for
 * an error answer, 2 for a bad URL, 3 when the daemon cannot be reached,
 * 4 for no such process, 5 for one the user may not see).
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
 * The daemon's reason for an error answer into out (size bytes): the
 * "error" string of its JSON body ({"error": "...", "status": N}), else
 * the first line of a text body. False when there is none.
 */
static bool answer_reason(const struct http_response *resp, char *out,
			  size_t size)
{
	const cJSON *err = NULL;
	cJSON *root;
	bool found = false;

	root = cJSON_ParseWithLength(resp->body, resp->body_len);
	if (root)
		err = cJSON_GetObjectItemCaseSensitive(root, "error");
	if (err && cJSON_IsString(err) && err->valuestring[0]) {
		snprintf(out, size, "%s", err->valuestring);
		found = true;
	}
	cJSON_Delete(root);
	return found || (resp->status >= 400 && text_reason(resp, out, size));
}

/*
 * The exit status of an error answer with reason why: the daemon's 404
 * for a pid says "no process N" only to whom may know it; to anyone else
 * it says "... not a process you may see" whether the process exists or
 * not, and so does the exit status.
 */
static int status_of_answer(int status, const char *why)
{
	int pid;
	char end;

	if (status == 401 || status == 403)
		return CLI_EPERM;
	if (status != 404 || !why)
		return CLI_EDAEMON;
	if (sscanf(why, "no process %d%c", &pid, &end) == 1)
		return CLI_ENOPROC;
	if (strstr(why, "not a process you may see"))
		return CLI_EPERM;
	return CLI_EDAEMON;
}

/* What to do next, after the reason the daemon gave with status rc. */
static void hint_answer(int rc, int status)
{
	if (status == 401 && !getenv("STACKWATCH_TOKEN"))
		cli_error("the daemon wants a token: set STACKWATCH_TOKEN");
	else if (status == 401)
		cli_error("check the token in STACKWATCH_TOKEN: it must be "
			  "the daemon's --token-file");
	else if (rc == CLI_ENOPROC)
		cli_error("check the pid: 'stackwatch ps' lists the "
			  "processes you may see");
	else if (rc == CLI_EPERM && status == 404)
		cli_error("a process is shown to its own user, root and the "
			  "daemon's admin group: run as one of them "
			  "('stackwatch ps' lists what you may see)");
}

/*
 * Prints the daemon's error answer (its reason, else the status line) and
 * what to do next. Returns the exit status it calls for.
 */
static int report_error_answer(const char *where,
			       const struct http_response *resp)
{
	char why[1024];
	bool have = answer_reason(resp, why, sizeof(why));
	int rc = status_of_answer(resp->status, have ? why : NULL);

	fflush(stdout);
	if (have) {
		fputs("stackwatch: ", stderr);
		cli_put_safe(stderr, why);
		fputc('\n', stderr);
	} else if (resp->status >= 400) {
		cli_error("the daemon at %s answered %d %s", where,
			  resp->status, resp->reason);
	} else {
		cli_error("unexpected answer from %s: %d %s", where,
			  resp->status, resp->reason);
	}
	hint_answer(rc, resp->status);
	return rc;
}

/* Says that the daemon cannot be reached (why), and what to do next. */
static void report_unreachable(const char *where, const char *why)
{
	cli_error("cannot reach the daemon at %s: %s", where, why);
	cli_error("start it (systemctl start stackwatchd, or 'make run' in "
		  "the source tree), name it with --url or "
		  "STACKWATCH_HTTP_SOCKET, or read a process without it: "
		  "stackwatch dump --local PID");
}

/*
 * Says in one line that the server at where was not used (why, from
 * http_get()): it is not root's nor the user's, or not on this host.
 */
static void report_refused(const char *where, const char *why)
{
	cli_error("not using the daemon at %s: %s; name the daemon with "
		  "--url or STACKWATCH_HTTP_SOCKET",
		  where, why);
}

int cli_get(const struct cli *cli, const char *target,
	    struct http_response *resp)
{
	struct http_opts opts;
	const char *where = cli->where;
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
	/* A URL of our own choosing: whoever got its port first answers. */
	opts.local_server = !cli->url_given;
	rc = http_get(cli->unix_socket ? "http://localhost" : cli->url, target,
		      &opts, resp);
	/*
	 * A socket left by a daemon that is gone: TCP at the default URL
	 * instead, whose server must prove to be root or the user; never
	 * with a token, which is not sent anywhere the user did not name.
	 */
	if (cli->unix_socket && (rc == -ECONNREFUSED || rc == -ENOENT)) {
		if (opts.token) {
			cli_error("the daemon socket %s does not answer (%s); "
				  "with STACKWATCH_TOKEN set, %s is not "
				  "tried instead: name the daemon with --url",
				  cli->unix_socket, resp->error, cli->url);
			return CLI_EREACH;
		}
		opts.unix_socket = NULL;
		http_response_release(resp);
		where = cli->url;
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
		cli_error("bad answer from %s: %s", where, resp->error);
		cli_error("check that it is a stackwatchd; name the daemon "
			  "with --url");
		return CLI_EREACH;
	case -EPERM:
		report_refused(where, resp->error);
		return CLI_EREACH;
	default:
		report_unreachable(where, resp->error);
		return CLI_EREACH;
	}
	if (resp->status >= 200 && resp->status < 300)
		return CLI_OK;
	rc = report_error_answer(where, resp);
	http_response_release(resp);
	return rc;
}
