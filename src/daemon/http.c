/*
 * http.c - routing, parameters and responses of the daemon's HTTP API
 * (http.h).
 *
 * Every request is answered on its first call: we take no request body.
 * Parameters are validated before anything is looked up, and a pid that is
 * not a registered target is a 404 with nothing signalled anywhere.
 *
 * Each connection has a thread of its own (MHD_USE_THREAD_PER_CONNECTION):
 * an answer may wait for a snapshot's turn, an agent's dump or the
 * symbolizer, and with a shared pool of threads one user's waiting
 * requests held the connections of everyone else, root's included. The
 * number of threads is bounded by the connections (HTTP_MAX_CONNECTIONS,
 * HTTP_MAX_PER_PEER of one requester). Errors
 * are JSON {"error", "status"} (the same sentence as text or HTML when
 * that format was asked for).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <grp.h>
#include <sys/stat.h>
#include <sys/un.h>

#include "broker.h"
#include "model/buf.h"
#include "stackwatch.h"
#include "access.h"
#include "cond.h"
#include "collector/collect.h"
#include "collector/signal/handler.h"
#include "cores.h"
#include "guard.h"
#include "http.h"
#include "log.h"
#include "metrics.h"
#include "watch.h"
#include "model/procfs.h"
#include "processes.h"
#include "profile.h"
#include "privsep/parsers.h"
#include "ptracer.h"
#include "query.h"
#include "rolling.h"
#include "render/pprof.h"
#include "scheduler.h"
#include "turns.h"
#include "render/render.h"
#include "web.h"

/* Connections at a time, on each socket (TCP, unix): each has a thread of
 * its own while it is open, so that no request waits behind another. */
#define HTTP_MAX_CONNECTIONS 256
#define HTTP_MAX_PER_IP 128 /* local clients all share 127.0.0.1 */
/* Open connections of one requester (a uid, or an anonymous address),
 * whatever loopback addresses it comes from; root has none. */
#define HTTP_MAX_PER_PEER 64
#define HTTP_PEER_SLOTS (2 * HTTP_MAX_CONNECTIONS) /* TCP and unix */
#define HTTP_CONN_TIMEOUT_S 10
#define HTTP_CONN_MEMORY (64 * 1024)
/* On the way out, the longest we wait for requests in flight: the
 * longest dump a request may ask for, the daemon's grace for an agent's
 * answer, and a second to send it. */
#define HTTP_DRAIN_MS (QUERY_MAX_TIMEOUT_MS + 500 + 1000)
/* The page's scripts and styles come from /static/ only: no inline code. */
#define HTTP_PAGE_CSP                                                   \
	"default-src 'self'; img-src 'self' data:; object-src 'none'; " \
	"base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

struct http {
	struct MHD_Daemon *d;
	struct MHD_Daemon *ud;	  /* on the unix socket; NULL: none */
	char usock[108];	  /* its path, removed at the end */
	pthread_mutex_t lock;	  /* active, stopping */
	pthread_cond_t idle;	  /* active fell to 0 */
	pthread_cond_t prof_cond; /* a profile run finished (prof_lock) */
	unsigned active;	  /* requests being answered */
	bool stopping;		  /* http_stop() began: no new requests */
	struct registry *reg;
	struct stacks *st;
	struct scheduler *sched;  /* NULL: no periodic sampling */
	struct turns *turns;	  /* each requester's requests at work */
	int timeout_ms;		  /* default per dump */
	int sample_ms;		  /* --sample-interval; 0: none */
	char *token;		  /* required bearer token, NULL: none */
	char *const *allow_hosts; /* extra Host names (the options') */
	int nallow_hosts;
	gid_t admin_gid;	    /* (gid_t)-1: no admin group */
	pthread_mutex_t prof_lock;  /* every conn's profile wait */
	pthread_mutex_t peers_lock; /* peers */
	struct peer_count {
		char key[sizeof(((struct peer *)0)->key)]; /* "": free */
		unsigned n;				   /* connections */
	} peers[HTTP_PEER_SLOTS];
};

/* A connection's socket context: who it is, and where it is counted. */
struct conn {
	struct peer peer;	 /* first: peer_of() hands out its address */
	struct peer_count *slot; /* NULL: not counted (root, or refused) */
	/* A profile request waiting for its run (under prof_lock). */
	struct http *h;
	struct MHD_Connection *c;
	struct profile_run *prof;
	bool finished;	 /* the run is finished: answer */
	bool identified; /* peer is what peer_identify() found */
};

/*
 * Counts one more connection for key. Returns its slot, or NULL, counting
 * nothing, when key already has HTTP_MAX_PER_PEER of them (or no slot is
 * free, which cannot happen while the daemons' own limits hold). A slot
 * keeps its key while its count is above 0.
 */
static struct peer_count *peer_count_up(struct http *h, const char *key)
{
	struct peer_count *slot = NULL;

	pthread_mutex_lock(&h->peers_lock);
	for (size_t i = 0; i < HTTP_PEER_SLOTS; i++) {
		struct peer_count *pc = &h->peers[i];

		if (pc->n && strcmp(pc->key, key) == 0) {
			slot = pc;
			break;
		}
		if (!pc->n && !slot)
			slot = pc;
	}
	if (slot && slot->n >= HTTP_MAX_PER_PEER)
		slot = NULL;
	if (slot && !slot->n++)
		snprintf(slot->key, sizeof(slot->key), "%s", key);
	pthread_mutex_unlock(&h->peers_lock);
	return slot;
}

static void peer_count_down(struct http *h, struct peer_count *slot)
{
	pthread_mutex_lock(&h->peers_lock);
	slot->n--;
	pthread_mutex_unlock(&h->peers_lock);
}

/*
 * A connection's socket context (struct conn), made when it opens and
 * freed when it closes; who is on it is found at its first request
 * (identified()).
 */
static void notify_connection(void *cls, struct MHD_Connection *c,
			      void **socket_context,
			      enum MHD_ConnectionNotificationCode code)
{
	const union MHD_ConnectionInfo *ci;
	struct http *h = cls;
	struct conn *cn = *socket_context;
	bool root;

	if (code == MHD_CONNECTION_NOTIFY_CLOSED) {
		if (cn && cn->slot)
			peer_count_down(h, cn->slot);
		/* Closed after its run finished, before the answer. */
		if (cn && cn->prof && cn->finished)
			profile_free(cn->prof);
		free(cn);
		*socket_context = NULL;
		return;
	}
	cn = calloc(1, sizeof(*cn));
	*socket_context = cn;
	if (cn) {
		cn->h = h;
		cn->c = c;
	}
	ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
	if (!cn || !ci) {
		if (ci)
			shutdown(ci->connect_fd, SHUT_RDWR);
		return;
	}
	/* Counted at once, by the kernel's cheap word on the owner. */
	if (peer_count_key(ci->connect_fd, cn->peer.key, sizeof(cn->peer.key),
			   &root) < 0 ||
	    root)
		return;
	cn->slot = peer_count_up(h, cn->peer.key);
	if (!cn->slot) {
		log_info("http: %s has %d connections open, one more refused",
			 cn->peer.key, HTTP_MAX_PER_PEER);
		shutdown(ci->connect_fd, SHUT_RDWR);
	}
}

/*
 * Who is on connection c (cn), proven at its first request (peer.h), in
 * the connection's own thread: the thread that accepts connections must
 * not wait for a look through /proc. Kept until the connection closes.
 */
static void identify(struct MHD_Connection *c, struct conn *cn)
{
	const union MHD_ConnectionInfo *ci;

	if (cn->identified)
		return;
	cn->identified = true;
	ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
	if (!ci || peer_identify(ci->connect_fd, &cn->peer) < 0)
		cn->peer.known = false;
}

/* The requester of c; an anonymous one when it could not be found. */
static const struct peer *peer_of(struct MHD_Connection *c)
{
	static const struct peer anonymous = { .key = "anonymous" };
	const union MHD_ConnectionInfo *ci =
		MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);

	return ci && ci->socket_context ? ci->socket_context : &anonymous;
}

static const char *const content_types[] = {
	[QUERY_HTML] = "text/html; charset=utf-8",
	[QUERY_JSON] = "application/json",
	[QUERY_TEXT] = "text/plain; charset=utf-8",
	[QUERY_FOLDED] = "text/plain; charset=utf-8",
	[QUERY_PPROF] = "application/octet-stream",
};

/*
 * Sends body (len bytes, taken over). A stacks answer that could not read
 * everything says how many processes and threads it misses in the header
 * X-Stackwatch-Partial (partial > 0), which every format can carry and
 * the CLI turns into its exit status.
 */
/*
 * A response of body (len bytes, taken over: freed on failure) with the
 * headers every answer has; NULL without memory.
 */
static struct MHD_Response *body_response(enum query_format fmt, char *body,
					  size_t len)
{
	struct MHD_Response *r;

	r = MHD_create_response_from_buffer(len, body, MHD_RESPMEM_MUST_FREE);
	if (!r) {
		free(body);
		return NULL;
	}
	MHD_add_response_header(r, "Content-Type", content_types[fmt]);
	MHD_add_response_header(r, "Cache-Control", "no-store");
	MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
	return r;
}

static enum MHD_Result send_body_partial(struct MHD_Connection *c,
					 unsigned status, enum query_format fmt,
					 char *body, size_t len, size_t partial)
{
	struct MHD_Response *r = body_response(fmt, body, len);
	enum MHD_Result ret;
	char n[24];

	if (!r)
		return MHD_NO;
	if (partial) {
		snprintf(n, sizeof(n), "%zu", partial);
		MHD_add_response_header(r, "X-Stackwatch-Partial", n);
	}
	ret = MHD_queue_response(c, status, r);
	MHD_destroy_response(r);
	return ret;
}

