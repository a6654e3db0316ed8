/*
 * http_client.h - a minimal HTTP/1.1 client for the CLI: one GET per
 * connection (Connection: close), plain http:// only, with one total
 * deadline and size caps on everything it reads. It exists because the
 * CLI may depend on nothing but the project's own libraries; it speaks
 * just enough HTTP to read the daemon's answers, and refuses the rest.
 */
#ifndef SW_HTTP_CLIENT_H
#define SW_HTTP_CLIENT_H

#include <stddef.h>

#define HTTP_DEFAULT_TIMEOUT_MS 15000
#define HTTP_MAX_HEADER (64 * 1024) /* the whole header section */
#define HTTP_MAX_BODY ((size_t)256 << 20)

/* A parsed base URL: http://HOST[:PORT][/prefix]. */
struct http_url {
	char host[256];	     /* for getaddrinfo: no brackets, zone as "%eth0" */
	char authority[272]; /* for the Host header: "[::1]:9407" */
	char port[6];	     /* decimal, "80" when the URL has none */
	char prefix[1024];   /* path put before each target, no trailing '/' */
};

struct http_opts {
	int timeout_ms;	   /* total deadline: connect, send and receive */
	size_t max_header; /* cap on the header section, in bytes */
	size_t max_body;   /* cap on the decoded body, in bytes */
	const char *token; /* sent as "Authorization: Bearer"; NULL: none */
};

struct http_response {
	int status;	  /* 100..599 */
	char reason[128]; /* the reason phrase, control bytes replaced */
	char *body;	  /* NUL-terminated, owned; NULL until a success */
	size_t body_len;  /* the body may hold NUL bytes of its own */
	char error[256];  /* after a failure: why, as a phrase */
};

/*
 * Parses url into *out. Accepts only the http scheme (any case), a host
 * name, an IPv4 address or a bracketed IPv6 address, an optional port
 * 1..65535 and an optional path; refuses user info, queries, fragments,
 * and bytes that could not go into a request line or a Host header.
 * Returns 0, or SW_EFORMAT with a reason written to err (errlen bytes,
 * may be 0). Allocates nothing.
 */
int http_parse_url(const char *url, struct http_url *out, char *err,
		   size_t errlen);

/* Fills opts with the defaults above and the token of $STACKWATCH_TOKEN. */
void http_opts_init(struct http_opts *opts);

/*
 * Sends "GET <prefix><target> HTTP/1.1" to url and reads the answer,
 * whatever its status, decoding a Content-Length, chunked or
 * close-delimited body. target starts with '/' and may carry a query.
 * Blocks for at most opts->timeout_ms after name resolution (which the
 * system resolver bounds itself); opts may be NULL for the defaults.
 *
 * On success returns 0 and *resp owns the body; release it with
 * http_response_release(). On failure *resp holds no body and
 * resp->error says why; returns -EINVAL (bad target or token),
 * -EHOSTUNREACH (name not resolved), the connect error (-ECONNREFUSED,
 * ...), -ETIMEDOUT, -ECONNRESET and the like, SW_EFORMAT for a response
 * that is not HTTP/1.x or is cut short, SW_ETOOBIG when a cap is passed,
 * or -ENOMEM. Not async-signal-safe; does not raise SIGPIPE.
 */
int http_get(const struct http_url *url, const char *target,
	     const struct http_opts *opts, struct http_response *resp);

/* Frees the body; resp can be reused. Accepts an empty response. */
void http_response_release(struct http_response *resp);

#endif /* SW_HTTP_CLIENT_H */
