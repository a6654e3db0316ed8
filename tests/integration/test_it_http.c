/*
 * test_it_http.c - the HTTP surface under bad input, on raw sockets: a
 * table of malformed requests each answered with the right status and a
 * JSON error (and nothing else changing), slow and half-closed clients,
 * the bearer token, the Host check, /metrics through promtool, and proof
 * that asking about a pid that is not a target signals nothing (strace).
 */
#define _GNU_SOURCE /* strcasestr */
#include <netinet/in.h>
#include <stdarg.h>
#include <poll.h>
#include <sys/socket.h>

#include "itest.h"
#include "tap.h"

static int connect_port(int port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET,
				  .sin_port = htons((uint16_t)port),
				  .sin_addr.s_addr = htonl(0x7f000001) };
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	if (fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		close(fd);
		fd = -1;
	}
	return fd;
}

/*
 * Sends raw bytes, half-closes, reads the whole answer (at most 64 kB,
 * within 5 s). Returns the status code, 0 for no answer at all; the body
 * goes to body.
 */
static int raw(int port, const char *req, size_t len, char *body, size_t size)
{
	char buf[65536];
	size_t got = 0;
	int fd = connect_port(port), status = 0;
	long end = itest_now_ms() + 5000;
	char *b;

	body[0] = '\0';
	if (fd < 0)
		return -1;
	if (write(fd, req, len) < 0) {
		close(fd);
		return -1;
	}
	shutdown(fd, SHUT_WR);
	while (got < sizeof(buf) - 1 && itest_now_ms() < end) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		ssize_t n;

		if (poll(&p, 1, 200) <= 0)
			continue;
		n = read(fd, buf + got, sizeof(buf) - 1 - got);
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	close(fd);
	buf[got] = '\0';
	sscanf(buf, "HTTP/1.%*d %d", &status);
	b = strstr(buf, "\r\n\r\n");
	if (b)
		snprintf(body, size, "%s", b + 4);
	return status;
}

#define GARBAGE "\x01\x02\xff\xfe GARBAGE \x00\x7f\r\n\r\n"

struct bad {
	const char *what;
	const char *request; /* NULL: built by the test */
	int status;	     /* expected; 0: any 4xx */
	int json;	     /* the body is a JSON error */
};

static const struct bad table[] = {
	{ "pid not a number", "GET /api/v1/stacks?pid=abc HTTP/1.1\r\n\r\n",
	  400, 1 },
	{ "pid negative", "GET /api/v1/stacks?pid=-5 HTTP/1.1\r\n\r\n", 400,
	  1 },
	{ "pid zero", "GET /api/v1/stacks?pid=0 HTTP/1.1\r\n\r\n", 400, 1 },
	{ "pid overflow",
	  "GET /api/v1/stacks?pid=99999999999999999999 HTTP/1.1\r\n\r\n", 400,
	  1 },
	{ "pid with junk", "GET /api/v1/stacks?pid=12x HTTP/1.1\r\n\r\n", 400,
	  1 },
	{ "pid empty", "GET /api/v1/stacks?pid= HTTP/1.1\r\n\r\n", 400, 1 },
	{ "pid of no process",
	  "GET /api/v1/stacks?pid=4194304 HTTP/1.1\r\n\r\n", 404, 1 },
	{ "unknown format", "GET /api/v1/stacks?format=xml HTTP/1.1\r\n\r\n",
	  400, 1 },
	{ "timeout_ms zero", "GET /api/v1/stacks?timeout_ms=0 HTTP/1.1\r\n\r\n",
	  400, 1 },
	{ "timeout_ms too large",
	  "GET /api/v1/stacks?timeout_ms=10001 HTTP/1.1\r\n\r\n", 400, 1 },
	{ "timeout_ms overflow",
	  "GET /api/v1/stacks?timeout_ms=4294967297 HTTP/1.1\r\n\r\n", 400, 1 },
	{ "symbols neither 0 nor 1",
	  "GET /api/v1/stacks?symbols=2 HTTP/1.1\r\n\r\n", 400, 1 },
	{ "diff without since", "GET /api/v1/diff?pid=1 HTTP/1.1\r\n\r\n", 400,
	  1 },
	{ "diff since negative",
	  "GET /api/v1/diff?pid=1&since=-1 HTTP/1.1\r\n\r\n", 400, 1 },
	{ "diff since not a number",
	  "GET /api/v1/diff?pid=1&since=nan HTTP/1.1\r\n\r\n", 400, 1 },
	{ "path traversal", "GET /../../etc/passwd HTTP/1.1\r\n\r\n", 0, 0 },
	{ "encoded traversal",
	  "GET /static/..%2f..%2fetc%2fpasswd HTTP/1.1\r\n\r\n", 404, 1 },
	{ "unknown endpoint", "GET /api/v2/stacks HTTP/1.1\r\n\r\n", 404, 1 },
	{ "POST", "POST /api/v1/stacks HTTP/1.1\r\nContent-Length: 0\r\n\r\n",
	  405, 1 },
	{ "DELETE", "DELETE /api/v1/targets HTTP/1.1\r\n\r\n", 405, 1 },
	{ "body on GET",
	  "GET /api/v1/targets HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello", 413,
	  1 },
	{ "binary garbage", GARBAGE, 0, 0 },
	{ "bad HTTP version", "GET /healthz HTTP/9.9\r\n\r\n", 0, 0 },
	{ "huge query string", NULL, 0, 0 },
	{ "huge header", NULL, 0, 0 },
	{ "foreign Host (DNS rebinding)",
	  "GET /api/v1/targets HTTP/1.1\r\nHost: evil.example\r\n\r\n", 403,
	  1 },
};

