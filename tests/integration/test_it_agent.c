/*
 * test_it_agent.c - the agent in real programs, through the real daemon:
 * a sigwait server whose workers block every signal, a raw-syscall
 * blocker, fork, exec, handlers reset to SIG_DFL, a daemon killed and
 * restarted, and hostile peers on the agent socket.
 */
#include <sys/socket.h>
#include <sys/un.h>

#include "itest.h"
#include "tap.h"

static char fixture[256];

static pid_t spawn(const struct itest_daemon *d, const char *mode,
		   const char *arg, int *out, int *in)
{
	char *argv[4] = { fixture, (char *)mode, (char *)arg, NULL };

	return itest_spawn_io(d, argv, out, in);
}

static cJSON *dump(const struct itest_daemon *d, pid_t pid, int *status)
{
	char path[96];

	snprintf(path, sizeof(path), "/api/v1/stacks?pid=%d", (int)pid);
	return itest_get_json(d, path, status);
}

/* Counts threads named name with the given status. */
static int count(cJSON *doc, const char *name, const char *status)
{
	cJSON *t;
	int n = 0;

	cJSON_ArrayForEach(t, cJSON_GetObjectItem(doc, "threads"))
	{
		cJSON *nm = cJSON_GetObjectItem(t, "name");
		cJSON *st = cJSON_GetObjectItem(t, "status");

		if (cJSON_IsString(nm) && cJSON_IsString(st) &&
		    strcmp(nm->valuestring, name) == 0 &&
		    strcmp(st->valuestring, status) == 0)
			n++;
	}
	return n;
}

/* The "method" of the first thread called name, or "". */
static const char *method_of(cJSON *doc, const char *name)
{
	cJSON *t;

	cJSON_ArrayForEach(t, cJSON_GetObjectItem(doc, "threads"))
	{
		cJSON *nm = cJSON_GetObjectItem(t, "name");
		cJSON *m = cJSON_GetObjectItem(t, "method");

		if (cJSON_IsString(nm) && strcmp(nm->valuestring, name) == 0)
			return cJSON_IsString(m) ? m->valuestring : "";
	}
	return "";
}

/* "name:status ..." of every thread, for a failure's message. */
static const char *statuses(cJSON *doc, char *buf, size_t size)
{
	cJSON *t;
	size_t off = 0;

	buf[0] = '\0';
	cJSON_ArrayForEach(t, cJSON_GetObjectItem(doc, "threads"))
	{
		cJSON *nm = cJSON_GetObjectItem(t, "name");
		cJSON *st = cJSON_GetObjectItem(t, "status");
		int n;

		n = snprintf(buf + off, size - off, "%s%s:%s", off ? " " : "",
			     cJSON_IsString(nm) ? nm->valuestring : "?",
			     cJSON_IsString(st) ? st->valuestring : "?");
		if (n < 0 || (size_t)n >= size - off)
			break;
		off += (size_t)n;
	}
	return buf;
}

/*
 * Frames of the agent's own code in the program's threads (the sw-agent
 * thread itself aside): our interposers must not show.
 */
static int agent_frames(cJSON *doc)
{
	cJSON *g, *f, *t;
	int n = 0;

	cJSON_ArrayForEach(g, cJSON_GetObjectItem(doc, "groups"))
	{
		bool agent_thread = false;

		cJSON_ArrayForEach(t, cJSON_GetObjectItem(doc, "threads"))
		{
			cJSON *gr = cJSON_GetObjectItem(t, "group");
			cJSON *nm = cJSON_GetObjectItem(t, "name");

			if (cJSON_IsNumber(gr) &&
			    gr->valuedouble ==
				    cJSON_GetObjectItem(g, "id")->valuedouble &&
			    cJSON_IsString(nm) &&
			    strcmp(nm->valuestring, "sw-agent") == 0)
				agent_thread = true;
		}
		if (agent_thread)
			continue;
		cJSON_ArrayForEach(f, cJSON_GetObjectItem(g, "frames"))
		{
			cJSON *m = cJSON_GetObjectItem(f, "module");

			if (cJSON_IsString(m) &&
			    strstr(m->valuestring, "libstackwatch-agent"))
				n++;
		}
	}
	return n;
}

