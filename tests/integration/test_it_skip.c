/*
 * test_it_skip.c - dumps that leave some threads alone (the skip set of
 * DUMP_REQ), asked of the real agent in a real program over a socket of
 * the test's own, the way the daemon asks: the threads named are neither
 * signalled nor reported, every other one is dumped as ever.
 *
 * The program (agent_target sleepers) has sleepers blocked in poll(),
 * which a signal handler cuts short with EINTR whatever SA_RESTART says.
 * The skipped ones must sleep on until the test wakes them through their
 * pipe; the one not skipped, in the same process and the same dump, is
 * cut short, which shows that the check can fail. A second dump skips
 * every thread: no signal at all, only the process's fields and modules.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "itest.h"
#include "tap.h"
#include "model/wire.h"

#define DUMP_MS 3000
#define WAIT_MS 10000

static const char *const sleepers[] = { "sleep-skip1", "sleep-skip2",
					"sleep-hit" };

/* The program: its process group, its stdin and stdout, its tids. */
struct prog {
	pid_t pid;
	int in, out;
	pid_t main_tid, tid[3];
};

/*
 * Starts agent_target sleepers under the agent, pointed at sock, in a
 * process group of its own. -1 on failure.
 */
static int start_prog(struct prog *p, const char *sock)
{
	char agent[256], fixture[256];
	int in[2], out[2];

	snprintf(agent, sizeof(agent), "%s/libstackwatch-agent.so",
		 itest_target_build());
	snprintf(fixture, sizeof(fixture), "%s/fixtures/agent_target",
		 itest_target_build());
	if (pipe2(in, O_CLOEXEC) < 0 || pipe2(out, O_CLOEXEC) < 0)
		return -1;
	p->pid = fork();
	if (p->pid < 0)
		return -1;
	if (p->pid == 0) {
		setpgid(0, 0);
		dup2(in[0], 0);
		dup2(out[1], 1);
		setenv("LD_PRELOAD", agent, 1);
		setenv("STACKWATCH_SOCKET", sock, 1);
		execl(fixture, fixture, "sleepers", (char *)NULL);
		_exit(127);
	}
	setpgid(p->pid, p->pid); /* either call comes first */
	close(in[0]);
	close(out[1]);
	p->in = in[1];
	p->out = out[0];
	return 0;
}

/* Reads a line of the program's into buf before deadline (ms). */
static bool read_line(struct prog *p, char *buf, size_t size, long deadline)
{
	size_t n = 0;

	for (;;) {
		struct pollfd pf = { .fd = p->out, .events = POLLIN };
		long left = deadline - itest_now_ms();
		char c;

		if (left <= 0 || poll(&pf, 1, (int)left) <= 0 ||
		    read(p->out, &c, 1) != 1)
			return false;
		if (c == '\n') {
			buf[n] = '\0';
			return true;
		}
		if (n < size - 1)
			buf[n++] = c;
	}
}

/* Reads the program's lines up to "ready", noting the tids it says. */
static bool wait_ready(struct prog *p)
{
	long deadline = itest_now_ms() + WAIT_MS;
	char line[128], name[64];
	int tid;

	while (read_line(p, line, sizeof(line), deadline)) {
		if (strcmp(line, "ready") == 0)
			return true;
		if (sscanf(line, "tid %63s %d", name, &tid) != 2)
			continue;
		if (strcmp(name, "main") == 0)
			p->main_tid = tid;
		for (int i = 0; i < 3; i++)
			if (strcmp(name, sleepers[i]) == 0)
				p->tid[i] = tid;
	}
	return false;
}

/*
 * Wakes the sleepers of the round and reads how each one's poll() ended
 * ("woken", "eintr", "timeout") into how[i], up to "ready" or "done".
 */
static bool wake_round(struct prog *p, int round, char how[3][16])
{
	long deadline = itest_now_ms() + WAIT_MS;
	char line[128], name[64], what[16];
	int r;

	for (int i = 0; i < 3; i++)
		snprintf(how[i], 16, "nothing");
	if (write(p->in, "wake\n", 5) != 5)
		return false;
	while (read_line(p, line, sizeof(line), deadline)) {
		if (strcmp(line, "ready") == 0 || strcmp(line, "done") == 0)
			return true;
		if (sscanf(line, "%63s %d %15s", name, &r, what) != 3 ||
		    r != round)
			continue;
		for (int i = 0; i < 3; i++)
			if (strcmp(name, sleepers[i]) == 0)
				snprintf(how[i], 16, "%s", what);
	}
	return false;
}

static int listen_at(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    listen(fd, 4) < 0)
		return -1;
	return fd;
}

static int accept_until(int lfd, long deadline)
{
	struct pollfd pf = { .fd = lfd, .events = POLLIN };
	long left = deadline - itest_now_ms();

	if (left <= 0 || poll(&pf, 1, (int)left) != 1)
		return -1;
	return accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
}

