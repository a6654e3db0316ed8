/*
 * test_it_kread.c - threads of processes without the agent read from the
 * kernel (src/kread/): the real daemon, its snapshot helper's BPF task
 * iterator, real blocked and busy threads (tests/fixtures/kread_target).
 *
 * - first: a dump asked for as soon as the daemon listens, before it has
 *   heard from its helper whether it reads from the kernel, is counted
 *   in /metrics as the kernel read it is;
 * - blocked: threads in clock_nanosleep(), poll(), epoll_wait(),
 *   sigtimedwait(), and one in read() under SECCOMP_MODE_STRICT, dumped
 *   200 times: each read by "kernel" (its stack in the function it waits
 *   in, whether copied or kept), not one context switch more for any
 *   of them (a ptrace stop wakes a thread: its counts grow), no call
 *   returns early, the strict thread still answers;
 * - churn: threads that wake and block in a tight loop, each kind
 *   through call chains of its own, dumped 300 times back to back: every
 *   stack read whole, by the kernel, a perf sample or ptrace, is a chain
 *   the program can have (a copy torn by the thread running meanwhile
 *   would mix frames of two moments);
 * - leak: 10,000 dumps of a small process by one daemon (as many as
 *   35 s allow on a machine too busy for that) leave the helper's
 *   descriptors, its BPF programs, links and maps, its reader entries
 *   and the daemon's descriptors as they were;
 * - fallback: a daemon without the privilege for BPF, and one told
 *   --no-kernel-reads (or --kernel-reads=no), say so in /api/v1/status and
 *   in their log, and still dump by ptrace; the normal one says kernel
 *   reads are active.
 *
 * Needs root (the daemon's helper traces, and loads BPF). A kernel that
 * cannot run the reader (no BTF, older than 6.1: the daemon says why)
 * skips what needs it. Each part can be run alone: test_it_kread
 * [first|blocked|churn|leak|fallback]...
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <dirent.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/stat.h>

#include "itest.h"
#include "tap.h"

static char fixture[512];

/*
 * The daemon answers a request within 1/--max-dump-rate s of the last
 * dump of the same process with that dump: at 1000 a second, nearly
 * every request is a fresh read (/metrics tells which were). The first
 * dump loads libc's debug information, which on a busy machine takes
 * longer than the default 500 ms that a dump may spend on symbols.
 */
static const char *const fast[] = { "--sample-interval", "0",
				    "--max-dump-rate=1000",
				    "--symbolize-budget=20000", NULL };
/* The same, with the line "kernel reads: on" (at info) in the log. */
static const char *const fast_info[] = {
	"--sample-interval",	"0",
	"--max-dump-rate=1000", "--symbolize-budget=20000",
	"--log-level=info",	NULL
};

/* Starts kread_target mode in a process group of its own; waits "ready". */
static int fix_start(struct itest_fix *f, const char *mode)
{
	return itest_fix_start(f, fixture, mode, NULL) ? 0 : -1;
}

/* The first letter of a task's State line ('?' when unreadable). */
static char task_state(pid_t pid, pid_t tid)
{
	char path[96], line[128];
	char st = '?';
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/task/%d/status", (int)pid,
		 (int)tid);
	f = fopen(path, "re");
	while (f && fgets(line, sizeof(line), f))
		if (strncmp(line, "State:", 6) == 0) {
			const char *s = line + 6;

			while (*s == ' ' || *s == '\t')
				s++;
			st = *s;
			break;
		}
	if (f)
		fclose(f);
	return st;
}

/* Waits (10 s at most) until pid has n tasks, every one asleep ('S'). */
static bool all_asleep(pid_t pid, int n)
{
	pid_t tids[64];

	for (long end = itest_now_ms() + 10000; itest_now_ms() < end;) {
		int k = itest_tids(pid, tids, 64), asleep = 0;

		for (int i = 0; i < k; i++)
			asleep += task_state(pid, tids[i]) == 'S';
		if (k == n && asleep == n)
			return true;
		itest_sleep_ms(5);
	}
	return false;
}

/* GET the stacks of pid as JSON (NULL on failure, *status the code). */
static cJSON *stacks_of(const struct itest_daemon *d, pid_t pid, int *status)
{
	char target[96];

	snprintf(target, sizeof(target),
		 "/api/v1/stacks?pid=%d&timeout_ms=5000", (int)pid);
	return itest_get_json(d, target, status);
}

static const char *str_of(cJSON *o, const char *key)
{
	const char *s = cJSON_GetStringValue(cJSON_GetObjectItem(o, key));

	return s ? s : "";
}