static void test_table(const struct itest_daemon *d)
{
	static char big[300000];
	char body[65536];

	for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++) {
		const struct bad *b = &table[i];
		const char *req = b->request;
		int st;

		if (!req && strcmp(b->what, "huge query string") == 0) {
			size_t n = (size_t)snprintf(big, sizeof(big),
						    "GET /api/v1/stacks?x=");
			memset(big + n, 'a', 200000);
			snprintf(big + n + 200000, sizeof(big) - n - 200000,
				 " HTTP/1.1\r\n\r\n");
			req = big;
		} else if (!req) {
			size_t n = (size_t)snprintf(big, sizeof(big),
						    "GET /healthz HTTP/1.1\r\n"
						    "X-Big: ");
			memset(big + n, 'b', 200000);
			snprintf(big + n + 200000, sizeof(big) - n - 200000,
				 "\r\n\r\n");
			req = big;
		}
		/* The garbage holds a NUL: send all of it. */
		st = raw(d->port, req,
			 strstr(b->what, "binary") ? sizeof(GARBAGE) - 1
						   : strlen(req),
			 body, sizeof(body));
		if (b->status)
			TAP_OK(st == b->status &&
				       (!b->json || strstr(body, "\"error\"")),
			       "%s: %d (want %d) %s", b->what, st, b->status,
			       b->json ? "with a JSON error" : "");
		else
			TAP_OK(st >= 400 && st <= 505,
			       "%s: %d (an error status, no crash)", b->what,
			       st);
	}
}

static void test_slow_clients(const struct itest_daemon *d)
{
	int fds[64];
	struct http_response r;
	long t0;
	int ok;

	/* Slowloris: 64 connections trickling a request that never ends. */
	for (int i = 0; i < 64; i++) {
		fds[i] = connect_port(d->port);
		if (fds[i] >= 0)
			(void)!write(fds[i],
				     "GET /healthz HTTP/1.1\r\nX-A: ", 28);
	}
	memset(&r, 0, sizeof(r));
	t0 = itest_now_ms();
	ok = itest_get(d, "/healthz", &r) == 0 && r.status == 200;
	TAP_OK(ok, "/healthz answered beside 64 slow clients (%ld ms)",
	       itest_now_ms() - t0);
	http_response_release(&r);
	for (int i = 0; i < 64; i++)
		if (fds[i] >= 0)
			close(fds[i]);
	/* A half-closed connection with a whole request still gets its
	 * answer; one closed mid-request costs nothing. */
	{
		char body[4096];

		TAP_OK(raw(d->port, "GET /healthz HTTP/1.1\r\n\r\n", 25, body,
			   sizeof(body)) == 200 &&
			       strcmp(body, "ok\n") == 0,
		       "half-closed client gets its answer");
		TAP_OK(raw(d->port, "GET /api/v1/stac", 16, body,
			   sizeof(body)) != 200,
		       "a request cut short gets no answer");
	}
	memset(&r, 0, sizeof(r));
	TAP_OK(itest_get(d, "/healthz", &r) == 0 && r.status == 200,
	       "the daemon is fine afterwards");
	http_response_release(&r);
}

