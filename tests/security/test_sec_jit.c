/*
 * test_sec_jit.c - what perf maps may cost the daemon (root). Eight
 * processes of nobody run code they generated at one fixed address
 * (tests/fixtures/jit_target.c), without the agent (ptrace snapshots);
 * the test writes their perf maps, owned by nobody.
 *
 * With the default limits:
 * - each process's own small map names its generated frame ([jit]);
 * - one map of 200,000 entries hard-linked as the eight maps is parsed
 *   and kept once: the first dump costs the daemon one copy, the seven
 *   others, one after another, less than half of one more, and all eight
 *   name the frame from it;
 * - another such map in its place, dumped by eight requests at once, is
 *   parsed once too: the daemon's peak memory grows by less than one and
 *   a half copies, and what it keeps afterwards by less than half of one.
 * With --max-jit-mib 4:
 * - a small map still names the frame;
 * - a map of 200,000 entries, more than nobody's 4 MiB, is refused: the
 *   dump says so in JSON (jit_map_refused, naming the option) and in text,
 *   its frame stays unnamed, the log says so once over three dumps, and
 *   the daemon's peak memory grows by less than 4 MiB and a little (the
 *   parse stops at the limit, it does not take the whole map first);
 * - the other process's small map still names its frame, and a small map
 *   in place of the big one names the frame again;
 * - a map shared by two processes that grows past half the limit ends up
 *   naming both, though the first to look may have found no room for the
 *   new version while the other still held the old one.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>

#include "sectest.h"
#include "tap.h"

#define NPROC 8
#define SHARED_ENTRIES 200000
#define BIG_ENTRIES 200000

static char fixture[256];
static char work[] = "/tmp/sw-secjit-XXXXXX";
static pid_t procs[NPROC];
static pid_t pgid;
static char jit_addr[32], jit_size[32];

/* One field of /proc/PID/status in KiB ("VmRSS", "VmHWM"), or -1. */
static long status_kib(pid_t pid, const char *field)
{
	char path[64], line[256];
	size_t n = strlen(field);
	long kib = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	f = fopen(path, "re");
	while (f && fgets(line, sizeof(line), f))
		if (!strncmp(line, field, n) && line[n] == ':') {
			kib = atol(line + n + 1);
			break;
		}
	if (f)
		fclose(f);
	return kib;
}

/* Starts the peak (VmHWM) of pid again from its RSS. false if it cannot. */
static bool reset_peak(pid_t pid)
{
	char path[64];
	int fd;
	bool ok;

	snprintf(path, sizeof(path), "/proc/%d/clear_refs", (int)pid);
	fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	ok = write(fd, "5", 1) == 1;
	close(fd);
	return ok;
}

/*
 * Starts the fixture as nobody, in the test's process group (the first
 * one makes it), and reads where its generated code is.
 */
static pid_t start_jit(void)
{
	char line[128], addr[32], size[32];
	int p[2];
	pid_t pid;
	bool ready;

	if (pipe(p) < 0)
		return -1;
	pid = fork();
	if (pid == 0) {
		setpgid(0, pgid);
		dup2(p[1], 1);
		close(p[0]);
		close(p[1]);
		if (sec_become(SEC_NOBODY, SEC_NOBODY, NULL, 0) < 0)
			_exit(126);
		execl(fixture, fixture, (char *)NULL);
		_exit(127);
	}
	close(p[1]);
	if (pid < 0) {
		close(p[0]);
		return -1;
	}
	setpgid(pid, pgid); /* either of the two calls comes first */
	if (!pgid)
		pgid = pid;
	ready = itest_read_line(p[0], line, sizeof(line)) &&
		sscanf(line, "ready %31s %31s", addr, size) == 2;
	close(p[0]);
	if (!ready)
		return -1;
	snprintf(jit_addr, sizeof(jit_addr), "%s", addr);
	snprintf(jit_size, sizeof(jit_size), "%s", size);
	return pid;
}

/* Entries [from, from + n) above the generated code, node's form. */
static void add_entries(FILE *f, const char *name, int from, int n)
{
	for (int i = from; i < from + n; i++)
		fprintf(f,
			"%llx 40 LazyCompile:*%sFn%d /srv/app/m%d.js:%d:%d\n",
			0x3f0000000000ull + (unsigned long long)i * 64, name, i,
			i % 1000, i % 5000, i % 80);
}

/*
 * Writes a perf map at path (a new file of nobody's): first the fixture's
 * generated code named name, then n more entries above it.
 */
