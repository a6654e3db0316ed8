/*
 * http.c - the CLI's GET through libcurl (http.h).
 *
 * One easy handle per request: the CLI makes one or two requests in its
 * life, so nothing is kept between them. What libcurl leaves to its
 * caller is here: the URL's shape, the token's bytes, the body cap, and
 * errors sorted so that "cannot reach" (exit 3) and "bad answer" stay
 * apart from usage errors (exit 2).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pwd.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <curl/curl.h>

#include "http.h"
#include "model/sockcheck.h"
#include "model/sockdiag.h"
#include "stackwatch.h"

#define TOKEN_MAX 4096
#define URL_MAX 4096

static pthread_once_t global_once = PTHREAD_ONCE_INIT;
static CURLcode global_rc;

static void global_init(void)
{
	global_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
}

/* Writes why into err (errlen bytes, may be 0) and returns SW_EFORMAT. */
static int url_fail(char *err, size_t errlen, const char *why)
{
	if (errlen)
		snprintf(err, errlen, "%s", why);
	return SW_EFORMAT;
}

/* True when part of u is present (and not empty). */
static bool has_part(CURLU *u, CURLUPart part)
{
	char *v = NULL;
	bool present = curl_url_get(u, part, &v, 0) == CURLUE_OK && v && *v;

	curl_free(v);
	return present;
}

/*
 * Parses url into a new CURLU after the checks of http_check_url().
 * Returns 0 with *out to free with curl_url_cleanup(), or SW_EFORMAT.
 */
static int parse_url(const char *url, CURLU **out, char *err, size_t errlen)
{
	CURLU *u;
	CURLUcode uc;
	char *v = NULL;
	int rc = 0;

	for (const char *p = url; *p; p++)
		if ((unsigned char)*p <= 0x20 || (unsigned char)*p == 0x7f)
			return url_fail(err, errlen,
					"a space or control character");
	if (!strstr(url, "://"))
		return url_fail(err, errlen,
				"it must start with http:// or https://");
	if (strlen(url) > URL_MAX)
		return url_fail(err, errlen, "too long");
	u = curl_url();
	if (!u)
		return url_fail(err, errlen, "out of memory");
	uc = curl_url_set(u, CURLUPART_URL, url, CURLU_NON_SUPPORT_SCHEME);
	if (uc) {
		rc = url_fail(err, errlen, curl_url_strerror(uc));
		goto out;
	}
	if (curl_url_get(u, CURLUPART_SCHEME, &v, 0) != CURLUE_OK || !v ||
	    (strcmp(v, "http") != 0 && strcmp(v, "https") != 0)) {
		rc = url_fail(err, errlen,
			      "it must start with http:// or https://");
		goto out;
	}
	if (has_part(u, CURLUPART_USER) || has_part(u, CURLUPART_PASSWORD)) {
		rc = url_fail(err, errlen, "user info is not supported");
		goto out;
	}
	if (has_part(u, CURLUPART_QUERY) || has_part(u, CURLUPART_FRAGMENT)) {
		rc = url_fail(err, errlen,
			      "a query or fragment is not supported");
		goto out;
	}
	if (!has_part(u, CURLUPART_HOST)) {
		rc = url_fail(err, errlen, "no host");
		goto out;
	}
	curl_free(v);
	v = NULL;
	if (curl_url_get(u, CURLUPART_PORT, &v, 0) == CURLUE_OK && v &&
	    (atol(v) < 1 || atol(v) > 65535)) {
		rc = url_fail(err, errlen, "bad port");
		goto out;
	}
out:
	curl_free(v);
	if (rc)
		curl_url_cleanup(u);
	else
		*out = u;
	return rc;
}

int http_check_url(const char *url, char *err, size_t errlen)
{
	CURLU *u;
	int rc = parse_url(url, &u, err, errlen);

	if (!rc)
		curl_url_cleanup(u);
	return rc;
}

void http_opts_init(struct http_opts *opts)
{
	const char *token = getenv("STACKWATCH_TOKEN");

	opts->timeout_ms = HTTP_DEFAULT_TIMEOUT_MS;
	opts->max_body = HTTP_MAX_BODY;
	opts->token = token && *token ? token : NULL;
	opts->unix_socket = NULL;
	opts->local_server = false;
}

void http_response_release(struct http_response *resp)
{
	free(resp->body);
	resp->body = NULL;
	resp->body_len = 0;
}