static enum MHD_Result send_body(struct MHD_Connection *c, unsigned status,
				 enum query_format fmt, char *body, size_t len)
{
	return send_body_partial(c, status, fmt, body, len, 0);
}

/* A 500 for an answer that could not be made: never a 200 cut short. */
static enum MHD_Result send_unrenderable(struct MHD_Connection *c)
{
	static const char msg[] =
		"{\"error\":\"the answer could not be made: out of memory or "
		"too large\",\"status\":500}\n";
	char *body = strdup(msg);

	if (!body)
		return MHD_NO;
	return send_body(c, MHD_HTTP_INTERNAL_SERVER_ERROR, QUERY_JSON, body,
			 sizeof(msg) - 1);
}

static enum MHD_Result send_json_partial(struct MHD_Connection *c,
					 unsigned status, cJSON *doc,
					 size_t partial)
{
	char *s = doc ? cJSON_PrintUnformatted(doc) : NULL;
	struct buf b;
	char *body;

	cJSON_Delete(doc);
	if (!s)
		return send_unrenderable(c);
	buf_init(&b, (size_t)1 << 30);
	if (buf_adds(&b, s) < 0 || buf_adds(&b, "\n") < 0 ||
	    buf_detach(&b, &body) < 0) {
		buf_release(&b);
		cJSON_free(s);
		return send_unrenderable(c);
	}
	cJSON_free(s);
	return send_body_partial(c, status, QUERY_JSON, body, strlen(body),
				 partial);
}

static enum MHD_Result send_json(struct MHD_Connection *c, unsigned status,
				 cJSON *doc)
{
	return send_json_partial(c, status, doc, 0);
}

/*
 * An error in the page's own layout (web.h), with the page's CSP: the
 * same status, the reason, a link back; the page's script says what to
 * do next.
 */
static enum MHD_Result send_error_page(struct MHD_Connection *c,
				       unsigned status, const char *why)
{
	struct MHD_Response *r;
	enum MHD_Result ret;
	char *body;

	if (web_error_page(status, why, &body) < 0)
		return MHD_NO;
	r = body_response(QUERY_HTML, body, strlen(body));
	if (!r)
		return MHD_NO;
	MHD_add_response_header(r, "Content-Security-Policy", HTTP_PAGE_CSP);
	ret = MHD_queue_response(c, status, r);
	MHD_destroy_response(r);
	return ret;
}

static enum MHD_Result send_error(struct MHD_Connection *c, unsigned status,
				  enum query_format fmt, const char *why)
{
	struct buf b;
	char *body;
	cJSON *doc;

	if (fmt == QUERY_JSON) {
		doc = cJSON_CreateObject();
		if (!doc || !cJSON_AddStringToObject(doc, "error", why) ||
		    !cJSON_AddNumberToObject(doc, "status", status)) {
			cJSON_Delete(doc);
			return MHD_NO;
		}
		return send_json(c, status, doc);
	}
	if (fmt == QUERY_HTML)
		return send_error_page(c, status, why);
	buf_init(&b, 1 << 16);
	buf_addf(&b, "error: %s\n", why);
	if (buf_detach(&b, &body) < 0) {
		buf_release(&b);
		return MHD_NO;
	}
	return send_body(c, status, fmt, body, strlen(body));
}

static const char *arg(struct MHD_Connection *c, const char *key)
{
	return MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, key);
}

/* The raw parameters of a request, for query.c to validate. */
static void get_args(struct MHD_Connection *c, struct query_args *a)
{
	a->pid = arg(c, "pid");
	a->format = arg(c, "format");
	a->symbols = arg(c, "symbols");
	a->timeout_ms = arg(c, "timeout_ms");
	a->max_frames = arg(c, "max_frames");
	a->since = arg(c, "since");
	a->seconds = arg(c, "seconds");
	a->debug = arg(c, "debug");
	a->until = arg(c, "until");
	a->mode = arg(c, "mode");
	a->accept = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Accept");
}

/* A process the requester may not see (any more): a 404 of its own. */
#define ACCESS_EHIDDEN (-21004)

static unsigned status_of(int rc)
{
	if (rc == ACCESS_EHIDDEN)
		return MHD_HTTP_NOT_FOUND;
	if (rc == SNAP_ETRACED)
		return MHD_HTTP_CONFLICT;
	if (rc == SNAP_EZOMBIE || rc == SNAP_EKTHREAD)
		return 422;
	if (rc == SNAP_EARCH)
		return MHD_HTTP_NOT_IMPLEMENTED;
	if (rc == -EPERM)
		return MHD_HTTP_INTERNAL_SERVER_ERROR;
	if (rc == PTRACER_EGONE || rc == PARSERS_EAGAIN ||
	    rc == PARSERS_EFAILED || rc == PARSERS_EBUSY)
		return MHD_HTTP_SERVICE_UNAVAILABLE;
	if (rc == -ETIMEDOUT)
		return MHD_HTTP_GATEWAY_TIMEOUT;
	if (rc == -ECONNRESET)
		return MHD_HTTP_BAD_GATEWAY;
	if (rc == REGISTRY_ECHANGED)
		return MHD_HTTP_NOT_FOUND;
	if (rc == -ENOMEM || rc == STACKS_EHISTORY)
		return MHD_HTTP_SERVICE_UNAVAILABLE;
	return MHD_HTTP_BAD_GATEWAY; /* the agent answered with an error */
}

static const char *reason_of(int rc, char *buf, size_t size, pid_t pid)
{
	if (rc == -ETIMEDOUT)
		snprintf(buf, size, "pid %d did not answer in time", (int)pid);
	else if (rc == -ECONNRESET)
		snprintf(buf, size, "pid %d is gone or broke the protocol",
			 (int)pid);
	else if (rc == ACCESS_EHIDDEN)
		snprintf(buf, size, "pid %d is not a process you may see",
			 (int)pid);
	else if (rc == REGISTRY_ECHANGED)
		snprintf(buf, size,
			 "pid %d runs another program or has other "
			 "credentials since it was asked for: ask again",
			 (int)pid);
	else if (rc == REGISTRY_EADDRS)
		snprintf(buf, size,
			 "pid %d sent a dump of more addresses than one dump "
			 "of a user's process may hold (--max-dump-addresses)",
			 (int)pid);
	else if (rc == SNAP_ETRACED || rc == SNAP_EZOMBIE ||
		 rc == SNAP_EKTHREAD || rc == SNAP_EARCH || rc == -EPERM)
		snap_why(pid, rc, 0, buf, size);
	else if (rc == PTRACER_EGONE)
		snprintf(buf, size,
			 "pid %d has no agent, and no snapshot helper of the "
			 "daemon runs (both died: systemd restarts the daemon "
			 "once its watchdog goes unfed): restart stackwatchd",
			 (int)pid);
	else if (rc == PARSERS_EAGAIN)
		snprintf(
			buf, size,
			"the parser unwinding pid %d failed on a file it maps, "
			"which is refused from now on: ask again",
			(int)pid);
	else if (rc == PARSERS_EFAILED)
		snprintf(buf, size,
			 "the parser unwinding pid %d failed: ask again",
			 (int)pid);
	else if (rc == PARSERS_EBUSY)
		snprintf(buf, size,
			 "no parser of the daemon was free to unwind pid %d in "
			 "time: ask again",
			 (int)pid);
	else if (rc == STACKS_EHISTORY)
		snprintf(buf, size,
			 "the dump of pid %d cannot be kept: its user's "
			 "samples take all the memory allowed per user "
			 "(--max-history-mib)",
			 (int)pid);
	else
		snprintf(buf, size, "pid %d: %s", (int)pid, sw_strerror(rc));
	return buf;
}

/* Threads of d that were meant to be read and were not: timeout, error. */
static size_t threads_missed(const struct sw_dump *d)
{
	size_t n = 0;

	for (size_t i = 0; d && i < d->nthreads; i++)
		n += d->threads[i].status == SW_ST_TIMEOUT ||
		     d->threads[i].status == SW_ST_ERROR;
	return n;
}

/* One process rendered in the requested format, appended to b. */
static int render_one(struct buf *b, const struct sw_dump *d,
		      enum query_format f)
{
	char *s = NULL;
	int rc;

	if (f == QUERY_FOLDED)
		rc = render_folded(d, &s);
	else
		rc = render_text(d, &s);
	if (rc == 0)
		rc = buf_adds(b, s);
	free(s);
	return rc;
}

static cJSON *error_object(pid_t pid, unsigned status, const char *why)
{
	cJSON *o = cJSON_CreateObject();

	if (!o)
		return NULL;
	cJSON_AddNumberToObject(o, "pid", pid);
	cJSON_AddStringToObject(o, "error", why);
	cJSON_AddNumberToObject(o, "status", status);
	return o;
}

/*
 * The dump to render from sd: sd's own, or without symbols a private
 * copy of it (*own, freed by the caller). *d points at whichever it is.
 */
static int view_of(struct http *h, const struct query_stacks *rq,
		   const struct sdump *sd, struct sw_dump **own,
		   const struct sw_dump **d)
{
	int rc;

	*own = NULL;
	*d = sd->d;
	if (rq->symbols)
		return 0;
	rc = stacks_unsymbolized(h->st, sd->d, own);
	*d = *own;
	return rc;
}

/* A zombie the requester may see: an answer of its own, not a 404. */
static bool zombie_seen(const struct access *acc, pid_t pid)
{
	struct procfs_proc pp;

	return procfs_read_proc(pid, &pp) == 0 && pp.state == 'Z' &&
	       access_sees_pid(acc, pid);
}

