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

/* The default directory's socket named name, for the running user. */
static int default_in_dir(char *buf, size_t size, const char *name)
{
	const char *xdg = getenv("XDG_RUNTIME_DIR");

	if (geteuid() == 0)
		return fits(snprintf(buf, size, "/run/stackwatch/%s", name),
			    size);
	if (xdg && xdg[0] == '/')
		return fits(snprintf(buf, size, "%s/stackwatch/%s", xdg, name),
			    size);
	return fits(snprintf(buf, size, "/tmp/stackwatch-%u/%s",
			     (unsigned)geteuid(), name),
		    size);
}

int paths_default_socket(char *buf, size_t size)
{
	return default_in_dir(buf, size, "agent.sock");
}

int paths_default_http_socket(char *buf, size_t size)
{
	return default_in_dir(buf, size, "http.sock");
}

int paths_agent_socket(char *buf, size_t size)
{
	const char *env = getenv("STACKWATCH_SOCKET");

	if (env && *env)
		return fits(snprintf(buf, size, "%s", env), size);
	return paths_default_socket(buf, size);
}