/* Writes why into resp->error and returns rc, for "return fail(...)". */
__attribute__((format(printf, 3, 4))) static int fail(
	struct http_response *resp, int rc, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(resp->error, sizeof(resp->error), fmt, ap);
	va_end(ap);
	for (char *p = resp->error; *p; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			*p = '?';
	return rc;
}

/*
 * The full URL: base's path without its trailing '/', then target.
 * Returns 0 with *out malloc'd, or -EINVAL / -ENOMEM with resp->error set.
 */
static int full_url(const char *base, const char *target,
		    struct http_response *resp, char **out)
{
	char why[128];
	char *norm = NULL;
	size_t n;
	CURLU *u;

	if (target[0] != '/')
		return fail(resp, -EINVAL, "bad request target");
	for (const char *p = target; *p; p++)
		if ((unsigned char)*p <= 0x20 || (unsigned char)*p >= 0x7f)
			return fail(resp, -EINVAL, "bad request target");
	if (parse_url(base, &u, why, sizeof(why)))
		return fail(resp, -EINVAL, "bad URL '%s': %s", base, why);
	if (curl_url_get(u, CURLUPART_URL, &norm, 0) != CURLUE_OK) {
		curl_url_cleanup(u);
		return fail(resp, -ENOMEM, "%s", sw_strerror(-ENOMEM));
	}
	curl_url_cleanup(u);
	n = strlen(norm);
	while (n && norm[n - 1] == '/')
		n--;
	if (asprintf(out, "%.*s%s", (int)n, norm, target) < 0) {
		curl_free(norm);
		return fail(resp, -ENOMEM, "%s", sw_strerror(-ENOMEM));
	}
	curl_free(norm);
	return 0;
}

/*
 * The Authorization header of token: surrounding whitespace removed (as
 * the daemon's token file has it), no other whitespace or control byte,
 * so that nothing can add a header. Returns 0 with *out (NULL without a
 * token) or -EINVAL / -ENOMEM with resp->error set.
 */
static int auth_header(const char *token, struct http_response *resp,
		       struct curl_slist **out)
{
	char line[TOKEN_MAX + 32];
	size_t n;

	*out = NULL;
	if (!token)
		return 0;
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
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)token[i] <= 0x20 ||
		    (unsigned char)token[i] == 0x7f)
			return fail(resp, -EINVAL,
				    "STACKWATCH_TOKEN holds a space or a "
				    "control character");
	snprintf(line, sizeof(line), "Authorization: Bearer %.*s", (int)n,
		 token);
	*out = curl_slist_append(NULL, line);
	if (!*out)
		return fail(resp, -ENOMEM, "%s", sw_strerror(-ENOMEM));
	return 0;
}

/* The body as it arrives, capped. */
struct sink {
	char *data;
	size_t len, cap, max;
	bool toobig;
	bool nomem;
};

static size_t on_body(char *p, size_t size, size_t nmemb, void *arg)
{
	struct sink *s = arg;
	size_t n = size * nmemb;

	if (n > s->max - s->len) {
		s->toobig = true;
		return 0; /* libcurl stops with CURLE_WRITE_ERROR */
	}
	if (s->len + n + 1 > s->cap) {
		size_t cap = s->cap ? s->cap : 16384;
		char *d;

		while (cap < s->len + n + 1)
			cap *= 2;
		d = realloc(s->data, cap);
		if (!d) {
			s->nomem = true;
			return 0;
		}
		s->data = d;
		s->cap = cap;
	}
	memcpy(s->data + s->len, p, n);
	s->len += n;
	s->data[s->len] = '\0';
	return n;
}

#define PARTIAL_HEADER "X-Stackwatch-Partial:"

/*
 * The count of X-Stackwatch-Partial (n bytes at p, the name included):
 * decimal digits, at most 9 of them; anything else counts as 1, so that a
 * header we cannot read still says the answer is not whole.
 */
static long partial_count(const char *p, size_t n)
{
	size_t i = sizeof(PARTIAL_HEADER) - 1, digits = 0;
	long v = 0;

	while (i < n && (p[i] == ' ' || p[i] == '\t'))
		i++;
	for (; i < n && p[i] >= '0' && p[i] <= '9' && digits < 9; i++) {
		v = v * 10 + (p[i] - '0');
		digits++;
	}
	while (i < n &&
	       (p[i] == ' ' || p[i] == '\t' || p[i] == '\r' || p[i] == '\n'))
		i++;
	return digits && i == n ? v : 1;
}