static void test_token(void)
{
	char tok[] = "/tmp/sw-token-XXXXXX";
	int fd = mkstemp(tok);
	const char *args[] = { "--sample-interval", "0", "--token-file", tok,
			       NULL };
	struct itest_daemon d;
	char body[4096], req[256];

	(void)!write(fd, "  s3cret-token\n", 15);
	close(fd);
	if (itest_daemon_start_args(&d, args) < 0) {
		TAP_OK(0, "token: daemon starts");
		unlink(tok);
		return;
	}
	snprintf(req, sizeof(req), "GET /api/v1/targets HTTP/1.1\r\n\r\n");
	TAP_OK(raw(d.port, req, strlen(req), body, sizeof(body)) == 401 &&
		       strstr(body, "\"error\""),
	       "token: no Authorization is 401");
	snprintf(req, sizeof(req),
		 "GET /api/v1/targets HTTP/1.1\r\nAuthorization: Bearer "
		 "s3cret-tokeX\r\n\r\n");
	TAP_OK(raw(d.port, req, strlen(req), body, sizeof(body)) == 401,
	       "token: a wrong token is 401");
	snprintf(req, sizeof(req),
		 "GET /api/v1/targets HTTP/1.1\r\nAuthorization: Bearer "
		 "s3cret-token\r\n\r\n");
	TAP_OK(raw(d.port, req, strlen(req), body, sizeof(body)) == 200,
	       "token: the right token is 200");
	TAP_OK(raw(d.port, "GET /healthz HTTP/1.1\r\n\r\n", 25, body,
		   sizeof(body)) == 200,
	       "token: /healthz needs none");
	itest_daemon_stop(&d);
	itest_daemon_cleanup(&d);
	unlink(tok);
}

static void test_promtool(const struct itest_daemon *d)
{
	char cmd[256];
	int rc;

	if (system("command -v promtool >/dev/null 2>&1") != 0) {
		TAP_SKIP("promtool not installed");
		return;
	}
	snprintf(cmd, sizeof(cmd),
		 "curl -sf %s/metrics | promtool check metrics >/dev/null",
		 d->url);
	rc = system(cmd);
	TAP_OK(rc == 0, "promtool check metrics accepts /metrics");
}

/* strace the daemon while asking about pids that are not targets. */
static void test_no_signal(const struct itest_daemon *d)
{
	char cmd[512], log[128], line[512];
	pid_t victim = fork(), tracer;
	int sends = 0, status;
	FILE *f;

	if (victim == 0) {
		pause();
		_exit(0);
	}
	if (system("command -v strace >/dev/null 2>&1") != 0) {
		TAP_SKIP("strace not installed");
		itest_kill(victim);
		return;
	}
	snprintf(log, sizeof(log), "%s/strace.log", d->dir);
	tracer = fork();
	if (tracer == 0) {
		snprintf(cmd, sizeof(cmd), "%d", (int)d->pid);
		execlp("strace", "strace", "-f", "-qq", "-o", log, "-e",
		       "trace=kill,tkill,tgkill,rt_sigqueueinfo,"
		       "rt_tgsigqueueinfo,pidfd_send_signal",
		       "-p", cmd, (char *)NULL);
		_exit(127);
	}
	itest_sleep_ms(500); /* strace attaches */
	/* Without the agent it is dumped by ptrace, which sends nothing. */
	snprintf(cmd, sizeof(cmd), "/api/v1/stacks?pid=%d", (int)victim);
	cJSON_Delete(itest_get_json(d, cmd, &status));
	TAP_OK(status == 200, "a child without the agent is dumped (%d)",
	       status);
	cJSON_Delete(itest_get_json(d, "/api/v1/stacks?pid=4194304", &status));
	TAP_OK(status == 404, "a pid no process has is 404");
	itest_sleep_ms(200);
	kill(tracer, SIGINT);
	waitpid(tracer, NULL, 0);
	f = fopen(log, "r");
	while (f && fgets(line, sizeof(line), f))
		if (strstr(line, "kill(") || strstr(line, "sigqueueinfo(") ||
		    strstr(line, "pidfd_send_signal("))
			sends++;
	TAP_OK(f != NULL && sends == 0,
	       "strace -f of the daemon: no signal sent anywhere (%d)", sends);
	if (f)
		fclose(f);
	unlink(log);
	TAP_OK(itest_alive(victim), "and the process asked about lives");
	itest_kill(victim);
}

