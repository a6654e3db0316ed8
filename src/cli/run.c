/*
 * run.c - "stackwatch run [--socket PATH] -- CMD [ARG...]": replaces
 * itself with CMD (execvp, no fork, so CMD keeps our pid) after putting
 * the agent at the front of LD_PRELOAD, the way env(1) runs a command.
 * CMD, asked for by name, starts the agent's thread at load: its pid is
 * put in STACKWATCH_START_PID, which its children, other pids, pass by.
 */
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "model/buf.h"
#include "model/paths.h"
#include "model/sockcheck.h"
#include "cli.h"
#include "commands.h"
#include "stackwatch.h"

#define AGENT_NAME "libstackwatch-agent.so"
#define SUN_PATH_MAX sizeof(((struct sockaddr_un *)0)->sun_path)

#ifdef SW_AGENT_PATH
static const char agent_path[] = SW_AGENT_PATH;
#else
static const char agent_path[] = "";
#endif

/* Exit statuses of env(1) when the command cannot be run. */
#define EXIT_CANNOT_INVOKE 126
#define EXIT_ENOENT 127

/*
 * Writes the absolute, canonical path of the agent at path to out (size
 * PATH_MAX) when it is a regular file. Returns 0 or a negative errno.
 */
static int try_agent(const char *path, char *out)
{
	struct stat st;

	if (stat(path, &st) != 0)
		return -errno;
	if (!S_ISREG(st.st_mode))
		return -ENOENT;
	if (!realpath(path, out))
		return -errno;
	return 0;
}

/*
 * Finds the agent: next to our executable (the build/ layout), then in
 * ../lib/stackwatch/ from there (the installed layout), then at the
 * SW_AGENT_PATH given at compile time. Writes the absolute path to out
 * (PATH_MAX bytes). Returns 0 or -ENOENT.
 */
static int find_agent(char *out)
{
	char exe[PATH_MAX], path[PATH_MAX + 64];
	char *slash;
	ssize_t n;

	n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n > 0) {
		exe[n] = '\0';
		slash = strrchr(exe, '/');
		if (slash) {
			*slash = '\0';
			snprintf(path, sizeof(path), "%s/" AGENT_NAME, exe);
			if (try_agent(path, out) == 0)
				return 0;
			snprintf(path, sizeof(path),
				 "%s/../lib/stackwatch/" AGENT_NAME, exe);
			if (try_agent(path, out) == 0)
				return 0;
		}
	}
	if (agent_path[0] == '/' && try_agent(agent_path, out) == 0)
		return 0;
	return -ENOENT;
}

/* True when the LD_PRELOAD list old already names agent. */
static bool preload_has(const char *old, const char *agent)
{
	char real[PATH_MAX], item[PATH_MAX];
	size_t n;

	while (*old) {
		old += strspn(old, " :");
		n = strcspn(old, " :");
		if (n && n < sizeof(item)) {
			memcpy(item, old, n);
			item[n] = '\0';
			if (strcmp(item, agent) == 0 ||
			    (realpath(item, real) && strcmp(real, agent) == 0))
				return true;
		}
		old += n;
	}
	return false;
}

/*
 * Puts agent first in LD_PRELOAD, keeping what was there. Returns 0 or
 * a negative errno, having said why.
 */
static int set_preload(const char *agent)
{
	const char *old = getenv("LD_PRELOAD");
	struct buf b;
	int rc;

	/* The loader splits LD_PRELOAD at spaces and colons. */
	if (strpbrk(agent, " :")) {
		cli_error("the agent's path %s holds a space or a colon, which "
			  "LD_PRELOAD cannot carry",
			  agent);
		return -EINVAL;
	}
	if (old && preload_has(old, agent))
		return 0;
	buf_init(&b, (size_t)1 << 20);
	if (old && old[strspn(old, " :")])
		rc = buf_addf(&b, "%s:%s", agent, old);
	else
		rc = buf_adds(&b, agent);
	if (!rc && setenv("LD_PRELOAD", b.data, 1) != 0)
		rc = -errno;
	if (rc)
		cli_error("cannot set LD_PRELOAD: %s", sw_strerror(rc));
	buf_release(&b);
	return rc;
}

/*
 * Sets STACKWATCH_SOCKET to path, made absolute so that it still holds
 * after CMD changes directory. Returns 0 or a negative errno, having
 * said why.
 */
static int set_socket(const char *path)
{
	char cwd[PATH_MAX], abs[PATH_MAX + 1];
	int n, err;

	if (path[0] == '/') {
		n = snprintf(abs, sizeof(abs), "%s", path);
	} else {
		if (!getcwd(cwd, sizeof(cwd))) {
			err = errno;
			cli_error("getcwd: %s", strerror(err));
			return -err;
		}
		n = snprintf(abs, sizeof(abs), "%s/%s", cwd, path);
	}
	if (n < 0 || (size_t)n >= sizeof(((struct sockaddr_un *)0)->sun_path)) {
		cli_error("socket path too long: %s", path);
		return -ENAMETOOLONG;
	}
	if (setenv("STACKWATCH_SOCKET", abs, 1) != 0) {
		err = errno;
		cli_error("cannot set STACKWATCH_SOCKET: %s", strerror(err));
		return -err;
	}
	return 0;
}