/*
 * Each header line: a status line ("HTTP/1.1 200 OK") sets the reason,
 * control bytes replaced, so the last one (after any 1xx) is the answer's;
 * X-Stackwatch-Partial sets resp->partial.
 */
static size_t on_header(char *p, size_t size, size_t nmemb, void *arg)
{
	struct http_response *resp = arg;
	size_t n = size * nmemb;
	size_t i = 0, k = 0;

	if (n >= sizeof(PARTIAL_HEADER) - 1 &&
	    strncasecmp(p, PARTIAL_HEADER, sizeof(PARTIAL_HEADER) - 1) == 0) {
		resp->partial = partial_count(p, n);
		return n;
	}
	if (n < 5 || memcmp(p, "HTTP/", 5) != 0)
		return n;
	resp->partial = 0;	     /* a new answer's headers begin */
	while (i < n && p[i] != ' ') /* the version */
		i++;
	while (i < n && p[i] == ' ')
		i++;
	while (i < n && p[i] != ' ' && p[i] != '\r' && p[i] != '\n') /* code */
		i++;
	while (i < n && p[i] == ' ')
		i++;
	while (i < n && p[i] != '\r' && p[i] != '\n' &&
	       k + 1 < sizeof(resp->reason)) {
		unsigned char c = (unsigned char)p[i++];

		resp->reason[k++] = c < 0x20 || c == 0x7f ? '?' : (char)c;
	}
	resp->reason[k] = '\0';
	return n;
}

/*
 * The server is checked (model/sockcheck.h for a unix socket,
 * model/sockdiag.h for TCP) once libcurl has connected and before it
 * sends the request, in the callback libcurl documents for that moment
 * (CURLOPT_PREREQFUNCTION, 7.80.0). Connecting ourselves and handing
 * libcurl a connected socket (CURL_SOCKOPT_ALREADY_CONNECTED) is not an
 * option: libcurl 7.88, that of Debian 12, connects such a socket again
 * and fails with EISCONN.
 */
#if LIBCURL_VERSION_NUM < 0x075000
#error "libcurl 7.80.0 or later is needed (CURLOPT_PREREQFUNCTION)"
#endif

/* The connection to check: the handle, and why it was dropped. */
struct server_check {
	curl_socket_t fd; /* the unix socket libcurl made, once it has */
	bool unix_socket; /* else TCP, with local_server */
	int err;	  /* 0, or a negative errno: the request was not sent */
	uid_t uid;	  /* the caller's effective uid */
	uid_t peer;	  /* with err -EPERM: the server's uid */
	bool remote;	  /* with err -EPERM: TCP, not to this host */
};

/* The socket address of ip (as libcurl prints it) and port, or -1. */
static int address_of(const char *ip, int port, struct sockaddr_storage *ss)
{
	struct sockaddr_in *in = (struct sockaddr_in *)ss;
	struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)ss;

	memset(ss, 0, sizeof(*ss));
	if (!ip || port <= 0 || port > 65535)
		return -1;
	if (inet_pton(AF_INET, ip, &in->sin_addr) == 1) {
		in->sin_family = AF_INET;
		in->sin_port = htons((uint16_t)port);
		return 0;
	}
	if (inet_pton(AF_INET6, ip, &in6->sin6_addr) == 1) {
		in6->sin6_family = AF_INET6;
		in6->sin6_port = htons((uint16_t)port);
		return 0;
	}
	return -1;
}

/*
 * The owner of the server's end of the TCP connection from local_ip:
 * local_port to server_ip:server_port, when the server is on a loopback
 * address: 0 with *uid, -EPERM with c->remote for another host, or a
 * negative errno when the kernel does not say.
 */
static int tcp_server_owner(struct server_check *c, const char *server_ip,
			    int server_port, const char *local_ip,
			    int local_port, uid_t *uid)
{
	struct sockaddr_storage local, server;
	struct sockdiag_tcp ds;
	int rc;

	if (address_of(server_ip, server_port, &server) < 0 ||
	    address_of(local_ip, local_port, &local) < 0)
		return -EADDRNOTAVAIL;
	if (!sockdiag_loopback(&server)) {
		c->remote = true;
		return -EPERM;
	}
	rc = sockdiag_tcp_socket(&server, &local, 1000, &ds);
	if (rc == 0)
		*uid = ds.uid;
	return rc;
}

/*
 * Whether uid is the daemon's own system user, stackwatchd: its service
 * gives up root once its sockets are bound, so the connections it
 * accepts are that user's. A system account only an installation makes
 * (never nobody, which any daemon may run as).
 */
