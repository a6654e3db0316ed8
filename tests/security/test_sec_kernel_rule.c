/*
 * test_sec_kernel_rule.c - who may see a process is the kernel's ptrace
 * read rule, all of it: uids and gids, capabilities, dumpable; and over
 * TCP the requester's groups are its process's, as over the unix socket.
 *
 * Processes without the agent, each a `sleep` started with setpriv:
 * - mine: uid and gid nobody;
 * - gid0: uid nobody, gid root;
 * - capable: uid nobody with the ambient capability CAP_NET_ADMIN;
 * - gid1: uid nobody, gid 1 (daemon).
 * The kernel refuses nobody's reads of gid0 and capable (/proc/PID/maps:
 * EACCES), so nobody must not see them: not listed by /api/v1/processes,
 * 404 for ?pid=, over TCP and over the unix socket. And with
 * --admin-group nogroup, a requester of uid nobody whose process runs
 * with gid 1 and no other groups (so not in nogroup, whatever the user
 * database says of nobody) sees gid1 only, over both.
 */
#define _GNU_SOURCE
#include "sectest.h"
#include "tap.h"

/* Starts `sleep 600` through setpriv with opts; its pid. */
static pid_t start(const char *const *opts)
{
	pid_t pid = fork();

	if (pid == 0) {
		const char *argv[16] = { "setpriv" };
		int n = 1;

		for (; *opts && n < 12; opts++)
			argv[n++] = *opts;
		argv[n++] = "sleep";
		argv[n++] = "600";
		argv[n] = NULL;
		execvp("setpriv", (char *const *)argv);
		_exit(127);
	}
	return pid;
}