/* Why a dump that was taken could not be rendered. */
static const char *render_failure(int rc, char *buf, size_t size, pid_t pid)
{
	snprintf(buf, size, "cannot render the dump of pid %d: %s", (int)pid,
		 rc == -ENOMEM	    ? "out of memory"
		 : rc == SW_ETOOBIG ? "it is too large"
				    : sw_strerror(rc));
	return buf;
}

/*
 * The dumps of ts (n of them) for acc, all at once under one deadline:
 * rcs[i] and sds[i] as stacks_get_many() has them. The rule is checked
 * again once they are taken (access.h): a target acc may no longer see
 * gets ACCESS_EHIDDEN, and so does one whose process changed during its
 * dump when it was one of many (it is left out of a list without a word).
 * A single target whose process changed is looked up and dumped anew,
 * once: ts[0] may be replaced (the caller puts whatever ts holds).
 */
static void dump_seen(struct http *h, const struct access *acc,
		      struct target **ts, size_t n, int timeout_ms, bool taken,
		      struct sdump **sds, int *rcs)
{
	bool *ok = calloc(n ? n : 1, sizeof(*ok));

	if (taken) {
		/* stacks_dump_frames_many() took them: checked here */
	} else if (n == 1) {
		rcs[0] = stacks_get(h->st, ts[0], &acc->who, timeout_ms,
				    &sds[0]);
		/*
		 * A process that changed since it became a target (a server
		 * that dropped its privileges after it registered) is another
		 * process now: asked for anew, once, under the same rule.
		 */
		if (rcs[0] == REGISTRY_ECHANGED) {
			struct target *t =
				access_get_process(h->reg, acc, ts[0]->pid);

			if (t) {
				target_put(ts[0]);
				ts[0] = t;
				rcs[0] = stacks_get(h->st, t, &acc->who,
						    timeout_ms, &sds[0]);
			}
		}
	} else {
		stacks_get_many(h->st, ts, n, &acc->who, timeout_ms, sds, rcs);
	}
	if (ok)
		access_sees_all(acc, ts, n, ok);
	for (size_t i = 0; i < n; i++) {
		struct sdump *v;

		if (rcs[i] == REGISTRY_ECHANGED && n > 1)
			rcs[i] = ACCESS_EHIDDEN;
		if (rcs[i] == 0 && ok && ok[i]) {
			/* Of the process, the threads it may read. */
			v = access_view(acc, sds[i], false);
			sdump_put(sds[i]);
			sds[i] = v;
			if (!v)
				rcs[i] = -ENOMEM;
			continue;
		}
		if (rcs[i] != 0)
			continue;
		sdump_put(sds[i]);
		sds[i] = NULL;
		rcs[i] = ACCESS_EHIDDEN;
	}
	free(ok);
}

/*
 * Dumps every target of ts (n of them; all at once under one deadline)
 * for acc and answers in rq's format. One target (!many) answers with its
 * error status when its dump or its rendering fails; many answer 200 with
 * an error entry for each target that failed.
 */
static enum MHD_Result answer_stacks(struct http *h, struct MHD_Connection *c,
				     const struct access *acc,
				     const struct query_stacks *rq,
				     struct target **ts, size_t n, bool many)
{
	/* NOLINTNEXTLINE(bugprone-sizeof-expression): pointers */
	struct sdump **sds = calloc(n ? n : 1, sizeof(*sds));
	int *rcs = calloc(n ? n : 1, sizeof(*rcs));
	cJSON *doc = NULL, *arr = NULL;
	enum MHD_Result ret = MHD_NO;
	size_t partial = 0;
	bool frames;
	bool sent = false;
	struct buf b;
	char *body;

	buf_init(&b, (size_t)1 << 30);
	if (!sds || !rcs) {
		ret = send_error(c, 500, rq->format, "out of memory");
		goto out;
	}
	/* Another depth than the usual: fresh dumps, not the cached. */
	frames = rq->max_frames >= 0 && rq->max_frames != SW_MAX_FRAMES;
	if (frames)
		stacks_dump_frames_many(h->st, ts, n, &acc->who, rq->timeout_ms,
					rq->symbols, (unsigned)rq->max_frames,
					sds, rcs);
	dump_seen(h, acc, ts, n, rq->timeout_ms, frames, sds, rcs);
	if (rq->format == QUERY_JSON && many) {
		doc = cJSON_CreateObject();
		arr = cJSON_AddArrayToObject(doc, "processes");
	}
	for (size_t i = 0; i < n && !sent; i++) {
		const struct sw_dump *d = NULL;
		struct sw_dump *own = NULL;
		char why[256];
		unsigned status = MHD_HTTP_OK;
		int rc = rcs[i];
		cJSON *one = NULL;

		if (rc == ACCESS_EHIDDEN && many)
			continue;
		if (rc == 0)
			rc = view_of(h, rq, sds[i], &own, &d);
		if (rc < 0) {
			status = status_of(rc);
			reason_of(rc, why, sizeof(why), ts[i]->pid);
			partial++;
		} else {
			partial += threads_missed(d);
			rc = rq->format == QUERY_JSON
				     ? render_json(d, &one)
				     : render_one(&b, d, rq->format);
			if (rc < 0) {
				status = MHD_HTTP_INTERNAL_SERVER_ERROR;
				render_failure(rc, why, sizeof(why),
					       ts[i]->pid);
			}
		}
		sw_dump_free(own);
		if (!many && (rc < 0 || rq->format == QUERY_JSON)) {
			sent = true;
			ret = rc < 0 ? send_error(c, status, rq->format, why)
				     : send_json_partial(c, MHD_HTTP_OK, one,
							 partial);
			continue;
		}
		if (rq->format == QUERY_JSON) {
			if (rc < 0)
				one = error_object(ts[i]->pid, status, why);
			if (one)
				cJSON_AddItemToArray(arr, one);
			continue;
		}
		if (rc < 0 && rq->format == QUERY_TEXT)
			buf_addf(&b, "error: %s\n", why);
		if (rq->format == QUERY_TEXT && i + 1 < n)
			buf_adds(&b, "\n");
	}
	if (sent)
		goto out;
	if (doc) {
		ret = send_json_partial(c, MHD_HTTP_OK, doc, partial);
		doc = NULL;
		goto out;
	}
	if (buf_detach(&b, &body) < 0) {
		ret = send_error(c, 500, rq->format,
				 "the response is too large");
		goto out;
	}
	ret = send_body_partial(c, MHD_HTTP_OK, rq->format, body, strlen(body),
				partial);
out:
	buf_release(&b);
	cJSON_Delete(doc);
	for (size_t i = 0; sds && i < n; i++)
		sdump_put(sds[i]);
	free(sds);
	free(rcs);
	return ret;
}

/*
 * Answers with one of the page's files (web.h). The page is client-side
 * rendered: it loads its script and style from /static/ and nothing from
 * anywhere else, which the Content-Security-Policy enforces. The ETag lets
 * a browser revalidate (304) instead of downloading the file again.
 */
static enum MHD_Result send_asset(struct MHD_Connection *c,
				  const struct web_asset *a)
{
	const char *inm = MHD_lookup_connection_value(
		c, MHD_HEADER_KIND, MHD_HTTP_HEADER_IF_NONE_MATCH);
	bool same = inm && strcmp(inm, a->etag) == 0;
	struct MHD_Response *r;
	enum MHD_Result ret;

	r = MHD_create_response_from_buffer(same ? 0 : a->len, (void *)a->data,
					    MHD_RESPMEM_PERSISTENT);
	if (!r)
		return MHD_NO;
	MHD_add_response_header(r, "Content-Type", a->content_type);
	MHD_add_response_header(r, "Cache-Control", "no-cache");
	MHD_add_response_header(r, "ETag", a->etag);
	MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
	MHD_add_response_header(r, "Content-Security-Policy", HTTP_PAGE_CSP);
	ret = MHD_queue_response(c, same ? MHD_HTTP_NOT_MODIFIED : MHD_HTTP_OK,
				 r);
	MHD_destroy_response(r);
	return ret;
}

/* /static/NAME: a file of the page, or a 404. */
static enum MHD_Result handle_static(struct MHD_Connection *c, const char *name)
{
	const struct web_asset *a = web_asset_find(name);

	if (!a)
		return send_error(c, MHD_HTTP_NOT_FOUND, QUERY_JSON,
				  "no such file");
	return send_asset(c, a);
}

/*
 * Whether a browser marked the request as made by another site's page
 * (an <img>, a form, a fetch): such a page must not make us signal every
 * target. Refused: a Sec-Fetch-Site other than same-origin or none (typed
 * by the user), and an Origin that is not this daemon's own (the scheme
 * and our Host). curl and scripts send neither header.
 */
static bool cross_site(struct MHD_Connection *c)
{
	const char *site = MHD_lookup_connection_value(c, MHD_HEADER_KIND,
						       "Sec-Fetch-Site");
	const char *origin =
		MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Origin");
	const char *host = MHD_lookup_connection_value(c, MHD_HEADER_KIND,
						       MHD_HTTP_HEADER_HOST);

	if (site && strcasecmp(site, "same-origin") != 0 &&
	    strcasecmp(site, "none") != 0)
		return true;
	if (!origin)
		return false;
	if (strncasecmp(origin, "http://", 7) == 0)
		origin += 7;
	else if (strncasecmp(origin, "https://", 8) == 0)
		origin += 8;
	else
		return true; /* "null": a sandboxed frame, a file */
	return !host || strcasecmp(origin, host) != 0;
}

static enum MHD_Result send_cross_site(struct MHD_Connection *c,
				       enum query_format fmt)
{
	return send_error(c, MHD_HTTP_FORBIDDEN, fmt,
			  "refused: the browser says another site's page made "
			  "this request (Sec-Fetch-Site, Origin)");
}

