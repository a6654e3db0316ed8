/*
 * test_sec_userns.c - capabilities held in a user namespace of one's own
 * count for nothing on the host.
 *
 * A process that makes a user namespace (unshare -Ur) holds every
 * capability in it, and its /proc/PID/status shows them, yet it holds
 * none over the host's processes. The daemon runs as root with root's
 * programs: a target under the agent with a spinning thread (flagged as
 * stuck) and a `sleep` without the agent. nobody, inside a user
 * namespace of its own (and in one with a mount namespace too, as
 * unshare -Urm), over the unix socket and over TCP, finds neither: the
 * stacks, the profile, the diff, the page and the pprof dump of each are
 * 404, and the lists (targets, processes, stuck, every stack) do not
 * hold them. Root in the host's namespace still sees them all.
 */
#define _GNU_SOURCE
#include <sched.h>

#include "sectest.h"
#include "tap.h"

struct setup {
	struct itest_daemon d;
	pid_t target;  /* root's, under the agent, spinning */
	pid_t sleeper; /* root's `sleep`, no agent */
};

/* Whether pid's number appears in body as a JSON "pid" value. */
static bool lists_pid(const char *body, pid_t pid)
{
	char want[40];

	snprintf(want, sizeof(want), "\"pid\":%d,", (int)pid);
	return strstr(body, want) != NULL;
}

/*
 * Whether nobody can make a user namespace here, and holds every
 * capability in it: a child tries and says.
 */
static bool userns_works(void)
{
	pid_t pid = fork();
	int st;

	if (pid == 0) {
		char buf[4096];
		FILE *f;
		bool full = false;

		if (sec_become(SEC_NOBODY, SEC_NOBODY, NULL, 0) < 0 ||
		    sec_enter_userns(0) < 0)
			_exit(1);
		f = fopen("/proc/self/status", "r");
		while (f && fgets(buf, sizeof(buf), f))
			if (strncmp(buf, "CapEff:", 7) == 0)
				full = strtoull(buf + 7, NULL, 16) != 0;
		_exit(full ? 0 : 2);
	}
	return pid > 0 && waitpid(pid, &st, 0) == pid && WIFEXITED(st) &&
	       WEXITSTATUS(st) == 0;
}

/* GET target as nobody in a user namespace made with flags. */
static void get_in_ns(const struct setup *s, int flags, bool unix_socket,
		      const char *target, struct sec_answer *a)
{
	struct sec_pending pg;

	sec_get_start_in(flags, SEC_NOBODY, SEC_NOBODY, NULL, 0, s->d.url,
			 unix_socket ? s->d.http_sock : NULL, NULL, target,
			 &pg);
	sec_get_finish(&pg, a);
}

/* The paths of one process that must be 404 for nobody. */
static const char *const by_pid[] = {
	"/api/v1/stacks?pid=%d",
	"/api/v1/stacks?pid=%d&format=text",
	"/stacks?pid=%d",
	"/api/v1/diff?pid=%d&since=1",
	"/api/v1/profile?pid=%d",
	"/debug/pprof/threads?pid=%d",
	"/debug/pprof/profile?seconds=1&pid=%d",
};

static void check_ns(const struct setup *s, int flags, bool unix_socket,
		     struct sec_answer *a)
{
	const char *via = unix_socket ? "the unix socket" : "TCP";
	const char *ns = flags ? "unshare -Urm" : "unshare -Ur";
	static const char *const lists[] = { "/api/v1/targets",
					     "/api/v1/processes",
					     "/api/v1/stuck",
					     "/api/v1/stacks" };
	pid_t pids[2] = { s->target, s->sleeper };
	char path[128];

	for (size_t i = 0; i < sizeof(by_pid) / sizeof(by_pid[0]); i++)
		for (int k = 0; k < 2; k++) {
			sec_path_pid(path, sizeof(path), by_pid[i], pids[k]);
			if (k == 1 && strstr(path, "diff"))
				continue; /* no history without the agent */
			get_in_ns(s, flags, unix_socket, path, a);
			TAP_OK(a->status == 404,
			       "nobody in %s over %s: %s of root's %s is 404 "
			       "(%d)",
			       ns, via, path, k ? "sleep" : "target",
			       a->status);
		}
	for (size_t i = 0; i < sizeof(lists) / sizeof(lists[0]); i++) {
		get_in_ns(s, flags, unix_socket, lists[i], a);
		TAP_OK(a->status == 200 && !lists_pid(a->body, s->target) &&
			       !lists_pid(a->body, s->sleeper),
		       "nobody in %s over %s: %s holds neither of root's "
		       "(%d)",
		       ns, via, lists[i], a->status);
	}
}

