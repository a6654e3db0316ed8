/*
 * http_client.c - the CLI's HTTP/1.1 GET client (http_client.h).
 *
 * One non-blocking socket driven by poll() against one absolute
 * CLOCK_MONOTONIC deadline, so that a server that stalls, or drips a byte
 * at a time, cannot hold the CLI past the timeout. Input passes through a
 * fixed buffer; the header section and the body are copied out into
 * capped bufs (buf.h), so no answer, however malformed, makes the client
 * allocate past its caps, read out of bounds, or wait forever.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "model/buf.h"
#include "http_client.h"
#include "stackwatch.h"

#define REQUEST_MAX (16 * 1024)
#define TOKEN_MAX 4096
#define CHUNK_LINE_MAX 1024 /* a chunk-size line, extensions included */
#define MAX_INTERIM 16	    /* 1xx answers skipped before the real one */

struct conn {
	int fd;
	uint64_t deadline_ns;
	int timeout_ms;
	struct http_response *resp; /* where failures are explained */
	size_t pos;		    /* next unread byte of in */
	size_t end;		    /* one past the last byte read */
	bool eof;
	char in[16384];
};

/* How the body of an answer is delimited. */
struct framing {
	bool chunked;
	bool has_length;
	uint64_t length;
};

static int fail(struct http_response *resp, int rc, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Writes why into resp->error and returns rc, for "return fail(...)". */
static int fail(struct http_response *resp, int rc, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(resp->error, sizeof(resp->error), fmt, ap);
	va_end(ap);
	return rc;
}

static bool is_digit(int c)
{
	return c >= '0' && c <= '9';
}

static bool is_alpha(int c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

static int hex_value(int c)
{
	if (is_digit(c))
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* A byte of a header name (RFC 9110 tchar). */
static bool is_tchar(int c)
{
	return is_alpha(c) || is_digit(c) ||
	       (c && strchr("!#$%&'*+-.^_`|~", c) != NULL);
}

/*
 * Copies at most n bytes of src into dst (size bytes, NUL-terminated),
 * replacing every byte outside printable ASCII with '?', so that whatever
 * a server sends can be quoted in a message without reaching a terminal
 * as control sequences.
 */
static void copy_safe(char *dst, size_t size, const char *src, size_t n)
{
	size_t i;

	if (!size)
		return;
	for (i = 0; i < n && i + 1 < size && src[i]; i++) {
		unsigned char c = (unsigned char)src[i];

		dst[i] = (c < 0x20 || c >= 0x7f) ? '?' : (char)c;
	}
	dst[i] = '\0';
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int url_fail(char *err, size_t errlen, const char *why)
{
	if (errlen)
		snprintf(err, errlen, "%s", why);
	return SW_EFORMAT;
}

/*
 * Parses the bracketed IPv6 literal at *pp (just past '['), leaving *pp
 * past the ']'. Accepts a zone as "%25zone" (RFC 6874) or "%zone".
 */
static int parse_ipv6(const char **pp, struct http_url *out, char *err,
		      size_t errlen)
{
	const char *p = *pp, *start = p, *zone = NULL;
	struct in6_addr a6;
	char addr[64];
	size_t n, zn = 0;

	while (hex_value(*p) >= 0 || *p == ':' || *p == '.')
		p++;
	n = (size_t)(p - start);
	if (*p == '%') {
		p += strncmp(p, "%25", 3) == 0 ? 3 : 1;
		zone = p;
		while (is_alpha(*p) || is_digit(*p) || *p == '-' || *p == '.' ||
		       *p == '_' || *p == '~')
			p++;
		zn = (size_t)(p - zone);
		if (!zn)
			return url_fail(err, errlen, "empty IPv6 zone");
	}
	if (*p != ']')
		return url_fail(err, errlen, "bad IPv6 address");
	if (n == 0 || n >= sizeof(addr))
		return url_fail(err, errlen, "bad IPv6 address");
	memcpy(addr, start, n);
	addr[n] = '\0';
	if (inet_pton(AF_INET6, addr, &a6) != 1)
		return url_fail(err, errlen, "bad IPv6 address");
	if (zone)
		snprintf(out->host, sizeof(out->host), "%s%%%.*s", addr,
			 (int)zn, zone);
	else
		snprintf(out->host, sizeof(out->host), "%s", addr);
	snprintf(out->authority, sizeof(out->authority), "[%.*s]",
		 (int)(p - start), start);
	*pp = p + 1;
	return 0;
}

/* Parses a host name or IPv4 address at *pp, leaving *pp past it. */
static int parse_name(const char **pp, struct http_url *out, char *err,
		      size_t errlen)
{
	const char *p = *pp;
	size_t n;

	while (is_alpha(*p) || is_digit(*p) || *p == '-' || *p == '.' ||
	       *p == '_')
		p++;
	n = (size_t)(p - *pp);
	if (*p == '@')
		return url_fail(err, errlen, "user info is not supported");
	if (*p && *p != ':' && *p != '/')
		return url_fail(err, errlen, "bad character in the host");
	if (n == 0)
		return url_fail(err, errlen, "no host");
	if (n >= sizeof(out->host))
		return url_fail(err, errlen, "host name too long");
	memcpy(out->host, *pp, n);
	out->host[n] = '\0';
	snprintf(out->authority, sizeof(out->authority), "%s", out->host);
	*pp = p;
	return 0;
}

int http_parse_url(const char *url, struct http_url *out, char *err,
		   size_t errlen)
{
	const char *p;
	size_t n;
	long port = 0;
	int rc;

	memset(out, 0, sizeof(*out));
	if (strncasecmp(url, "http://", 7) != 0) {
		if (strncasecmp(url, "https://", 8) == 0)
			return url_fail(err, errlen,
					"https is not supported, use http://");
		return url_fail(err, errlen, "it must start with http://");
	}
	p = url + 7;
	if (*p == '[') {
		p++;
		rc = parse_ipv6(&p, out, err, errlen);
	} else {
		rc = parse_name(&p, out, err, errlen);
	}
	if (rc)
		return rc;

	snprintf(out->port, sizeof(out->port), "80");
	if (*p == ':') {
		const char *digits = ++p;

		while (is_digit(*p) && port <= 65535)
			port = port * 10 + (*p++ - '0');
		if (p == digits || port < 1 || port > 65535 ||
		    (*p && *p != '/'))
			return url_fail(err, errlen, "bad port");
		snprintf(out->port, sizeof(out->port), "%ld", port);
		n = strlen(out->authority);
		snprintf(out->authority + n, sizeof(out->authority) - n, ":%ld",
			 port);
	}
	if (*p && *p != '/')
		return url_fail(err, errlen, "bad character after the host");

	for (n = 0; p[n]; n++) {
		unsigned char c = (unsigned char)p[n];

		if (c == '?' || c == '#')
			return url_fail(err, errlen,
					"a query or fragment is not supported");
		if (c <= 0x20 || c >= 0x7f)
			return url_fail(err, errlen,
					"bad character in the path");
	}
	while (n > 0 && p[n - 1] == '/')
		n--;
	if (n >= sizeof(out->prefix))
		return url_fail(err, errlen, "path too long");
	memcpy(out->prefix, p, n);
	out->prefix[n] = '\0';
	return 0;
}

void http_opts_init(struct http_opts *opts)
{
	const char *token = getenv("STACKWATCH_TOKEN");

	opts->timeout_ms = HTTP_DEFAULT_TIMEOUT_MS;
	opts->max_header = HTTP_MAX_HEADER;
	opts->max_body = HTTP_MAX_BODY;
	opts->token = token && *token ? token : NULL;
}

void http_response_release(struct http_response *resp)
{
	free(resp->body);
	resp->body = NULL;
	resp->body_len = 0;
}

/*
 * Writes the request into req. The token loses surrounding whitespace
 * (as the daemon's token file does) and must hold no other whitespace or
 * control byte, so that nothing can add a header. Returns 0, -EINVAL
 * (explained in resp->error) or -ENOMEM.
 */
static int build_request(const struct http_url *url, const char *target,
			 const char *token, struct buf *req,
			 struct http_response *resp)
{
	size_t i, n;
	int rc;

	if (!target || target[0] != '/')
		return fail(resp, -EINVAL, "bad request target");
	for (i = 0; target[i]; i++)
		if ((unsigned char)target[i] <= 0x20 ||
		    (unsigned char)target[i] >= 0x7f)
			return fail(resp, -EINVAL, "bad request target");
	rc = buf_addf(req,
		      "GET %s%s HTTP/1.1\r\n"
		      "Host: %s\r\n"
		      "User-Agent: stackwatch/%s\r\n"
		      "Accept: */*\r\n"
		      "Connection: close\r\n",
		      url->prefix, target, url->authority, SW_VERSION);
	if (!rc && token) {
		while (*token == ' ' || *token == '\t' || *token == '\n' ||
		       *token == '\r')
			token++;
		n = strlen(token);
		while (n && (token[n - 1] == ' ' || token[n - 1] == '\t' ||
			     token[n - 1] == '\n' || token[n - 1] == '\r'))
			n--;
		if (!n || n > TOKEN_MAX)
			return fail(resp, -EINVAL,
				    "STACKWATCH_TOKEN is empty or too long");
		for (i = 0; i < n; i++)
			if ((unsigned char)token[i] <= 0x20 ||
			    (unsigned char)token[i] == 0x7f)
				return fail(resp, -EINVAL,
					    "STACKWATCH_TOKEN holds a space "
					    "or a control character");
		rc = buf_addf(req, "Authorization: Bearer %.*s\r\n", (int)n,
			      token);
	}
	if (!rc)
		rc = buf_adds(req, "\r\n");
	if (rc == SW_ETOOBIG)
		return fail(resp, -EINVAL, "request too long");
	if (rc)
		return fail(resp, rc, "%s", sw_strerror(rc));
	return 0;
}

/*
 * Waits until c->fd is ready for events or the deadline passes. Returns
 * 0 when ready (or in error: the next call on the socket tells), or
 * -ETIMEDOUT with the phase (what) in resp->error.
 */
static int wait_fd(struct conn *c, short events, const char *what)
{
	struct pollfd pfd = { .fd = c->fd, .events = events };

	for (;;) {
		uint64_t now = now_ns();
		int n;

		if (now >= c->deadline_ns)
			return fail(c->resp, -ETIMEDOUT,
				    "timed out after %d ms %s", c->timeout_ms,
				    what);
		n = poll(&pfd, 1,
			 (int)((c->deadline_ns - now + 999999) / 1000000));
		if (n > 0)
			return 0;
		if (n < 0 && errno != EINTR)
			return fail(c->resp, -errno, "poll: %s",
				    strerror(errno));
	}
}

/*
 * Connects c->fd to one address before the deadline. Returns 0 with
 * c->fd open, or a negative errno (explained) with c->fd closed.
 */
static int connect_one(struct conn *c, const struct addrinfo *ai)
{
	socklen_t len = sizeof(int);
	int err = 0, rc;

	c->fd = socket(ai->ai_family,
		       ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
		       ai->ai_protocol);
	if (c->fd < 0) {
		err = errno;
		return fail(c->resp, -err, "socket: %s", strerror(err));
	}
	if (connect(c->fd, ai->ai_addr, ai->ai_addrlen) == 0)
		return 0;
	if (errno != EINPROGRESS && errno != EINTR) {
		rc = -errno;
		goto out_explain;
	}
	rc = wait_fd(c, POLLOUT, "connecting");
	if (rc)
		goto out_close;
	if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
		err = errno;
	if (!err)
		return 0;
	rc = -err;
out_explain:
	fail(c->resp, rc, "%s", strerror(-rc));
out_close:
	close(c->fd);
	c->fd = -1;
	return rc;
}

/*
 * Resolves the host and connects to the first address that answers.
 * Returns 0 with c->fd open, or a negative errno (explained).
 */
static int conn_open(struct conn *c, const struct http_url *url)
{
	struct addrinfo hints, *res, *ai;
	int rc, err;

	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_NUMERICSERV;
	err = getaddrinfo(url->host, url->port, &hints, &res);
	if (err == EAI_SYSTEM) {
		err = errno ? errno : EHOSTUNREACH;
		return fail(c->resp, -err, "cannot resolve %s: %s", url->host,
			    strerror(err));
	}
	if (err == EAI_MEMORY)
		return fail(c->resp, -ENOMEM, "out of memory");
	if (err)
		return fail(c->resp, -EHOSTUNREACH, "cannot resolve %s: %s",
			    url->host, gai_strerror(err));
	rc = fail(c->resp, -EHOSTUNREACH, "%s has no address", url->host);
	for (ai = res; ai; ai = ai->ai_next) {
		rc = connect_one(c, ai);
		if (rc == 0 || rc == -ETIMEDOUT)
			break;
	}
	freeaddrinfo(res);
	return rc;
}

/* Sends all n bytes before the deadline. Returns 0 or a negative errno. */
static int conn_send(struct conn *c, const char *p, size_t n)
{
	while (n) {
		ssize_t k = send(c->fd, p, n, MSG_NOSIGNAL);
		int rc;

		if (k > 0) {
			p += k;
			n -= (size_t)k;
			continue;
		}
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
			return fail(c->resp, -errno, "sending the request: %s",
				    strerror(errno));
		rc = wait_fd(c, POLLOUT, "sending the request");
		if (rc)
			return rc;
	}
	return 0;
}

/*
 * Reads more of the answer into c->in, after moving unread bytes to the
 * front. Returns 0 when bytes arrived or c->eof got set, or a negative
 * errno (explained), -ETIMEDOUT past the deadline even while bytes keep
 * coming.
 */
static int conn_fill(struct conn *c)
{
	if (c->pos > 0) {
		memmove(c->in, c->in + c->pos, c->end - c->pos);
		c->end -= c->pos;
		c->pos = 0;
	}
	if (c->eof || c->end == sizeof(c->in))
		return 0;
	for (;;) {
		ssize_t k;
		int rc;

		if (now_ns() >= c->deadline_ns)
			return fail(c->resp, -ETIMEDOUT,
				    "timed out after %d ms reading the answer",
				    c->timeout_ms);
		k = recv(c->fd, c->in + c->end, sizeof(c->in) - c->end, 0);
		if (k > 0) {
			c->end += (size_t)k;
			return 0;
		}
		if (k == 0) {
			c->eof = true;
			return 0;
		}
		if (errno == EINTR)
			continue;
		if (errno != EAGAIN && errno != EWOULDBLOCK)
			return fail(c->resp, -errno, "reading the answer: %s",
				    strerror(errno));
		rc = wait_fd(c, POLLIN, "reading the answer");
		if (rc)
			return rc;
	}
}

/*
 * Makes sure at least one unread byte is in c->in. Returns 0, SW_EFORMAT
 * (explained with what) when the connection ends first, or a read error.
 */
static int conn_need(struct conn *c, const char *what)
{
	while (c->pos == c->end) {
		int rc;

		if (c->eof)
			return fail(c->resp, SW_EFORMAT,
				    "the connection closed in the %s", what);
		rc = conn_fill(c);
		if (rc)
			return rc;
	}
	return 0;
}

/*
 * Appends the next line, its LF included, to b. Returns 0, SW_ETOOBIG
 * when b would pass its cap, SW_EFORMAT when the connection ends before
 * the LF, -ENOMEM, or a read error; each explained with what.
 */
static int read_line(struct conn *c, struct buf *b, const char *what)
{
	for (;;) {
		const char *p, *lf;
		size_t n;
		int rc;

		rc = conn_need(c, what);
		if (rc)
			return rc;
		p = c->in + c->pos;
		n = c->end - c->pos;
		lf = memchr(p, '\n', n);
		if (lf)
			n = (size_t)(lf - p) + 1;
		rc = buf_add(b, p, n);
		if (rc == SW_ETOOBIG)
			return fail(c->resp, rc,
				    "the %s is longer than %zu bytes", what,
				    b->max);
		if (rc)
			return fail(c->resp, rc, "%s", sw_strerror(rc));
		c->pos += n;
		if (lf)
			return 0;
	}
}

/* True when the line at p (n bytes, LF included) is empty. */
static bool is_blank(const char *p, size_t n)
{
	return n == 1 || (n == 2 && p[0] == '\r');
}

/*
 * Fails as soon as the first bytes of an answer cannot start "HTTP/1.",
 * so that a peer speaking another protocol (an SSH banner, a TLS alert)
 * is recognized without waiting for a whole line or the deadline.
 */
static int check_http(struct conn *c)
{
	static const char want[] = "HTTP/1.";
	char quoted[48];
	size_t n;
	int rc;

	for (;;) {
		n = c->end - c->pos;
		if (n > sizeof(want) - 1)
			n = sizeof(want) - 1;
		if (memcmp(c->in + c->pos, want, n) != 0) {
			const char *p = c->in + c->pos;

			for (n = 0; n < c->end - c->pos; n++)
				if (p[n] == '\r' || p[n] == '\n')
					break;
			copy_safe(quoted, sizeof(quoted), p, n);
			return fail(c->resp, SW_EFORMAT,
				    "not an HTTP/1.x answer: '%s'", quoted);
		}
		if (n == sizeof(want) - 1 || c->eof)
			return 0;
		rc = conn_fill(c);
		if (rc)
			return rc;
	}
}

/* Reads one header section, up to and including its blank line. */
static int read_head(struct conn *c, struct buf *hdr)
{
	size_t start;
	int rc;

	rc = check_http(c);
	if (rc)
		return rc;
	do {
		start = hdr->len;
		rc = read_line(c, hdr, "header section");
		if (rc == SW_EFORMAT && hdr->len == 0)
			return fail(c->resp, rc,
				    "the connection closed without an answer");
		if (rc)
			return rc;
	} while (start == 0 || !is_blank(hdr->data + start, hdr->len - start));
	return 0;
}

/* Parses "HTTP/1.x NNN reason" into resp->status and resp->reason. */
static int parse_status_line(struct conn *c, const char *s)
{
	struct http_response *resp = c->resp;
	char quoted[48];

	if (strncmp(s, "HTTP/1.", 7) != 0 || !is_digit(s[7]) || s[8] != ' ' ||
	    !is_digit(s[9]) || !is_digit(s[10]) || !is_digit(s[11]) ||
	    (s[12] != ' ' && s[12] != '\0')) {
		copy_safe(quoted, sizeof(quoted), s, strlen(s));
		return fail(resp, SW_EFORMAT,
			    "not an HTTP/1.x status line: '%s'", quoted);
	}
	resp->status = (s[9] - '0') * 100 + (s[10] - '0') * 10 + s[11] - '0';
	if (resp->status < 100 || resp->status > 599)
		return fail(resp, SW_EFORMAT, "bad status code %d",
			    resp->status);
	s += s[12] ? 13 : 12;
	copy_safe(resp->reason, sizeof(resp->reason), s, strlen(s));
	return 0;
}

/* Content-Length: one decimal number; repeated, it must not change. */
static int parse_length(struct conn *c, const char *v, struct framing *f)
{
	uint64_t n = 0;
	const char *p;

	if (!*v)
		return fail(c->resp, SW_EFORMAT, "empty Content-Length");
	for (p = v; *p; p++) {
		if (!is_digit(*p))
			return fail(c->resp, SW_EFORMAT, "bad Content-Length");
		if (n > (UINT64_MAX - 9) / 10)
			return fail(c->resp, SW_ETOOBIG,
				    "Content-Length too large");
		n = n * 10 + (uint64_t)(*p - '0');
	}
	if (f->has_length && f->length != n)
		return fail(c->resp, SW_EFORMAT,
			    "conflicting Content-Length headers");
	f->has_length = true;
	f->length = n;
	return 0;
}

/*
 * Transfer-Encoding: only "chunked" is decoded (we never ask for more),
 * and it may appear once, across every such header.
 */
static int parse_coding(struct conn *c, const char *v, struct framing *f)
{
	while (*v) {
		const char *e;
		size_t n;

		while (*v == ' ' || *v == '\t' || *v == ',')
			v++;
		e = v;
		while (*e && *e != ',')
			e++;
		n = (size_t)(e - v);
		while (n && (v[n - 1] == ' ' || v[n - 1] == '\t'))
			n--;
		if (n) {
			if (n != 7 || strncasecmp(v, "chunked", 7) != 0)
				return fail(c->resp, SW_EFORMAT,
					    "unsupported Transfer-Encoding");
			if (f->chunked)
				return fail(c->resp, SW_EFORMAT,
					    "chunked applied twice");
			f->chunked = true;
		}
		v = e;
	}
	return 0;
}

/* Parses one "Name: value" line (NUL-terminated, no EOL). */
static int parse_header(struct conn *c, char *line, struct framing *f)
{
	char *colon, *v, *e;
	const char *p;

	if (*line == ' ' || *line == '\t')
		return fail(c->resp, SW_EFORMAT, "folded header line");
	colon = strchr(line, ':');
	if (!colon || colon == line)
		return fail(c->resp, SW_EFORMAT, "header line without a name");
	for (p = line; p < colon; p++)
		if (!is_tchar(*p))
			return fail(c->resp, SW_EFORMAT, "bad header name");
	*colon = '\0';
	v = colon + 1;
	while (*v == ' ' || *v == '\t')
		v++;
	e = v + strlen(v);
	while (e > v && (e[-1] == ' ' || e[-1] == '\t'))
		*--e = '\0';
	if (strcasecmp(line, "Content-Length") == 0)
		return parse_length(c, v, f);
	if (strcasecmp(line, "Transfer-Encoding") == 0)
		return parse_coding(c, v, f);
	return 0;
}

/*
 * Parses a header section read by read_head() (len bytes at p, ending in
 * a blank line; modified in place) into the status and *f.
 */
static int parse_head(struct conn *c, char *p, size_t len, struct framing *f)
{
	char *end = p + len, *line, *eol;
	int rc;

	if (memchr(p, '\0', len))
		return fail(c->resp, SW_EFORMAT, "NUL byte in the headers");
	for (line = p; line < end; line = eol + 1) {
		eol = memchr(line, '\n', (size_t)(end - line));
		if (!eol)
			break;
		*eol = '\0';
		if (eol > line && eol[-1] == '\r')
			eol[-1] = '\0';
		if (line == p)
			rc = parse_status_line(c, line);
		else if (!*line)
			break;
		else
			rc = parse_header(c, line, f);
		if (rc)
			return rc;
	}
	return 0;
}

/* Explains a failed append to the body. */
static int body_fail(struct conn *c, int rc, const struct buf *body)
{
	if (rc == SW_ETOOBIG)
		return fail(c->resp, rc, "the body is larger than %zu bytes",
			    body->max);
	return fail(c->resp, rc, "%s", sw_strerror(rc));
}

/* Appends exactly n more bytes of the answer to body. */
static int read_exact(struct conn *c, struct buf *body, uint64_t n,
		      const char *what)
{
	if (n > body->max - body->len)
		return body_fail(c, SW_ETOOBIG, body);
	while (n) {
		size_t k;
		int rc;

		rc = conn_need(c, what);
		if (rc)
			return rc;
		k = c->end - c->pos;
		if (k > n)
			k = (size_t)n;
		rc = buf_add(body, c->in + c->pos, k);
		if (rc)
			return body_fail(c, rc, body);
		c->pos += k;
		n -= k;
	}
	return 0;
}

/*
 * Decodes a chunked body into body: "SIZE[;ext]" lines, each chunk
 * followed by CRLF, a zero-size chunk, then trailers (read and dropped,
 * capped like the headers) up to a blank line.
 */
static int read_chunked(struct conn *c, struct buf *body, size_t max_trailer)
{
	struct buf line;
	int rc;

	buf_init(&line, CHUNK_LINE_MAX);
	for (;;) {
		uint64_t size = 0;
		const char *p;

		buf_release(&line);
		rc = read_line(c, &line, "chunk size line");
		if (rc)
			goto out_release;
		for (p = line.data; hex_value(*p) >= 0; p++) {
			if (size > body->max)
				break;
			size = size * 16 + (uint64_t)hex_value(*p);
		}
		if (p == line.data)
			goto out_format;
		while (*p == ' ' || *p == '\t')
			p++;
		if (hex_value(*p) >= 0) {
			rc = body_fail(c, SW_ETOOBIG, body);
			goto out_release;
		}
		if (*p != ';' && *p != '\r' && *p != '\n')
			goto out_format;
		if (size == 0)
			break;
		rc = read_exact(c, body, size, "chunked body");
		if (rc)
			goto out_release;
		buf_release(&line);
		rc = read_line(c, &line, "chunked body");
		if (rc)
			goto out_release;
		if (!is_blank(line.data, line.len))
			goto out_format;
	}

	buf_release(&line);
	buf_init(&line, max_trailer);
	do {
		buf_release(&line);
		rc = read_line(c, &line, "trailer section");
		if (rc)
			goto out_release;
	} while (!is_blank(line.data, line.len));
	rc = 0;
	goto out_release;

out_format:
	rc = fail(c->resp, SW_EFORMAT, "bad chunked encoding");
out_release:
	buf_release(&line);
	return rc;
}

/* Appends everything until the server closes the connection. */
static int read_until_close(struct conn *c, struct buf *body)
{
	for (;;) {
		int rc;

		if (c->pos < c->end) {
			rc = buf_add(body, c->in + c->pos, c->end - c->pos);
			if (rc)
				return body_fail(c, rc, body);
			c->pos = c->end;
		}
		if (c->eof)
			return 0;
		rc = conn_fill(c);
		if (rc)
			return rc;
	}
}

/*
 * Reads the answer: skips interim (1xx) answers, then reads the final
 * header section and its body. On success resp owns the body.
 */
static int read_response(struct conn *c, const struct http_opts *opts,
			 struct http_response *resp)
{
	struct framing f;
	struct buf hdr, body;
	size_t len;
	int rc, i;

	buf_init(&hdr, opts->max_header);
	buf_init(&body, opts->max_body);
	for (i = 0;; i++) {
		memset(&f, 0, sizeof(f));
		buf_release(&hdr);
		rc = read_head(c, &hdr);
		if (rc)
			goto out_release;
		rc = parse_head(c, hdr.data, hdr.len, &f);
		if (rc)
			goto out_release;
		if (resp->status >= 200)
			break;
		if (resp->status == 101 || i == MAX_INTERIM) {
			rc = fail(resp, SW_EFORMAT, "unexpected %d answer",
				  resp->status);
			goto out_release;
		}
	}

	if (resp->status == 204 || resp->status == 304)
		rc = 0;
	else if (f.chunked)
		rc = read_chunked(c, &body, opts->max_header);
	else if (f.has_length)
		rc = read_exact(c, &body, f.length, "body");
	else
		rc = read_until_close(c, &body);
	if (rc)
		goto out_release;
	len = body.len;
	rc = buf_detach(&body, &resp->body);
	if (rc) {
		rc = fail(resp, rc, "%s", sw_strerror(rc));
		goto out_release;
	}
	resp->body_len = len;

out_release:
	buf_release(&hdr);
	buf_release(&body);
	if (rc)
		resp->status = 0;
	return rc;
}

int http_get(const struct http_url *url, const char *target,
	     const struct http_opts *opts, struct http_response *resp)
{
	struct http_opts defaults;
	struct buf req;
	struct conn *c;
	int rc;

	memset(resp, 0, sizeof(*resp));
	if (!opts) {
		http_opts_init(&defaults);
		opts = &defaults;
	}
	if (opts->timeout_ms <= 0)
		return fail(resp, -EINVAL, "bad timeout");
	c = calloc(1, sizeof(*c));
	if (!c)
		return fail(resp, -ENOMEM, "out of memory");
	c->fd = -1;
	c->resp = resp;
	c->timeout_ms = opts->timeout_ms;
	c->deadline_ns = now_ns() + (uint64_t)opts->timeout_ms * 1000000ull;

	buf_init(&req, REQUEST_MAX);
	rc = build_request(url, target, opts->token, &req, resp);
	if (rc)
		goto out_free;
	rc = conn_open(c, url);
	if (rc)
		goto out_free;
	rc = conn_send(c, req.data, req.len);
	if (rc)
		goto out_close;
	rc = read_response(c, opts, resp);
	if (!rc)
		resp->error[0] = '\0';

out_close:
	close(c->fd);
out_free:
	buf_release(&req);
	free(c);
	return rc;
}