/*
 * The targets a request names: pid's (0: every target the requester may
 * see) into *ts, *n (freed with registry_put_all()). false when the
 * answer is already sent into *ret: 422 for a zombie, 404 for a pid the
 * requester may not see (never a 403: that would say it exists).
 */
static bool targets_of(struct http *h, struct MHD_Connection *c,
		       const struct access *acc, pid_t pid,
		       enum query_format fmt, struct target ***ts, size_t *n,
		       enum MHD_Result *ret)
{
	struct target *t;
	char why[256];

	*ts = NULL;
	*n = 0;
	if (!pid) {
		if (access_list(h->reg, acc, ts, n) == 0)
			return true;
		*ret = send_error(c, 500, fmt, "out of memory");
		return false;
	}
	t = access_get_process(h->reg, acc, pid);
	if (!t && zombie_seen(acc, pid)) {
		snap_why(pid, SNAP_EZOMBIE, 0, why, sizeof(why));
		*ret = send_error(c, 422, fmt, why);
		return false;
	}
	/* With no core, a process without the agent cannot be told. */
	if (!t && broker_in_use() && cores_state(NULL, 0) >= 2) {
		reason_of(PTRACER_EGONE, why, sizeof(why), pid);
		*ret = send_error(c, MHD_HTTP_SERVICE_UNAVAILABLE, fmt, why);
		return false;
	}
	if (!t) {
		access_unseen_why(acc, pid, why, sizeof(why));
		*ret = send_error(c, MHD_HTTP_NOT_FOUND, fmt, why);
		return false;
	}
	/* NOLINTNEXTLINE(bugprone-sizeof-expression): pointers */
	*ts = malloc(sizeof(**ts));
	if (!*ts) {
		target_put(t);
		*ret = send_error(c, 500, fmt, "out of memory");
		return false;
	}
	(*ts)[0] = t;
	*n = 1;
	return true;
}

static enum MHD_Result handle_stacks(struct http *h, struct MHD_Connection *c,
				     const struct access *acc,
				     enum query_format dflt)
{
	struct query_stacks rq;
	struct query_args a;
	struct target **ts;
	enum MHD_Result ret;
	const char *bad;
	size_t n;

	get_args(c, &a);
	bad = query_parse_stacks(&a, dflt, h->timeout_ms, &rq);
	if (bad)
		return send_error(c, MHD_HTTP_BAD_REQUEST,
				  dflt == QUERY_JSON ? QUERY_JSON : rq.format,
				  bad);
	/* The page itself signals nothing; its data requests do. */
	if (rq.format != QUERY_HTML && cross_site(c))
		return send_cross_site(c, rq.format);
	if (!targets_of(h, c, acc, rq.pid, rq.format, &ts, &n, &ret))
		return ret;
	if (rq.format == QUERY_HTML)
		ret = handle_static(c, "index.html");
	else
		ret = answer_stacks(h, c, acc, &rq, ts, n, rq.pid == 0);
	registry_put_all(ts, n);
	return ret;
}

/*
 * Sends a pprof profile (gzipped protobuf, made by the caller) as Go's
 * net/http/pprof does: application/octet-stream, an attachment named
 * after the profile.
 */
static enum MHD_Result send_pprof(struct MHD_Connection *c, const char *name,
				  void *body, size_t len)
{
	struct MHD_Response *r;
	enum MHD_Result ret;
	char disp[96];

	r = MHD_create_response_from_buffer(len, body, MHD_RESPMEM_MUST_FREE);
	if (!r) {
		free(body);
		return MHD_NO;
	}
	snprintf(disp, sizeof(disp), "attachment; filename=\"%s.pb.gz\"", name);
	MHD_add_response_header(r, "Content-Type", content_types[QUERY_PPROF]);
	MHD_add_response_header(r, "Content-Disposition", disp);
	MHD_add_response_header(r, "Cache-Control", "no-store");
	MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
	ret = MHD_queue_response(c, MHD_HTTP_OK, r);
	MHD_destroy_response(r);
	return ret;
}

/* A profile run is finished (the scheduler's thread): wake its request. */
static void profile_done(void *arg)
{
	struct conn *cn = arg;
	struct http *h = cn->h;

	pthread_mutex_lock(&h->prof_lock);
	cn->finished = true;
	pthread_cond_broadcast(&h->prof_cond);
	pthread_mutex_unlock(&h->prof_lock);
}

/*
 * The answer to a profile run that sched_profile() refused with rc: a
 * 429 when the requester has its share of runs, a 503 when the daemon
 * has all it takes (or all but root's reserve), each saying which limit.
 */
static enum MHD_Result refuse_profile(struct http *h, struct MHD_Connection *c,
				      int rc)
{
	unsigned status = MHD_HTTP_SERVICE_UNAVAILABLE;
	char why[256];

	if (rc == -EDQUOT) {
		status = MHD_HTTP_TOO_MANY_REQUESTS;
		snprintf(why, sizeof(why),
			 "you have %d profiles in progress already, the most "
			 "one user may run at a time "
			 "(--max-profiles-per-user)",
			 sched_profiles_per_user(h->sched));
	} else if (rc == -ENOSPC) {
		snprintf(why, sizeof(why),
			 "too many profiles in progress: the last %d of the "
			 "%d the daemon runs at a time are kept for root, the "
			 "admin group and the token",
			 SCHED_PROFILE_RESERVE, SCHED_MAX_PROFILES);
	} else if (rc == -EAGAIN) {
		snprintf(why, sizeof(why),
			 "too many profiles in progress: the daemon runs %d "
			 "at a time",
			 SCHED_MAX_PROFILES);
	} else {
		status = MHD_HTTP_INTERNAL_SERVER_ERROR;
		snprintf(why, sizeof(why), "%s",
			 rc == -ENOTSUP ? "profiles are off (--profile-hz)"
					: "out of memory");
	}
	return send_error(c, status, QUERY_TEXT, why);
}

/*
 * /debug/pprof/profile and /debug/fgprof: a wall-clock profile of every
 * target the requester may see, or of ?pid=N, over the next ?seconds=N
 * (30 by default), sampled by the scheduler at --profile-hz (profile.h).
 * The connection is suspended meanwhile, so it holds no HTTP thread; when
 * the run is finished, MHD calls again and the profile is the answer. A
 * run ends early when its client hangs up (the scheduler watches the
 * connection's socket, which MHD does not while it is suspended): then
 * the connection is closed without an answer.
 */
static enum MHD_Result handle_pprof_profile(struct http *h,
					    struct MHD_Connection *c,
					    const struct access *acc)
{
	const union MHD_ConnectionInfo *ci =
		MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
	struct conn *cn = ci ? ci->socket_context : NULL;
	struct sched_requester who = { acc->peer.key, acc->all, -1, acc };
	struct profile_run *r;
	struct query_pprof rq;
	struct query_args a;
	struct target **ts;
	enum MHD_Result ret;
	const char *bad;
	size_t n;
	int rc;

	if (!cn)
		return send_error(c, 500, QUERY_TEXT, "out of memory");
	get_args(c, &a);
	bad = query_parse_pprof(&a, h->timeout_ms, &rq);
	if (bad)
		return send_error(c, MHD_HTTP_BAD_REQUEST, QUERY_TEXT, bad);
	if (cross_site(c))
		return send_cross_site(c, QUERY_TEXT);
	if (rq.format == QUERY_TEXT)
		return send_error(c, MHD_HTTP_BAD_REQUEST, QUERY_TEXT,
				  "a profile has no text form (debug=0 only)");
	if (!targets_of(h, c, acc, rq.pid, QUERY_TEXT, &ts, &n, &ret))
		return ret;
	ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
	if (ci)
		who.fd = ci->connect_fd;
	pthread_mutex_lock(&h->prof_lock);
	cn->finished = false;
	rc = sched_profile(h->sched, ts, n, rq.seconds, &who, profile_done, cn,
			   &cn->prof);
	/* The connection's own thread waits for the run (or its end). */
	while (rc == 0 && !cn->finished)
		pthread_cond_wait(&h->prof_cond, &h->prof_lock);
	r = rc == 0 ? cn->prof : NULL;
	cn->prof = NULL;
	cn->finished = false;
	pthread_mutex_unlock(&h->prof_lock);
	if (r && r->rc == -ECONNABORTED) { /* its client hung up */
		profile_free(r);
		return MHD_NO;
	}
	if (r) {
		void *body = r->out;
		size_t len = r->len;

		r->out = NULL;
		ret = r->rc < 0
			      ? send_error(c, 500, QUERY_TEXT,
					   r->rc == SW_ETOOBIG
						   ? "the profile is too large"
						   : "out of memory")
			      : send_pprof(c, "profile", body, len);
		profile_free(r);
		return ret;
	}
	if (rc == 0)
		return send_error(c, 500, QUERY_TEXT, "out of memory");
	registry_put_all(ts, n);
	return refuse_profile(h, c, rc);
}

/*
 * /debug/pprof/goroutine and /debug/pprof/threads (type is the last part
 * of the path): the stacks of every target the requester may see, or of
 * ?pid=N, as a count profile (pprof.h), the way Go serves its goroutine
 * profile; ?debug=1 or 2 answers the text format instead. With several
 * targets, one whose dump fails is left out of the profile; with ?pid=
 * its failure is the answer, as on /api/v1/stacks.
 */