static void test_sigwait(const struct itest_daemon *d)
{
	int out, status, st = 0;
	pid_t pid = spawn(d, "sigwait", NULL, &out, NULL);
	cJSON *j;

	TAP_OK(itest_wait_line(out, "ready") &&
		       itest_wait_registered(d, pid, 10000),
	       "sigwait server registered");
	j = dump(d, pid, &status);
	TAP_OK(status == 200 && count(j, "worker", "ok") == 4,
	       "workers that block every signal are all dumped (%d ok)",
	       count(j, "worker", "ok"));
	TAP_OK(j && cJSON_GetObjectItem(j, "threads_ok")->valuedouble ==
			       cJSON_GetObjectItem(j, "threads_total")
				       ->valuedouble,
	       "and so is the thread waiting in sigwait(all signals)");
	TAP_OK(j && agent_frames(j) == 0,
	       "no frame of our interposers shows in its stacks (%d)",
	       j ? agent_frames(j) : -1);
	cJSON_Delete(j);
	kill(pid, SIGTERM);
	TAP_OK(itest_wait_line(out, "got SIGTERM"),
	       "the server still takes SIGTERM through sigwait");
	waitpid(pid, &st, 0);
	TAP_OK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "and exits 0");
	close(out);
}

static void test_rawmask(const struct itest_daemon *d)
{
	int out, status;
	pid_t pid = spawn(d, "rawmask", NULL, &out, NULL);
	cJSON *j;

	TAP_OK(itest_wait_line(out, "ready") &&
		       itest_wait_registered(d, pid, 10000),
	       "raw-mask program registered");
	j = dump(d, pid, &status);
	/*
	 * It cannot be signalled, but it is blocked in pause(): the kernel
	 * has its registers and stack, so it is read all the same.
	 */
	TAP_OK(status == 200 && count(j, "rawmask", "ok") == 1 &&
		       strcmp(method_of(j, "rawmask"), "kernel") == 0 &&
		       count(j, "worker", "ok") == 2,
	       "a thread blocking every signal by raw system call, blocked, "
	       "is read from the kernel (%s)",
	       j ? method_of(j, "rawmask") : "no answer");
	cJSON_Delete(j);
	TAP_OK(itest_alive(pid), "and the program lives");
	itest_kill(pid);
	close(out);
}

/*
 * A thread stopped in its own signal handler: the frames above the
 * handler are the signal trampoline, named, and the interrupted code.
 */
static void test_inhandler(const struct itest_daemon *d)
{
	int out, status, k = 0, at = -1;
	pid_t pid = spawn(d, "inhandler", NULL, &out, NULL);
	const char *fn[64] = { NULL };
	cJSON *j, *t, *f, *threads;

	TAP_OK(itest_wait_line(out, "ready") &&
		       itest_wait_registered(d, pid, 10000),
	       "a program with a thread in its signal handler registered");
	j = dump(d, pid, &status);
	threads = j ? cJSON_GetObjectItem(j, "threads") : NULL;
	cJSON_ArrayForEach(t, threads)
	{
		cJSON *nm = cJSON_GetObjectItem(t, "name");
		cJSON *g = cJSON_GetObjectItem(t, "group"), *gr;

		if (!cJSON_IsString(nm) ||
		    strcmp(nm->valuestring, "inhandler") != 0 ||
		    !cJSON_IsNumber(g))
			continue;
		cJSON_ArrayForEach(gr, cJSON_GetObjectItem(j, "groups"))
		{
			if (cJSON_GetObjectItem(gr, "id")->valuedouble !=
			    g->valuedouble)
				continue;
			cJSON_ArrayForEach(f, cJSON_GetObjectItem(gr, "frames"))
			{
				cJSON *fu = cJSON_GetObjectItem(f, "function");

				if (k < 64)
					fn[k++] = cJSON_IsString(fu)
							  ? fu->valuestring
							  : "??";
			}
		}
	}
	for (int i = 0; i + 1 < k; i++)
		if (strcmp(fn[i], "in_handler_wait") == 0)
			at = i + 1;
	TAP_OK(status == 200 && at > 0 && at + 1 < k &&
		       strcmp(fn[at], "__restore_rt") == 0 &&
		       strcmp(fn[at + 1], "??") != 0,
	       "above its handler: the signal trampoline by name (%s), then "
	       "the code it interrupted (%s)",
	       at > 0 && at < k ? fn[at] : "-",
	       at > 0 && at + 1 < k ? fn[at + 1] : "-");
	cJSON_Delete(j);
	itest_kill(pid);
	close(out);
}

/* A string field of pid's entry in a /api/v1/targets answer, or "". */
static const char *target_field(cJSON *targets, pid_t pid, const char *name)
{
	cJSON *t;

	cJSON_ArrayForEach(t, cJSON_GetObjectItem(targets, "targets"))
	{
		cJSON *p = cJSON_GetObjectItem(t, "pid");
		cJSON *c = cJSON_GetObjectItem(t, name);

		if (cJSON_IsNumber(p) && (pid_t)p->valuedouble == pid &&
		    cJSON_IsString(c))
			return c->valuestring;
	}
	return "";
}