static cJSON *group_of(cJSON *doc, cJSON *thread)
{
	cJSON *id = cJSON_GetObjectItem(thread, "group"), *g;

	if (!cJSON_IsNumber(id))
		return NULL;
	cJSON_ArrayForEach(g, cJSON_GetObjectItem(doc, "groups"))
	{
		if (cJSON_GetObjectItem(g, "id")->valueint == id->valueint)
			return g;
	}
	return NULL;
}

/*
 * Whether the daemon's log has a line holding what, and also unless it
 * is NULL, within 5 s: main() writes its line on kernel reads after
 * it listens.
 */
static bool log_has(const struct itest_daemon *d, const char *what,
		    const char *also)
{
	char line[512];
	bool found = false;

	for (long end = itest_now_ms() + 5000; !found;) {
		FILE *f = fopen(d->log, "re");

		while (f && !found && fgets(line, sizeof(line), f))
			found = strstr(line, what) &&
				(!also || strstr(line, also));
		if (f)
			fclose(f);
		if (found || itest_now_ms() >= end)
			break;
		itest_sleep_ms(10);
	}
	return found;
}

/* --- first --------------------------------------------------------- */

#define FIRST_ROUNDS 5

/*
 * The daemon listens before it has asked its helper whether it reads
 * from the kernel (the helper loads its BPF program first): a dump asked
 * for at once is read from the kernel all the same, and must be counted
 * as such. Each round starts a daemon and dumps a blocked process as soon
 * as the daemon listens.
 */
static void test_first(void)
{
	int counted = 0, rounds = 0;
	struct itest_fix f;

	if (fix_start(&f, "idle") < 0 || !all_asleep(f.pid, 1)) {
		TAP_OK(0, "first: the fixture starts");
		itest_fix_stop(&f);
		return;
	}
	for (; rounds < FIRST_ROUNDS; rounds++) {
		struct itest_daemon d;
		cJSON *doc;
		int status;

		if (itest_daemon_start_args(&d, fast) < 0) {
			itest_daemon_cleanup(&d);
			break;
		}
		doc = stacks_of(&d, f.pid, &status);
		counted += status == 200 &&
			   itest_metric(&d, "stackwatch_kernel_reads_total") ==
				   1 &&
			   itest_metric(&d, "stackwatch_threads_read_total{"
					    "method=\"kernel\"}") == 1;
		cJSON_Delete(doc);
		if (itest_daemon_stop(&d) != 0)
			break;
		itest_daemon_cleanup(&d);
	}
	TAP_OK(rounds == FIRST_ROUNDS && counted == FIRST_ROUNDS,
	       "first: a dump asked for as soon as the daemon listens is "
	       "counted as one kernel read of one thread (%d of %d rounds)",
	       counted, rounds);
	TAP_OK(itest_fix_stop(&f), "first: nothing of the fixture is left");
}

/* --- blocked ------------------------------------------------------- */

/* Dumps taken afresh (a cached answer is not counted). */
#define DUMPS_OK "stackwatch_dumps_total{result=\"ok\"}"

/* main, sleeper, poller, epoller, sigwaiter, strict */
#define BLOCKED_THREADS 6
#define BLOCKED_DUMPS 200

/* The function each thread of "blocked" waits in, by thread name. */
static const char *const blocked_in[][2] = {
	{ "kread_target", "blocked" }, { "sleeper", "sleeper" },
	{ "poller", "poller" },	       { "epoller", "epoller" },
	{ "sigwaiter", "sigwaiter" },  { "strict", "strict" },
};

/* Whether thread t's stack in doc holds the function its name says. */
static bool own_frame(cJSON *doc, cJSON *t)
{
	cJSON *g = group_of(doc, t), *f;
	const char *want = NULL;

	for (size_t i = 0; i < sizeof(blocked_in) / sizeof(blocked_in[0]); i++)
		if (strcmp(str_of(t, "name"), blocked_in[i][0]) == 0)
			want = blocked_in[i][1];
	cJSON_ArrayForEach(f, cJSON_GetObjectItem(g, "frames"))
	{
		if (want && strcmp(str_of(f, "function"), want) == 0)
			return true;
	}
	return false;
}