static enum MHD_Result handle_pprof_count(struct http *h,
					  struct MHD_Connection *c,
					  const struct access *acc,
					  const char *type)
{
	struct query_pprof rq;
	struct query_args a;
	struct target **ts;
	struct sdump **sds = NULL;
	const struct sw_dump **ds = NULL;
	enum MHD_Result ret;
	const char *bad;
	int *rcs = NULL, rc;
	size_t n, k = 0, len;
	void *body;
	char why[256];

	get_args(c, &a);
	bad = query_parse_pprof(&a, h->timeout_ms, &rq);
	if (bad)
		return send_error(c, MHD_HTTP_BAD_REQUEST, QUERY_TEXT, bad);
	if (cross_site(c))
		return send_cross_site(c, QUERY_TEXT);
	if (!targets_of(h, c, acc, rq.pid, QUERY_TEXT, &ts, &n, &ret))
		return ret;
	if (rq.format == QUERY_TEXT) {
		struct query_stacks qs = { rq.pid, QUERY_TEXT, true,
					   rq.timeout_ms, -1 };

		ret = answer_stacks(h, c, acc, &qs, ts, n, rq.pid == 0);
		registry_put_all(ts, n);
		return ret;
	}
	/* NOLINTNEXTLINE(bugprone-sizeof-expression): pointers */
	sds = calloc(n ? n : 1, sizeof(*sds));
	/* NOLINTNEXTLINE(bugprone-sizeof-expression): pointers */
	ds = calloc(n ? n : 1, sizeof(*ds));
	rcs = calloc(n ? n : 1, sizeof(*rcs));
	if (!sds || !ds || !rcs) {
		ret = send_error(c, 500, QUERY_TEXT, "out of memory");
		goto out;
	}
	dump_seen(h, acc, ts, n, rq.timeout_ms, false, sds, rcs);
	for (size_t i = 0; i < n; i++)
		if (rcs[i] == 0)
			ds[k++] = sds[i]->d;
	if (rq.pid && rcs[0] < 0) {
		ret = send_error(c, status_of(rcs[0]), QUERY_TEXT,
				 reason_of(rcs[0], why, sizeof(why), rq.pid));
		goto out;
	}
	rc = render_pprof_count(ds, k, type, &body, &len);
	if (rc < 0) {
		ret = send_error(c, 500, QUERY_TEXT,
				 render_failure(rc, why, sizeof(why),
						rq.pid ? rq.pid : 0));
		goto out;
	}
	ret = send_pprof(c, type, body, len);
out:
	for (size_t i = 0; sds && i < n; i++)
		sdump_put(sds[i]);
	free(sds);
	free(ds);
	free(rcs);
	registry_put_all(ts, n);
	return ret;
}

static int count_threads(pid_t pid)
{
	char path[64], buf[4096];
	int64_t v;
	ssize_t n;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	n = procfs_read_at(-100 /* AT_FDCWD */, path, buf, sizeof(buf));
	if (n < 0 || procfs_parse_status_dec(buf, (size_t)n, "Threads", &v) < 0)
		return -1;
	return (int)v;
}

static void add_time(cJSON *o, const char *key, uint64_t ms)
{
	struct timespec ts = { .tv_sec = (time_t)(ms / 1000),
			       .tv_nsec = (long)(ms % 1000) * 1000000L };
	char when[40];

	if (!ms) {
		cJSON_AddNullToObject(o, key);
		return;
	}
	render_iso_time(&ts, when, sizeof(when));
	cJSON_AddStringToObject(o, key, when);
}

/*
 * What t's history covers, for the page to offer only windows it has:
 * "history_from" (Unix seconds of its oldest sample, null when none),
 * "history_samples" and "history_bytes".
 */
static void add_history(struct target *t, cJSON *o)
{
	struct timespec from;
	size_t n, bytes;
	long ms;

	stacks_history_span(t, &n, &from, &bytes);
	ms = from.tv_nsec / 1000000; /* to the millisecond, as JSON times */
	if (n)
		cJSON_AddNumberToObject(o, "history_from",
					(double)from.tv_sec + (double)ms / 1e3);
	else
		cJSON_AddNullToObject(o, "history_from");
	cJSON_AddNumberToObject(o, "history_samples", (double)n);
	cJSON_AddNumberToObject(o, "history_bytes", (double)bytes);
}

static enum MHD_Result handle_targets(struct http *h, struct MHD_Connection *c,
				      const struct access *acc)
{
	cJSON *doc = cJSON_CreateObject(), *arr;
	struct target **ts;
	size_t n;

	arr = cJSON_AddArrayToObject(doc, "targets");
	if (!arr || access_list(h->reg, acc, &ts, &n) < 0) {
		cJSON_Delete(doc);
		return send_error(c, 500, QUERY_JSON, "out of memory");
	}
	for (size_t i = 0; i < n; i++) {
		const struct target *t = ts[i];
		cJSON *o = cJSON_CreateObject();
		bool alive = target_alive(t);
		int threads = alive ? count_threads(t->pid) : -1;
		char *live = NULL;

		if (!o)
			break;
		/*
		 * The command line as ps shows it now: servers rewrite it for
		 * a title after they registered (nginx's workers, forked from
		 * the master, say "worker process" only then).
		 */
		if (alive && !t->self &&
		    (procfs_read_cmdline(t->pid, &live) < 0 || !live[0])) {
			free(live);
			live = NULL;
		}
		cJSON_AddNumberToObject(o, "pid", t->pid);
		cJSON_AddStringToObject(o, "comm", t->comm);
		cJSON_AddStringToObject(o, "cmdline", live ? live : t->cmdline);
		free(live);
		cJSON_AddNumberToObject(o, "uid", t->uid);
		cJSON_AddNumberToObject(o, "signal",
					t->self ? collect_signal()
						: atomic_load(&t->signo));
		if (threads < 0)
			threads = (int)atomic_load(&t->last_threads);
		cJSON_AddNumberToObject(o, "threads", threads);
		add_time(o, "registered_at",
			 (uint64_t)t->registered_at.tv_sec * 1000 +
				 (uint64_t)t->registered_at.tv_nsec / 1000000);
		add_time(o, "last_sample_at", atomic_load(&t->last_sample_ms));
		cJSON_AddBoolToObject(o, "self", t->self);
		add_history(ts[i], o);
		cJSON_AddItemToArray(arr, o);
	}
	registry_put_all(ts, n);
	return send_json(c, MHD_HTTP_OK, doc);
}

static enum MHD_Result handle_processes(struct http *h,
					struct MHD_Connection *c,
					const struct access *acc)
{
	cJSON *doc;

	if (processes_json(h->reg, h->st, acc, &doc) < 0)
		return send_error(c, 500, QUERY_JSON, "out of memory");
	return send_json(c, MHD_HTTP_OK, doc);
}

static enum MHD_Result handle_stuck(struct http *h, struct MHD_Connection *c,
				    const struct access *acc)
{
	cJSON *doc;

	if (watch_stuck(h->st, h->reg, acc, &doc, NULL) < 0)
		return send_error(c, 500, QUERY_JSON, "out of memory");
	return send_json(c, MHD_HTTP_OK, doc);
}

/*
 * The registered target pid when the requester may see it (a reference);
 * else NULL with a 404 sent into *ret.
 */
static struct target *target_seen(struct http *h, struct MHD_Connection *c,
				  const struct access *acc, pid_t pid,
				  enum MHD_Result *ret)
{
	struct target *t = access_get(h->reg, acc, pid);
	char why[64];

	if (!t) {
		access_unseen_why(acc, pid, why, sizeof(why));
		*ret = send_error(c, MHD_HTTP_NOT_FOUND, QUERY_JSON, why);
	}
	return t;
}

/*
 * The 404 of a diff without a sample that old: says why, and when the
 * history is still filling, in how many seconds one will be
 * ("retry_after_s").
 */
static enum MHD_Result send_no_sample(struct http *h, struct MHD_Connection *c,
				      const struct access *acc,
				      const struct query_diff *q)
{
	struct target *t = access_get(h->reg, acc, q->pid);
	double retry = -1;
	char why[256];
	cJSON *doc;

	snprintf(why, sizeof(why), "no sample of pid %d is %g s old",
		 (int)q->pid, q->since);
	if (t) {
		watch_diff_why(h->st, t, q->since, h->sample_ms, why,
			       sizeof(why), &retry);
		target_put(t);
	}
	doc = cJSON_CreateObject();
	if (!doc || !cJSON_AddStringToObject(doc, "error", why) ||
	    !cJSON_AddNumberToObject(doc, "status", MHD_HTTP_NOT_FOUND) ||
	    (retry >= 0 &&
	     !cJSON_AddNumberToObject(doc, "retry_after_s", retry))) {
		cJSON_Delete(doc);
		return MHD_NO;
	}
	return send_json(c, MHD_HTTP_NOT_FOUND, doc);
}

/* Whether pid is a process (no kernel thread); the rule aside. */
static bool process_exists(pid_t pid)
{
	struct procfs_proc p;

	return procfs_read_proc(pid, &p) == 0 && p.state != 'Z' &&
	       !(p.flags & PROCFS_PF_KTHREAD);
}

/*
 * target_seen() for what is built on the history (diff, profile): a
 * process the requester may see but that is not sampled (it has no
 * agent, and --sample-ptrace is off or nobody opened it yet) has no
 * history, and the 404 says so and what would give it one.
 */
static struct target *sampled_seen(struct http *h, struct MHD_Connection *c,
				   const struct access *acc, pid_t pid,
				   enum MHD_Result *ret)
{
	struct target *t = access_get(h->reg, acc, pid);
	char why[160];

