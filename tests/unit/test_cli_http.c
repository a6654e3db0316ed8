/*
 * test_cli_http.c - the CLI's HTTP client (src/cli/http_client.c) against
 * a real TCP peer: a small server thread on 127.0.0.1:0 (and [::1]:0 when
 * the host has IPv6) answers each connection with a canned response, whole,
 * byte by byte, stalled or dripping, and records the request it got. The
 * checks cover URL parsing, the request we send, every body framing, the
 * caps, the deadline, and answers that are malformed or garbled at random.
 *
 * The client is compiled into this program (it is not part of
 * libstackwatch), hence the #include of its source.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "../../src/cli/http_client.c"
#include "tap.h"

enum mode {
	M_REPLY, /* send the reply, close */
	M_SPLIT, /* send the reply one byte at a time, close */
	M_STALL, /* send the reply, then hold on until the client closes */
	M_DRIP,	 /* send the reply, then an 'x' every 50 ms until closed */
};

struct server {
	int fd;
	char port[8];
	pthread_t thread;
	pthread_mutex_t lock;
	/* Below: guarded by lock. */
	enum mode mode;
	const char *reply;
	size_t reply_len;
	char request[8192];
	size_t request_len;
	int served;
	bool stop;
};

static uint64_t ms_now(void)
{
	return now_ns() / 1000000;
}

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) != 0)
		;
}

/* Reads the request head (up to the blank line) into buf; its length. */
static size_t read_request(int fd, char *buf, size_t size)
{
	size_t len = 0;

	while (len + 1 < size) {
		ssize_t n = recv(fd, buf + len, size - 1 - len, 0);

		if (n <= 0)
			break;
		len += (size_t)n;
		buf[len] = '\0';
		if (strstr(buf, "\r\n\r\n"))
			break;
	}
	buf[len] = '\0';
	return len;
}

/* Waits (at most 5 s) until the client closes its end. */
static void wait_peer_close(int fd, bool drip)
{
	uint64_t end = ms_now() + 5000;
	char c;

	while (ms_now() < end) {
		ssize_t n;

		if (drip && send(fd, "x", 1, MSG_NOSIGNAL) < 0)
			return;
		n = recv(fd, &c, 1, MSG_DONTWAIT);
		if (n == 0 ||
		    (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK))
			return;
		sleep_ms(drip ? 50 : 10);
	}
}

static void serve_one(struct server *s, int fd)
{
	struct timeval tv = { 2, 0 };
	char req[sizeof(s->request)];
	const char *reply;
	char *copy;
	size_t len, i;
	enum mode mode;
	int one = 1;

	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	len = read_request(fd, req, sizeof(req));

	pthread_mutex_lock(&s->lock);
	memcpy(s->request, req, len + 1);
	s->request_len = len;
	s->served++;
	mode = s->mode;
	len = s->reply_len;
	/* Our own copy: the client may return, and the test move on to
	 * the next reply, before we are done sending this one. */
	copy = malloc(len + 1);
	if (copy)
		memcpy(copy, s->reply, len);
	pthread_mutex_unlock(&s->lock);
	if (!copy) {
		close(fd);
		return;
	}
	reply = copy;

	if (mode == M_SPLIT) {
		for (i = 0; i < len; i++) {
			if (send(fd, reply + i, 1, MSG_NOSIGNAL) != 1)
				break;
			if (i % 8 == 0)
				sleep_ms(1);
		}
	} else if (len) {
		ssize_t n = send(fd, reply, len, MSG_NOSIGNAL);

		(void)n;
	}
	if (mode == M_STALL || mode == M_DRIP)
		wait_peer_close(fd, mode == M_DRIP);
	close(fd);
	free(copy);
}

static void *server_main(void *arg)
{
	struct server *s = arg;

	for (;;) {
		int fd = accept(s->fd, NULL, NULL);
		bool stop;

		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			break;
		}
		pthread_mutex_lock(&s->lock);
		stop = s->stop;
		pthread_mutex_unlock(&s->lock);
		if (stop) {
			close(fd);
			break;
		}
		serve_one(s, fd);
	}
	return NULL;
}