static void test_blocked(const struct itest_daemon *d)
{
	pid_t tids[BLOCKED_THREADS + 1], strict_tid = 0;
	long sw0[BLOCKED_THREADS], moved_at = -1, moved_from = 0, moved_to = 0;
	char bad[256] = "", moved[64] = "", line[128], path[96],
	     wrong_at[64] = "";
	double dumps0, kreads0, kthreads0, kreads, kthreads, memo0, memo;
	int n, answered = 0, not_kernel = 0, fresh = 0, wrong = 0;
	bool partial;
	struct itest_fix f;

	if (fix_start(&f, "blocked") < 0 ||
	    !all_asleep(f.pid, BLOCKED_THREADS)) {
		TAP_OK(0, "blocked: the fixture's %d threads block",
		       BLOCKED_THREADS);
		itest_fix_stop(&f);
		return;
	}
	n = itest_tids(f.pid, tids, BLOCKED_THREADS + 1);
	for (int i = 0; i < n; i++)
		sw0[i] = itest_task_switches(f.pid, tids[i]);
	dumps0 = itest_metric(d, DUMPS_OK);
	kreads0 = itest_metric(d, "stackwatch_kernel_reads_total");
	kthreads0 = itest_metric(
		d, "stackwatch_threads_read_total{method=\"kernel\"}");
	memo0 = itest_metric(d,
			     "stackwatch_dumps_symbolized_from_memory_total");
	for (int k = 0; fresh < BLOCKED_DUMPS && k < 5 * BLOCKED_DUMPS; k++) {
		int status;
		cJSON *doc = stacks_of(d, f.pid, &status), *t;

		answered += status == 200 && doc;
		fresh = (int)(itest_metric(d, DUMPS_OK) - dumps0);
		partial = cJSON_IsTrue(
			cJSON_GetObjectItem(doc, "symbols_partial"));
		cJSON_ArrayForEach(t, cJSON_GetObjectItem(doc, "threads"))
		{
			if (strcmp(str_of(t, "name"), "strict") == 0)
				strict_tid =
					(pid_t)cJSON_GetObjectItem(t, "tid")
						->valueint;
			if (strcmp(str_of(t, "status"), "ok") == 0 &&
			    !partial && !own_frame(doc, t) && !wrong++)
				snprintf(wrong_at, sizeof(wrong_at),
					 "dump %d: %s", k + 1,
					 str_of(t, "name"));
			if (strcmp(str_of(t, "status"), "ok") == 0 &&
			    strcmp(str_of(t, "method"), "kernel") == 0)
				continue;
			if (!not_kernel++)
				snprintf(bad, sizeof(bad),
					 "dump %d: %s status %s method '%s'",
					 k + 1, str_of(t, "name"),
					 str_of(t, "status"),
					 str_of(t, "method"));
		}
		cJSON_Delete(doc);
		for (int i = 0; i < n && moved_at < 0; i++) {
			long now = itest_task_switches(f.pid, tids[i]);

			if (now == sw0[i])
				continue;
			moved_at = k + 1;
			moved_from = sw0[i];
			moved_to = now;
			snprintf(moved, sizeof(moved), "tid %d", (int)tids[i]);
		}
	}
	TAP_OK(n == BLOCKED_THREADS && fresh == BLOCKED_DUMPS &&
		       answered >= fresh,
	       "blocked: %d dumps of its %d threads read afresh and answered "
	       "(%d of %d answers)",
	       BLOCKED_DUMPS, n, fresh, answered);
	TAP_OK(not_kernel == 0,
	       "blocked: every thread of every dump read whole by \"kernel\" "
	       "(%d not; first: %s)",
	       not_kernel, bad);
	TAP_OK(wrong == 0,
	       "blocked: each thread's stack holds the function it blocks in "
	       "(%d not; first: %s)",
	       wrong, wrong_at);
	TAP_OK(moved_at < 0,
	       "blocked: no thread switched once over %d dumps (first: %s "
	       "at dump %ld, %ld -> %ld switches)",
	       BLOCKED_DUMPS, moved, moved_at, moved_from, moved_to);
	/* Stacks that did not change were named as before, from memory
	 * (and each held its function, above). */
	memo = itest_metric(d,
			    "stackwatch_dumps_symbolized_from_memory_total") -
	       memo0;
	TAP_OK(memo >= fresh / 2 && memo <= fresh,
	       "blocked: the symbols of stacks that did not change were "
	       "named from memory, not by a parser (%g of %d dumps)",
	       memo, fresh);
	kreads = itest_metric(d, "stackwatch_kernel_reads_total") - kreads0;
	kthreads =
		itest_metric(
			d, "stackwatch_threads_read_total{method=\"kernel\"}") -
		kthreads0;
	TAP_OK(kreads == fresh && kthreads == fresh * BLOCKED_THREADS,
	       "blocked: /metrics counts %d threads read by the kernel in "
	       "%d kernel reads (%g, %g)",
	       fresh * BLOCKED_THREADS, fresh, kthreads, kreads);
	line[0] = '\0';
	if (write(f.in, "\n", 1) != 1 ||
	    !itest_read_line(f.out, line, sizeof(line)))
		line[0] = '\0';
	TAP_OK(strncmp(line, "early 0 0 0 0 ", 14) == 0,
	       "blocked: no sleep, poll, epoll_wait or sigtimedwait returned "
	       "early (%s)",
	       line);
	snprintf(path, sizeof(path), "/proc/%d/task/%d", (int)f.pid,
		 (int)strict_tid);
	TAP_OK(strstr(line, "strict=alive") && strict_tid > 0 &&
		       access(path, F_OK) == 0,
	       "blocked: the thread under SECCOMP_MODE_STRICT lives and "
	       "answers");
	TAP_OK(itest_fix_stop(&f), "blocked: nothing of the fixture is left");
}