	if (t && (!t->ptrace || stacks_sampled(h->st, t)))
		return t;
	if (!t && (!process_exists(pid) || !access_sees_pid(acc, pid)))
		return target_seen(h, c, acc, pid, ret);
	target_put(t);
	if (h->st->ptrace_spacing_ns)
		snprintf(why, sizeof(why),
			 "pid %d is not sampled yet: it has no agent, and "
			 "--sample-ptrace samples it once it is dumped",
			 (int)pid);
	else
		snprintf(why, sizeof(why),
			 "pid %d is not sampled: it has no agent (see "
			 "--sample-ptrace)",
			 (int)pid);
	*ret = send_error(c, MHD_HTTP_NOT_FOUND, QUERY_JSON, why);
	return NULL;
}

static enum MHD_Result handle_diff(struct http *h, struct MHD_Connection *c,
				   const struct access *acc)
{
	enum MHD_Result ret;
	struct query_args a;
	struct query_diff q;
	const char *bad;
	struct target *t;
	char why[128];
	cJSON *doc;
	int rc;

	get_args(c, &a);
	bad = query_parse_diff(&a, h->timeout_ms, &q);
	if (bad)
		return send_error(c, MHD_HTTP_BAD_REQUEST, QUERY_JSON, bad);
	if (cross_site(c)) /* it dumps the process now */
		return send_cross_site(c, QUERY_JSON);
	t = sampled_seen(h, c, acc, q.pid, &ret);
	if (!t)
		return ret;
	rc = watch_diff(h->st, t, acc, q.since, q.timeout_ms, &doc);
	/* Checked again once read (access.h). */
	if (rc == 0 && !access_sees(acc, t)) {
		cJSON_Delete(doc);
		rc = ACCESS_EHIDDEN;
	}
	target_put(t);
	if (rc == -ENOENT)
		return send_no_sample(h, c, acc, &q);
	if (rc < 0)
		return send_error(c, status_of(rc), QUERY_JSON,
				  reason_of(rc, why, sizeof(why), q.pid));
	return send_json(c, MHD_HTTP_OK, doc);
}

/*
 * /api/v1/profile?pid=N: the page's Profile view, from the history alone
 * (rolling.h): nothing is dumped, so no cross-site check is needed.
 */
static enum MHD_Result handle_profile(struct http *h, struct MHD_Connection *c,
				      const struct access *acc)
{
	enum MHD_Result ret;
	struct query_profile q;
	struct query_args a;
	const char *bad;
	struct target *t;
	cJSON *doc;
	int rc;

	get_args(c, &a);
	bad = query_parse_profile(&a, &q);
	if (bad)
		return send_error(c, MHD_HTTP_BAD_REQUEST, QUERY_JSON, bad);
	t = sampled_seen(h, c, acc, q.pid, &ret);
	if (!t)
		return ret;
	rc = rolling_profile(t, acc, q.since, q.until, q.cpu, &doc);
	if (rc == 0 && !access_sees(acc, t)) {
		cJSON_Delete(doc);
		target_put(t);
		return send_error(c, MHD_HTTP_NOT_FOUND, QUERY_JSON,
				  "not a process you may see");
	}
	target_put(t);
	if (rc < 0)
		return send_error(c, 500, QUERY_JSON, "out of memory");
	return send_json(c, MHD_HTTP_OK, doc);
}

static enum MHD_Result handle_metrics(struct http *h, struct MHD_Connection *c,
				      const struct access *acc)
{
	struct MHD_Response *r;
	enum MHD_Result ret;
	char *body;

	if (metrics_render(h->st, h->reg, h->sched, h->turns, acc, &body) < 0)
		return send_error(c, 500, QUERY_JSON, "out of memory");
	r = MHD_create_response_from_buffer(strlen(body), body,
					    MHD_RESPMEM_MUST_FREE);
	if (!r) {
		free(body);
		return MHD_NO;
	}
	MHD_add_response_header(r, "Content-Type",
				"text/plain; version=0.0.4; charset=utf-8");
	ret = MHD_queue_response(c, MHD_HTTP_OK, r);
	MHD_destroy_response(r);
	return ret;
}

/* One entry of /api/v1/status's "methods". */
static cJSON *method_json(bool active, const char *why)
{
	cJSON *o = cJSON_CreateObject();

	if (!o || !cJSON_AddBoolToObject(o, "active", active) ||
	    (!active && why && !cJSON_AddStringToObject(o, "why", why))) {
		cJSON_Delete(o);
		return NULL;
	}
	return o;
}

/*
 * /api/v1/status: which ways of reading a thread this daemon can use
 * (the least disturbing first), and for each it cannot, why.
 */
static enum MHD_Result handle_status(struct MHD_Connection *c)
{
	cJSON *doc = cJSON_CreateObject(), *m = cJSON_CreateObject();
	char why[240], pwhy[160];
	bool helper = cores_state(NULL, 0) < 2, kernel, perf;

	kernel = ptracer_kernel_status(why, sizeof(why)) == 0;
	perf = ptracer_perf_status(pwhy, sizeof(pwhy)) == 0;
	if (!doc || !m ||
	    !cJSON_AddStringToObject(doc, "version", SW_VERSION) ||
	    !cJSON_AddItemToObject(doc, "methods", m)) {
		cJSON_Delete(doc);
		cJSON_Delete(m);
		return send_unrenderable(c);
	}
	if (!cJSON_AddItemToObject(m, "kernel", method_json(kernel, why)) ||
	    !cJSON_AddItemToObject(m, "signal", method_json(true, NULL)) ||
	    !cJSON_AddItemToObject(m, "perf", method_json(perf, pwhy)) ||
	    !cJSON_AddItemToObject(
		    m, "ptrace",
		    method_json(helper, "no snapshot helper runs")) ||
	    !cJSON_AddItemToObject(doc, "processes", guard_processes()) ||
	    !cJSON_AddItemToObject(doc, "degraded", guard_degraded())) {
		cJSON_Delete(doc);
		return send_unrenderable(c);
	}
	return send_json(c, MHD_HTTP_OK, doc);
}

static enum MHD_Result handle_text(struct MHD_Connection *c, const char *s);

/*
 * /healthz: "ok" when the daemon can do its job, else 503 with what keeps
 * it from it, one reason a line (guard.h).
 */
static enum MHD_Result handle_healthz(struct MHD_Connection *c)
{
	cJSON *d = guard_degraded(), *r;
	struct buf b;
	char *body;

	if (!d)
		return send_unrenderable(c);
	if (cJSON_GetArraySize(d) == 0) {
		cJSON_Delete(d);
		return handle_text(c, "ok\n");
	}
	buf_init(&b, 1 << 16);
	cJSON_ArrayForEach(r, d)
	{
		if (cJSON_IsString(r))
			buf_addf(&b, "%s\n", r->valuestring);
	}
	cJSON_Delete(d);
	if (buf_detach(&b, &body) < 0) {
		buf_release(&b);
		return send_unrenderable(c);
	}
	return send_body(c, MHD_HTTP_SERVICE_UNAVAILABLE, QUERY_TEXT, body,
			 strlen(body));
}

static enum MHD_Result handle_redirect(struct MHD_Connection *c, const char *to)
{
	struct MHD_Response *r;
	enum MHD_Result ret;
	char *body;

	if (asprintf(&body, "see %s\n", to) < 0)
		return MHD_NO;
	r = MHD_create_response_from_buffer(strlen(body), body,
					    MHD_RESPMEM_MUST_FREE);
	if (!r) {
		free(body);
		return MHD_NO;
	}
	MHD_add_response_header(r, "Location", to);
	MHD_add_response_header(r, "Content-Type", content_types[QUERY_TEXT]);
	ret = MHD_queue_response(c, MHD_HTTP_FOUND, r);
	MHD_destroy_response(r);
	return ret;
}

/*
 * /debug/pprof/: the index of the profiles served, as Go's net/http/pprof
 * has one, for whoever types the path by hand. Names nothing of any
 * process; links are relative, so a prefix of a proxy in front stays.
 */
static enum MHD_Result handle_pprof_index(struct MHD_Connection *c)
{
	static const char page[] =
		"<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\">"
		"<title>/debug/pprof/</title></head><body>\n"
		"<h1>/debug/pprof/</h1>\n"
		"<p>Profiles of the threads of every process you may see, "
		"in pprof's format (gzip-compressed protobuf), for go tool "
		"pprof, Parca, Pyroscope and the OpenTelemetry collector. "
		"Add <code>?pid=N</code> for one process.</p>\n<table>\n"
		"<tr><th>Profile</th><th>What it holds</th></tr>\n"
		"<tr><td><a href=\"goroutine\">goroutine</a></td><td>the "
		"stack of every thread now, one sample per distinct stack, "
		"its value the number of threads (labels pid, comm, thread, "
		"state)</td></tr>\n"
		"<tr><td><a href=\"threads\">threads</a></td><td>the same "
		"under the name threadcreate-style tools ask for</td></tr>\n"
		"<tr><td><a href=\"profile?seconds=30\">profile</a></td>"
		"<td>a wall-clock profile over the next N seconds "
		"(<code>?seconds=N</code>): samples, wall and CPU "
		"time</td></tr>\n"
		"<tr><td><a href=\"../fgprof?seconds=30\">fgprof</a></td>"
		"<td>the same profile at fgprof's path</td></tr>\n"
		"</table>\n<p>Full stacks as text: <a href=\"../../api/v1/"
		"stacks?format=text\">/api/v1/stacks?format=text</a>; the "
		"page: "
		"<a href=\"../../stacks\">/stacks</a>.</p>\n"
		"</body></html>\n";
	char *body = strdup(page);

	if (!body)
		return MHD_NO;
	return send_body(c, MHD_HTTP_OK, QUERY_HTML, body, sizeof(page) - 1);
}

static enum MHD_Result handle_text(struct MHD_Connection *c, const char *s)
{
	char *body = strdup(s);