/* Starts a server on the loopback address of family. 0 or -1. */
static int server_start(struct server *s, int family)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int port;

	memset(s, 0, sizeof(*s));
	memset(&ss, 0, sizeof(ss));
	pthread_mutex_init(&s->lock, NULL);
	s->fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (s->fd < 0)
		return -1;
	if (family == AF_INET) {
		struct sockaddr_in *a = (struct sockaddr_in *)&ss;

		a->sin_family = AF_INET;
		a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		len = sizeof(*a);
	} else {
		struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;

		a->sin6_family = AF_INET6;
		a->sin6_addr = in6addr_loopback;
		len = sizeof(*a);
	}
	if (bind(s->fd, (struct sockaddr *)&ss, len) != 0 ||
	    listen(s->fd, 16) != 0 ||
	    getsockname(s->fd, (struct sockaddr *)&ss, &len) != 0)
		goto out_close;
	port = family == AF_INET
		       ? ntohs(((struct sockaddr_in *)&ss)->sin_port)
		       : ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
	snprintf(s->port, sizeof(s->port), "%d", port);
	if (pthread_create(&s->thread, NULL, server_main, s) != 0)
		goto out_close;
	return 0;

out_close:
	close(s->fd);
	return -1;
}

/* Stops the thread (waking its accept with one last connection). */
static void server_stop(struct server *s, const char *host)
{
	struct http_url url;
	struct http_response resp;
	struct http_opts opts;
	char u[128];

	pthread_mutex_lock(&s->lock);
	s->stop = true;
	pthread_mutex_unlock(&s->lock);
	snprintf(u, sizeof(u), "http://%s:%s", host, s->port);
	http_parse_url(u, &url, NULL, 0);
	http_opts_init(&opts);
	opts.timeout_ms = 2000;
	http_get(&url, "/", &opts, &resp);
	http_response_release(&resp);
	pthread_join(s->thread, NULL);
	close(s->fd);
	pthread_mutex_destroy(&s->lock);
}

static void server_set(struct server *s, enum mode mode, const char *reply,
		       size_t len)
{
	pthread_mutex_lock(&s->lock);
	s->mode = mode;
	s->reply = reply;
	s->reply_len = len;
	s->request[0] = '\0';
	s->request_len = 0;
	pthread_mutex_unlock(&s->lock);
}

/* A copy of the last request the server read. */
static void server_request(struct server *s, char *out, size_t size)
{
	pthread_mutex_lock(&s->lock);
	snprintf(out, size, "%s", s->request);
	pthread_mutex_unlock(&s->lock);
}

static int server_served(struct server *s)
{
	int n;

	pthread_mutex_lock(&s->lock);
	n = s->served;
	pthread_mutex_unlock(&s->lock);
	return n;
}

static struct server srv;
static const char empty_ok[] = "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n";

/*
 * GETs /api/v1/targets from srv after setting its reply (len bytes;
 * (size_t)-1: strlen). opts may be NULL (defaults, no token).
 */
static int get_with(enum mode mode, const char *reply, size_t len,
		    const struct http_opts *opts, struct http_response *resp)
{
	struct http_opts defaults;
	struct http_url url;
	char u[64];

	if (len == (size_t)-1)
		len = strlen(reply);
	if (!opts) {
		http_opts_init(&defaults);
		defaults.token = NULL;
		defaults.timeout_ms = 5000;
		opts = &defaults;
	}
	server_set(&srv, mode, reply, len);
	snprintf(u, sizeof(u), "http://127.0.0.1:%s", srv.port);
	if (http_parse_url(u, &url, NULL, 0) != 0)
		return -1000;
	return http_get(&url, "/api/v1/targets", opts, resp);
}

static int get(const char *reply, struct http_response *resp)
{
	return get_with(M_REPLY, reply, (size_t)-1, NULL, resp);
}