/* True when execvp() could find cmd: a path to it, or a name in $PATH. */
static bool runnable(const char *cmd)
{
	const char *path = getenv("PATH"), *p;
	char full[PATH_MAX];
	size_t n;

	if (strchr(cmd, '/'))
		return access(cmd, X_OK) == 0;
	for (p = path && *path ? path : "/bin:/usr/bin"; *p; p += n + !!p[n]) {
		n = strcspn(p, ":");
		if ((size_t)snprintf(full, sizeof(full), "%.*s%s%s", (int)n, p,
				     n ? "/" : "", cmd) < sizeof(full) &&
		    access(full, X_OK) == 0)
			return true;
	}
	return false;
}

/* STACKWATCH_DISABLE=1: the agent does nothing, as agent.c reads it. */
static bool agent_disabled(void)
{
	const char *off = getenv("STACKWATCH_DISABLE");

	return off && strcmp(off, "1") == 0;
}

/*
 * Warns, in one line on stderr, when the agent will find no daemon to
 * register with at path (given says it came from --socket or
 * STACKWATCH_SOCKET, not from the default): nothing listens there, or the
 * socket fails the rules the agent checks in silence (model/sockcheck.h).
 * The command runs either way; this is the only place that can say so,
 * since the agent itself never prints.
 */
static void check_daemon(const char *path, bool given)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	uid_t euid = geteuid(), peer = 0;
	const char *why = NULL;
	int fd, rc;

	rc = sockcheck_path(path, euid, NULL);
	if (rc == -ENOENT || rc == -ENOTDIR)
		why = "no daemon listens there";
	else if (rc && !given)
		why = "the socket or its directory fails the ownership rules "
		      "of stackwatch(1)";
	fd = why ? -1 : socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	if (fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0)
		why = "no daemon listens there";
	else if (fd >= 0 && sockcheck_peer(fd, euid, &peer) == -EPERM)
		why = "its daemon is neither root nor you";
	if (fd >= 0)
		close(fd);
	if (!why)
		return;
	cli_error("the agent will not register at %s: %s; start a daemon "
		  "(systemctl start stackwatchd, or make run) or give its "
		  "socket with --socket PATH",
		  path, why);
}

int cmd_run(const struct cli *cli, int argc, char **argv)
{
	const char *sock_path = NULL;
	char agent[PATH_MAX], pidbuf[16], sock[SUN_PATH_MAX];
	int i, err;

	(void)cli;
	for (i = 1; i < argc && argv[i][0] == '-'; i++) {
		const char *a = argv[i];

		if (strcmp(a, "--") == 0) {
			i++;
			break;
		}
		if (strcmp(a, "--socket") == 0) {
			if (i + 1 >= argc)
				return cli_usage_error("--socket needs a path");
			sock_path = argv[++i];
		} else if (strncmp(a, "--socket=", 9) == 0) {
			sock_path = a + 9;
		} else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
			cli_usage(stdout);
			return cli_finish(CLI_OK);
		} else {
			return cli_usage_error("run: unknown option '%s'", a);
		}
	}
	if (i >= argc)
		return cli_usage_error("run: no command given");
	if (sock_path && !*sock_path)
		return cli_usage_error("--socket needs a path");

	if (find_agent(agent) != 0) {
		cli_error("cannot find the agent " AGENT_NAME
			  " (looked next to the stackwatch executable, in "
			  "../lib/stackwatch/ from there%s%s): reinstall "
			  "stackwatch, or preload the agent yourself "
			  "(LD_PRELOAD)",
			  agent_path[0] ? " and at " : "", agent_path);
		return CLI_EDAEMON;
	}
	if (set_preload(agent) != 0)
		return CLI_EDAEMON;
	if (sock_path && set_socket(sock_path) != 0)
		return CLI_EDAEMON;
	/* An agent turned off (STACKWATCH_DISABLE=1) looks for no daemon. */
	if (runnable(argv[i]) && !agent_disabled() &&
	    paths_agent_socket(sock, sizeof(sock)) == 0) {
		const char *env = getenv("STACKWATCH_SOCKET");

		check_daemon(sock, env && *env);
	}
	snprintf(pidbuf, sizeof(pidbuf), "%d", (int)getpid());
	if (setenv("STACKWATCH_START_PID", pidbuf, 1) != 0) {
		cli_error("cannot set STACKWATCH_START_PID: %s",
			  strerror(errno));
		return CLI_EDAEMON;
	}

	fflush(NULL);
	execvp(argv[i], argv + i);
	err = errno;
	cli_error("%s: %s", argv[i], strerror(err));
	return err == ENOENT ? EXIT_ENOENT : EXIT_CANNOT_INVOKE;
}