static bool write_map(const char *path, const char *name, int n)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
	bool ok;

	if (!f) {
		if (fd >= 0)
			close(fd);
		return false;
	}
	fprintf(f, "%s %s %s\n", jit_addr, jit_size, name);
	add_entries(f, name, 0, n);
	ok = fchown(fd, SEC_NOBODY, SEC_NOBODY) == 0;
	return fclose(f) == 0 && ok;
}

/* Appends entries [from, from + n) to the map at path, as a JIT does. */
static bool grow_map(const char *path, const char *name, int from, int n)
{
	FILE *f = fopen(path, "ae");

	if (!f)
		return false;
	add_entries(f, name, from, n);
	return fclose(f) == 0;
}

/* Makes the file at path (a hard link to it) pid's perf map, at once. */
static bool place_map(const char *path, pid_t pid)
{
	char tmp[128], map[64];

	snprintf(tmp, sizeof(tmp), "%s/link-%d", work, (int)pid);
	snprintf(map, sizeof(map), "/tmp/perf-%d.map", (int)pid);
	unlink(tmp);
	return link(path, tmp) == 0 && rename(tmp, map) == 0;
}

/* A small map of its own for pid, naming its code name. */
static bool small_map(pid_t pid, const char *name)
{
	char path[128];

	snprintf(path, sizeof(path), "%s/%s-%d.map", work, name, (int)pid);
	unlink(path);
	return write_map(path, name, 0) && place_map(path, pid);
}

/* The function of the first [jit] frame of a process's JSON, or NULL. */
static const char *jit_function(cJSON *j)
{
	cJSON *g, *f;

	cJSON_ArrayForEach(g, cJSON_GetObjectItem(j, "groups"))
	{
		cJSON_ArrayForEach(f, cJSON_GetObjectItem(g, "frames"))
		{
			cJSON *m = cJSON_GetObjectItem(f, "module");
			cJSON *fn = cJSON_GetObjectItem(f, "function");

			if (cJSON_IsString(m) &&
			    !strcmp(m->valuestring, "[jit]"))
				return cJSON_IsString(fn) ? fn->valuestring
							  : "";
		}
	}
	return NULL;
}

/*
 * Dumps pid as root (a fresh dump: each call waits out the daemon's
 * 1/30 s cache). Whether its [jit] frame is named want (NULL: none is).
 * *json, when not NULL, gets the answer.
 */
static bool dump_names(const struct itest_daemon *d, pid_t pid,
		       const char *want, cJSON **json)
{
	char path[96];
	const char *got;
	cJSON *j = NULL;
	bool ok;

	itest_sleep_ms(40);
	snprintf(path, sizeof(path), "/api/v1/stacks?pid=%d", (int)pid);
	ok = sec_root_get(d, path, 10000, &j) == 200 && j;
	got = j ? jit_function(j) : NULL;
	ok = ok && (want ? got && !strcmp(got, want) : !got);
	if (json)
		*json = j;
	else
		cJSON_Delete(j);
	return ok;
}

struct dumper {
	const struct itest_daemon *d;
	pid_t pid;
	const char *want;
	bool named;
};

static void *dumper_main(void *arg)
{
	struct dumper *w = arg;

	w->named = dump_names(w->d, w->pid, w->want, NULL);
	return NULL;
}

/* ------------------------------------------------ the default limits */

/* Eight dumps at once, one per process; how many named want. */
static int dump_all_at_once(const struct itest_daemon *d, const char *want)
{
	struct dumper w[NPROC];
	pthread_t th[NPROC];
	int named = 0;

	for (int i = 0; i < NPROC; i++) {
		w[i] = (struct dumper){ d, procs[i], want, false };
		pthread_create(&th[i], NULL, dumper_main, &w[i]);
	}
	for (int i = 0; i < NPROC; i++) {
		pthread_join(th[i], NULL);
		named += w[i].named;
	}
	return named;
}