static void test_parse_url(void)
{
	static const char *const bad[] = {
		"https://h",	  "ftp://h",	    "http://",
		"http://:80",	  "http://h:0",	    "http://h:65536",
		"http://h:",	  "http://h:8a",    "http://u@h",
		"http://h/a b",	  "http://h/?x=1",  "http://h#f",
		"http://[::1",	  "http://[zz]:1",  "http://[]",
		"http://h\r\nX:", "127.0.0.1:9407", "http://h:99999999999",
		"http://[::1]x",  "http://h/\x7f",  "",
	};
	struct http_url u;
	char err[128], quoted[64];
	size_t i;
	int rc;

	rc = http_parse_url("http://127.0.0.1:9407", &u, err, sizeof(err));
	TAP_OK(rc == 0 && strcmp(u.host, "127.0.0.1") == 0 &&
		       strcmp(u.port, "9407") == 0 &&
		       strcmp(u.authority, "127.0.0.1:9407") == 0 &&
		       u.prefix[0] == '\0',
	       "url: IPv4 and port");
	rc = http_parse_url("HTTP://Example.COM", &u, err, sizeof(err));
	TAP_OK(rc == 0 && strcmp(u.host, "Example.COM") == 0 &&
		       strcmp(u.port, "80") == 0 &&
		       strcmp(u.authority, "Example.COM") == 0,
	       "url: name, scheme in capitals, default port 80");
	rc = http_parse_url("http://[::1]:8080/sw/", &u, err, sizeof(err));
	TAP_OK(rc == 0 && strcmp(u.host, "::1") == 0 &&
		       strcmp(u.port, "8080") == 0 &&
		       strcmp(u.authority, "[::1]:8080") == 0 &&
		       strcmp(u.prefix, "/sw") == 0,
	       "url: bracketed IPv6 with a path prefix (got host '%s', "
	       "prefix '%s')",
	       u.host, u.prefix);
	rc = http_parse_url("http://[fe80::1%25eth0]:1", &u, err, sizeof(err));
	TAP_OK(rc == 0 && strcmp(u.host, "fe80::1%eth0") == 0,
	       "url: IPv6 zone (got '%s')", u.host);
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err[0] = '\0';
		rc = http_parse_url(bad[i], &u, err, sizeof(err));
		copy_safe(quoted, sizeof(quoted), bad[i], strlen(bad[i]));
		TAP_OK(rc == SW_EFORMAT && err[0], "url: refuses '%s' (%s)",
		       quoted, err);
	}
}

static void test_request(void)
{
	struct http_response resp;
	struct http_opts opts;
	struct http_url url;
	char req[8192], want[128], u[64];
	int rc;

	http_opts_init(&opts);
	opts.token = "  s3cret\n";
	rc = get_with(M_REPLY,
		      "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello",
		      (size_t)-1, &opts, &resp);
	TAP_OK(rc == 0 && resp.status == 200 && resp.body_len == 5 &&
		       strcmp(resp.body, "hello") == 0 &&
		       strcmp(resp.reason, "OK") == 0,
	       "Content-Length body (rc %d: %s)", rc, resp.error);
	http_response_release(&resp);
	server_request(&srv, req, sizeof(req));
	TAP_OK(strncmp(req, "GET /api/v1/targets HTTP/1.1\r\n", 30) == 0,
	       "request line");
	snprintf(want, sizeof(want), "\r\nHost: 127.0.0.1:%s\r\n", srv.port);
	TAP_OK(strstr(req, want) != NULL, "Host header with the port");
	TAP_OK(strstr(req, "\r\nConnection: close\r\n") &&
		       strstr(req, "\r\nAccept: */*\r\n"),
	       "Connection: close and Accept");
	TAP_OK(strstr(req, "\r\nAuthorization: Bearer s3cret\r\n") != NULL,
	       "bearer token, trimmed");
	TAP_OK(strlen(req) > 4 &&
		       strcmp(req + strlen(req) - 4, "\r\n\r\n") == 0,
	       "request ends with a blank line");

	rc = get("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", &resp);
	server_request(&srv, req, sizeof(req));
	TAP_OK(rc == 0 && resp.body && resp.body_len == 0 &&
		       !strstr(req, "Authorization"),
	       "empty body; no token, no Authorization header");
	http_response_release(&resp);

	server_set(&srv, M_REPLY, empty_ok, strlen(empty_ok));
	snprintf(u, sizeof(u), "http://127.0.0.1:%s/base/", srv.port);
	http_parse_url(u, &url, NULL, 0);
	rc = http_get(&url, "/api/v1/stacks?pid=1&format=json", NULL, &resp);
	http_response_release(&resp);
	server_request(&srv, req, sizeof(req));
	TAP_OK(rc == 0 && strncmp(req,
				  "GET /base/api/v1/stacks?pid=1&format=json "
				  "HTTP/1.1\r\n",
				  50) == 0,
	       "the URL's path prefixes the target");

	rc = get_with(M_REPLY,
		      "HTTP/1.1 200 OK\r\nContent-Length: 7\r\n\r\na\0b\0c\0d",
		      45, NULL, &resp);
	TAP_OK(rc == 0 && resp.body_len == 7 &&
		       memcmp(resp.body, "a\0b\0c\0d", 8) == 0,
	       "binary body with NUL bytes keeps its length");
	http_response_release(&resp);
}