/* --- churn --------------------------------------------------------- */

#define CHURN_DUMPS 300

/* A kind of thread of "churn": its name and its functions, outermost first. */
struct kind {
	const char *name;
	const char *chain[4];
};

static const struct kind kinds[] = {
	{ "sleepy",
	  { "kr_sleepy_main", "kr_sleepy_1", "kr_sleepy_2", "kr_sleepy_3" } },
	{ "pinger", { "kr_ping_main", "kr_ping_1", "kr_ping_2", "kr_ping_3" } },
	{ "busy", { "kr_busy_main", "kr_busy_1", "kr_busy_2", "kr_busy_3" } },
};

/*
 * Whether frames (innermost first) are a stack thread kind k can have.
 * Read outward: start_thread, then k's own chain from its first
 * function on (a prefix of it), then libc's frames, only below the leaf
 * (the one function of k that calls into libc). Says why not in why,
 * with the functions seen.
 *
 * One shorter stack is the program's too: a thread stopped on the ret
 * of one of its functions, after leave, whose caller's frame pointer
 * the CFI then finds in the slot just popped, below sp, which no copy
 * holds. Its stack ends at that caller: the innermost frame is k's, one
 * frame of k's outside it at most, and nothing after. *cut says so.
 */
static bool chain_ok(const struct kind *k, cJSON *frames, char *why,
		     size_t size, bool *cut)
{
	const char *fn[64];
	char seen[512], reason[128] = "";
	int n = 0, first = -1, last = -1, from = -1;
	size_t len = 0;
	cJSON *f;

	*cut = false;
	cJSON_ArrayForEach(f, frames)
	{
		if (!cJSON_IsTrue(cJSON_GetObjectItem(f, "inlined")) && n < 64)
			fn[n++] = str_of(f, "function");
	}
	seen[0] = '\0';
	for (int i = 0; i < n && len < sizeof(seen); i++) {
		len += (size_t)snprintf(seen + len, sizeof(seen) - len, "%s%s",
					i ? " < " : "", fn[i]);
		if (strncmp(fn[i], "kr_", 3) == 0) {
			if (first < 0)
				first = i;
			last = i;
		}
	}
	for (int c = 0; last >= 0 && c < 4; c++)
		if (strcmp(fn[last], k->chain[c]) == 0)
			from = c;
	if (first < 0)
		snprintf(reason, sizeof(reason), "none of its own functions");
	else if (from < 0)
		snprintf(reason, sizeof(reason), "%s is not %s's", fn[last],
			 k->name);
	/* Read outward, the run is chain[from], chain[from + 1], ... */
	for (int i = last, c = from; !reason[0] && i >= first; i--, c++)
		if (c >= 4 || strcmp(fn[i], k->chain[c]) != 0)
			snprintf(reason, sizeof(reason), "%s where %s was due",
				 fn[i], c < 4 ? k->chain[c] : "nothing");
	if (!reason[0] && first > 0 && strcmp(fn[first], k->chain[3]) != 0)
		snprintf(reason, sizeof(reason),
			 "%s called %s, which it never calls", fn[first],
			 fn[first - 1]);
	if (!reason[0] && last + 1 < n &&
	    (strcmp(fn[last + 1], "start_thread") != 0 || from != 0))
		snprintf(reason, sizeof(reason), "%s outside %s", fn[last + 1],
			 fn[last]);
	if (!reason[0] && last + 1 == n) {
		*cut = true;
		if (first != 0 || last > 1)
			snprintf(reason, sizeof(reason),
				 "it ends at %s, not stopped on a return",
				 fn[last]);
	}
	if (reason[0])
		snprintf(why, size, "%s (%s)", reason, seen);
	return !reason[0];
}

static const struct kind *kind_named(const char *name)
{
	for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++)
		if (strcmp(kinds[i].name, name) == 0)
			return &kinds[i];
	return NULL;
}