/*
 * GETs the path that pathfmt makes, from 127.0.0.1:port as Host, with the
 * extra header lines headers ("" for none). Returns the status.
 */
static int ask(int port, char *body, size_t size, const char *headers,
	       const char *pathfmt, ...) __attribute__((format(printf, 5, 6)));
static int ask(int port, char *body, size_t size, const char *headers,
	       const char *pathfmt, ...)
{
	char path[256], req[1024];
	va_list ap;

	va_start(ap, pathfmt);
	vsnprintf(path, sizeof(path), pathfmt, ap);
	va_end(ap);
	snprintf(req, sizeof(req),
		 "GET %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n%s\r\n", path, port,
		 headers);
	return raw(port, req, strlen(req), body, size);
}

/*
 * Reads of targets so far: signals sent and kernel reads asked of the
 * helper (a blocked thread is read from the kernel, not signalled).
 */
static double reads_done(const struct itest_daemon *d)
{
	double s = itest_metric(d, "stackwatch_signals_sent_total");
	double k = itest_metric(d, "stackwatch_kernel_reads_total");

	return s < 0 || k < 0 ? -1 : s + k;
}

/*
 * A page on another site must not make the daemon signal (an <img> or a
 * fetch pointed at /api/v1/stacks): what the browser marks as cross-site
 * is a 403 and no signal goes out, while the daemon's own page, a typed
 * URL and plain scripts are answered and dumped.
 */
static void test_cross_site(const struct itest_daemon *d)
{
	static const char *const refused[] = {
		"Sec-Fetch-Site: cross-site\r\n",
		"Sec-Fetch-Site: same-site\r\n",
		"Origin: http://evil.example\r\n",
		"Origin: null\r\n",
		"Sec-Fetch-Site: same-origin\r\nOrigin: "
		"http://evil.example\r\n",
	};
	char fixture[256], req[1024], body[65536], host[64];
	char sigwait[] = "sigwait", two[] = "2";
	char *argv[] = { fixture, sigwait, two, NULL };
	double before, after;
	int out, st;
	pid_t pid;

	snprintf(fixture, sizeof(fixture), "%s/fixtures/agent_target",
		 itest_target_build());
	pid = itest_spawn(d, argv, &out);
	if (pid <= 0 || !itest_wait_line(out, "ready") ||
	    !itest_wait_registered(d, pid, 10000)) {
		TAP_OK(0, "a target registers");
		itest_kill(pid);
		return;
	}
	close(out);
	snprintf(host, sizeof(host), "127.0.0.1:%d", d->port);
	before = reads_done(d);
	for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
		const char *path = i % 2 ? "/api/v1/stacks" : "/stacks";
		const char *fmt = i % 2 ? "" : "&format=json";

		snprintf(req, sizeof(req),
			 "GET %s?pid=%d%s HTTP/1.1\r\nHost: %s\r\n%s\r\n", path,
			 (int)pid, fmt, host, refused[i]);
		st = raw(d->port, req, strlen(req), body, sizeof(body));
		TAP_OK(st == 403 && strstr(body, "Sec-Fetch-Site"),
		       "%s with '%.*s': 403 (%d)", path,
		       (int)strcspn(refused[i], "\r"), refused[i], st);
	}
	st = ask(d->port, body, sizeof(body), "Sec-Fetch-Site: cross-site\r\n",
		 "/api/v1/diff?pid=%d&since=1", (int)pid);
	TAP_OK(st == 403, "a cross-site /api/v1/diff: 403 (%d)", st);
	after = reads_done(d);
	TAP_OK(before >= 0 && after == before,
	       "nothing was read for them: no signal, no kernel read (%g "
	       "then %g)",
	       before, after);
	st = ask(d->port, body, sizeof(body), "Sec-Fetch-Site: cross-site\r\n",
		 "/stacks?pid=%d", (int)pid);
	TAP_OK(st == 200, "a link from elsewhere opens the page (%d)", st);
	snprintf(req, sizeof(req),
		 "Sec-Fetch-Site: same-origin\r\nOrigin: http://%s\r\n", host);
	st = ask(d->port, body, sizeof(body), req, "/api/v1/stacks?pid=%d",
		 (int)pid);
	TAP_OK(st == 200, "the daemon's own page is answered (%d)", st);
	st = ask(d->port, body, sizeof(body), "Sec-Fetch-Site: none\r\n",
		 "/api/v1/stacks?pid=%d&format=text", (int)pid);
	TAP_OK(st == 200, "a URL typed into the browser is answered (%d)", st);
	st = ask(d->port, body, sizeof(body), "", "/api/v1/stacks?pid=%d",
		 (int)pid);
	after = reads_done(d);
	TAP_OK(st == 200 && after > before,
	       "a script's request (neither header) is answered and "
	       "reads (%d, %g reads)",
	       st, after - before);
	itest_kill(pid);
}