/* Whether the kernel lets uid/gid read pid's maps (a child tries). */
static bool kernel_lets(uid_t uid, gid_t gid, pid_t pid)
{
	pid_t c = fork();
	int st = 0;

	if (c == 0) {
		char path[64];
		int fd;

		if (sec_become(uid, gid, NULL, 0) < 0)
			_exit(2);
		snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
		fd = open(path, O_RDONLY);
		_exit(fd >= 0 ? 0 : 1);
	}
	waitpid(c, &st, 0);
	return WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

/* Whether /api/v1/processes, asked as uid/gid, lists pid. */
static int lists(const struct itest_daemon *d, uid_t uid, gid_t gid,
		 bool unix_socket, pid_t pid)
{
	struct sec_answer *a = calloc(1, sizeof(*a));
	cJSON *j, *p;
	int found = 0;

	if (!a)
		return -1;
	sec_get_as(uid, gid, NULL, 0, d->url, unix_socket ? d->http_sock : NULL,
		   NULL, "/api/v1/processes", a);
	j = a->status == 200 ? cJSON_Parse(a->body) : NULL;
	if (!j) {
		free(a);
		return -1;
	}
	cJSON_ArrayForEach(p, cJSON_GetObjectItem(j, "processes"))
	{
		cJSON *n = cJSON_GetObjectItem(p, "pid");

		if (cJSON_IsNumber(n) && (pid_t)n->valuedouble == pid)
			found = 1;
	}
	cJSON_Delete(j);
	free(a);
	return found;
}

static int status_of(const struct itest_daemon *d, uid_t uid, gid_t gid,
		     bool unix_socket, pid_t pid)
{
	struct sec_answer *a = calloc(1, sizeof(*a));
	char path[64];
	int st;

	if (!a)
		return -1;
	snprintf(path, sizeof(path), "/api/v1/stacks?pid=%d", (int)pid);
	sec_get_as(uid, gid, NULL, 0, d->url, unix_socket ? d->http_sock : NULL,
		   NULL, path, a);
	st = a->status;
	free(a);
	return st;
}

static void as_nobody(const struct itest_daemon *d, pid_t mine, pid_t gid0,
		      pid_t capable, bool unix_socket)
{
	const char *via = unix_socket ? "the unix socket" : "TCP";

	TAP_OK(lists(d, SEC_NOBODY, SEC_NOBODY, unix_socket, mine) == 1 &&
		       status_of(d, SEC_NOBODY, SEC_NOBODY, unix_socket,
				 mine) == 200,
	       "over %s nobody lists and dumps its own process", via);
	TAP_OK(lists(d, SEC_NOBODY, SEC_NOBODY, unix_socket, gid0) == 0,
	       "over %s nobody does not list nobody's process of gid root",
	       via);
	TAP_OK(status_of(d, SEC_NOBODY, SEC_NOBODY, unix_socket, gid0) == 404,
	       "over %s it is a 404 for nobody", via);
	TAP_OK(lists(d, SEC_NOBODY, SEC_NOBODY, unix_socket, capable) == 0,
	       "over %s nobody does not list nobody's process that holds "
	       "CAP_NET_ADMIN",
	       via);
	TAP_OK(status_of(d, SEC_NOBODY, SEC_NOBODY, unix_socket, capable) ==
		       404,
	       "over %s it is a 404 for nobody", via);
}

static void as_gid1(const struct itest_daemon *d, pid_t gid1, pid_t mine,
		    bool unix_socket)
{
	const char *via = unix_socket ? "the unix socket" : "TCP";

	TAP_OK(lists(d, SEC_NOBODY, 1, unix_socket, gid1) == 1,
	       "over %s a requester of uid nobody, gid 1 lists its own "
	       "process",
	       via);
	TAP_OK(lists(d, SEC_NOBODY, 1, unix_socket, 1) == 0 &&
		       lists(d, SEC_NOBODY, 1, unix_socket, mine) == 0,
	       "over %s it is not taken for the admin group nogroup: pid 1 "
	       "and nobody's process of gid nobody are not listed",
	       via);
}

int main(void)
{
	static const char *const args[] = { "--sample-interval", "0", NULL };
	static const char *const admin_args[] = { "--sample-interval", "0",
						  "--admin-group", "nogroup",
						  NULL };
	static const char *const o_mine[] = { "--reuid=65534", "--regid=65534",
					      "--clear-groups", NULL };
	static const char *const o_gid0[] = { "--reuid=65534", "--regid=0",
					      "--clear-groups", NULL };
	static const char *const o_cap[] = { "--reuid=65534",
					     "--regid=65534",
					     "--clear-groups",
					     "--inh-caps=+net_admin",
					     "--ambient-caps=+net_admin",
					     NULL };
	static const char *const o_gid1[] = { "--reuid=65534", "--regid=1",
					      "--clear-groups", NULL };
	struct itest_daemon d;
	pid_t mine, gid0, capable, gid1;

	if (geteuid() != 0) {
		TAP_SKIP("needs root: the daemon runs as root, requesters as "
			 "nobody");
		return tap_done();
	}
	if (!getgrnam("nogroup")) {
		TAP_SKIP("no group nogroup here");
		return tap_done();
	}
	mine = start(o_mine);
	gid0 = start(o_gid0);
	capable = start(o_cap);
	gid1 = start(o_gid1);
	TAP_OK(sec_wait_comm(mine, "sleep") && sec_wait_comm(gid0, "sleep") &&
		       sec_wait_comm(capable, "sleep") &&
		       sec_wait_comm(gid1, "sleep"),
	       "the four processes run");
	TAP_OK(kernel_lets(SEC_NOBODY, SEC_NOBODY, mine) &&
		       !kernel_lets(SEC_NOBODY, SEC_NOBODY, gid0) &&
		       !kernel_lets(SEC_NOBODY, SEC_NOBODY, capable),
	       "the kernel lets nobody read its own process's maps, not the "
	       "other two's");
	if (itest_daemon_start_args(&d, args) < 0) {
		TAP_OK(0, "the daemon starts");
	} else {
		chmod(d.dir, 0711);
		as_nobody(&d, mine, gid0, capable, false);
		as_nobody(&d, mine, gid0, capable, true);
		TAP_OK(lists(&d, 0, 0, false, gid0) == 1 &&
			       lists(&d, 0, 0, false, capable) == 1,
		       "root sees them all");
		TAP_OK(itest_daemon_stop(&d) == 0, "the daemon stops cleanly");
		itest_daemon_cleanup(&d);
	}
	/* nobody's own group is the admin group now: gid 1 is not in it. */
	if (itest_daemon_start_args(&d, admin_args) < 0) {
		TAP_OK(0, "the daemon starts with --admin-group nogroup");
	} else {
		chmod(d.dir, 0711);
		as_gid1(&d, gid1, mine, false);
		as_gid1(&d, gid1, mine, true);
		TAP_OK(itest_daemon_stop(&d) == 0, "the daemon stops cleanly");
		itest_daemon_cleanup(&d);
	}
	itest_kill(mine);
	itest_kill(gid0);
	itest_kill(capable);
	itest_kill(gid1);
	return tap_done();
}