static void test_framing(void)
{
	struct http_response resp;
	int rc;

	rc = get_with(M_SPLIT,
		      "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n"
		      "\r\n5;ext=1\r\nhello\r\n7\r\n, world\r\n0\r\n"
		      "X-Trailer: y\r\n\r\n",
		      (size_t)-1, NULL, &resp);
	TAP_OK(rc == 0 && resp.body_len == 12 &&
		       strcmp(resp.body, "hello, world") == 0,
	       "chunked, extension and trailer, sent byte by byte (rc %d: "
	       "%s)",
	       rc, resp.error);
	http_response_release(&resp);

	rc = get("HTTP/1.1 200 OK\r\ntransfer-encoding:  Chunked \r\n\r\n"
		 "A\r\n0123456789\r\n0\r\n\r\n",
		 &resp);
	TAP_OK(rc == 0 && strcmp(resp.body, "0123456789") == 0,
	       "chunked: header in any case, hex in capitals");
	http_response_release(&resp);

	rc = get("HTTP/1.1 200 OK\nContent-Length: 2\n\nok", &resp);
	TAP_OK(rc == 0 && strcmp(resp.body, "ok") == 0,
	       "bare LF line ends are accepted");
	http_response_release(&resp);

	rc = get_with(M_SPLIT,
		      "HTTP/1.0 404 Not Found\r\nContent-Type: application/"
		      "json\r\n\r\n{\"error\": \"no such target\", \"status\": "
		      "404}",
		      (size_t)-1, NULL, &resp);
	TAP_OK(rc == 0 && resp.status == 404 &&
		       strcmp(resp.reason, "Not Found") == 0 &&
		       strcmp(resp.body, "{\"error\": \"no such target\", "
					 "\"status\": 404}") == 0,
	       "close-delimited body of an error answer");
	http_response_release(&resp);

	rc = get("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\n"
		 "Content-Length: 2\r\n\r\nok",
		 &resp);
	TAP_OK(rc == 0 && resp.status == 200 && strcmp(resp.body, "ok") == 0,
	       "an interim 100 answer is skipped");
	http_response_release(&resp);

	rc = get_with(M_STALL, "HTTP/1.1 204 No Content\r\n\r\n", (size_t)-1,
		      NULL, &resp);
	TAP_OK(rc == 0 && resp.status == 204 && resp.body_len == 0,
	       "204 has no body, even on an open connection");
	http_response_release(&resp);

	rc = get("HTTP/1.1 200\r\nContent-Length: 1\r\n\r\nx", &resp);
	TAP_OK(rc == 0 && resp.reason[0] == '\0',
	       "status line without a reason phrase");
	http_response_release(&resp);

	rc = get("HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Length: 3"
		 "\r\n\r\nabcdef",
		 &resp);
	TAP_OK(rc == 0 && strcmp(resp.body, "abc") == 0,
	       "repeated equal Content-Length; bytes past it are dropped");
	http_response_release(&resp);
}

