/*
 * test_sec_modules.c - the symbols of a file that a requester may not
 * read are not shown to it, whatever process maps the file.
 *
 * tests/fixtures/mapped_secret, started by root, maps a copy of
 * secret_lib.so that only root may read (mode 0600, in a directory of
 * root's), runs a thread in it, then drops every thread to nobody and
 * makes itself dumpable: nobody may read its memory now, but not the
 * file, whose symbol table (never mapped) names the thread's function.
 * The daemon opens the file as root through the process's own mapping.
 * nobody's dumps (JSON, text, folded, pprof) name no function of the
 * file, yet show its frames (module and offset); root's name it. The
 * same file readable by all (0644) is named for nobody too.
 */
#define _GNU_SOURCE
#include <zlib.h>

#include "sectest.h"
#include "tap.h"

#define INNER "secret_lib_inner_name"

static char dir[] = "/tmp/sw-secmod-XXXXXX";

/* Starts mapped_secret on lib as root (it drops to nobody). */
static pid_t start(const char *lib, int *in)
{
	char fixture[256];
	char *argv[] = { fixture, (char *)lib, NULL };
	int p[2], q[2];
	pid_t pid;

	snprintf(fixture, sizeof(fixture), "%s/fixtures/mapped_secret",
		 itest_target_build());
	if (pipe(p) < 0 || pipe(q) < 0)
		return -1;
	pid = fork();
	if (pid == 0) {
		setpgid(0, 0);
		dup2(p[1], 1);
		dup2(q[0], 0);
		close(p[0]);
		close(p[1]);
		close(q[0]);
		close(q[1]);
		execv(argv[0], argv);
		_exit(127);
	}
	close(p[1]);
	close(q[0]);
	*in = q[1];
	if (pid > 0 && !itest_wait_line(p[0], "ready")) {
		kill(-pid, SIGKILL);
		waitpid(pid, NULL, 0);
		pid = -1;
	}
	close(p[0]);
	return pid;
}

/* GET as uid over the unix socket; the body gunzipped when gzip. */
static char *get(const struct itest_daemon *d, uid_t uid, const char *path,
		 int *status)
{
	struct sec_answer *a = calloc(1, sizeof(*a));
	const unsigned char *in;
	size_t cap = 1 << 22;
	char *out = malloc(cap + 1);
	z_stream z = { 0 };
	size_t len;

	*status = 0;
	if (!a || !out) {
		free(a);
		free(out);
		return NULL;
	}
	sec_get_as(uid, uid, NULL, 0, d->url, d->http_sock, NULL, path, a);
	*status = a->status;
	in = (const unsigned char *)a->body;
	len = strlen(a->body);
	if (len >= 2 && in[0] == 0x1f && in[1] == 0x8b &&
	    inflateInit2(&z, 16 + MAX_WBITS) == Z_OK) {
		/* sec_answer stops at the first NUL: whatever came before */
		z.next_in = (unsigned char *)in;
		z.avail_in = (unsigned)sizeof(a->body);
		z.next_out = (unsigned char *)out;
		z.avail_out = (unsigned)cap;
		inflate(&z, Z_FINISH);
		len = cap - z.avail_out;
		inflateEnd(&z);
		for (size_t i = 0; i < len; i++)
			if (!out[i])
				out[i] = ' ';
		out[len] = '\0';
	} else {
		memcpy(out, a->body, len + 1);
	}
	free(a);
	return out;
}

/* Whether nobody's answers name INNER (want) and root's always do. */
static void check(const struct itest_daemon *d, pid_t pid, bool nobody_names,
		  const char *what)
{
	static const char *const paths[] = {
		"/api/v1/stacks?pid=%d",
		"/api/v1/stacks?pid=%d&format=text",
		"/api/v1/stacks?pid=%d&format=folded",
	};
	char path[96];

	for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
		int sn, sr;
		char *mine, *roots;

		sec_path_pid(path, sizeof(path), paths[i], pid);
		mine = get(d, SEC_NOBODY, path, &sn);
		roots = get(d, 0, path, &sr);
		/* An unnamed frame still says where: its module. */
		TAP_OK(sn == 200 && mine &&
			       (nobody_names ? strstr(mine, INNER) != NULL
					     : !strstr(mine, INNER) &&
						       strstr(mine,
							      "secret_lib.so")),
		       "%s: nobody's %s %s the file's function, and has its "
		       "frame (%d)",
		       what, path, nobody_names ? "names" : "does not name",
		       sn);
		TAP_OK(sr == 200 && roots && strstr(roots, INNER),
		       "%s: root's %s names it", what, path);
		free(mine);
		free(roots);
	}
}

int main(void)
{
	static const char *const args[] = { "--sample-interval", "0", NULL };
	char lib[128], cmd[512];
	struct itest_daemon d;
	pid_t pid;
	int in = -1;

	if (geteuid() != 0) {
		TAP_SKIP("needs root: a file only root may read");
		return tap_done();
	}
	if (!mkdtemp(dir) || chmod(dir, 0755) < 0) {
		TAP_OK(0, "a directory of root's");
		return tap_done();
	}
	snprintf(lib, sizeof(lib), "%s/secret_lib.so", dir);
	snprintf(cmd, sizeof(cmd), "cp %s/fixtures/secret_lib.so %s",
		 itest_target_build(), lib);
	TAP_OK(system(cmd) == 0 && chmod(lib, 0600) == 0,
	       "a copy of secret_lib.so only root may read");
	if (itest_daemon_start_args(&d, args) < 0) {
		TAP_OK(0, "the daemon starts");
		return tap_done();
	}
	chmod(d.dir, 0711);
	pid = start(lib, &in);
	TAP_OK(pid > 0, "mapped_secret maps it, then drops to nobody");
	if (pid > 0)
		check(&d, pid, false, "mode 0600");
	if (pid > 0) {
		close(in);
		kill(-pid, SIGKILL);
		waitpid(pid, NULL, 0);
	}
	/* The same file readable by all: nobody gets the names. */
	chmod(lib, 0644);
	pid = start(lib, &in);
	if (pid > 0)
		check(&d, pid, true, "mode 0644");
	if (pid > 0) {
		close(in);
		kill(-pid, SIGKILL);
		waitpid(pid, NULL, 0);
	}
	TAP_OK(pid <= 0 || !itest_alive(pid), "the fixtures are gone");
	TAP_OK(itest_daemon_stop(&d) == 0, "the daemon stops cleanly");
	itest_daemon_cleanup(&d);
	unlink(lib);
	rmdir(dir);
	return tap_done();
}
