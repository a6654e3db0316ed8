/*
 * paths.h - where the agent socket lives by default, shared by the agent,
 * the daemon and the CLI so they always agree.
 */
#ifndef SW_PATHS_H
#define SW_PATHS_H

#include <stddef.h>

/*
 * Writes the agent socket path into buf: $STACKWATCH_SOCKET when set, else
 * /run/stackwatch/agent.sock for root, else
 * $XDG_RUNTIME_DIR/stackwatch/agent.sock, else
 * /tmp/stackwatch-$UID/agent.sock. 0, or SW_ETOOBIG when it does not fit
 * (or is longer than a unix socket address allows).
 */
int paths_agent_socket(char *buf, size_t size);

/* The same default, ignoring $STACKWATCH_SOCKET (the daemon's default). */
int paths_default_socket(char *buf, size_t size);

/*
 * The daemon's HTTP unix socket by default, in the same directory:
 * /run/stackwatch/http.sock for root, and so on. 0 or SW_ETOOBIG.
 */
int paths_default_http_socket(char *buf, size_t size);

#endif /* SW_PATHS_H */