	if (!body)
		return MHD_NO;
	return send_body(c, MHD_HTTP_OK, QUERY_TEXT, body, strlen(body));
}

/* True when the request announces a body (we accept none). */
static bool has_body(struct MHD_Connection *c)
{
	const char *len = MHD_lookup_connection_value(
		c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);

	if (MHD_lookup_connection_value(c, MHD_HEADER_KIND,
					MHD_HTTP_HEADER_TRANSFER_ENCODING))
		return true;
	return len && strcmp(len, "0") != 0;
}

/* Compares in time that depends only on the lengths. */
static bool same_secret(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);
	unsigned char diff = la != lb;

	for (size_t i = 0; i < la; i++)
		diff |= (unsigned char)(a[i] ^ b[i % (lb ? lb : 1)]);
	return diff == 0;
}

static bool authorized(const struct http *h, struct MHD_Connection *c)
{
	const char *auth;

	if (!h->token)
		return true;
	auth = MHD_lookup_connection_value(c, MHD_HEADER_KIND,
					   MHD_HTTP_HEADER_AUTHORIZATION);
	if (!auth || strncasecmp(auth, "Bearer ", 7) != 0)
		return false;
	return same_secret(auth + 7, h->token);
}

/*
 * Guards against DNS rebinding: a page on another site that resolves its
 * own name to 127.0.0.1 must not read our answers. Accepted: no Host
 * header, an IP literal, "localhost", and the names given with
 * --allow-host; each with an optional port.
 */
static bool host_allowed(const struct http *h, struct MHD_Connection *c)
{
	const char *host = MHD_lookup_connection_value(c, MHD_HEADER_KIND,
						       MHD_HTTP_HEADER_HOST);
	char name[256];
	struct in6_addr a6;
	struct in_addr a4;
	const char *colon;
	size_t n;

	if (!host)
		return true;
	if (host[0] == '[') {
		const char *end = strchr(host, ']');

		n = end ? (size_t)(end - host - 1) : 0;
		if (!end || n == 0 || n >= sizeof(name))
			return false;
		memcpy(name, host + 1, n);
		name[n] = '\0';
		return inet_pton(AF_INET6, name, &a6) == 1;
	}
	colon = strchr(host, ':');
	n = colon ? (size_t)(colon - host) : strlen(host);
	if (n == 0 || n >= sizeof(name))
		return false;
	memcpy(name, host, n);
	name[n] = '\0';
	if (inet_pton(AF_INET, name, &a4) == 1 ||
	    strcasecmp(name, "localhost") == 0)
		return true;
	for (int i = 0; i < h->nallow_hosts; i++)
		if (strcasecmp(name, h->allow_hosts[i]) == 0)
			return true;
	return false;
}

static enum MHD_Result send_unauthorized(struct MHD_Connection *c)
{
	struct MHD_Response *r;
	enum MHD_Result ret;
	char *body = strdup("{\"error\":\"a valid 'Authorization: Bearer' "
			    "token is required\",\"status\":401}\n");

	if (!body)
		return MHD_NO;
	r = MHD_create_response_from_buffer(strlen(body), body,
					    MHD_RESPMEM_MUST_FREE);
	if (!r) {
		free(body);
		return MHD_NO;
	}
	MHD_add_response_header(r, "Content-Type", content_types[QUERY_JSON]);
	MHD_add_response_header(r, MHD_HTTP_HEADER_WWW_AUTHENTICATE,
				"Bearer realm=\"stackwatch\"");
	ret = MHD_queue_response(c, MHD_HTTP_UNAUTHORIZED, r);
	MHD_destroy_response(r);
	return ret;
}

static enum MHD_Result route(struct http *h, struct MHD_Connection *c,
			     const char *url, const struct access *acc);
static enum MHD_Result dispatch(struct http *h, struct MHD_Connection *c,
				const char *url, const struct access *acc);

/* A browser's navigation: text/html is asked for, JSON is not. */
static bool wants_html(struct MHD_Connection *c)
{
	const char *accept =
		MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Accept");

	return accept && strstr(accept, "text/html") &&
	       !strstr(accept, "application/json");
}

static enum MHD_Result answer(void *cls, struct MHD_Connection *c,
			      const char *url, const char *method,
			      const char *version, const char *upload,
			      size_t *upload_size, void **con_cls)
{
	const union MHD_ConnectionInfo *ci;
	struct http *h = cls;
	struct access acc;
	bool stopping;

	(void)version;
	(void)upload;
	/* Every request is answered here on its first call: count it until
	 * request_done(), so that http_stop() lets it finish. */
	pthread_mutex_lock(&h->lock);
	/* A request counted already (a profile called again) finishes. */
	stopping = h->stopping && !*con_cls;
	if (!stopping && !*con_cls) {
		h->active++;
		*con_cls = h;
	}
	pthread_mutex_unlock(&h->lock);
	if (stopping)
		return send_error(c, MHD_HTTP_SERVICE_UNAVAILABLE, QUERY_JSON,
				  "the daemon is stopping");
	ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
	if (ci && ci->socket_context)
		identify(c, ci->socket_context);
	if (strcmp(method, MHD_HTTP_METHOD_GET) != 0 &&
	    strcmp(method, MHD_HTTP_METHOD_HEAD) != 0)
		return send_error(c, MHD_HTTP_METHOD_NOT_ALLOWED, QUERY_JSON,
				  "only GET and HEAD are allowed");
	if (*upload_size || has_body(c))
		return send_error(c, 413, QUERY_JSON,
				  "no request body is accepted");
	if (!host_allowed(h, c))
		return send_error(c, MHD_HTTP_FORBIDDEN, QUERY_JSON,
				  "Host header not allowed (see --allow-host)");
	if (strcmp(url, "/healthz") == 0)
		return handle_healthz(c);
	if (!authorized(h, c))
		return send_unauthorized(c);
	/* With a token configured, whoever got this far presented it. */
	access_init(&acc, peer_of(c), h->token != NULL, h->admin_gid);
	return route(h, c, url, &acc);
}

/*
 * Whether url's answer costs the daemon work that its requester chooses
 * (dumps, tables, histories): taken in turns (turns.h). The page's files,
 * the status and the profile runs (bounded on their own: sched.h) are
 * not.
 */
static bool takes_turns(const char *url)
{
	return strcmp(url, "/") != 0 && strncmp(url, "/static/", 8) != 0 &&
	       strcmp(url, "/api/v1/status") != 0 &&
	       strncmp(url, "/debug/pprof/profile", 20) != 0 &&
	       strcmp(url, "/debug/fgprof") != 0 &&
	       strcmp(url, "/debug/pprof/") != 0;
}

/* Answers url for acc, in its turn (turns.h). */
static enum MHD_Result route(struct http *h, struct MHD_Connection *c,
			     const char *url, const struct access *acc)
{
	bool turn = takes_turns(url) && !acc->all &&
		    turns_take(h->turns, acc->peer.key) == 0;
	enum MHD_Result ret = dispatch(h, c, url, acc);

	if (turn)
		turns_give(h->turns, acc->peer.key);
	return ret;
}

/* The handler of url. */
static enum MHD_Result dispatch(struct http *h, struct MHD_Connection *c,
				const char *url, const struct access *acc)
{
	if (strcmp(url, "/") == 0)
		return handle_redirect(c, "/stacks");
	if (strcmp(url, "/stacks") == 0)
		return handle_stacks(h, c, acc, QUERY_HTML);
	if (strcmp(url, "/api/v1/stacks") == 0)
		return handle_stacks(h, c, acc, QUERY_JSON);
	if (strcmp(url, "/api/v1/targets") == 0)
		return handle_targets(h, c, acc);
	if (strcmp(url, "/api/v1/processes") == 0)
		return handle_processes(h, c, acc);
	if (strncmp(url, "/static/", 8) == 0)
		return handle_static(c, url + 8);
	if (strcmp(url, "/api/v1/stuck") == 0)
		return handle_stuck(h, c, acc);
	if (strcmp(url, "/api/v1/diff") == 0)
		return handle_diff(h, c, acc);
	if (strcmp(url, "/api/v1/profile") == 0)
		return handle_profile(h, c, acc);
	if (strcmp(url, "/metrics") == 0)
		return handle_metrics(h, c, acc);
	if (strcmp(url, "/api/v1/status") == 0)
		return handle_status(c);
	if (strcmp(url, "/debug/pprof/") == 0)
		return handle_pprof_index(c);
	if (strcmp(url, "/debug/pprof") == 0)
		return handle_redirect(c, "/debug/pprof/");
	if (strcmp(url, "/debug/pprof/goroutine") == 0)
		return handle_pprof_count(h, c, acc, "goroutine");
	if (strcmp(url, "/debug/pprof/threads") == 0)
		return handle_pprof_count(h, c, acc, "threads");
	if (strcmp(url, "/debug/pprof/profile") == 0 ||
	    strcmp(url, "/debug/fgprof") == 0)
		return handle_pprof_profile(h, c, acc);
	/* A person who typed a wrong address gets the page's layout. */
	return send_error(c, MHD_HTTP_NOT_FOUND,
			  wants_html(c) ? QUERY_HTML : QUERY_JSON,
			  "no such endpoint");
}

/* MHD is done with a request: its answer went out, or it failed. */
static void request_done(void *cls, struct MHD_Connection *c, void **con_cls,
			 enum MHD_RequestTerminationCode toe)
{
	struct http *h = cls;

	(void)c;
	(void)toe;
	if (!*con_cls)
		return;
	*con_cls = NULL;
	pthread_mutex_lock(&h->lock);
	if (--h->active == 0)
		pthread_cond_broadcast(&h->idle);
	pthread_mutex_unlock(&h->lock);
}

