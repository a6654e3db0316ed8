/*
 * test_sec_kstack.c - the kernel's own stack of a thread is shown to
 * whom the kernel shows it: CAP_SYS_ADMIN (and the admin group).
 *
 * /proc/PID/task/TID/stack is CAP_SYS_ADMIN's; the daemon, root, reads
 * it for a thread stuck in state D ("kernel_frames"). nobody's program
 * under the agent has a thread in vfork() whose child sleeps: the parent
 * waits in state D, and the watchdog flags it. root's /api/v1/stuck has
 * its kernel frames, nobody's only its wait channel ("wchan", the one
 * name /proc/PID/task/TID/wchan gives), and so has the CLI's `stuck` run
 * by nobody; nobody in the admin group gets the kernel frames.
 */
#define _GNU_SOURCE

#include "sectest.h"
#include "tap.h"

#define ADMIN_GROUP "sw-sec-kadmin"

/* The stuck entry of pid's thread named name in a /api/v1/stuck body. */
static cJSON *entry_of(cJSON *doc, pid_t pid, const char *name)
{
	cJSON *t;

	cJSON_ArrayForEach(t, cJSON_GetObjectItem(doc, "threads"))
	{
		cJSON *p = cJSON_GetObjectItem(t, "pid");
		cJSON *n = cJSON_GetObjectItem(t, "name");

		if (cJSON_IsNumber(p) && (pid_t)p->valuedouble == pid &&
		    cJSON_IsString(n) && strcmp(n->valuestring, name) == 0)
			return t;
	}
	return NULL;
}

/* What one requester's /api/v1/stuck says of the vfork parent. */
struct seen {
	bool found;
	int kframes; /* kernel frames, -1 none */
	char wchan[64];
};

static void stuck_as(const struct itest_daemon *d, uid_t uid, const gid_t *g,
		     size_t ng, pid_t pid, struct seen *s)
{
	struct sec_answer *a = calloc(1, sizeof(*a));
	cJSON *doc, *e, *k, *w;

	memset(s, 0, sizeof(*s));
	s->kframes = -1;
	if (!a)
		return;
	sec_get_as(uid, uid, g, ng, d->url, d->http_sock, NULL, "/api/v1/stuck",
		   a);
	doc = cJSON_Parse(a->body);
	e = entry_of(doc, pid, "vforker");
	if (e) {
		s->found = true;
		k = cJSON_GetObjectItem(e, "kernel_frames");
		w = cJSON_GetObjectItem(e, "wchan");
		if (cJSON_IsArray(k))
			s->kframes = cJSON_GetArraySize(k);
		if (cJSON_IsString(w))
			snprintf(s->wchan, sizeof(s->wchan), "%s",
				 w->valuestring);
	}
	cJSON_Delete(doc);
	free(a);
}

int main(void)
{
	static const char *const args[] = { "--sample-interval",
					    "200",
					    "--stuck-after",
					    "1",
					    "--admin-group",
					    ADMIN_GROUP,
					    NULL };
	char fixture[256], watch[] = "watch", vf[] = "vfork", cmd[768];
	char out[4096] = "";
	char *argv[] = { fixture, watch, vf, NULL };
	struct itest_daemon d;
	struct seen root, nobody, admin;
	struct group *g;
	gid_t admin_gid;
	int fd = -1;
	pid_t pid;
	FILE *f;

	if (geteuid() != 0) {
		TAP_SKIP("needs root: the daemon runs as root, requesters as "
			 "nobody");
		return tap_done();
	}
	if (!getgrnam(ADMIN_GROUP) &&
	    system("groupadd -f " ADMIN_GROUP " 2>/dev/null") != 0) {
		TAP_OK(0, "groupadd %s", ADMIN_GROUP);
		return tap_done();
	}
	g = getgrnam(ADMIN_GROUP);
	admin_gid = g ? g->gr_gid : (gid_t)-1;
	if (itest_daemon_start_args(&d, args) < 0) {
		TAP_OK(0, "the daemon starts");
		return tap_done();
	}
	chmod(d.dir, 0711);
	snprintf(fixture, sizeof(fixture), "%s/fixtures/agent_target",
		 itest_target_build());
	pid = sec_spawn_as(&d, SEC_NOBODY, SEC_NOBODY, argv, &fd);
	TAP_OK(pid > 0 && itest_wait_line(fd, "ready") &&
		       itest_wait_registered(&d, pid, 10000),
	       "nobody's program with a vfork parent runs under the agent");
	memset(&root, 0, sizeof(root));
	for (long end = itest_now_ms() + 15000;
	     itest_now_ms() < end && root.kframes <= 0; itest_sleep_ms(100))
		stuck_as(&d, 0, NULL, 0, pid, &root);
	TAP_OK(root.found && root.kframes > 0,
	       "root sees the vfork parent's kernel frames (%d)", root.kframes);
	TAP_OK(root.wchan[0], "and its wait channel (%s)", root.wchan);
	stuck_as(&d, SEC_NOBODY, NULL, 0, pid, &nobody);
	TAP_OK(nobody.found && nobody.kframes == -1,
	       "nobody sees its own stuck thread, without kernel frames "
	       "(%d)",
	       nobody.kframes);
	TAP_OK(nobody.wchan[0] && strcmp(nobody.wchan, root.wchan) == 0,
	       "nobody gets the wait channel's one name (%s)", nobody.wchan);
	stuck_as(&d, SEC_NOBODY, &admin_gid, 1, pid, &admin);
	TAP_OK(admin.found && admin.kframes > 0,
	       "nobody in the admin group gets the kernel frames (%d)",
	       admin.kframes);

	snprintf(cmd, sizeof(cmd),
		 "setpriv --reuid=%d --regid=%d --clear-groups env "
		 "STACKWATCH_HTTP_SOCKET=%s %s/stackwatch stuck 2>&1",
		 SEC_NOBODY, SEC_NOBODY, d.http_sock, sec_cli_dir());
	f = popen(cmd, "r");
	if (f) {
		size_t n = fread(out, 1, sizeof(out) - 1, f);

		out[n] = '\0';
		pclose(f);
	}
	TAP_OK(strstr(out, "vforker") && root.wchan[0] &&
		       strstr(out, root.wchan) && !strstr(out, "kernel:"),
	       "the CLI's stuck, run by nobody, names the wait channel and "
	       "no kernel frame");

	if (fd >= 0)
		close(fd);
	if (pid > 0) {
		kill(-pid, SIGKILL);
		waitpid(pid, NULL, 0);
	}
	TAP_OK(pid <= 0 || !itest_alive(pid), "the program is gone");
	TAP_OK(itest_daemon_stop(&d) == 0, "the daemon stops cleanly");
	itest_daemon_cleanup(&d);
	if (system("groupdel " ADMIN_GROUP " 2>/dev/null") != 0)
		TAP_OK(1, "# the group %s stays", ADMIN_GROUP);
	return tap_done();
}