static void test_fork(const struct itest_daemon *d)
{
	char line[64];
	int out, status, b = 0;
	pid_t pid = spawn(d, "fork", NULL, &out, NULL);
	cJSON *j;

	while (itest_read_line(out, line, sizeof(line)) &&
	       strcmp(line, "ready") != 0)
		sscanf(line, "child %d", &b);
	TAP_OK(b > 0, "fork: parent %d and child %d", (int)pid, b);
	TAP_OK(b > 0 && itest_wait_registered(d, b, 10000),
	       "the child registers under its own pid");
	j = itest_get_json(d, "/api/v1/targets", &status);
	TAP_OK(b > 0 && strcmp(target_field(j, b, "comm"), "agent_target") == 0,
	       "under the kernel's name for it, not the title its parent "
	       "wrote over argv[0] (got \"%s\")",
	       target_field(j, b, "comm"));
	cJSON_Delete(j);
	j = b > 0 ? dump(d, b, &status) : NULL;
	TAP_OK(j && status == 200 &&
		       cJSON_GetObjectItem(j, "threads_ok")->valuedouble >= 2,
	       "the child is dumpable (its own agent thread included)");
	cJSON_Delete(j);
	TAP_OK(itest_registered(d, pid), "the parent stays registered");
	j = itest_get_json(d, "/api/v1/targets", &status);
	TAP_OK(strncmp(target_field(j, pid, "cmdline"), "fork: a title", 13) ==
		       0,
	       "its command line is the title it wrote after registering "
	       "(got \"%.40s\")",
	       target_field(j, pid, "cmdline"));
	cJSON_Delete(j);
	if (b > 0)
		itest_kill(b);
	itest_kill(pid);
	close(out);
}

static void test_exec(const struct itest_daemon *d)
{
	int out, st = 0, dumps = 0, ok = 0;
	pid_t pid = spawn(d, "exec", "40", &out, NULL);
	long end = itest_now_ms() + 60000;

	/* Dump as fast as we can while it execs itself 40 times. */
	while (itest_alive(pid) && itest_now_ms() < end) {
		int status;
		cJSON *j = dump(d, pid, &status);

		dumps++;
		ok += status == 200;
		cJSON_Delete(j);
	}
	waitpid(pid, &st, 0);
	TAP_OK(WIFEXITED(st) && WEXITSTATUS(st) == 0,
	       "a program execing itself 40 times while dumped is never "
	       "killed (%d dumps, %d answered)",
	       dumps, ok);
	close(out);
}

static void test_reset(const struct itest_daemon *d)
{
	int out, in, status;
	pid_t pid = spawn(d, "reset", NULL, &out, &in);
	cJSON *j, *err;

	TAP_OK(itest_wait_line(out, "ready") &&
		       itest_wait_registered(d, pid, 10000),
	       "reset program registered");
	j = dump(d, pid, &status);
	TAP_OK(status == 200, "dumpable before the reset");
	cJSON_Delete(j);
	TAP_OK(write(in, "go\n", 3) == 3 && itest_wait_line(out, "reset"),
	       "the program set every real-time signal to SIG_DFL");
	/* Past the rate limit's window (1/30 s): no cached answer. */
	itest_sleep_ms(100);
	j = dump(d, pid, &status);
	err = cJSON_GetObjectItem(j, "error");
	TAP_OK(status >= 500 && cJSON_IsString(err) &&
		       strstr(err->valuestring, "signal handler replaced"),
	       "dumping it now is an error saying so (%d: %s)", status,
	       cJSON_IsString(err) ? err->valuestring : "");
	cJSON_Delete(j);
	itest_sleep_ms(100);
	TAP_OK(itest_alive(pid), "and the program lives");
	itest_kill(pid);
	close(out);
	close(in);
}

static int connect_sock(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM, 0);

	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