static void test_shared(const struct itest_daemon *d)
{
	char s1[128], s2[128];
	long rss0, rss1, rss8, rss_before, peak, rss_after, copy;
	int named = 0, placed = 0;

	for (int i = 0; i < NPROC; i++)
		named += small_map(procs[i], "own") &&
			 dump_names(d, procs[i], "own", NULL);
	TAP_OK(named == NPROC,
	       "each process's own map names its generated code (%d/%d)", named,
	       NPROC);

	snprintf(s1, sizeof(s1), "%s/shared1.map", work);
	snprintf(s2, sizeof(s2), "%s/shared2.map", work);
	TAP_OK(write_map(s1, "shared1", SHARED_ENTRIES) &&
		       write_map(s2, "shared2", SHARED_ENTRIES),
	       "two maps of %d entries", SHARED_ENTRIES);
	for (int i = 0; i < NPROC; i++)
		placed += place_map(s1, procs[i]);
	TAP_OK(placed == NPROC, "the first hard-linked as the eight maps");

	rss0 = status_kib(d->pid, "VmRSS");
	named = dump_names(d, procs[0], "shared1", NULL);
	rss1 = status_kib(d->pid, "VmRSS");
	for (int i = 1; i < NPROC; i++)
		named += dump_names(d, procs[i], "shared1", NULL);
	rss8 = status_kib(d->pid, "VmRSS");
	copy = rss1 - rss0;
	TAP_OK(named == NPROC, "all eight name their code from it (%d/%d)",
	       named, NPROC);
	if (SEC_SANITIZED) {
		TAP_SKIP("the RSS of a sanitized daemon is its allocator's");
	} else {
		TAP_OK(copy > 1024 && rss8 - rss1 < copy / 2,
		       "kept once: the first dump took %ld KiB, the seven "
		       "others %ld KiB",
		       copy, rss8 - rss1);
	}

	placed = 0;
	for (int i = 0; i < NPROC; i++)
		placed += place_map(s2, procs[i]);
	rss_before = status_kib(d->pid, "VmRSS");
	if (!reset_peak(d->pid))
		TAP_NOTE("cannot reset the daemon's peak memory");
	named = dump_all_at_once(d, "shared2");
	peak = status_kib(d->pid, "VmHWM");
	rss_after = status_kib(d->pid, "VmRSS");
	TAP_OK(placed == NPROC && named == NPROC,
	       "the second map in its place, eight dumps at once: all name "
	       "their code from it (%d/%d)",
	       named, NPROC);
	if (SEC_SANITIZED) {
		TAP_SKIP("the RSS of a sanitized daemon is its allocator's");
	} else {
		TAP_OK(copy > 1024 && peak - rss_before < copy * 3 / 2,
		       "parsed once: the daemon's peak grew by %ld KiB (one "
		       "copy: %ld KiB)",
		       peak - rss_before, copy);
		TAP_OK(rss_after - rss_before < copy / 2,
		       "and it keeps one copy: %ld KiB more than before",
		       rss_after - rss_before);
	}
}

static void with_default_limits(void)
{
	static const char *const args[] = { "--sample-interval", "0", NULL };
	struct itest_daemon d;

	if (itest_daemon_start_args(&d, args) < 0) {
		TAP_OK(false, "daemon starts with the default limits");
		return;
	}
	test_shared(&d);
	TAP_OK(itest_alive(d.pid), "the daemon is alive after it all");
	TAP_OK(itest_daemon_stop(&d) == 0, "the daemon stops cleanly");
	itest_daemon_cleanup(&d);
}

/* ------------------------------------------------- --max-jit-mib 4 */

/* Lines of the daemon's log that hold what and " n". */
static int log_count(const struct itest_daemon *d, const char *what, int n)
{
	char line[1024], num[16];
	int count = 0;
	FILE *f = fopen(d->log, "re");

	snprintf(num, sizeof(num), " %d", n);
	while (f && fgets(line, sizeof(line), f))
		count += strstr(line, what) && strstr(line, num);
	if (f)
		fclose(f);
	return count;
}

/*
 * Two processes share a map of about 2.5 MiB that then grows past half the
 * limit: while the other holds the old version, the first to look may find
 * no room for the new one; once the other took it, both use it.
 */
static void test_growing(const struct itest_daemon *d)
{
	pid_t a = procs[2], b = procs[3];
	char path[128];
	bool ok;

	snprintf(path, sizeof(path), "%s/grow.map", work);
	ok = write_map(path, "grow", 36000) && place_map(path, a) &&
	     place_map(path, b);
	TAP_OK(ok && dump_names(d, a, "grow", NULL) &&
		       dump_names(d, b, "grow", NULL),
	       "a map of 36000 entries shared by two processes names both");
	ok = grow_map(path, "grow", 36000, 4000);
	(void)dump_names(d, a, "grow", NULL); /* room or not: either */
	ok = ok && dump_names(d, b, "grow", NULL);
	TAP_OK(ok && dump_names(d, a, "grow", NULL),
	       "grown to 40000 entries (half the limit and more): the "
	       "second to look takes it, and then the first uses it too");
}

