/*
 * test_sec_visibility.c - every requester sees what ptrace would let it
 * see, and no more.
 *
 * The daemon runs as root with three targets: one of root's, one of
 * nobody's, and one of nobody's that made itself undumpable (as programs
 * that hold secrets do). Then:
 * - nobody, over TCP from loopback and over the unix socket, lists only
 *   its own dumpable target, dumps it, and gets 404 (not 403) for the
 *   others, which are absent from the all-target dump too; so does the
 *   CLI run as nobody;
 * - root sees them all, and so does nobody with the admin group among its
 *   groups (--admin-group, over the unix socket: SO_PEERGROUPS);
 * - with a token file, nobody without the token gets 401 and with it sees
 *   every target;
 * - a requester that does not come from loopback (this host's own
 *   non-loopback address) is anonymous: it sees no target, even as root.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <sys/stat.h>

#include "sectest.h"
#include "tap.h"

#define ADMIN_GROUP "sw-sec-admin"

static char fixture[256];

static pid_t start(const struct itest_daemon *d, uid_t uid, const char *mode)
{
	char *argv[] = { fixture, (char *)mode, NULL };
	int out;
	pid_t pid = uid ? sec_spawn_as(d, uid, uid, argv, &out)
			: itest_spawn(d, argv, &out);

	if (pid > 0 && (!itest_wait_line(out, "ready") ||
			!itest_wait_registered(d, pid, 10000))) {
		itest_kill(pid);
		pid = -1;
	}
	if (pid > 0)
		close(out);
	return pid;
}

/* The targets uid sees over TCP or the unix socket; n, or -1. */
static int listed(const struct itest_daemon *d, uid_t uid, const gid_t *g,
		  size_t ng, bool unix_socket, const char *token, pid_t *pids)
{
	struct sec_answer a;

	sec_get_as(uid, uid, g, ng, d->url, unix_socket ? d->http_sock : NULL,
		   token, "/api/v1/targets", &a);
	return a.status == 200 ? sec_target_pids(a.body, pids, 64) : -1;
}

static int status_as(const struct itest_daemon *d, uid_t uid, bool unix_socket,
		     const char *target)
{
	struct sec_answer a;

	sec_get_as(uid, uid, NULL, 0, d->url, unix_socket ? d->http_sock : NULL,
		   NULL, target, &a);
	return a.status;
}

static void check_nobody(const struct itest_daemon *d, pid_t mine, pid_t roots,
			 pid_t secret, bool unix_socket)
{
	const char *via = unix_socket ? "the unix socket" : "TCP";
	struct sec_answer a;
	char path[96];
	pid_t pids[64];
	int n = listed(d, SEC_NOBODY, NULL, 0, unix_socket, NULL, pids);

	TAP_OK(n == 1 && pids[0] == mine,
	       "nobody over %s lists its own target only (%d listed)", via, n);
	snprintf(path, sizeof(path), "/api/v1/stacks?pid=%d", (int)mine);
	TAP_OK(status_as(d, SEC_NOBODY, unix_socket, path) == 200,
	       "nobody over %s dumps its own target", via);
	snprintf(path, sizeof(path), "/api/v1/stacks?pid=%d", (int)roots);
	TAP_OK(status_as(d, SEC_NOBODY, unix_socket, path) == 404,
	       "root's target is 404 for nobody over %s", via);
	snprintf(path, sizeof(path), "/api/v1/stacks?pid=%d", (int)secret);
	TAP_OK(status_as(d, SEC_NOBODY, unix_socket, path) == 404,
	       "nobody's own undumpable target is 404 for it over %s", via);
	snprintf(path, sizeof(path), "/api/v1/diff?pid=%d&since=1", (int)roots);
	TAP_OK(status_as(d, SEC_NOBODY, unix_socket, path) == 404,
	       "and so is the diff of root's over %s", via);
	sec_get_as(SEC_NOBODY, SEC_NOBODY, NULL, 0, d->url,
		   unix_socket ? d->http_sock : NULL, NULL,
		   "/api/v1/stacks?format=folded", &a);
	snprintf(path, sizeof(path), "agent_target");
	sec_get_as(SEC_NOBODY, SEC_NOBODY, NULL, 0, d->url,
		   unix_socket ? d->http_sock : NULL, NULL, "/api/v1/stacks",
		   &a);
	{
		cJSON *j = cJSON_Parse(a.body), *p;
		int count = 0, foreign = 0;

		cJSON_ArrayForEach(p, cJSON_GetObjectItem(j, "processes"))
		{
			cJSON *pid = cJSON_GetObjectItem(p, "pid");

			count++;
			if (!cJSON_IsNumber(pid) ||
			    (pid_t)pid->valuedouble != mine)
				foreign++;
		}
		cJSON_Delete(j);
		TAP_OK(a.status == 200 && count == 1 && foreign == 0,
		       "the all-target dump for nobody over %s holds its own "
		       "process only (%d, %d foreign)",
		       via, count, foreign);
	}
}

