/*
 * cli.h - what the subcommands of the stackwatch CLI share: the exit
 * statuses, the global options, the usage text and messages (common.c)
 * and the request helper (request.c). The subcommands' entry points are
 * in commands.h, for main.c alone.
 */
#ifndef SW_CLI_H
#define SW_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#define CLI_DEFAULT_URL "http://127.0.0.1:9407"

/* Exit statuses; INTERFACE.md makes them a contract. */
enum {
	CLI_OK = 0,
	CLI_EDAEMON = 1,  /* the daemon answered with an error (or we failed) */
	CLI_EUSAGE = 2,	  /* bad command line */
	CLI_EREACH = 3,	  /* the daemon cannot be reached */
	CLI_ENOPROC = 4,  /* no such process (said only to whom may know) */
	CLI_EPERM = 5,	  /* not a process you may see; a token is needed */
	CLI_EPARTIAL = 6, /* printed, but some processes or threads are not */
	CLI_ENONE = 7,	  /* nothing to show: no process, no stuck thread */
};

/* The global options, given before the subcommand. */
struct cli {
	const char *url; /* the daemon's base URL */
	/*
	 * The user named url (--url, $STACKWATCH_URL): whoever answers
	 * there is the user's choice. Otherwise url is the default, where
	 * anyone may listen first, and its server must prove to be root or
	 * the user (http.h's local_server) before anything is sent to it.
	 */
	bool url_given;
	/*
	 * With no --url (nor $STACKWATCH_URL): the daemon's unix socket when
	 * there is one ($STACKWATCH_HTTP_SOCKET, this user's own daemon's,
	 * /run/stackwatch/http.sock), where the daemon knows who asks; NULL
	 * for TCP at url.
	 */
	const char *unix_socket;
	char where[160]; /* the daemon, for messages: url or unix:PATH */
	/*
	 * Not empty when the chosen socket fails the ownership rule
	 * (model/sockcheck.h): why, as a message. cli_get() then says it
	 * and connects nowhere.
	 */
	char refused[512];
};

/*
 * Chooses the daemon's unix socket for cli (when no URL was given): the
 * first of the candidates above that exists (buf, size bytes, holds the
 * user's own path). One that only root or the user could have set up is
 * used; any other is refused, with the reason in cli->refused, rather
 * than passed over: which daemon answers must not be up to whoever
 * planted it. Sets cli->where. Does not connect.
 */
void cli_find_socket(struct cli *cli, char *buf, size_t size);

struct http_response;

/* Prints the full help (for --help) to f. */
void cli_usage(FILE *f);

/*
 * Prints "stackwatch: <message>" and the short usage to stderr and
 * returns CLI_EUSAGE, for "return cli_usage_error(...)".
 */
int cli_usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Prints "stackwatch: <message>" to stderr. */
void cli_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/*
 * Says that the daemon's answer is not of the shape expected ("what":
 * e.g. 'no "targets" list') and what to do: check that --url names a
 * stackwatchd.
 */
void cli_bad_answer(const struct cli *cli, const char *what);

/*
 * Writes s to f with every control byte replaced by '?', so that names
 * taken from targets or a server cannot reach the terminal as escapes.
 */
void cli_put_safe(FILE *f, const char *s);

/*
 * Flushes stdout and reports a failed write ("stackwatch: write error").
 * Returns status when the output went out, else CLI_EDAEMON.
 */
int cli_finish(int status);

/*
 * GETs target (a path with its query, e.g. "/api/v1/targets") from the
 * daemon at cli->url. Returns CLI_OK with *resp owning a 2xx answer
 * (release it with http_response_release()), or an exit status after
 * printing why with nothing left to release: CLI_EUSAGE for a bad URL or
 * token, CLI_EREACH when no HTTP answer came back or the daemon's socket
 * is not to be trusted (cli->refused, or a server that is neither root nor
 * the user: nothing is sent to it), CLI_EDAEMON for an error status (the
 * "error" of its JSON body is printed).
 */
int cli_get(const struct cli *cli, const char *target,
	    struct http_response *resp);

/*
 * Parses a decimal pid, 1..INT_MAX with nothing else around it, into
 * *out. Returns 0 or -1.
 */
int cli_parse_pid(const char *s, long *out);

/* True for "text" and "json"; with folded true, for "folded" too. */
bool cli_valid_format(const char *format, bool folded);

/*
 * Reading the daemon's JSON (json.c); obj may be anything, NULL included.
 * A number that is absent, negative or not a number is -1; a string or
 * array that is absent or of another type is NULL.
 */
struct cJSON;
long long cli_json_number(const struct cJSON *obj, const char *key);
double cli_json_double(const struct cJSON *obj, const char *key);
const char *cli_json_string(const struct cJSON *obj, const char *key);
const struct cJSON *cli_json_array(const struct cJSON *obj, const char *key);

/*
 * Prints a JSON array of frames as the daemon's text format does, one
 * line each after indent, at most max of them (0: all) and then how many
 * more; "(no frames)" for none. Names are printed terminal-safe.
 */
void cli_print_frames(FILE *f, const struct cJSON *frames, const char *indent,
		      int max);

/* Prints a thread's "name (tid)" from its JSON object, terminal-safe. */
void cli_print_thread(FILE *f, const struct cJSON *th);

/*
 * Parser workers for a CLI run with privilege (sandbox.c): whether this
 * run parses in them (it is root), starting and ending their pool
 * (privsep/parsers.h), and a worker's own main (--parser-worker).
 */
bool cli_sandboxed(void);
int cli_sandbox_start(void);
void cli_sandbox_stop(void);
int cli_parser_worker(int argc, char **argv);

#endif /* SW_CLI_H */
