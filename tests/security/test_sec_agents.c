/*
 * test_sec_agents.c - hostile agents, run as nobody against the daemon
 * as root (tests/fixtures/hostile_agent.c speaks the wire protocol with
 * lies of its own choosing), hurt neither the daemon nor another target:
 *
 * - a module whose directory holds a FIFO named as its separate debug
 *   file, or a symlink there to a FIFO only root may open: the daemon
 *   opens neither (a FIFO opened for reading would block a symbolizer,
 *   and with it every dump), and dumps go on;
 * - a stub ELF that carries libc's build-id, after 300 junk build-ids
 *   that once overflowed the session table: root's own target still
 *   shows libc's real functions, never the stub's;
 * - a process that connects and exits before its HELLO is refused, so
 *   its pid never speaks for whatever process gets it next;
 * - a module the process does not map (a root-only file) is never
 *   opened: no symbol of it shows.
 */
#define _GNU_SOURCE
#include <sys/stat.h>

#include "collector/modules.h"
#include "sectest.h"
#include "tap.h"

static char work[] = "/tmp/sw-secagent-XXXXXX";

/* Whether some process has the FIFO at path open for reading. */
static bool fifo_has_reader(const char *path)
{
	int fd = open(path, O_WRONLY | O_NONBLOCK | O_CLOEXEC);

	if (fd >= 0) {
		close(fd);
		return true;
	}
	return errno != ENXIO;
}

static bool copy_file(const char *from, const char *to, uid_t owner)
{
	char buf[65536];
	ssize_t n;
	int in = open(from, O_RDONLY | O_CLOEXEC);
	int out = open(to, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0755);
	bool ok = in >= 0 && out >= 0;

	while (ok && (n = read(in, buf, sizeof(buf))) > 0)
		ok = write(out, buf, (size_t)n) == n;
	if (in >= 0)
		close(in);
	if (out >= 0)
		close(out);
	return ok && chown(to, owner, owner) == 0;
}

/* The functions of every frame of a one-process dump, checked. */
struct frames_seen {
	int total;
	int named;    /* frames with a function */
	int poisoned; /* frames named POISONED */
	int libc;     /* named frames in libc */
};

static void scan_frames(cJSON *j, struct frames_seen *s)
{
	cJSON *g, *f;

	memset(s, 0, sizeof(*s));
	cJSON_ArrayForEach(g, cJSON_GetObjectItem(j, "groups"))
	{
		cJSON_ArrayForEach(f, cJSON_GetObjectItem(g, "frames"))
		{
			const char *fn = cJSON_GetStringValue(
				cJSON_GetObjectItem(f, "function"));
			const char *mod = cJSON_GetStringValue(
				cJSON_GetObjectItem(f, "module"));

			s->total++;
			if (!fn)
				continue;
			s->named++;
			s->poisoned += strstr(fn, "POISONED") != NULL;
			s->libc += mod && strstr(mod, "libc.so") != NULL;
		}
	}
}

/* libc's build-id in hex, as this process maps it; "" if none. */
static void libc_build_id(char *hex, size_t size)
{
	struct sw_dump *d = dump_new();

	hex[0] = '\0';
	if (!d || modules_read_self(d)) {
		sw_dump_free(d);
		return;
	}
	for (size_t i = 0; i < d->nmodules; i++) {
		const struct sw_module *m = &d->modules[i];

		if (!m->path || !strstr(m->path, "/libc.so") ||
		    2 * m->build_id_len + 1 > size)
			continue;
		for (uint32_t k = 0; k < m->build_id_len; k++)
			snprintf(hex + 2 * k, 3, "%02x", m->build_id[k]);
	}
	sw_dump_free(d);
}

/* Makes a copy of the stub whose build-id is the one given in hex. */
static bool stub_with_build_id(const char *to, const char *hex)
{
	static const char pattern[] = "SWSTUBSTUBSTUBSTUBST";
	char from[256], buf[1 << 16];
	size_t n;
	char *at;
	FILE *f;

	snprintf(from, sizeof(from), "%s/fixtures/stub.so",
		 itest_target_build());
	f = fopen(from, "rb");
	n = f ? fread(buf, 1, sizeof(buf), f) : 0;
	if (f)
		fclose(f);
	at = memmem(buf, n, pattern, 20);
	if (!at || strlen(hex) != 40)
		return false;
	for (int i = 0; i < 20; i++) {
		unsigned v;

		sscanf(hex + 2 * i, "%2x", &v);
		at[i] = (char)v;
	}
	f = fopen(to, "wb");
	if (!f)
		return false;
	n = fwrite(buf, 1, n, f);
	fclose(f);
	return chown(to, SEC_NOBODY, SEC_NOBODY) == 0 && chmod(to, 0755) == 0;
}