static void test_over_limit(const struct itest_daemon *d)
{
	pid_t small = procs[0], big = procs[1];
	char path[128], target[96];
	struct http_opts o;
	struct http_response r;
	long rss_before, peak, rss_after;
	const char *why;
	cJSON *j = NULL;
	bool refused, text;

	TAP_OK(small_map(small, "small") && dump_names(d, small, "small", NULL),
	       "a small map names the generated code");

	snprintf(path, sizeof(path), "%s/big.map", work);
	TAP_OK(write_map(path, "big", BIG_ENTRIES) && place_map(path, big),
	       "a map of %d entries for another process", BIG_ENTRIES);
	rss_before = status_kib(d->pid, "VmRSS");
	if (!reset_peak(d->pid))
		TAP_NOTE("cannot reset the daemon's peak memory");
	refused = dump_names(d, big, NULL, &j);
	peak = status_kib(d->pid, "VmHWM");
	rss_after = status_kib(d->pid, "VmRSS");
	why = cJSON_GetStringValue(cJSON_GetObjectItem(j, "jit_map_refused"));
	TAP_OK(refused && why && strstr(why, "--max-jit-mib") &&
		       strstr(why, "perf-"),
	       "it is refused, its frame unnamed: \"jit_map_refused\": %s",
	       why ? why : "(none)");
	cJSON_Delete(j);
	if (SEC_SANITIZED) {
		TAP_SKIP("the RSS of a sanitized daemon is its allocator's");
	} else {
		TAP_OK(peak - rss_before < 7 * 1024,
		       "the parse stopped at the limit: the daemon's peak grew "
		       "by %ld KiB (limit 4096)",
		       peak - rss_before);
		TAP_OK(rss_after - rss_before < 1024,
		       "and nothing of it is kept: %ld KiB more",
		       rss_after - rss_before);
	}

	itest_sleep_ms(40);
	snprintf(target, sizeof(target), "/api/v1/stacks?pid=%d&format=text",
		 (int)big);
	http_opts_init(&o);
	o.timeout_ms = 10000;
	memset(&r, 0, sizeof(r));
	text = http_get(d->url, target, &o, &r) == 0 && r.status == 200 &&
	       r.body && strstr(r.body, "\n(perf map /tmp/perf-") &&
	       strstr(r.body, "(--max-jit-mib))\n");
	TAP_OK(text, "the text format says so too");
	if (!text && r.body)
		TAP_NOTE("%.400s", r.body);
	http_response_release(&r);
	refused = dump_names(d, big, NULL, NULL);
	TAP_OK(refused && log_count(d, "--max-jit-mib", big) == 1,
	       "three dumps, one line in the log (%d)",
	       log_count(d, "--max-jit-mib", big));
	TAP_OK(dump_names(d, small, "small", NULL),
	       "the small map still names its process's code");
	TAP_OK(small_map(big, "again") && dump_names(d, big, "again", NULL),
	       "a small map in place of the big one names the code again");
	test_growing(d);
}

static void with_small_limit(void)
{
	static const char *const args[] = { "--sample-interval", "0",
					    "--max-jit-mib", "4", NULL };
	struct itest_daemon d;

	if (itest_daemon_start_args(&d, args) < 0) {
		TAP_OK(false, "daemon starts with --max-jit-mib 4");
		return;
	}
	test_over_limit(&d);
	TAP_OK(itest_alive(d.pid), "the daemon is alive after it all");
	TAP_OK(itest_daemon_stop(&d) == 0, "the daemon stops cleanly");
	itest_daemon_cleanup(&d);
}

int main(void)
{
	char cmd[96], map[64];
	int started = 0;

	if (geteuid() != 0) {
		TAP_SKIP("needs root: the daemon runs as root, the processes "
			 "as nobody");
		return tap_done();
	}
#if !defined(__x86_64__)
	TAP_SKIP("the fixture generates x86-64 code");
	return tap_done();
#endif
	snprintf(fixture, sizeof(fixture), "%s/fixtures/jit_target",
		 itest_target_build());
	if (!mkdtemp(work) || chmod(work, 0755) < 0) {
		TAP_OK(false, "a work directory");
		return tap_done();
	}
	for (int i = 0; i < NPROC; i++) {
		procs[i] = start_jit();
		started += procs[i] > 0;
	}
	TAP_OK(started == NPROC,
	       "eight processes of nobody run generated code (%d)", started);
	if (started == NPROC) {
		with_default_limits();
		with_small_limit();
	}
	if (pgid > 0)
		kill(-pgid, SIGKILL);
	for (int i = 0; i < NPROC; i++) {
		if (procs[i] > 0)
			waitpid(procs[i], NULL, 0);
		snprintf(map, sizeof(map), "/tmp/perf-%d.map", (int)procs[i]);
		unlink(map);
	}
	TAP_OK(pgid > 0 && kill(-pgid, 0) < 0 && errno == ESRCH,
	       "no process of the test is left");
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", work);
	if (system(cmd) != 0)
		TAP_NOTE("could not remove %s", work);
	return tap_done();
}