static void test_malformed(void)
{
	static const struct {
		const char *reply;
		size_t len;
		const char *what;
	} cases[] = {
		{ "SSH-2.0-OpenSSH_9.6\r\n", 0, "not HTTP" },
		{ "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", 1,
		  "cut after one byte" },
		{ "HTTP/1.1 20 OK\r\n\r\n", 0, "two-digit status" },
		{ "HTTP/1.1 2000 OK\r\n\r\n", 0, "four-digit status" },
		{ "HTTP/2 200\r\n\r\n", 0, "HTTP/2" },
		{ "HTTP/1.1 099 Low\r\n\r\n", 0, "status below 100" },
		{ "\r\nHTTP/1.1 200 OK\r\n\r\n", 0, "blank first line" },
		{ "HTTP/1.1 200 OK\r\nNoColon\r\n\r\n", 0, "no colon" },
		{ "HTTP/1.1 200 OK\r\n: v\r\n\r\n", 0, "empty name" },
		{ "HTTP/1.1 200 OK\r\nContent-Length : 1\r\n\r\nx", 0,
		  "space before the colon" },
		{ "HTTP/1.1 200 OK\r\nX: a\r\n b\r\n\r\n", 0, "folded header" },
		{ "HTTP/1.1 200 OK\r\nContent-Length: abc\r\n\r\n", 0,
		  "Content-Length not a number" },
		{ "HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n", 0,
		  "negative Content-Length" },
		{ "HTTP/1.1 200 OK\r\nContent-Length:\r\n\r\n", 0,
		  "empty Content-Length" },
		{ "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3"
		  "\r\n\r\nabc",
		  0, "conflicting Content-Length" },
		{ "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc", 0,
		  "body cut short" },
		{ "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n", 0,
		  "unsupported coding" },
		{ "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, chunked\r\n"
		  "\r\n0\r\n\r\n",
		  0, "chunked twice" },
		{ "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
		  0, "chunk size not hex" },
		{ "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5x\r\n",
		  0, "junk after the chunk size" },
		{ "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
		  "5\r\nhelloX\r\n0\r\n\r\n",
		  0, "chunk without its CRLF" },
		{ "HTTP/1.1 200 OK\r\nTransfer-Encoding: "
		  "chunked\r\n\r\n5\r\nhel",
		  0, "chunked body cut short" },
		{ "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
		  "0\r\nX: y\r\n",
		  0, "trailers cut short" },
		{ "HTTP/1.1 200 OK\r\nX: y", 0, "headers cut short" },
		{ "", 0, "closed without an answer" },
		{ "HTTP/1.1 200 OK\r\nX: a\0b\r\nContent-Length: 0\r\n\r\n", 46,
		  "NUL byte in a header" },
		{ "HTTP/1.1 101 Switching Protocols\r\n\r\n", 0,
		  "101 that we never asked for" },
		{ "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03", 11,
		  "a TLS handshake" },
	};
	struct http_response resp;
	uint64_t t0, dt;
	size_t i;
	int rc;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		rc = get_with(M_REPLY, cases[i].reply,
			      cases[i].len ? cases[i].len : (size_t)-1, NULL,
			      &resp);
		TAP_OK(rc == SW_EFORMAT && !resp.body && resp.status == 0 &&
			       resp.error[0],
		       "malformed: %s (rc %d: %s)", cases[i].what, rc,
		       resp.error);
		http_response_release(&resp);
	}
	rc = get("", &resp);
	TAP_OK(strstr(resp.error, "without an answer") != NULL,
	       "an empty answer is explained (%s)", resp.error);

	t0 = ms_now();
	rc = get_with(M_STALL, "SSH-2.0-OpenSSH_9.6\r\n", (size_t)-1, NULL,
		      &resp);
	dt = ms_now() - t0;
	TAP_OK(rc == SW_EFORMAT && dt < 1000 &&
		       strstr(resp.error, "'SSH-2.0-OpenSSH_9.6'"),
	       "a peer that is not HTTP and keeps the connection open is "
	       "recognized at once (%llu ms: %s)",
	       (unsigned long long)dt, resp.error);
	t0 = ms_now();
	rc = get_with(M_STALL, "HTX", (size_t)-1, NULL, &resp);
	dt = ms_now() - t0;
	TAP_OK(rc == SW_EFORMAT && dt < 1000,
	       "... even before its first line ends (%llu ms)",
	       (unsigned long long)dt);
}

/* Fills p with n bytes of a pattern that shows misplaced bytes. */
static void pattern(char *p, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		p[i] = (char)('a' + (i * 7 + i / 4093) % 26);
}

/* 1 MB bodies, far larger than the client's input buffer. */
static void test_big_bodies(void)
{
	const size_t n = 1 << 20, chunk = 65000;
	struct http_response resp;
	char *data, *reply, *p;
	size_t off;
	int rc;

	data = malloc(n);
	reply = malloc(n + n / 8);
	if (!data || !reply) {
		TAP_OK(0, "out of memory");
		goto out_free;
	}
	pattern(data, n);

	p = reply + sprintf(reply,
			    "HTTP/1.1 200 OK\r\nContent-Length: %zu"
			    "\r\n\r\n",
			    n);
	memcpy(p, data, n);
	rc = get_with(M_REPLY, reply, (size_t)(p - reply) + n, NULL, &resp);
	TAP_OK(rc == 0 && resp.body_len == n && memcmp(resp.body, data, n) == 0,
	       "a 1 MB Content-Length body arrives intact (rc %d: %s)", rc,
	       resp.error);
	http_response_release(&resp);

	p = reply + sprintf(reply, "HTTP/1.1 200 OK\r\nTransfer-Encoding: "
				   "chunked\r\n\r\n");
	for (off = 0; off < n; off += chunk) {
		size_t k = n - off < chunk ? n - off : chunk;

		p += sprintf(p, "%zx\r\n", k);
		memcpy(p, data + off, k);
		p += k;
		p += sprintf(p, "\r\n");
	}
	p += sprintf(p, "0\r\n\r\n");
	rc = get_with(M_REPLY, reply, (size_t)(p - reply), NULL, &resp);
	TAP_OK(rc == 0 && resp.body_len == n && memcmp(resp.body, data, n) == 0,
	       "a 1 MB chunked body arrives intact (rc %d: %s)", rc,
	       resp.error);
	http_response_release(&resp);

out_free:
	free(data);
	free(reply);
}