static void test_churn(const struct itest_daemon *d)
{
	int answered = 0, checked = 0, bad = 0, not_ok = 0, by_kernel = 0,
	    by_perf = 0, by_ptrace = 0, fresh = 0, nocut = 0, partial = 0;
	double dumps0;
	char first_bad[900] = "";
	struct itest_fix f;

	if (fix_start(&f, "churn") < 0) {
		TAP_OK(0, "churn: the fixture starts");
		itest_fix_stop(&f);
		return;
	}
	dumps0 = itest_metric(d, DUMPS_OK);
	for (int k = 0; fresh < CHURN_DUMPS && k < 5 * CHURN_DUMPS; k++) {
		int status;
		cJSON *doc = stacks_of(d, f.pid, &status), *t;

		answered += status == 200 && doc;
		fresh = (int)(itest_metric(d, DUMPS_OK) - dumps0);
		if (cJSON_IsTrue(cJSON_GetObjectItem(doc, "symbols_partial"))) {
			partial++; /* frames left raw: nothing to compare */
			cJSON_Delete(doc);
			continue;
		}
		cJSON_ArrayForEach(t, cJSON_GetObjectItem(doc, "threads"))
		{
			const struct kind *kd = kind_named(str_of(t, "name"));
			const char *method = str_of(t, "method");
			cJSON *g = group_of(doc, t);
			char why[700];
			bool cut;

			if (!kd)
				continue; /* the main thread */
			if (strcmp(str_of(t, "status"), "ok") != 0) {
				not_ok++;
				continue;
			}
			checked++;
			by_kernel += strcmp(method, "kernel") == 0;
			by_perf += strcmp(method, "perf") == 0;
			by_ptrace += strcmp(method, "ptrace") == 0;
			if (g && chain_ok(kd, cJSON_GetObjectItem(g, "frames"),
					  why, sizeof(why), &cut)) {
				nocut += !cut;
				continue;
			}
			if (!bad++)
				snprintf(
					first_bad, sizeof(first_bad),
					"dump %d, %s %d read by %s: %s", k + 1,
					kd->name,
					cJSON_GetObjectItem(t, "tid")->valueint,
					method, g ? why : "no group");
		}
		cJSON_Delete(doc);
	}
	TAP_OK(fresh == CHURN_DUMPS && answered >= fresh,
	       "churn: %d dumps read afresh and answered (%d of %d answers)",
	       CHURN_DUMPS, fresh, answered);
	TAP_OK(checked > 0 && bad == 0,
	       "churn: each of the %d stacks read whole is a call chain the "
	       "program can have (%d not; first: %s)",
	       checked, bad, first_bad);
	TAP_OK(by_kernel + by_perf + by_ptrace == checked,
	       "churn: each was read by the kernel, by perf or by ptrace");
	TAP_OK(by_kernel > 0, "churn: the kernel read some of them");
	TAP_NOTE("churn: %d read by the kernel, %d by perf, %d by ptrace, %d "
		 "not read whole, in %d answers (%d not symbolized in time); "
		 "%d stacks ended on a return",
		 by_kernel, by_perf, by_ptrace, not_ok, answered, partial,
		 checked - bad - nocut);
	TAP_OK(itest_fix_stop(&f), "churn: nothing of the fixture is left");
}

/* --- leak ---------------------------------------------------------- */

#define LEAK_READS 10000 /* kernel reads measured */
#define LEAK_WARMUP 100	 /* before: buffers and caches grow */
#define LEAK_MS 35000	 /* at most */
#define LEAK_MIN 2000	 /* in LEAK_MS, on the busiest machine */
#define LEAK_CLIENTS 2	 /* one per fixture */

/* What a process holds: descriptors, and of them BPF objects by kind. */
struct holds {
	int fds, progs, links, maps;
};

static void holds_of(pid_t pid, struct holds *h)
{
	char path[64], file[320], line[128];
	struct dirent *e;
	DIR *dir;

	memset(h, 0, sizeof(*h));
	h->fds = -1;
	snprintf(path, sizeof(path), "/proc/%d/fdinfo", (int)pid);
	dir = opendir(path);
	if (!dir)
		return;
	h->fds = 0;
	while ((e = readdir(dir))) {
		bool link = false, prog = false, map = false;
		FILE *f;

		if (!isdigit((unsigned char)e->d_name[0]))
			continue;
		h->fds++;
		snprintf(file, sizeof(file), "%s/%s", path, e->d_name);
		f = fopen(file, "re");
		while (f && fgets(line, sizeof(line), f)) {
			link = link || strncmp(line, "link_id:", 8) == 0;
			prog = prog || strncmp(line, "prog_id:", 8) == 0;
			map = map || strncmp(line, "map_id:", 7) == 0;
		}
		if (f)
			fclose(f);
		h->links += link;
		h->progs += prog && !link; /* a link names its program */
		h->maps += map;
	}
	closedir(dir);
}

/* The entries of BPF map id (bpftool map dump), -1 when unreadable. */
static int map_entries(int id)
{
	char cmd[96], line[256];
	int n = 0;
	FILE *p;

	snprintf(cmd, sizeof(cmd), "bpftool -j map dump id %d 2>/dev/null", id);
	p = popen(cmd, "r");
	if (!p)
		return -1;
	while (fgets(line, sizeof(line), p))
		for (const char *s = line; (s = strstr(s, "\"key\"")); s++)
			n++;
	return pclose(p) == 0 ? n : -1;
}