/* evil1 and evil2 of nobody's, rootonly of root's (0700). */
static int make_dirs(void)
{
	char path[128];

	snprintf(path, sizeof(path), "%s/rootonly", work);
	if (mkdir(path, 0700) < 0)
		return -1;
	for (int i = 1; i <= 2; i++) {
		snprintf(path, sizeof(path), "%s/evil%d", work, i);
		if (mkdir(path, 0755) < 0 ||
		    chown(path, SEC_NOBODY, SEC_NOBODY) < 0)
			return -1;
	}
	return 0;
}

/* A FIFO named as the module's debug file, and a symlink to root's. */
static void test_debug_paths(const struct itest_daemon *d, pid_t roots)
{
	char dir1[128], dir2[128], so1[160], so2[160], fifo1[160], dbg[160];
	char secret[128], rootfifo[160], path[96], stub[256];
	pid_t h1, h2;
	cJSON *j;
	int st;

	snprintf(stub, sizeof(stub), "%s/fixtures/stub.so",
		 itest_target_build());
	snprintf(dir1, sizeof(dir1), "%s/evil1", work);
	snprintf(dir2, sizeof(dir2), "%s/evil2", work);
	snprintf(secret, sizeof(secret), "%s/rootonly", work);
	snprintf(so1, sizeof(so1), "%s/x.so", dir1);
	snprintf(so2, sizeof(so2), "%s/x.so", dir2);
	snprintf(fifo1, sizeof(fifo1), "%s/x.so.debug", dir1);
	snprintf(rootfifo, sizeof(rootfifo), "%s/secret.fifo", secret);
	snprintf(dbg, sizeof(dbg), "%s/.debug", dir2);
	mkdir(dbg, 0755);
	snprintf(dbg, sizeof(dbg), "%s/.debug/x.so.debug", dir2);
	TAP_OK(copy_file(stub, so1, SEC_NOBODY) &&
		       copy_file(stub, so2, SEC_NOBODY) &&
		       mkfifo(fifo1, 0666) == 0 &&
		       mkfifo(rootfifo, 0600) == 0 &&
		       symlink(rootfifo, dbg) == 0,
	       "a FIFO as x.so.debug, and .debug/x.so.debug a symlink to a "
	       "root-only FIFO");
	h1 = sec_start_hostile(d, "map", so1, NULL, NULL);
	h2 = sec_start_hostile(d, "map", so2, NULL, NULL);
	TAP_OK(h1 > 0 && h2 > 0, "two hostile agents registered as nobody");

	snprintf(path, sizeof(path), "/api/v1/stacks?pid=%d", (int)h1);
	st = sec_root_get(d, path, 5000, NULL);
	TAP_OK(st == 200, "the dump of the first comes back (%d)", st);
	TAP_OK(!fifo_has_reader(fifo1),
	       "the daemon did not open the FIFO in the agent's directory");
	snprintf(path, sizeof(path), "/api/v1/stacks?pid=%d", (int)h2);
	st = sec_root_get(d, path, 5000, NULL);
	TAP_OK(st == 200, "the dump of the second comes back (%d)", st);
	TAP_OK(!fifo_has_reader(rootfifo),
	       "the daemon did not follow the symlink to root's FIFO");
	snprintf(path, sizeof(path), "/api/v1/stacks?pid=%d", (int)roots);
	st = sec_root_get(d, path, 5000, &j);
	TAP_OK(st == 200, "root's own target still dumps (%d)", st);
	cJSON_Delete(j);
	/* Whatever opened them (a daemon before this fix) is let go. */
	close(open(fifo1, O_WRONLY | O_NONBLOCK));
	close(open(rootfifo, O_WRONLY | O_NONBLOCK));
	itest_kill(h1);
	itest_kill(h2);
}

static int dump_roots(const struct itest_daemon *d, pid_t roots,
		      struct frames_seen *s)
{
	char path[96];
	cJSON *j;
	int st;

	snprintf(path, sizeof(path), "/api/v1/stacks?pid=%d", (int)roots);
	st = sec_root_get(d, path, 10000, &j);
	scan_frames(j, s);
	cJSON_Delete(j);
	return st;
}