static void test_caps(void)
{
	struct http_response resp;
	struct http_opts opts;
	char *big, *body;
	size_t n, k;
	int rc;

	/* One header line of 70 kB: past the 64 kB cap on the section. */
	n = 70 * 1024;
	big = malloc(n + 64);
	body = malloc(2048);
	if (!big || !body) {
		TAP_OK(0, "out of memory");
		free(big);
		free(body);
		return;
	}
	strcpy(big, "HTTP/1.1 200 OK\r\nX-Big: ");
	k = strlen(big);
	memset(big + k, 'a', n);
	strcpy(big + k + n, "\r\nContent-Length: 0\r\n\r\n");
	rc = get(big, &resp);
	TAP_OK(rc == SW_ETOOBIG && !resp.body,
	       "a 70 kB header section is refused (rc %d: %s)", rc, resp.error);
	http_response_release(&resp);

	/* Many 1 kB lines, 60 kB in all: under the cap. */
	strcpy(big, "HTTP/1.1 200 OK\r\n");
	for (n = 0; n < 60; n++) {
		size_t at = strlen(big);

		memcpy(big + at, "X-Pad: ", 7);
		memset(big + at + 7, 'p', 1000);
		strcpy(big + at + 1007, "\r\n");
	}
	strcat(big, "Content-Length: 2\r\n\r\nok");
	rc = get(big, &resp);
	TAP_OK(rc == 0 && strcmp(resp.body, "ok") == 0,
	       "60 kB of headers pass (rc %d: %s)", rc, resp.error);
	http_response_release(&resp);

	test_big_bodies();

	http_opts_init(&opts);
	opts.token = NULL;
	opts.max_body = 100;
	memset(body, 'b', 2048);

	snprintf(big, 256, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n");
	n = strlen(big);
	memcpy(big + n, body, 100);
	rc = get_with(M_REPLY, big, n + 100, &opts, &resp);
	TAP_OK(rc == 0 && resp.body_len == 100, "a body of exactly the cap");
	http_response_release(&resp);

	snprintf(big, 256, "HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n");
	n = strlen(big);
	memcpy(big + n, body, 1000);
	rc = get_with(M_REPLY, big, n + 1000, &opts, &resp);
	TAP_OK(rc == SW_ETOOBIG && !resp.body,
	       "Content-Length past the body cap");
	http_response_release(&resp);

	snprintf(big, 256, "HTTP/1.1 200 OK\r\n\r\n");
	n = strlen(big);
	memcpy(big + n, body, 1000);
	rc = get_with(M_REPLY, big, n + 1000, &opts, &resp);
	TAP_OK(rc == SW_ETOOBIG && !resp.body,
	       "close-delimited body past the cap");
	http_response_release(&resp);

	snprintf(big, 256,
		 "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
		 "50\r\n");
	n = strlen(big);
	memcpy(big + n, body, 80);
	memcpy(big + n + 80, "\r\n50\r\n", 6);
	memcpy(big + n + 86, body, 80);
	memcpy(big + n + 166, "\r\n0\r\n\r\n", 7);
	rc = get_with(M_REPLY, big, n + 173, &opts, &resp);
	TAP_OK(rc == SW_ETOOBIG && !resp.body, "chunks past the body cap");
	http_response_release(&resp);

	rc = get("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
		 "ffffffffffffffffffffffff\r\n",
		 &resp);
	TAP_OK(rc == SW_ETOOBIG, "a chunk size that overflows 64 bits");
	http_response_release(&resp);

	rc = get("HTTP/1.1 200 OK\r\nContent-Length: "
		 "99999999999999999999999999\r\n\r\n",
		 &resp);
	TAP_OK(rc == SW_ETOOBIG, "a Content-Length that overflows 64 bits");
	http_response_release(&resp);

	rc = get("HTTP/1.1 200 OK\r\nContent-Length: 268435457\r\n\r\n", &resp);
	TAP_OK(rc == SW_ETOOBIG, "the default body cap is 256 MB");
	http_response_release(&resp);

	free(big);
	free(body);
}

static void test_deadline(void)
{
	struct http_response resp;
	struct http_opts opts;
	uint64_t t0, dt;
	int rc;

	http_opts_init(&opts);
	opts.token = NULL;
	opts.timeout_ms = 300;

	t0 = ms_now();
	rc = get_with(M_STALL, "", 0, &opts, &resp);
	dt = ms_now() - t0;
	TAP_OK(rc == -ETIMEDOUT && dt >= 250 && dt < 1500,
	       "a server that never answers: timeout after %llu ms (%s)",
	       (unsigned long long)dt, resp.error);

	t0 = ms_now();
	rc = get_with(M_STALL,
		      "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nab",
		      (size_t)-1, &opts, &resp);
	dt = ms_now() - t0;
	TAP_OK(rc == -ETIMEDOUT && dt >= 250 && dt < 1500,
	       "a body that stops halfway: timeout after %llu ms",
	       (unsigned long long)dt);

	t0 = ms_now();
	rc = get_with(M_DRIP, "HTTP/1.1 200 OK\r\nX-Slow: ", (size_t)-1, &opts,
		      &resp);
	dt = ms_now() - t0;
	TAP_OK(rc == -ETIMEDOUT && dt >= 250 && dt < 1500,
	       "headers dripping a byte at a time: one total deadline "
	       "(%llu ms)",
	       (unsigned long long)dt);

	t0 = ms_now();
	rc = get_with(M_DRIP, "HTTP/1.1 200 OK\r\n\r\n", (size_t)-1, &opts,
		      &resp);
	dt = ms_now() - t0;
	TAP_OK(rc == -ETIMEDOUT && dt >= 250 && dt < 1500 && !resp.body,
	       "a close-delimited body that never ends (%llu ms)",
	       (unsigned long long)dt);
}

static void test_connect(void)
{
	struct sockaddr_in a;
	struct http_response resp;
	struct http_opts opts;
	struct http_url url;
	socklen_t len = sizeof(a);
	char u[64];
	int fd, rc, before;

	/* A bound socket that does not listen refuses connections. */
	memset(&a, 0, sizeof(a));
	a.sin_family = AF_INET;
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	fd = socket(AF_INET, SOCK_STREAM, 0);
	if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) != 0 ||
	    getsockname(fd, (struct sockaddr *)&a, &len) != 0) {
		TAP_SKIP("cannot bind a socket for the refusal test");
	} else {
		snprintf(u, sizeof(u), "http://127.0.0.1:%d",
			 ntohs(a.sin_port));
		http_parse_url(u, &url, NULL, 0);
		rc = http_get(&url, "/", NULL, &resp);
		TAP_OK(rc == -ECONNREFUSED && strstr(resp.error, "refused"),
		       "connection refused (%s)", resp.error);
	}
	if (fd >= 0)
		close(fd);

	server_set(&srv, M_REPLY, empty_ok, strlen(empty_ok));
	snprintf(u, sizeof(u), "http://localhost:%s", srv.port);
	http_parse_url(u, &url, NULL, 0);
	rc = http_get(&url, "/", NULL, &resp);
	if (rc == -EHOSTUNREACH)
		TAP_SKIP("localhost does not resolve here");
	else
		TAP_OK(rc == 0 && resp.status == 200,
		       "a host name, trying each address (rc %d: %s)", rc,
		       resp.error);
	http_response_release(&resp);

	http_opts_init(&opts);
	before = server_served(&srv);
	opts.token = "abc\r\nX-Evil: 1";
	rc = get_with(M_REPLY, "", 0, &opts, &resp);
	TAP_OK(rc == -EINVAL && server_served(&srv) == before,
	       "a token with CR LF is refused before connecting");
	opts.token = NULL;
	snprintf(u, sizeof(u), "http://127.0.0.1:%s", srv.port);
	http_parse_url(u, &url, NULL, 0);
	rc = http_get(&url, "/a b", &opts, &resp);
	TAP_OK(rc == -EINVAL, "a target with a space is refused");
	rc = http_get(&url, "a", &opts, &resp);
	TAP_OK(rc == -EINVAL, "a target without a leading slash is refused");
}