static void test_hostile(const struct itest_daemon *d, pid_t healthy)
{
	unsigned char junk[4096];
	int silent[64], fd, status, n = 0;
	struct http_response r;
	cJSON *j;

	srand(42);
	for (size_t i = 0; i < sizeof(junk); i++)
		junk[i] = (unsigned char)rand();
	/* Random bytes. */
	fd = connect_sock(d->sock);
	n += fd >= 0 && write(fd, junk, sizeof(junk)) > 0;
	close(fd);
	/* A HELLO header announcing 64 MiB, then nothing. */
	{
		unsigned char h[16] = { 'S', 'W', 'A', 'T', 1, 0, 1, 0,
					0,   0,	  0,   4,   0, 0, 0, 0 };
		fd = connect_sock(d->sock);
		n += fd >= 0 && write(fd, h, sizeof(h)) == sizeof(h);
		close(fd);
	}
	/* A truncated HELLO. */
	{
		unsigned char h[20] = { 'S', 'W', 'A', 'T', 1, 0, 1, 0,
					100, 0,	  0,   0,   0, 0, 0, 0 };
		fd = connect_sock(d->sock);
		n += fd >= 0 && write(fd, h, sizeof(h)) == sizeof(h);
		close(fd);
	}
	for (int i = 0; i < 64; i++)
		silent[i] = connect_sock(d->sock);
	memset(&r, 0, sizeof(r));
	TAP_OK(n == 3 && itest_get(d, "/healthz", &r) == 0 && r.status == 200,
	       "garbage, oversized and truncated peers: /healthz still ok");
	http_response_release(&r);
	j = dump(d, healthy, &status);
	TAP_OK(status == 200, "with 64 silent agents a real one is dumped");
	cJSON_Delete(j);
	for (int i = 0; i < 64; i++)
		if (silent[i] >= 0)
			close(silent[i]);
}

static void test_restart(struct itest_daemon *d, pid_t pid)
{
	struct itest_daemon again;
	/* A later --agent-socket wins: the new daemon takes the old path. */
	const char *extra[] = { "--sample-interval", "0", "--agent-socket",
				d->sock, NULL };

	kill(d->pid, SIGKILL);
	waitpid(d->pid, NULL, 0);
	d->pid = 0;
	TAP_OK(itest_alive(pid), "the target survives its daemon's SIGKILL");
	if (itest_daemon_start_args(&again, extra) < 0) {
		TAP_OK(0, "a new daemon starts on the old socket");
		return;
	}
	TAP_OK(itest_wait_registered(&again, pid, 10000),
	       "the agent re-registers with the restarted daemon within 10 s");
	TAP_OK(itest_daemon_stop(&again) == 0, "the new daemon stops cleanly");
	itest_daemon_cleanup(&again);
}

/*
 * A program that takes the agent's signal for its own signalfd: it gets
 * every one it queues, the agent moves to another and says so, and the
 * program is dumped whole.
 */
static void test_claim(const struct itest_daemon *d)
{
	int out, in, status, got = 0, before, after;
	pid_t pid = spawn(d, "signalfd", NULL, &out, &in);
	char line[256];
	cJSON *j;

	TAP_OK(itest_wait_line(out, "ready") &&
		       itest_wait_registered(d, pid, 10000),
	       "a program with a signalfd on SIGRTMIN+4 registered");
	before = itest_target_signal(d, pid);
	for (int i = 0; i < 10; i++) {
		j = dump(d, pid, &status);
		cJSON_Delete(j);
		if (write(in, "x\n", 2) != 2)
			break;
		if (itest_read_line(out, line, sizeof(line)) &&
		    atoi(line + 4) == 100 + i && strncmp(line, "got ", 4) == 0)
			got++;
	}
	TAP_OK(got == 10,
	       "every signal it queued reached its signalfd (%d "
	       "of 10)",
	       got);
	j = dump(d, pid, &status);
	after = itest_target_signal(d, pid);
	/* The move may come before the first look: what counts is that the
	 * list never names the program's signal once it claimed it. */
	TAP_OK(status == 200 && count(j, "worker", "ok") == 4 &&
		       after != SIGRTMIN + 4 && after > 0,
	       "the agent moved off the program's signal %d (listed %d, "
	       "then %d), and the targets list says so; every worker is "
	       "dumped (HTTP %d, %d of 4 ok, statuses: %s)",
	       SIGRTMIN + 4, before, after, status, count(j, "worker", "ok"),
	       statuses(j, line, sizeof(line)));
	cJSON_Delete(j);
	itest_kill(pid);
	close(out);
	close(in);
}

int main(void)
{
	struct itest_daemon d;
	int out;
	pid_t steady;

	snprintf(fixture, sizeof(fixture), "%s/fixtures/agent_target",
		 itest_build());
	if (itest_daemon_start(&d) < 0) {
		TAP_OK(0, "the daemon starts");
		return tap_done();
	}
	test_sigwait(&d);
	test_rawmask(&d);
	test_inhandler(&d);
	test_fork(&d);
	test_exec(&d);
	test_reset(&d);
	test_claim(&d);
	steady = spawn(&d, "sigwait", NULL, &out, NULL);
	TAP_OK(itest_wait_line(out, "ready") &&
		       itest_wait_registered(&d, steady, 10000),
	       "a steady target for the last checks");
	test_hostile(&d, steady);
	test_restart(&d, steady);
	itest_kill(steady);
	close(out);
	itest_daemon_cleanup(&d);
	return tap_done();
}