static bool daemon_user(uid_t uid)
{
	char buf[1024];
	struct passwd pw, *res = NULL;

	return getpwnam_r("stackwatchd", &pw, buf, sizeof(buf), &res) == 0 &&
	       res && res->pw_uid == uid && uid != 0;
}

/* CURLOPT_SOCKOPTFUNCTION: notes the unix socket libcurl connects. */
static int note_socket(void *arg, curl_socket_t fd, curlsocktype purpose)
{
	struct server_check *c = arg;

	if (purpose == CURLSOCKTYPE_IPCXN)
		c->fd = fd;
	return CURL_SOCKOPT_OK;
}

/*
 * CURLOPT_PREREQFUNCTION: lets the request go only to a server that is
 * root or the caller (SO_PEERCRED of a unix socket; the socket
 * diagnostics of a TCP one on this host, named by the connection's
 * addresses libcurl gives); else aborts the transfer, nothing sent, with
 * c->err set.
 */
static int server_prereq(void *arg, char *primary_ip, char *local_ip,
			 int primary_port, int local_port)
{
	struct server_check *c = arg;

	if (c->unix_socket) {
		c->err = c->fd == CURL_SOCKET_BAD
				 ? -ENOTCONN
				 : sockcheck_peer(c->fd, c->uid, &c->peer);
	} else {
		c->err = tcp_server_owner(c, primary_ip, primary_port, local_ip,
					  local_port, &c->peer);
		if (c->err == 0 && c->peer != 0 && c->peer != c->uid &&
		    !daemon_user(c->peer))
			c->err = -EPERM;
	}
	return c->err ? CURL_PREREQFUNC_ABORT : CURL_PREREQFUNC_OK;
}

/* Why server_prereq() stopped the request, as http_get()'s code. */
static int check_fail(const struct server_check *c, struct http_response *resp)
{
	if (c->err == -EPERM && c->remote)
		return fail(resp, -EPERM,
			    "it is not on this host: nothing was sent to it");
	if (c->err == -EPERM)
		return fail(resp, -EPERM,
			    "its server runs as uid %u, not as root, as "
			    "stackwatchd's user or as you (uid %u): nothing "
			    "was sent to it",
			    (unsigned)c->peer, (unsigned)c->uid);
	return fail(resp, c->err, "cannot tell who listens there: %s",
		    sw_strerror(c->err));
}

/* A transfer's failure as one of http_get()'s codes, with its phrase. */
static int curl_fail(CURL *h, CURLcode cc, const char *errbuf,
		     const struct sink *s, const struct http_opts *opts,
		     struct http_response *resp)
{
	const char *why = errbuf[0] ? errbuf : curl_easy_strerror(cc);
	long os = 0;

	switch (cc) {
	case CURLE_OUT_OF_MEMORY:
		return fail(resp, -ENOMEM, "%s", sw_strerror(-ENOMEM));
	case CURLE_WRITE_ERROR:
		if (s->nomem)
			return fail(resp, -ENOMEM, "%s", sw_strerror(-ENOMEM));
		if (s->toobig)
			return fail(resp, SW_ETOOBIG,
				    "the answer is larger than %zu bytes",
				    opts->max_body);
		return fail(resp, -EIO, "%s", why);
	case CURLE_FILESIZE_EXCEEDED:
		return fail(resp, SW_ETOOBIG,
			    "the answer is larger than %zu bytes",
			    opts->max_body);
	case CURLE_COULDNT_RESOLVE_HOST:
		return fail(resp, -EHOSTUNREACH, "%s", why);
	case CURLE_OPERATION_TIMEDOUT:
		return fail(resp, -ETIMEDOUT, "no answer within %d ms",
			    opts->timeout_ms);
	case CURLE_COULDNT_CONNECT:
		curl_easy_getinfo(h, CURLINFO_OS_ERRNO, &os);
		if (os > 0)
			return fail(resp, -(int)os, "%s", strerror((int)os));
		return fail(resp, -ECONNREFUSED, "%s", why);
	case CURLE_SEND_ERROR:
	case CURLE_RECV_ERROR:
	case CURLE_GOT_NOTHING:
		return fail(resp, -ECONNRESET, "%s", why);
	case CURLE_WEIRD_SERVER_REPLY:
	case CURLE_UNSUPPORTED_PROTOCOL:
	case CURLE_PARTIAL_FILE:
	case CURLE_BAD_CONTENT_ENCODING:
	case CURLE_HTTP2:
	case CURLE_HTTP2_STREAM:
		return fail(resp, SW_EFORMAT, "%s", why);
	default:
		return fail(resp, -EIO, "%s", why);
	}
}

