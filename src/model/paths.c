/*
 * paths.c - the default agent socket path (paths.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <sys/un.h>
#include <unistd.h>

#include "paths.h"
#include "stackwatch.h"

static int fits(int n, size_t size)
{
	if (n < 0 || (size_t)n >= size ||
	    (size_t)n >= sizeof(((struct sockaddr_un *)0)->sun_path))
		return SW_ETOOBIG;
	return 0;
}

int paths_default_socket(char *buf, size_t size)
{
	const char *xdg = getenv("XDG_RUNTIME_DIR");

	if (geteuid() == 0)
		return fits(snprintf(buf, size, "/run/stackwatch/agent.sock"),
			    size);
	if (xdg && xdg[0] == '/')
		return fits(
			snprintf(buf, size, "%s/stackwatch/agent.sock", xdg),
			size);
	return fits(snprintf(buf, size, "/tmp/stackwatch-%u/agent.sock",
			     (unsigned)geteuid()),
		    size);
}

int paths_agent_socket(char *buf, size_t size)
{
	const char *env = getenv("STACKWATCH_SOCKET");

	if (env && *env)
		return fits(snprintf(buf, size, "%s", env), size);
	return paths_default_socket(buf, size);
}