/* The CLI run as nobody against the daemon's unix socket. */
static void check_cli(const struct itest_daemon *d, pid_t mine, pid_t roots)
{
	char cmd[1024], line[256];
	bool saw_mine = false, saw_roots = false;
	FILE *f;
	int st;

	snprintf(cmd, sizeof(cmd),
		 "setpriv --reuid=%d --regid=%d --clear-groups env "
		 "STACKWATCH_HTTP_SOCKET=%s %s/stackwatch targets",
		 SEC_NOBODY, SEC_NOBODY, d->http_sock, itest_target_build());
	f = popen(cmd, "r");
	while (f && fgets(line, sizeof(line), f)) {
		long pid = strtol(line, NULL, 10);

		saw_mine |= pid == mine;
		saw_roots |= pid == roots;
	}
	st = f ? pclose(f) : -1;
	TAP_OK(st == 0 && saw_mine && !saw_roots,
	       "the CLI as nobody lists its own target, not root's");
	snprintf(cmd, sizeof(cmd),
		 "setpriv --reuid=%d --regid=%d --clear-groups env "
		 "STACKWATCH_HTTP_SOCKET=%s %s/stackwatch dump %d "
		 ">/dev/null 2>&1",
		 SEC_NOBODY, SEC_NOBODY, d->http_sock, itest_target_build(),
		 (int)roots);
	st = system(cmd);
	TAP_OK(WIFEXITED(st) && WEXITSTATUS(st) == 5,
	       "the CLI as nobody cannot dump root's target: not a process "
	       "it may see (exit %d)",
	       WIFEXITED(st) ? WEXITSTATUS(st) : -1);
}

/* This host's first non-loopback IPv4 address, or false. */
static bool outer_address(char *out, size_t size)
{
	struct ifaddrs *ifs, *i;
	bool found = false;

	if (getifaddrs(&ifs) < 0)
		return false;
	for (i = ifs; i && !found; i = i->ifa_next) {
		const struct sockaddr_in *a = (void *)i->ifa_addr;

		if (!a || a->sin_family != AF_INET ||
		    (ntohl(a->sin_addr.s_addr) >> 24) == 127)
			continue;
		found = inet_ntop(AF_INET, &a->sin_addr, out,
				  (socklen_t)size) != NULL;
	}
	freeifaddrs(ifs);
	return found;
}

