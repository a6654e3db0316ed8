/*
 * http.h - one GET to the daemon, through libcurl.
 *
 * libcurl does the HTTP (and TLS, proxies, ~/.netrc); this file adds what
 * the CLI promises on top of it: a base URL checked before anything is
 * sent, one total deadline, a cap on the body, a token that cannot add a
 * header, and every failure sorted into a few error codes that request.c
 * turns into exit statuses.
 */
#ifndef SW_CLI_HTTP_H
#define SW_CLI_HTTP_H

#include <stdbool.h>
#include <stddef.h>

#define HTTP_DEFAULT_TIMEOUT_MS 15000
#define HTTP_MAX_BODY ((size_t)256 << 20)

struct http_opts {
	int timeout_ms;	   /* total deadline: resolve, connect, send, receive */
	size_t max_body;   /* cap on the decoded body, in bytes */
	const char *token; /* sent as "Authorization: Bearer"; NULL: none */
	/*
	 * Connect here instead (HTTP over it). The server must be root or
	 * the caller's effective uid (SO_PEERCRED), checked before anything
	 * is sent; the path itself is the caller's to check
	 * (model/sockcheck.h).
	 */
	const char *unix_socket;
	/*
	 * Over TCP: the server must listen on a loopback address of this
	 * host and be root or the caller, as the kernel's socket
	 * diagnostics name the owner of its end of the connection
	 * (model/sockdiag.h), checked before anything is sent. For a
	 * daemon the user did not name: anyone may listen on a free port.
	 */
	bool local_server;
};

struct http_response {
	int status;	  /* 100..599 */
	char reason[128]; /* the reason phrase, control bytes replaced */
	char *body;	  /* NUL-terminated, owned; NULL until a success */
	size_t body_len;  /* the body may hold NUL bytes of its own */
	/*
	 * The daemon's X-Stackwatch-Partial header: how many processes or
	 * threads it could not read for this answer (0 when absent).
	 */
	long partial;
	char error[256]; /* after a failure: why, as a phrase */
};

/*
 * Checks a base URL: http:// or https://, a host, an optional port
 * 1..65535 and an optional path; no user info, query or fragment.
 * Returns 0, or SW_EFORMAT with the reason in err (errlen bytes, may be
 * 0).
 */
int http_check_url(const char *url, char *err, size_t errlen);

/* Fills opts with the defaults above and the token of $STACKWATCH_TOKEN. */
void http_opts_init(struct http_opts *opts);

/*
 * GETs base_url's path followed by target (which starts with '/' and may
 * carry a query), whatever the answer's status; redirects are not
 * followed. Blocks for at most opts->timeout_ms in all; opts may be NULL
 * for the defaults.
 *
 * On success returns 0 and *resp owns the body; release it with
 * http_response_release(). On failure *resp holds no body and
 * resp->error says why; returns -EINVAL (bad URL, target or token),
 * -EHOSTUNREACH (name not resolved), -ECONNREFUSED and the like when no
 * connection was made, -EPERM when the unix socket's server (or with
 * local_server, the TCP server) is neither root nor the caller, or is
 * not on this host (nothing was sent), -ETIMEDOUT, -ECONNRESET, SW_EFORMAT
 * for an answer that is not HTTP or is cut short, SW_ETOOBIG past the body cap,
 * or -ENOMEM. Thread-safe; does not raise SIGPIPE or SIGALRM.
 */
int http_get(const char *base_url, const char *target,
	     const struct http_opts *opts, struct http_response *resp);

/* Frees the body; resp can be reused. Accepts an empty response. */
void http_response_release(struct http_response *resp);

#endif /* SW_CLI_HTTP_H */