/* The id of the BPF map named name among pid's descriptors, 0 if none. */
static int map_named(pid_t pid, const char *name)
{
	char cmd[160], want[64], line[512];
	int id = 0;
	FILE *p;

	snprintf(cmd, sizeof(cmd),
		 "for f in /proc/%d/fdinfo/*; do sed -n 's/^map_id:\t*//p' "
		 "\"$f\"; done | while read i; do bpftool map show id $i; "
		 "done 2>/dev/null",
		 (int)pid);
	snprintf(want, sizeof(want), " name %s ", name);
	p = popen(cmd, "r");
	while (p && fgets(line, sizeof(line), p))
		if (strstr(line, want))
			id = atoi(line);
	if (p)
		pclose(p);
	return id;
}

/* A client of the leak test: dumps its target until told to stop. */
struct client {
	const struct itest_daemon *d;
	char target[96];
	_Atomic bool *stop;
	int n, ok, bad;
};

/* Dumps c->target over the daemon's unix socket until *c->stop. */
static void *client_run(void *arg)
{
	struct client *c = arg;
	struct http_opts o;

	http_opts_init(&o);
	o.unix_socket = c->d->http_sock;
	while (!atomic_load(c->stop)) {
		struct http_response r;

		memset(&r, 0, sizeof(r));
		c->n++;
		if (http_get("http://localhost", c->target, &o, &r) == 0 &&
		    r.status == 200)
			c->ok++;
		else if (c->bad++ < 3)
			TAP_NOTE("client: answer %d: %.200s", r.status,
				 r.status ? (r.body ? r.body : "") : r.error);
		http_response_release(&r);
	}
	return NULL;
}

/*
 * One client per fixture, each dumping its own (so that none waits for
 * another's dump), until the helper has read want more processes from
 * the kernel or ms passed. Returns the reads done; *answers and *ok get
 * the requests made and those answered 200.
 */
static int dump_until(const struct itest_daemon *d, const struct itest_fix *f,
		      int want, long ms, int *answers, int *ok)
{
	struct client c[LEAK_CLIENTS];
	pthread_t t[LEAK_CLIENTS];
	_Atomic bool stop = false;
	double r0 = itest_metric(d, "stackwatch_kernel_reads_total"), r = r0;
	bool started[LEAK_CLIENTS];

	for (int i = 0; i < LEAK_CLIENTS; i++) {
		c[i] = (struct client){ .d = d, .stop = &stop };
		snprintf(c[i].target, sizeof(c[i].target),
			 "/api/v1/stacks?pid=%d", (int)f[i].pid);
		started[i] =
			pthread_create(&t[i], NULL, client_run, &c[i]) == 0;
	}
	for (long end = itest_now_ms() + ms;
	     r - r0 < want && itest_now_ms() < end;) {
		itest_sleep_ms(50);
		r = itest_metric(d, "stackwatch_kernel_reads_total");
	}
	atomic_store(&stop, true);
	*answers = *ok = 0;
	for (int i = 0; i < LEAK_CLIENTS; i++)
		if (started[i]) {
			pthread_join(t[i], NULL);
			*answers += c[i].n;
			*ok += c[i].ok;
		}
	return (int)(itest_metric(d, "stackwatch_kernel_reads_total") - r0);
}

/* Waits (2 s at most) until pid holds at most fds descriptors. */
static int fds_settle(pid_t pid, int fds)
{
	struct holds h;

	holds_of(pid, &h);
	for (long end = itest_now_ms() + 2000;
	     h.fds > fds && itest_now_ms() < end;) {
		itest_sleep_ms(20);
		holds_of(pid, &h);
	}
	return h.fds;
}