static bool read_full(int fd, void *buf, size_t n, long deadline)
{
	uint8_t *p = buf;

	while (n > 0) {
		struct pollfd pf = { .fd = fd, .events = POLLIN };
		long left = deadline - itest_now_ms();
		ssize_t r;

		if (left <= 0 || poll(&pf, 1, (int)left) != 1)
			return false;
		r = read(fd, p, n);
		if (r <= 0)
			return false;
		p += r;
		n -= (size_t)r;
	}
	return true;
}

/* One message from the agent: *payload is malloc'd. */
static bool read_msg(int fd, struct wire_hdr *h, uint8_t **payload,
		     long deadline)
{
	uint8_t hdr[WIRE_HDR_SIZE];

	*payload = NULL;
	if (!read_full(fd, hdr, sizeof(hdr), deadline) ||
	    wire_parse_hdr(hdr, h) < 0)
		return false;
	*payload = malloc(h->length ? h->length : 1);
	return *payload && read_full(fd, *payload, h->length, deadline);
}

/*
 * Sends a DUMP_REQ with skip[0..nskip) (ascending) and returns the
 * answer's status, its dump in *out; -1 when none came.
 */
static int ask(int fd, uint32_t seq, const pid_t *skip, size_t nskip,
	       struct sw_dump **out)
{
	struct wire_dump_req req = { .timeout_ms = DUMP_MS,
				     .window = 64,
				     .nskip = (uint32_t)nskip,
				     .skip = (pid_t *)skip };
	long deadline = itest_now_ms() + DUMP_MS + WAIT_MS;
	struct wire_out o;
	int status = -1;
	bool sent;

	*out = NULL;
	wire_out_init(&o);
	sent = wire_encode_dump_req(&o, seq, &req) == 0 &&
	       write(fd, o.data, o.len) == (ssize_t)o.len;
	wire_out_release(&o);
	while (sent) {
		struct wire_hdr h;
		uint8_t *body;
		int rc;

		if (!read_msg(fd, &h, &body, deadline)) {
			free(body);
			break;
		}
		if (h.type != WIRE_DUMP_RESP || h.seq != seq) {
			free(body); /* a SIGNAL: the agent moved */
			continue;
		}
		rc = wire_decode_dump_resp(body, h.length, &status, out);
		free(body);
		if (rc < 0)
			status = -1;
		break;
	}
	return status;
}

static const struct sw_thread *find(const struct sw_dump *d, pid_t tid)
{
	for (size_t i = 0; d && i < d->nthreads; i++)
		if (d->threads[i].tid == tid)
			return &d->threads[i];
	return NULL;
}

/* Threads named name with a stack (status ok, some ips). */
static int with_stack(const struct sw_dump *d, const char *name)
{
	int n = 0;

	for (size_t i = 0; d && i < d->nthreads; i++)
		n += strcmp(d->threads[i].name, name) == 0 &&
		     d->threads[i].status == SW_ST_OK && d->threads[i].nips > 0;
	return n;
}

static int cmp_pid(const void *a, const void *b)
{
	pid_t x = *(const pid_t *)a, y = *(const pid_t *)b;

	return (x > y) - (x < y);
}

/* Every tid of pid, ascending, into tids (at most max). */
static size_t all_tids(pid_t pid, pid_t *tids, size_t max)
{
	char path[64];
	struct dirent *e;
	size_t n = 0;
	DIR *dir;

	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	dir = opendir(path);
	while (dir && (e = readdir(dir)) && n < max)
		if (e->d_name[0] != '.')
			tids[n++] = (pid_t)atoi(e->d_name);
	if (dir)
		closedir(dir);
	qsort(tids, n, sizeof(*tids), cmp_pid);
	return n;
}

/* Round 0: main and two sleepers skipped, the third one signalled. */
static void test_some(struct prog *p, int fd)
{
	pid_t skip[3] = { p->main_tid, p->tid[0], p->tid[1] };
	pid_t tids[64];
	size_t ntids = all_tids(p->pid, tids, 64);
	struct sw_dump *d = NULL;
	char how[3][16];
	int status;

	qsort(skip, 3, sizeof(*skip), cmp_pid);
	status = ask(fd, 1, skip, 3, &d);
	TAP_OK(status == 0 && d,
	       "a dump skipping main and two sleepers is "
	       "answered (status %d)",
	       status);
	TAP_OK(d && !find(d, p->main_tid) && !find(d, p->tid[0]) &&
		       !find(d, p->tid[1]),
	       "the skipped threads are not in it");
	TAP_OK(d && d->nthreads + 3 == ntids,
	       "every other thread is (%zu of %zu)", d ? d->nthreads : 0,
	       ntids);
	TAP_OK(with_stack(d, "sleep-hit") == 1 &&
		       with_stack(d, "worker") == 2 &&
		       with_stack(d, "sw-agent") == 1,
	       "sleep-hit, both workers and the agent's thread have stacks");
	TAP_OK(d && d->pid == p->pid && strcmp(d->comm, "agent_target") == 0 &&
		       d->nmodules > 0,
	       "the process's fields and modules are as ever (comm '%s', "
	       "%zu modules)",
	       d ? d->comm : "", d ? d->nmodules : 0);
	sw_dump_free(d);

	TAP_OK(wake_round(p, 0, how), "the sleepers told how they woke");
	TAP_OK(strcmp(how[2], "eintr") == 0,
	       "sleep-hit, signalled, was cut short: poll() said %s", how[2]);
	TAP_OK(strcmp(how[0], "woken") == 0,
	       "sleep-skip1, skipped, slept until woken: poll() said %s",
	       how[0]);
	TAP_OK(strcmp(how[1], "woken") == 0,
	       "sleep-skip2, skipped, slept until woken: poll() said %s",
	       how[1]);
}