/* Sends req to port and reads the whole answer, headers too, into buf. */
static void whole(int port, const char *req, char *buf, size_t size)
{
	int fd = connect_port(port);
	size_t got = 0;
	long end = itest_now_ms() + 5000;

	buf[0] = '\0';
	if (fd < 0)
		return;
	if (write(fd, req, strlen(req)) < 0) {
		close(fd);
		return;
	}
	shutdown(fd, SHUT_WR);
	while (got < size - 1 && itest_now_ms() < end) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		ssize_t n;

		if (poll(&p, 1, 200) <= 0)
			continue;
		n = read(fd, buf + got, size - 1 - got);
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	close(fd);
	buf[got] = '\0';
}

/*
 * Every endpoint, as a page on another site would reach it: through a
 * name of its own resolved to 127.0.0.1 (DNS rebinding: its Host) it is
 * 403; no answer lets another origin read it (no CORS header, to a GET
 * with a foreign Origin or to a preflight, which is 405).
 */
static void test_every_endpoint(const struct itest_daemon *d)
{
	static const char *const paths[] = {
		"/",
		"/stacks",
		"/stacks?format=json",
		"/api/v1/stacks",
		"/api/v1/targets",
		"/api/v1/processes",
		"/api/v1/stuck",
		"/api/v1/diff?pid=1&since=1",
		"/api/v1/profile?pid=1",
		"/api/v1/status",
		"/metrics",
		"/healthz",
		"/debug/pprof/",
		"/debug/pprof/threads",
		"/debug/pprof/goroutine",
		"/debug/pprof/profile?seconds=1",
		"/static/app.js",
	};
	static char buf[1 << 20];
	char req[1024];
	int rebound = 0, cors = 0, preflight = 0;
	size_t n = sizeof(paths) / sizeof(paths[0]);

	for (size_t i = 0; i < n; i++) {
		int st = 0;

		snprintf(req, sizeof(req),
			 "GET %s HTTP/1.1\r\nHost: evil.example:%d\r\n\r\n",
			 paths[i], d->port);
		whole(d->port, req, buf, sizeof(buf));
		sscanf(buf, "HTTP/1.%*d %d", &st);
		if (st == 403)
			rebound++;
		else
			TAP_NOTE("%s through a rebound name: %d", paths[i], st);
		snprintf(req, sizeof(req),
			 "GET %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n"
			 "Origin: http://evil.example\r\n\r\n",
			 paths[i], d->port);
		whole(d->port, req, buf, sizeof(buf));
		if (!strcasestr(buf, "Access-Control-"))
			cors++;
		snprintf(req, sizeof(req),
			 "OPTIONS %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n"
			 "Origin: http://evil.example\r\n"
			 "Access-Control-Request-Method: GET\r\n\r\n",
			 paths[i], d->port);
		whole(d->port, req, buf, sizeof(buf));
		st = 0;
		sscanf(buf, "HTTP/1.%*d %d", &st);
		if (st == 405 && !strcasestr(buf, "Access-Control-"))
			preflight++;
	}
	TAP_OK(rebound == (int)n,
	       "every endpoint through a rebound name is 403 (%d of %zu)",
	       rebound, n);
	TAP_OK(cors == (int)n,
	       "no answer to a foreign Origin has a CORS header (%d of %zu)",
	       cors, n);
	TAP_OK(preflight == (int)n,
	       "every preflight is 405 without a CORS header (%d of %zu)",
	       preflight, n);
}

int main(void)
{
	struct itest_daemon d;

	if (itest_daemon_start(&d) < 0) {
		TAP_OK(0, "the daemon starts");
		return tap_done();
	}
	test_table(&d);
	test_slow_clients(&d);
	test_promtool(&d);
	test_no_signal(&d);
	test_cross_site(&d);
	test_every_endpoint(&d);
	TAP_OK(itest_daemon_stop(&d) == 0, "the daemon exits 0 after all that");
	itest_daemon_cleanup(&d);
	test_token();
	return tap_done();
}