static void test_leak(void)
{
	struct itest_daemon d;
	struct holds h0, h1, d0;
	struct itest_fix f[LEAK_CLIENTS];
	long t0;
	int reads, answers, ok, ctls, entries = -1, dfds = -1;
	pid_t helper;
	bool up = true;

	for (int i = 0; i < LEAK_CLIENTS; i++)
		up = fix_start(&f[i], "idle") == 0 && up;
	if (up && itest_daemon_start_args(&d, fast) < 0) {
		itest_daemon_cleanup(&d);
		up = false;
	}
	if (!up) {
		TAP_OK(0, "leak: the fixtures and the daemon start");
		for (int i = 0; i < LEAK_CLIENTS; i++)
			itest_fix_stop(&f[i]);
		return;
	}
	helper = itest_first_child(d.pid);
	if (helper <= 0) {
		TAP_OK(0, "leak: the daemon has its helper");
		goto out;
	}
	reads = dump_until(&d, f, LEAK_WARMUP, 10000, &answers, &ok);
	holds_of(helper, &h0);
	holds_of(d.pid, &d0);
	ctls = map_named(helper, "ctls");
	t0 = itest_now_ms();
	reads = dump_until(&d, f, LEAK_READS, LEAK_MS, &answers, &ok);
	TAP_NOTE("leak: %d kernel reads in %d answers, %ld ms", reads, answers,
		 itest_now_ms() - t0);
	fds_settle(helper, h0.fds); /* its copy of the last answer's socket */
	holds_of(helper, &h1);
	if (reads < LEAK_READS)
		TAP_NOTE(
			"leak: a busy machine: %d kernel reads in %d s, not %d",
			reads, LEAK_MS / 1000, LEAK_READS);
	TAP_OK(reads >= LEAK_MIN && ok == answers,
	       "leak: %d more kernel reads (%d at the least, on a busy "
	       "machine), every answer a 200 (%d reads, %d of %d)",
	       LEAK_READS, LEAK_MIN, reads, ok, answers);
	TAP_OK(h0.progs >= 1 && h0.maps >= 1,
	       "leak: the helper holds its BPF program and maps (%d, %d)",
	       h0.progs, h0.maps);
	TAP_OK(h1.fds == h0.fds,
	       "leak: the helper's descriptors: %d after the first %d reads, "
	       "%d after %d more",
	       h0.fds, LEAK_WARMUP, h1.fds, reads);
	TAP_OK(h1.progs == h0.progs && h1.links == h0.links &&
		       h1.maps == h0.maps,
	       "leak: its BPF programs, links and maps: %d, %d, %d, then "
	       "%d, %d, %d",
	       h0.progs, h0.links, h0.maps, h1.progs, h1.links, h1.maps);
	if (ctls > 0)
		entries = map_entries(ctls);
	TAP_OK(entries == 0,
	       "leak: no reader's entry is left in its map ctls (%d, map %d)",
	       entries, ctls);
	dfds = fds_settle(d.pid, d0.fds);
	TAP_OK(dfds <= d0.fds,
	       "leak: the daemon's descriptors: %d, then %d once its "
	       "connections closed",
	       d0.fds, dfds);
out:
	up = true;
	for (int i = 0; i < LEAK_CLIENTS; i++)
		up = itest_fix_stop(&f[i]) && up;
	TAP_OK(up, "leak: nothing of the fixtures is left");
	TAP_OK(itest_daemon_stop(&d) == 0, "leak: the daemon stops cleanly");
	itest_daemon_cleanup(&d);
}

/* --- fallback ------------------------------------------------------ */

/* /api/v1/status's methods.kernel: active (1, 0; -1 if none), and why. */
static int kernel_status(const struct itest_daemon *d, char *why, size_t size)
{
	int status, active = -1;
	cJSON *doc = itest_get_json(d, "/api/v1/status", &status), *k;

	k = cJSON_GetObjectItem(cJSON_GetObjectItem(doc, "methods"), "kernel");
	if (status == 200 && cJSON_IsBool(cJSON_GetObjectItem(k, "active")))
		active = cJSON_IsTrue(cJSON_GetObjectItem(k, "active"));
	snprintf(why, size, "%s", str_of(k, "why"));
	cJSON_Delete(doc);
	return active;
}

/* Whether a dump of pid answers with every thread read whole by method. */
static bool all_read_by(const struct itest_daemon *d, pid_t pid,
			const char *method, int *threads)
{
	int status;
	cJSON *doc = stacks_of(d, pid, &status), *t;
	bool all = status == 200 && doc;

	*threads = 0;
	cJSON_ArrayForEach(t, cJSON_GetObjectItem(doc, "threads"))
	{
		(*threads)++;
		all = all && strcmp(str_of(t, "status"), "ok") == 0 &&
		      strcmp(str_of(t, "method"), method) == 0;
	}
	cJSON_Delete(doc);
	return all && *threads > 0;
}

/*
 * A daemon started under wrap with extra arguments, without kernel reads
 * for the reason named by reason (a word of its "why"): says so in
 * /api/v1/status and its log, and still dumps f by ptrace.
 */