static void check_remote(pid_t roots)
{
	static const char *const args[] = { "--listen", "0.0.0.0:0",
					    "--sample-interval", "0", NULL };
	struct itest_daemon d;
	struct sec_answer a;
	char addr[64], url[128], path[96];
	pid_t pids[64];
	pid_t t;

	if (!outer_address(addr, sizeof(addr))) {
		TAP_SKIP("a remote-looking requester: this host has no "
			 "non-loopback address");
		return;
	}
	if (itest_daemon_start_args(&d, args) < 0) {
		TAP_OK(0, "a daemon listening on every address starts");
		return;
	}
	chmod(d.dir, 0711);
	t = start(&d, 0, "sigwait");
	snprintf(url, sizeof(url), "http://%s:%d", addr, d.port);
	sec_get_as(0, 0, NULL, 0, url, NULL, NULL, "/api/v1/targets", &a);
	TAP_OK(a.status == 200 && sec_target_pids(a.body, pids, 64) == 0,
	       "a requester from %s (not loopback) is anonymous: no target "
	       "listed, even as root",
	       addr);
	snprintf(path, sizeof(path), "/api/v1/stacks?pid=%d", (int)t);
	sec_get_as(0, 0, NULL, 0, url, NULL, NULL, path, &a);
	TAP_OK(a.status == 404, "and a target by pid is 404 for it");
	sec_get_as(0, 0, NULL, 0, url, NULL, NULL, "/healthz", &a);
	TAP_OK(a.status == 200, "while /healthz still answers it");
	(void)roots;
	itest_kill(t);
	itest_daemon_stop(&d);
	itest_daemon_cleanup(&d);
}

static void check_token(void)
{
	char tokfile[] = "/tmp/sw-sec-token-XXXXXX";
	const char *args[] = { "--token-file", tokfile, "--sample-interval",
			       "0", NULL };
	struct itest_daemon d;
	pid_t pids[64], roots;
	int fd = mkstemp(tokfile), n;

	if (fd < 0 || write(fd, "s3cret\n", 7) != 7) {
		TAP_OK(0, "a token file");
		return;
	}
	close(fd);
	if (itest_daemon_start_args(&d, args) < 0) {
		TAP_OK(0, "a daemon with a token starts");
		unlink(tokfile);
		return;
	}
	chmod(d.dir, 0711);
	/* The test's own requests (itest.h) need it too. */
	setenv("STACKWATCH_TOKEN", "s3cret", 1);
	roots = start(&d, 0, "sigwait");
	unsetenv("STACKWATCH_TOKEN");
	TAP_OK(listed(&d, SEC_NOBODY, NULL, 0, false, NULL, pids) < 0,
	       "with a token file, nobody without the token is refused");
	n = listed(&d, SEC_NOBODY, NULL, 0, false, "s3cret", pids);
	TAP_OK(n >= 2 && sec_has(pids, n, roots),
	       "nobody with the token over TCP sees every target, root's "
	       "too (%d)",
	       n);
	itest_kill(roots);
	itest_daemon_stop(&d);
	itest_daemon_cleanup(&d);
	unlink(tokfile);
}

/* The number of threads of pid in a /api/v1/stuck answer; -1: not one. */
static int stuck_of(const char *body, pid_t pid)
{
	cJSON *j = cJSON_Parse(body), *t;
	int n = 0;

	if (!cJSON_IsArray(cJSON_GetObjectItem(j, "threads"))) {
		cJSON_Delete(j);
		return -1;
	}
	cJSON_ArrayForEach(t, cJSON_GetObjectItem(j, "threads"))
	{
		cJSON *p = cJSON_GetObjectItem(t, "pid");

		n += cJSON_IsNumber(p) && (pid_t)p->valuedouble == pid;
	}
	cJSON_Delete(j);
	return n;
}

/*
 * The watchdog's findings follow the same rule: root's spinning thread
 * is flagged for root, and is neither in nobody's /api/v1/stuck nor in
 * any label of the /metrics nobody reads.
 */