/* Junk build-ids, then a stub claiming libc's: root's libc is libc. */
static void test_poison(const struct itest_daemon *d, pid_t roots)
{
	char id[2 * SW_BUILD_ID_MAX + 1], liar[160], path[96];
	struct frames_seen s;
	pid_t junk, poison;
	cJSON *j;
	int st;

	libc_build_id(id, sizeof(id));
	snprintf(liar, sizeof(liar), "%s/evil1/libc-liar.so", work);
	TAP_OK(stub_with_build_id(liar, id),
	       "a stub ELF carrying libc's build-id %s", id);
	st = dump_roots(d, roots, &s);
	TAP_OK(st == 200 && s.libc > 0 && !s.poisoned,
	       "root's target first: %d libc frames named", s.libc);

	junk = sec_start_hostile(d, "junk", liar, "300", NULL);
	snprintf(path, sizeof(path), "/api/v1/stacks?pid=%d", (int)junk);
	st = sec_root_get(d, path, 10000, NULL);
	TAP_OK(junk > 0 && st == 200, "a dump claiming 300 junk build-ids (%d)",
	       st);

	poison = sec_start_hostile(d, "map", liar, id, NULL);
	snprintf(path, sizeof(path), "/api/v1/stacks?pid=%d", (int)poison);
	st = sec_root_get(d, path, 10000, &j);
	scan_frames(j, &s);
	cJSON_Delete(j);
	TAP_OK(poison > 0 && st == 200,
	       "the liar's dump (%d; its own frames %d named)", st, s.named);

	st = dump_roots(d, roots, &s);
	TAP_OK(st == 200 && s.libc > 0 && !s.poisoned,
	       "root's target after them: libc frames named %d, POISONED %d",
	       s.libc, s.poisoned);
	itest_kill(junk);
	itest_kill(poison);
}

/* A pid that connected and exited before HELLO never registers. */
static void test_dead_pid(const struct itest_daemon *d)
{
	char line[64];
	int out, child = 0;
	pid_t h = sec_hostile(d, "deadpid", NULL, NULL, NULL, &out);
	bool listed;

	TAP_OK(h > 0 && itest_read_line(out, line, sizeof(line)) &&
		       sscanf(line, "child %d", &child) == 1,
	       "a child connected, handed over its socket and exited "
	       "(pid %d)",
	       child);
	itest_sleep_ms(500);
	listed = itest_registered(d, child);
	TAP_OK(child > 0 && !listed,
	       "the dead pid %d is not a target: refused at HELLO", child);
	TAP_OK(sec_log_has(d, "refusing", child),
	       "the daemon's log says it refused pid %d", child);
	close(out);
	itest_kill(h);
}

/* A module the process does not map, a root-only file: never opened. */
static void test_unmapped_claim(const struct itest_daemon *d)
{
	char secret[160], stub[256], path[96];
	struct frames_seen s;
	pid_t h;
	cJSON *j;
	int st;

	snprintf(stub, sizeof(stub), "%s/fixtures/stub.so",
		 itest_target_build());
	snprintf(secret, sizeof(secret), "%s/rootonly/secret.so", work);
	TAP_OK(copy_file(stub, secret, 0) && chmod(secret, 0700) == 0,
	       "a root-only binary in a root-only directory");
	h = sec_start_hostile(d, "claim", secret, NULL, NULL);
	snprintf(path, sizeof(path), "/api/v1/stacks?pid=%d", (int)h);
	st = sec_root_get(d, path, 5000, &j);
	scan_frames(j, &s);
	cJSON_Delete(j);
	TAP_OK(h > 0 && st == 200 && s.total > 0 && !s.poisoned && !s.named,
	       "a claim of it shows no symbol of it (%d frames, %d named)",
	       s.total, s.named);
	itest_kill(h);
}

int main(void)
{
	static const char *const args[] = { "--sample-interval", "0", NULL };
	struct itest_daemon d;
	char fixture[256], cmd[160];
	char sigwait[] = "sigwait", four[] = "4";
	char *argv[] = { fixture, sigwait, four, NULL };
	pid_t roots = -1;
	int out;

	if (geteuid() != 0) {
		TAP_SKIP("needs root: the daemon runs as root, agents as "
			 "nobody");
		return tap_done();
	}
	snprintf(fixture, sizeof(fixture), "%s/fixtures/agent_target",
		 itest_target_build());
	if (!mkdtemp(work) || chmod(work, 0755) < 0 || make_dirs() < 0) {
		TAP_OK(false, "a work directory");
		return tap_done();
	}
	if (itest_daemon_start_args(&d, args) < 0) {
		TAP_OK(false, "daemon starts");
		return tap_done();
	}
	/* nobody may reach the agent socket, as on a real host. */
	chmod(d.dir, 0711);
	roots = itest_spawn(&d, argv, &out);
	TAP_OK(roots > 0 && itest_wait_line(out, "ready") &&
		       itest_wait_registered(&d, roots, 10000),
	       "a target of root's");

	test_debug_paths(&d, roots);
	test_poison(&d, roots);
	test_dead_pid(&d);
	test_unmapped_claim(&d);

	TAP_OK(itest_alive(d.pid), "the daemon is alive after all of it");
	itest_kill(roots);
	TAP_OK(itest_daemon_stop(&d) == 0, "the daemon stops cleanly");
	itest_daemon_cleanup(&d);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", work);
	if (system(cmd) != 0)
		TAP_NOTE("could not remove %s", work);
	return tap_done();
}