static void test_ipv6(void)
{
	static const char v6_ok[] =
		"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nv6";
	struct server s6;
	struct http_response resp;
	struct http_url url;
	char u[64], req[1024], want[64];
	int rc;

	if (server_start(&s6, AF_INET6) != 0) {
		TAP_SKIP("no IPv6 loopback here");
		return;
	}
	server_set(&s6, M_REPLY, v6_ok, strlen(v6_ok));
	snprintf(u, sizeof(u), "http://[::1]:%s", s6.port);
	http_parse_url(u, &url, NULL, 0);
	rc = http_get(&url, "/", NULL, &resp);
	server_request(&s6, req, sizeof(req));
	snprintf(want, sizeof(want), "\r\nHost: [::1]:%s\r\n", s6.port);
	TAP_OK(rc == 0 && strcmp(resp.body, "v6") == 0 && strstr(req, want),
	       "IPv6 literal, bracketed Host header (rc %d: %s)", rc,
	       resp.error);
	http_response_release(&resp);
	server_stop(&s6, "[::1]");
}

/*
 * Garbles valid answers at random (flipped bytes, cuts, inserted CR/LF
 * and digits) and checks that each request ends, in an error or in a
 * well-formed result, and never crashes.
 */
static void test_garbled(void)
{
	static const char *const base[] = {
		"HTTP/1.1 200 OK\r\nContent-Length: 12\r\n\r\nhello, world",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
		"5\r\nhello\r\n7;x=y\r\n, world\r\n0\r\nT: 1\r\n\r\n",
		"HTTP/1.0 500 Oops\r\nContent-Type: text/plain\r\n\r\nbroken",
	};
	static const char junk[] = "\r\n:0123456789abcdefABCDEF;\x00\xff ";
	struct http_response resp;
	struct http_opts opts;
	char buf[512];
	unsigned int seed = 12345;
	int i, bad = 0, ok = 0;

	http_opts_init(&opts);
	opts.token = NULL;
	opts.timeout_ms = 3000;
	opts.max_body = 4096;
	for (i = 0; i < 300; i++) {
		const char *b = base[i % 3];
		size_t n = strlen(b), k;
		int rc, edits = 1 + rand_r(&seed) % 4;

		memcpy(buf, b, n);
		while (edits--) {
			k = (size_t)rand_r(&seed) % n;
			switch (rand_r(&seed) % 3) {
			case 0:
				buf[k] = junk[rand_r(&seed) %
					      (sizeof(junk) - 1)];
				break;
			case 1:
				n = k;
				break;
			default:
				if (n + 1 < sizeof(buf)) {
					memmove(buf + k + 1, buf + k, n - k);
					buf[k] = junk[rand_r(&seed) %
						      (sizeof(junk) - 1)];
					n++;
				}
			}
			if (!n)
				break;
		}
		rc = get_with(M_REPLY, buf, n, &opts, &resp);
		if (rc == 0 && resp.body && resp.body[resp.body_len] == '\0' &&
		    resp.status >= 100 && resp.status <= 599)
			ok++;
		else if (rc == SW_EFORMAT || rc == SW_ETOOBIG ||
			 rc == -ECONNRESET)
			bad++;
		else
			TAP_OK(0, "garbled answer %d: rc %d (%s)", i, rc,
			       resp.error);
		http_response_release(&resp);
	}
	TAP_OK(ok + bad == 300,
	       "300 garbled answers: %d read, %d refused, none hung or "
	       "crashed",
	       ok, bad);
}

int main(void)
{
	signal(SIGPIPE, SIG_IGN);
	unsetenv("STACKWATCH_TOKEN");

	test_parse_url();
	if (server_start(&srv, AF_INET) != 0) {
		TAP_OK(0, "cannot start the test server on 127.0.0.1");
		return tap_done();
	}
	test_request();
	test_framing();
	test_malformed();
	test_caps();
	test_deadline();
	test_connect();
	test_garbled();
	test_ipv6();
	server_stop(&srv, "127.0.0.1");
	return tap_done();
}