/* Round 1: every thread skipped; then a dump of the first form. */
static void test_all(struct prog *p, int fd)
{
	pid_t tids[64];
	size_t ntids = all_tids(p->pid, tids, 64);
	struct sw_dump *d = NULL;
	char how[3][16];
	int status;

	status = ask(fd, 2, tids, ntids, &d);
	TAP_OK(status == 0 && d && d->nthreads == 0 && d->nmodules > 0 &&
		       d->pid == p->pid && strcmp(d->comm, "agent_target") == 0,
	       "a dump skipping all %zu threads has no thread, but the "
	       "process's fields and modules (status %d, %zu threads)",
	       ntids, status, d ? d->nthreads : 0);
	sw_dump_free(d);
	TAP_OK(wake_round(p, 1, how) && strcmp(how[0], "woken") == 0 &&
		       strcmp(how[1], "woken") == 0 &&
		       strcmp(how[2], "woken") == 0,
	       "no sleeper was cut short: %s %s %s", how[0], how[1], how[2]);

	ntids = all_tids(p->pid, tids, 64);
	status = ask(fd, 3, NULL, 0, &d);
	TAP_OK(status == 0 && d && d->nthreads == ntids &&
		       with_stack(d, "sleep-hit") == 1 &&
		       with_stack(d, "sleep-skip1") == 1,
	       "a request without a skip set still dumps every thread "
	       "(%zu of %zu)",
	       d ? d->nthreads : 0, ntids);
	sw_dump_free(d);
}

int main(void)
{
	char dir[] = "/tmp/sw-itest-XXXXXX", sock[128];
	struct wire_hello hello;
	struct prog p = { .pid = -1, .in = -1, .out = -1 };
	struct wire_hdr h;
	uint8_t *body = NULL;
	int lfd, fd = -1;
	long deadline;

	signal(SIGPIPE, SIG_IGN);
	if (!mkdtemp(dir)) {
		TAP_OK(0, "a temp dir");
		return tap_done();
	}
	snprintf(sock, sizeof(sock), "%s/agent.sock", dir);
	lfd = listen_at(sock);
	TAP_OK(lfd >= 0 && start_prog(&p, sock) == 0,
	       "listening on our own socket, the program started");
	deadline = itest_now_ms() + WAIT_MS;
	if (lfd >= 0 && p.pid > 0)
		fd = accept_until(lfd, deadline);
	TAP_OK(fd >= 0, "its agent connected");
	memset(&hello, 0, sizeof(hello));
	TAP_OK(fd >= 0 && read_msg(fd, &h, &body, deadline) &&
		       h.type == WIRE_HELLO &&
		       wire_decode_hello(body, h.length, &hello) == 0,
	       "its HELLO decodes");
	free(body);
	TAP_OK(hello.features & WIRE_FEAT_SKIP,
	       "its HELLO says it takes skip sets (features 0x%x)",
	       hello.features);
	TAP_OK(wait_ready(&p) && p.main_tid == p.pid && p.tid[0] > 0 &&
		       p.tid[1] > 0 && p.tid[2] > 0,
	       "the sleepers sleep in poll()");
	if (fd >= 0 && (hello.features & WIRE_FEAT_SKIP) && p.tid[2] > 0) {
		test_some(&p, fd);
		test_all(&p, fd);
	}

	if (fd >= 0)
		close(fd);
	if (p.pid > 0) {
		kill(-p.pid, SIGKILL);
		waitpid(p.pid, NULL, 0);
		for (long end = itest_now_ms() + WAIT_MS;
		     kill(-p.pid, 0) == 0 && itest_now_ms() < end;)
			itest_sleep_ms(10);
		TAP_OK(kill(-p.pid, 0) < 0 && errno == ESRCH,
		       "no process of the test is left");
	}
	if (lfd >= 0)
		close(lfd);
	unlink(sock);
	rmdir(dir);
	return tap_done();
}