static void log_mhd(void *cls, const char *fmt, va_list ap)
{
	char line[512];

	(void)cls;
	vsnprintf(line, sizeof(line), fmt, ap);
	log_info("http: %s", line);
}

static void free_http(struct http *h)
{
	pthread_cond_destroy(&h->idle);
	pthread_cond_destroy(&h->prof_cond);
	pthread_mutex_destroy(&h->lock);
	pthread_mutex_destroy(&h->peers_lock);
	pthread_mutex_destroy(&h->prof_lock);
	turns_free(h->turns);
	free(h->token);
	free(h);
}

/*
 * Waits until no request is being answered, or HTTP_DRAIN_MS passed.
 * From now on new requests (on connections already open) get a 503.
 */
static void drain(struct http *h)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	ts.tv_sec += HTTP_DRAIN_MS / 1000;
	ts.tv_nsec += (HTTP_DRAIN_MS % 1000) * 1000000L;
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&h->lock);
	h->stopping = true;
	while (h->active > 0) {
		if (pthread_cond_timedwait(&h->idle, &h->lock, &ts) ==
		    ETIMEDOUT) {
			log_warn("%u requests still in flight after %d ms",
				 h->active, HTTP_DRAIN_MS);
			break;
		}
	}
	pthread_mutex_unlock(&h->lock);
}

/*
 * The admin group's gid: o's group if it exists; a group given by name
 * that does not is an error, the default one is just absent.
 */
static int admin_gid_of(const struct options *o, gid_t *out)
{
	struct group gr, *res = NULL;
	char buf[4096];

	*out = (gid_t)-1;
	if (!o->admin_group[0])
		return 0;
	if (getgrnam_r(o->admin_group, &gr, buf, sizeof(buf), &res) == 0 &&
	    res) {
		*out = gr.gr_gid;
		return 0;
	}
	return o->admin_group_set ? -ENOENT : 0;
}

/*
 * A listening unix socket at path, for everyone to connect to (who is
 * asking comes from SO_PEERCRED): its directory made 0755 if missing, a
 * stale socket replaced, one another daemon answers on left alone
 * (-EADDRINUSE). Returns the socket, or a negative errno.
 */
static int listen_unix(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	char dir[sizeof(sa.sun_path)], *slash;
	int fd, probe;

	if (strlen(path) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	snprintf(dir, sizeof(dir), "%s", path);
	slash = strrchr(dir, '/');
	if (slash && slash != dir) {
		*slash = '\0';
		/* Searchable by all whatever the umask (the unit's is 077). */
		if (mkdir(dir, 0755) == 0)
			(void)chmod(dir, 0755);
		else if (errno != EEXIST)
			return -errno;
	}
	probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (probe >= 0 &&
	    connect(probe, (struct sockaddr *)&sa, sizeof(sa)) == 0) {
		close(probe);
		return -EADDRINUSE;
	}
	if (probe >= 0)
		close(probe);
	unlink(path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -errno;
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    chmod(path, 0666) < 0 || listen(fd, 64) < 0) {
		int err = -errno;

		close(fd);
		return err;
	}
	return fd;
}

/* One MHD daemon: on ss, or on the listening socket fd when fd >= 0. */
static struct MHD_Daemon *start_mhd(struct http *h, unsigned flags,
				    const struct sockaddr_storage *ss, int fd)
{
	return MHD_start_daemon(
		flags, 0, NULL, NULL, answer, h,
		fd >= 0 ? MHD_OPTION_LISTEN_SOCKET : MHD_OPTION_SOCK_ADDR,
		fd >= 0 ? (intptr_t)fd : (intptr_t)ss,
		MHD_OPTION_CONNECTION_LIMIT, (unsigned)HTTP_MAX_CONNECTIONS,
		MHD_OPTION_PER_IP_CONNECTION_LIMIT,
		(unsigned)(fd >= 0 ? 0 : HTTP_MAX_PER_IP),
		MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)HTTP_CONN_TIMEOUT_S,
		MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)HTTP_CONN_MEMORY,
		MHD_OPTION_NOTIFY_COMPLETED, request_done, h,
		MHD_OPTION_NOTIFY_CONNECTION, notify_connection, h,
		MHD_OPTION_EXTERNAL_LOGGER, log_mhd, NULL, MHD_OPTION_END);
}

int http_start(const struct options *o, struct registry *reg, struct stacks *st,
	       struct scheduler *sched, struct http **out, int *port, char *why,
	       size_t whylen)
{
	struct sockaddr_storage ss;
	struct sockaddr_in *sin = (struct sockaddr_in *)&ss;
	struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)&ss;
	unsigned flags = MHD_USE_THREAD_PER_CONNECTION |
			 MHD_USE_POLL_INTERNAL_THREAD | MHD_USE_ERROR_LOG |
			 MHD_USE_ITC;
	const union MHD_DaemonInfo *info;
	struct http *h;
	int rc;

	memset(&ss, 0, sizeof(ss));
	if (inet_pton(AF_INET, o->listen_addr, &sin->sin_addr) == 1) {
		sin->sin_family = AF_INET;
		sin->sin_port = htons((uint16_t)o->listen_port);
	} else if (inet_pton(AF_INET6, o->listen_addr, &sin6->sin6_addr) == 1) {
		sin6->sin6_family = AF_INET6;
		sin6->sin6_port = htons((uint16_t)o->listen_port);
	} else {
		snprintf(why, whylen,
			 "cannot listen on %s:%d: not a numeric IP "
			 "address",
			 o->listen_addr, o->listen_port);
		return -EINVAL;
	}
	h = calloc(1, sizeof(*h));
	if (!h)
		return -ENOMEM;
	pthread_mutex_init(&h->lock, NULL);
	pthread_mutex_init(&h->peers_lock, NULL);
	pthread_mutex_init(&h->prof_lock, NULL);
	/* http_stop() waits with a deadline on the monotonic clock. */
	cond_init_monotonic(&h->idle);
	pthread_cond_init(&h->prof_cond, NULL);
	h->reg = reg;
	h->st = st;
	h->sched = sched;
	h->timeout_ms = o->timeout_ms;
	h->sample_ms = o->sample_interval_ms;
	h->allow_hosts = o->allow_hosts;
	h->nallow_hosts = o->nallow_hosts;
	if (turns_init(&h->turns) < 0) {
		snprintf(why, whylen, "out of memory");
		free_http(h);
		return -ENOMEM;
	}
	rc = admin_gid_of(o, &h->admin_gid);
	if (rc < 0) {
		snprintf(why, whylen, "no group '%s' (--admin-group)",
			 o->admin_group);
		free_http(h);
		return rc;
	}
	if (o->token) {
		h->token = strdup(o->token);
		if (!h->token) {
			snprintf(why, whylen, "out of memory");
			free_http(h);
			return -ENOMEM;
		}
	}
	h->d = start_mhd(h,
			 flags | (ss.ss_family == AF_INET6 ? MHD_USE_IPv6 : 0),
			 &ss, -1);
	if (!h->d) {
		int err = errno ? -errno : -EADDRINUSE;

		snprintf(why, whylen, "cannot listen on %s:%d: %s",
			 o->listen_addr, o->listen_port, sw_strerror(err));
		free_http(h);
		return err;
	}
	if (o->http_socket[0]) {
		int fd = listen_unix(o->http_socket);

		if (fd >= 0) {
			h->ud = start_mhd(h, flags, NULL, fd);
			if (!h->ud)
				close(fd);
			else
				snprintf(h->usock, sizeof(h->usock), "%s",
					 o->http_socket);
		}
		if (!h->ud && o->http_socket_set) {
			snprintf(why, whylen, "cannot listen on %s: %s",
				 o->http_socket,
				 fd == -EADDRINUSE
					 ? "another daemon answers there"
					 : sw_strerror(fd < 0 ? fd : -EIO));
			MHD_stop_daemon(h->d);
			free_http(h);
			return fd < 0 ? fd : -EIO;
		}
		if (!h->ud)
			log_warn("no HTTP on %s: %s", o->http_socket,
				 strerror(fd < 0 ? -fd : EIO));
	}
	info = MHD_get_daemon_info(h->d, MHD_DAEMON_INFO_BIND_PORT);
	*port = info ? info->port : o->listen_port;
	*out = h;
	return 0;
}

void http_stop(struct http *h)
{
	MHD_socket listen_fd, ufd = MHD_INVALID_SOCKET;

	if (!h)
		return;
	/* Stop listening; let the requests in flight finish and their
	 * answers go out (stopping the pool at once would drop them). */
	listen_fd = MHD_quiesce_daemon(h->d);
	/* A quiesced socket still completes handshakes into its backlog:
	 * shut it down, so that new clients are refused at once instead of
	 * waiting for a reset. It is closed only after the pool stopped. */
	if (listen_fd != MHD_INVALID_SOCKET)
		shutdown(listen_fd, SHUT_RDWR);
	if (h->ud) {
		ufd = MHD_quiesce_daemon(h->ud);
		if (ufd != MHD_INVALID_SOCKET)
			shutdown(ufd, SHUT_RDWR);
	}
	/* Profiles in progress answer now, with what they have. */
	sched_profile_end_all(h->sched);
	drain(h);
	MHD_stop_daemon(h->d);
	if (h->ud) {
		MHD_stop_daemon(h->ud);
		unlink(h->usock);
		if (ufd != MHD_INVALID_SOCKET)
			close(ufd);
	}
	if (listen_fd != MHD_INVALID_SOCKET)
		close(listen_fd);
	free_http(h);
}

const char *http_unix_socket(const struct http *h)
{
	return h && h->ud ? h->usock : NULL;
}