int http_get(const char *base_url, const char *target,
	     const struct http_opts *opts, struct http_response *resp)
{
	char errbuf[CURL_ERROR_SIZE] = "";
	char agent[64];
	struct http_opts defaults;
	struct curl_slist *hdrs = NULL;
	struct sink s = { 0 };
	struct server_check sc = { .fd = CURL_SOCKET_BAD };
	char *url = NULL, *noproxy = NULL;
	const char *np;
	long status = 0;
	CURLcode cc;
	CURL *h;
	int rc;

	memset(resp, 0, sizeof(*resp));
	if (!opts) {
		http_opts_init(&defaults);
		opts = &defaults;
	}
	pthread_once(&global_once, global_init);
	if (global_rc)
		return fail(resp, -ENOMEM, "libcurl: %s",
			    curl_easy_strerror(global_rc));
	rc = full_url(base_url, target, resp, &url);
	if (rc)
		return rc;
	rc = auth_header(opts->token, resp, &hdrs);
	if (rc)
		goto out_url;
	h = curl_easy_init();
	if (!h) {
		rc = fail(resp, -ENOMEM, "%s", sw_strerror(-ENOMEM));
		goto out_hdrs;
	}
	/* A proxy of the environment is for other hosts: the daemon is
	 * usually on this one. */
	np = getenv("no_proxy");
	if (!np || !*np)
		np = getenv("NO_PROXY");
	if (asprintf(&noproxy, "%s%slocalhost,127.0.0.0/8,::1", np ? np : "",
		     np && *np ? "," : "") < 0) {
		noproxy = NULL;
		rc = fail(resp, -ENOMEM, "%s", sw_strerror(-ENOMEM));
		goto out_easy;
	}
	s.max = opts->max_body;
	snprintf(agent, sizeof(agent), "stackwatch/%s", SW_VERSION);
	curl_easy_setopt(h, CURLOPT_URL, url);
	curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)opts->timeout_ms);
	curl_easy_setopt(h, CURLOPT_USERAGENT, agent);
	curl_easy_setopt(h, CURLOPT_NETRC, (long)CURL_NETRC_OPTIONAL);
	curl_easy_setopt(h, CURLOPT_NOPROXY, noproxy);
	curl_easy_setopt(h, CURLOPT_MAXFILESIZE_LARGE,
			 (curl_off_t)opts->max_body);
	curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, &s);
	curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(h, CURLOPT_HEADERDATA, resp);
	if (hdrs)
		curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
	if (opts->unix_socket || opts->local_server) {
		sc.uid = geteuid();
		sc.unix_socket = opts->unix_socket != NULL;
		if (opts->unix_socket) {
			curl_easy_setopt(h, CURLOPT_UNIX_SOCKET_PATH,
					 opts->unix_socket);
			curl_easy_setopt(h, CURLOPT_SOCKOPTFUNCTION,
					 note_socket);
			curl_easy_setopt(h, CURLOPT_SOCKOPTDATA, &sc);
		} else { /* a proxy would be the server checked */
			curl_easy_setopt(h, CURLOPT_NOPROXY, "*");
		}
		curl_easy_setopt(h, CURLOPT_PREREQFUNCTION, server_prereq);
		curl_easy_setopt(h, CURLOPT_PREREQDATA, &sc);
	}
	cc = curl_easy_perform(h);
	if (cc) {
		if (sc.err)
			rc = check_fail(&sc, resp);
		else
			rc = curl_fail(h, cc, errbuf, &s, opts, resp);
		free(s.data);
		goto out_easy;
	}
	curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
	if (status < 100 || status > 599) {
		rc = fail(resp, SW_EFORMAT, "bad status %ld", status);
		free(s.data);
		goto out_easy;
	}
	resp->status = (int)status;
	resp->body = s.data ? s.data : calloc(1, 1);
	resp->body_len = s.len;
	if (!resp->body)
		rc = fail(resp, -ENOMEM, "%s", sw_strerror(-ENOMEM));
out_easy:
	curl_easy_cleanup(h);
	free(noproxy);
out_hdrs:
	curl_slist_free_all(hdrs);
out_url:
	free(url);
	return rc;
}