/* Root, in the host's namespace, sees both: the check above can fail. */
static void check_root(const struct setup *s, bool unix_socket,
		       struct sec_answer *a)
{
	const char *via = unix_socket ? "the unix socket" : "TCP";
	const char *sock = unix_socket ? s->d.http_sock : NULL;
	char path[128];

	snprintf(path, sizeof(path), "/api/v1/stacks?pid=%d", (int)s->target);
	sec_get_as(0, 0, NULL, 0, s->d.url, sock, NULL, path, a);
	TAP_OK(a->status == 200, "root over %s dumps its target (%d)", via,
	       a->status);
	snprintf(path, sizeof(path), "/api/v1/stacks?pid=%d", (int)s->sleeper);
	sec_get_as(0, 0, NULL, 0, s->d.url, sock, NULL, path, a);
	TAP_OK(a->status == 200, "root over %s dumps its sleep (%d)", via,
	       a->status);
	snprintf(path, sizeof(path), "/api/v1/diff?pid=%d&since=1",
		 (int)s->target);
	sec_get_as(0, 0, NULL, 0, s->d.url, sock, NULL, path, a);
	TAP_OK(a->status == 200, "root over %s has its target's diff (%d)", via,
	       a->status);
	sec_get_as(0, 0, NULL, 0, s->d.url, sock, NULL, "/api/v1/processes", a);
	TAP_OK(a->status == 200 && lists_pid(a->body, s->target) &&
		       lists_pid(a->body, s->sleeper),
	       "root over %s lists both processes", via);
	sec_get_as(0, 0, NULL, 0, s->d.url, sock, NULL, "/api/v1/stuck", a);
	TAP_OK(a->status == 200 && lists_pid(a->body, s->target),
	       "root over %s sees its target's stuck thread", via);
}

int main(void)
{
	static const char *const args[] = { "--sample-interval", "200",
					    "--stuck-after", "1", NULL };
	char fixture[256], watch[] = "watch", spin[] = "spin";
	char *argv[] = { fixture, watch, spin, NULL };
	struct sec_answer *a = calloc(1, sizeof(*a));
	struct setup s;
	bool stuck = false;
	int out = -1;

	if (geteuid() != 0) {
		TAP_SKIP("needs root: the daemon runs as root, requesters as "
			 "nobody");
		return tap_done();
	}
	if (!userns_works()) {
		TAP_SKIP("nobody cannot make a user namespace here "
			 "(user.max_user_namespaces, or a security module)");
		return tap_done();
	}
	if (!a || itest_daemon_start_args(&s.d, args) < 0) {
		TAP_OK(0, "the daemon starts");
		return tap_done();
	}
	chmod(s.d.dir, 0711);
	snprintf(fixture, sizeof(fixture), "%s/fixtures/agent_target",
		 itest_target_build());
	s.target = itest_spawn(&s.d, argv, &out);
	s.sleeper = sec_sleeper(0, 0);
	TAP_OK(s.target > 0 && itest_wait_line(out, "ready") &&
		       itest_wait_registered(&s.d, s.target, 10000) &&
		       s.sleeper > 0 && sec_wait_comm(s.sleeper, "sleep"),
	       "root's target and root's sleep run");
	for (long end = itest_now_ms() + 15000; itest_now_ms() < end && !stuck;
	     itest_sleep_ms(100)) {
		sec_get_as(0, 0, NULL, 0, s.d.url, NULL, NULL, "/api/v1/stuck",
			   a);
		stuck = lists_pid(a->body, s.target);
	}
	TAP_OK(stuck, "root's spinning thread is flagged as stuck");

	check_ns(&s, 0, true, a);
	check_ns(&s, 0, false, a);
	check_ns(&s, CLONE_NEWNS, true, a);
	check_ns(&s, CLONE_NEWNS, false, a);
	check_root(&s, true, a);
	check_root(&s, false, a);

	if (out >= 0)
		close(out);
	itest_kill(s.target);
	itest_kill(s.sleeper);
	TAP_OK(!itest_alive(s.target) && !itest_alive(s.sleeper),
	       "root's programs are gone");
	TAP_OK(itest_daemon_stop(&s.d) == 0, "the daemon stops cleanly");
	itest_daemon_cleanup(&s.d);
	free(a);
	return tap_done();
}
