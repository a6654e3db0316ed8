/*
 * http.h - the daemon's HTTP surface (libmicrohttpd): the endpoints of
 * INTERFACE.md, GET and HEAD only.
 */
#ifndef SWD_HTTP_H
#define SWD_HTTP_H

#include "options.h"
#include "registry.h"
#include "scheduler.h"
#include "stacks.h"

struct http;

/*
 * Starts serving on o->listen_addr:o->listen_port, and on the unix socket
 * o->http_socket (when set; failing there is fatal only when it was
 * given, else a warning). On success *port is the bound port (the one
 * picked when 0 was asked). Returns 0, or a negative errno with the
 * reason, a phrase, in why (whylen bytes).
 */
int http_start(const struct options *o, struct registry *reg, struct stacks *st,
	       struct scheduler *sched, struct http **out, int *port, char *why,
	       size_t whylen);

/* The unix socket served, or NULL. */
const char *http_unix_socket(const struct http *h);

/*
 * Stops accepting connections; requests in flight finish (each within its
 * own deadline) before this returns.
 */
void http_stop(struct http *h);

#endif /* SWD_HTTP_H */