static void check_stuck(void)
{
	static const char *const args[] = { "--sample-interval",
					    "200",
					    "--stuck-after",
					    "1",
					    "--timeout",
					    "200",
					    NULL };
	char watch[] = "watch", spin[] = "spin", pidstr[32];
	char *argv[] = { fixture, watch, spin, NULL };
	struct sec_answer *a = calloc(1, sizeof(*a));
	struct itest_daemon d;
	int out, mine = -1, theirs = -1;
	pid_t roots;

	if (!a || itest_daemon_start_args(&d, args) < 0) {
		TAP_OK(0, "a daemon with the watchdog on starts");
		free(a);
		return;
	}
	chmod(d.dir, 0711);
	roots = itest_spawn(&d, argv, &out);
	if (roots > 0 && itest_wait_line(out, "ready") &&
	    itest_wait_registered(&d, roots, 10000)) {
		for (long end = itest_now_ms() + 15000;
		     itest_now_ms() < end && mine <= 0; itest_sleep_ms(100)) {
			sec_get_as(0, 0, NULL, 0, d.url, NULL, NULL,
				   "/api/v1/stuck", a);
			mine = stuck_of(a->body, roots);
		}
		sec_get_as(SEC_NOBODY, SEC_NOBODY, NULL, 0, d.url, NULL, NULL,
			   "/api/v1/stuck", a);
		theirs = stuck_of(a->body, roots);
	}
	TAP_OK(mine > 0, "root's spinning thread is flagged for root (%d)",
	       mine);
	TAP_OK(theirs == 0, "and absent from nobody's /api/v1/stuck (%d)",
	       theirs);
	sec_get_as(SEC_NOBODY, SEC_NOBODY, NULL, 0, d.url, d.http_sock, NULL,
		   "/metrics", a);
	snprintf(pidstr, sizeof(pidstr), "\"%d\"", (int)roots);
	TAP_OK(a->status == 200 && !strstr(a->body, pidstr),
	       "and from every label of nobody's /metrics (%d)", a->status);
	if (roots > 0) {
		close(out);
		itest_kill(roots);
	}
	TAP_OK(itest_daemon_stop(&d) == 0, "that daemon stops cleanly");
	itest_daemon_cleanup(&d);
	free(a);
}

int main(void)
{
	static const char *const args[] = { "--sample-interval", "0",
					    "--admin-group", ADMIN_GROUP,
					    NULL };
	struct itest_daemon d;
	pid_t roots, mine, secret, pids[64];
	struct group *g;
	gid_t admin;
	int n;

	if (geteuid() != 0) {
		TAP_SKIP("needs root: the daemon runs as root, requesters as "
			 "nobody");
		return tap_done();
	}
	snprintf(fixture, sizeof(fixture), "%s/fixtures/agent_target",
		 itest_target_build());
	if (!getgrnam(ADMIN_GROUP) &&
	    system("groupadd -f " ADMIN_GROUP " 2>/dev/null") != 0) {
		TAP_OK(0, "groupadd %s", ADMIN_GROUP);
		return tap_done();
	}
	g = getgrnam(ADMIN_GROUP);
	admin = g ? g->gr_gid : (gid_t)-1;
	if (itest_daemon_start_args(&d, args) < 0) {
		TAP_OK(0, "the daemon starts");
		return tap_done();
	}
	/* Other users reach the sockets; who they are decides the rest. */
	chmod(d.dir, 0711);
	roots = start(&d, 0, "sigwait");
	mine = start(&d, SEC_NOBODY, "sigwait");
	secret = start(&d, SEC_NOBODY, "undumpable");
	TAP_OK(roots > 0 && mine > 0 && secret > 0,
	       "targets of root, of nobody, and of nobody undumpable run");

	check_nobody(&d, mine, roots, secret, false);
	check_nobody(&d, mine, roots, secret, true);
	check_cli(&d, mine, roots);

	n = listed(&d, 0, NULL, 0, false, NULL, pids);
	TAP_OK(n >= 4 && sec_has(pids, n, roots) && sec_has(pids, n, mine) &&
		       sec_has(pids, n, secret),
	       "root sees every target (%d, the daemon's own included)", n);
	n = listed(&d, SEC_NOBODY, &admin, 1, true, NULL, pids);
	TAP_OK(n >= 4 && sec_has(pids, n, roots) && sec_has(pids, n, secret),
	       "nobody in the admin group sees every target too (%d)", n);

	itest_kill(roots);
	itest_kill(mine);
	itest_kill(secret);
	TAP_OK(itest_daemon_stop(&d) == 0, "the daemon stops cleanly");
	itest_daemon_cleanup(&d);
	check_token();
	check_remote(roots);
	check_stuck();
	if (system("groupdel " ADMIN_GROUP " 2>/dev/null") != 0)
		TAP_OK(1, "# the group %s stays", ADMIN_GROUP);
	return tap_done();
}