static void fallback_one(const char *what, const char *const *wrap,
			 const char *const *extra, const char *reason,
			 const struct itest_fix *f)
{
	struct itest_daemon d;
	char why[256];
	int active, threads;
	bool all;

	if (itest_daemon_start_under(&d, wrap, extra) < 0) {
		TAP_OK(0, "fallback: the daemon %s starts", what);
		itest_daemon_cleanup(&d); /* its log said why */
		return;
	}
	active = kernel_status(&d, why, sizeof(why));
	TAP_OK(active == 0 && strstr(why, reason),
	       "fallback: the daemon %s says kernel reads are inactive, "
	       "naming %s (%d: '%s')",
	       what, reason, active, why);
	TAP_OK(log_has(&d, "kernel reads: off", reason),
	       "fallback: and its log says \"kernel reads: off\", naming %s",
	       reason);
	all = all_read_by(&d, f->pid, "ptrace", &threads);
	TAP_OK(all,
	       "fallback: it dumps a process, each of its %d threads by "
	       "ptrace",
	       threads);
	TAP_OK(itest_daemon_stop(&d) == 0,
	       "fallback: the daemon %s stops cleanly", what);
	itest_daemon_cleanup(&d);
}

static void test_fallback(const struct itest_daemon *d)
{
	static const char *const off[] = { "--sample-interval", "0",
					   "--no-kernel-reads", NULL };
	static const char *const no[] = { "--sample-interval", "0",
					  "--kernel-reads=no", NULL };
	static const char *const plain[] = { "--sample-interval", "0", NULL };
	/* CAP_SYS_ADMIN would do for both: it goes too. */
	static const char *const capsh[] = {
		"capsh",       "--drop=cap_bpf,cap_perfmon,cap_sys_admin",
		"--",	       "-c",
		"exec \"$@\"", "stackwatchd",
		NULL
	};
	char why[256];
	int active, threads;
	struct itest_fix f;
	bool all;

	if (fix_start(&f, "blocked") < 0 ||
	    !all_asleep(f.pid, BLOCKED_THREADS)) {
		TAP_OK(0, "fallback: the fixture starts");
		itest_fix_stop(&f);
		return;
	}
	active = kernel_status(d, why, sizeof(why));
	TAP_OK(active == 1 && !why[0],
	       "fallback: the normal daemon says kernel reads are active (%d)",
	       active);
	TAP_OK(log_has(d, "kernel reads: on", NULL),
	       "fallback: and its log says \"kernel reads: on\"");
	all = all_read_by(d, f.pid, "kernel", &threads);
	TAP_OK(all,
	       "fallback: it reads each of the %d blocked threads by the "
	       "kernel",
	       threads);
	fallback_one("with --no-kernel-reads", NULL, off, "--no-kernel-reads",
		     &f);
	fallback_one("with --kernel-reads=no", NULL, no, "turned off", &f);
	if (system("command -v capsh >/dev/null 2>&1") != 0)
		TAP_SKIP("fallback: capsh is not installed (libcap2-bin)");
	else
		fallback_one("without CAP_BPF, CAP_PERFMON, CAP_SYS_ADMIN",
			     capsh, plain, "privilege", &f);
	TAP_OK(itest_fix_stop(&f), "fallback: nothing of the fixture is left");
}

static bool wanted(int argc, char **argv, const char *part)
{
	if (argc < 2)
		return true;
	for (int i = 1; i < argc; i++)
		if (strcmp(argv[i], part) == 0)
			return true;
	return false;
}

/*
 * Whether this kernel can run the reader at all: the daemon's status,
 * unless it says the kernel has no BTF or refused the reader (then
 * false, why in why). A daemon that is not asked, or is denied for want
 * of privilege, is no reason to skip: it fails the checks.
 */
static bool kernel_can(const struct itest_daemon *d, char *why, size_t size)
{
	return kernel_status(d, why, size) == 1 ||
	       (!strstr(why, "no BTF") && !strstr(why, "refused the reader"));
}

int main(int argc, char **argv)
{
	struct itest_daemon d;
	char why[256];
	bool can;

	if (geteuid() != 0) {
		TAP_SKIP("needs root: the helper traces and loads BPF");
		return tap_done();
	}
	snprintf(fixture, sizeof(fixture), "%s/fixtures/kread_target",
		 itest_target_build());
	if (itest_daemon_start_args(&d, fast_info) < 0) {
		TAP_OK(0, "the daemon starts");
		itest_daemon_cleanup(&d);
		return tap_done();
	}
	can = kernel_can(&d, why, sizeof(why));
	if (!can)
		TAP_SKIP("this kernel cannot read threads: %s", why);
	if (can && wanted(argc, argv, "blocked"))
		test_blocked(&d);
	if (can && wanted(argc, argv, "churn"))
		test_churn(&d);
	if (can && wanted(argc, argv, "fallback"))
		test_fallback(&d);
	TAP_OK(itest_daemon_stop(&d) == 0, "the daemon stops cleanly");
	itest_daemon_cleanup(&d);
	if (can && wanted(argc, argv, "first"))
		test_first();
	if (can && wanted(argc, argv, "leak"))
		test_leak();
	return tap_done();
}
