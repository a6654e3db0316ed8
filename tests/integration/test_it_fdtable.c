/*
 * test_it_fdtable.c - the agent's connection to the daemon is out of the
 * program's reach, and the program's descriptors out of the agent's.
 *
 * A program owns its descriptor numbers: it may put its own file on any
 * number with dup2() or close it, including numbers it never opened. In
 * the race, the program (fixtures/fd_thief.c) finds any socket it did
 * not open among its descriptors and puts its own file and that socket
 * on its number by turns, as fast as it can, while the test asks for
 * dumps: no byte of a dump may land in its file, every dump must be
 * answered, and the program must end unharmed. On a descriptor table
 * shared with the agent, that socket is the agent's connection, and its
 * answers (the program's stacks) went into the file.
 *
 * In the second case the program detaches as a daemon does: it closes
 * every number from 3 up, by close() and by close_range(). It must go on
 * working, and the agent must still be registered on the very
 * connection it had (src/agent/agent.c says why).
 */
#define _GNU_SOURCE
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "itest.h"
#include "tap.h"

#define RACE_MS 8000 /* dumps asked for meanwhile, one after the other */
#define MIN_DUMPS 50

static char fixture[256];

/*
 * Starts fd_thief MODE FILE under the agent in a process group of its
 * own, its stdin and stdout on pipes (*in, *out).
 */
static pid_t spawn(const struct itest_daemon *d, const char *mode,
		   const char *file, int *in, int *out)
{
	char agent[256];
	int p[2], q[2];
	pid_t pid;

	snprintf(agent, sizeof(agent), "%s/libstackwatch-agent.so",
		 itest_target_build());
	if (pipe2(p, O_CLOEXEC) < 0)
		return -1;
	if (pipe2(q, O_CLOEXEC) < 0) {
		close(p[0]);
		close(p[1]);
		return -1;
	}
	pid = fork();
	if (pid == 0) {
		setpgid(0, 0);
		dup2(p[1], 1);
		dup2(q[0], 0);
		setenv("LD_PRELOAD", agent, 1);
		setenv("STACKWATCH_SOCKET", d->sock, 1);
		execl(fixture, fixture, mode, file, (char *)NULL);
		_exit(127);
	}
	if (pid > 0)
		setpgid(pid, pid);
	close(p[1]);
	close(q[0]);
	*out = p[0];
	*in = q[1];
	return pid;
}

/* Kills the group and reaps pid; true when nothing of the group is left. */
static bool kill_group(pid_t pid)
{
	if (pid <= 0)
		return true;
	kill(-pid, SIGKILL);
	waitpid(pid, NULL, 0);
	for (long end = itest_now_ms() + 5000; itest_now_ms() < end;) {
		if (kill(-pid, 0) < 0 && errno == ESRCH)
			return true;
		itest_sleep_ms(10);
	}
	return false;
}

/* The tid of pid's agent thread ("sw-agent"), 0 when there is none. */
static pid_t agent_tid(pid_t pid)
{
	pid_t tids[64];
	int n = itest_tids(pid, tids, 64);

	for (int i = 0; i < n; i++) {
		char path[96], name[32] = "";
		FILE *f;

		snprintf(path, sizeof(path), "/proc/%d/task/%d/comm", (int)pid,
			 (int)tids[i]);
		f = fopen(path, "re");
		if (!f)
			continue;
		if (!fgets(name, sizeof(name), f))
			name[0] = '\0';
		fclose(f);
		if (strcmp(name, "sw-agent\n") == 0)
			return tids[i];
	}
	return 0;
}

/*
 * The sockets in the descriptor table at dir (/proc/PID/fd or
 * /proc/PID/task/TID/fd): how many, and the inode of the last one.
 */
static int sockets_in(const char *dir, unsigned long *ino)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int n = 0;

	*ino = 0;
	while (d && (e = readdir(d))) {
		char path[300], link[64];
		ssize_t len;

		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		len = readlink(path, link, sizeof(link) - 1);
		if (len <= 0)
			continue;
		link[len] = '\0';
		if (sscanf(link, "socket:[%lu]", ino) == 1)
			n++;
	}
	if (d)
		closedir(d);
	return n;
}

/* The program's own table (/proc/PID/fd). */
static int program_sockets(pid_t pid)
{
	char dir[64];
	unsigned long ino;

	snprintf(dir, sizeof(dir), "/proc/%d/fd", (int)pid);
	return sockets_in(dir, &ino);
}

/* The inode of the agent thread's connection, 0 when it has none. */
static unsigned long agent_socket(pid_t pid)
{
	char dir[96];
	unsigned long ino;
	pid_t tid = agent_tid(pid);

	if (!tid)
		return 0;
	snprintf(dir, sizeof(dir), "/proc/%d/task/%d/fd", (int)pid, (int)tid);
	return sockets_in(dir, &ino) >= 1 ? ino : 0;
}

/* One dump of pid: true when it is answered with the program's threads. */
static bool dump_ok(const struct itest_daemon *d, pid_t pid)
{
	char path[96];
	int status;
	cJSON *j;
	bool ok;

	snprintf(path, sizeof(path), "/api/v1/stacks?pid=%d", (int)pid);
	j = itest_get_json(d, path, &status);
	ok = status == 200 &&
	     cJSON_GetArraySize(cJSON_GetObjectItem(j, "threads")) >= 2;
	cJSON_Delete(j);
	return ok;
}

static off_t file_size(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0 ? st.st_size : -1;
}

static void test_race(const struct itest_daemon *d)
{
	char file[160], line[128];
	int in = -1, out = -1, answered = 0, asked = 0, st = -1;
	long sockets = -1, turns = 0, left = -1;
	pid_t pid;
	off_t size = 0;

	snprintf(file, sizeof(file), "%s/race.out", d->dir);
	pid = spawn(d, "race", file, &in, &out);
	TAP_OK(pid > 0 && itest_wait_line(out, "ready") &&
		       itest_wait_registered(d, pid, 10000),
	       "race: the program runs under the agent, registered");
	TAP_OK(program_sockets(pid) == 0,
	       "race: the agent's connection is not among the program's "
	       "descriptors (%d sockets there)",
	       program_sockets(pid));
	TAP_OK(agent_socket(pid) != 0,
	       "race: the agent thread holds its connection");
	(void)!write(in, "go\n", 3);
	for (long end = itest_now_ms() + RACE_MS; itest_now_ms() < end;
	     asked++) {
		answered += dump_ok(d, pid);
		size = file_size(file);
		if (size != 0)
			break; /* the first leak says it all */
	}
	close(in);
	while (itest_read_line(out, line, sizeof(line)) &&
	       strcmp(line, "done") != 0)
		sscanf(line, "sockets %ld turns %ld left %ld", &sockets, &turns,
		       &left);
	if (waitpid(pid, &st, 0) != pid)
		st = -1;
	TAP_OK(size == 0,
	       "race: no byte of the agent's reached the program's socket "
	       "(%lld bytes after %d dumps)",
	       (long long)size, asked);
	TAP_OK(answered == asked && asked >= MIN_DUMPS,
	       "race: every dump answered while the program replaced "
	       "descriptors (%d of %d, at least %d)",
	       answered, asked, MIN_DUMPS);
	TAP_OK(WIFEXITED(st) && WEXITSTATUS(st) == 0,
	       "race: the program ends unharmed: its socket its own, nothing "
	       "received, none of its %d bytes read by another (status %d; "
	       "%ld bytes left, %ld foreign sockets, %ld turns)",
	       4096, st, left, sockets, turns);
	TAP_OK(kill_group(pid), "race: no process of the program is left");
	close(out);
	unlink(file);
}

static void test_daemonize(const struct itest_daemon *d)
{
	char file[160];
	unsigned long before, after;
	int in = -1, out = -1;
	pid_t pid;

	snprintf(file, sizeof(file), "%s/daemonize.out", d->dir);
	pid = spawn(d, "daemonize", file, &in, &out);
	TAP_OK(pid > 0 && itest_wait_line(out, "ready") &&
		       itest_wait_registered(d, pid, 10000),
	       "daemonize: the program runs under the agent, registered");
	before = agent_socket(pid);
	(void)!write(in, "go\n", 3);
	TAP_OK(itest_wait_line(out, "closed") && file_size(file) == 6,
	       "daemonize: the program closed every descriptor from 3 up "
	       "and works on");
	after = agent_socket(pid);
	TAP_OK(before != 0 && after == before,
	       "daemonize: the agent keeps its connection (socket %lu, "
	       "then %lu)",
	       before, after);
	TAP_OK(itest_registered(d, pid) && dump_ok(d, pid),
	       "daemonize: still registered, and a dump is answered");
	TAP_OK(program_sockets(pid) == 0,
	       "daemonize: no socket left among the program's descriptors");
	close(in);
	TAP_OK(kill_group(pid), "daemonize: no process of the program is left");
	close(out);
	unlink(file);
}

int main(void)
{
	struct itest_daemon d;

	signal(SIGPIPE, SIG_IGN);
	snprintf(fixture, sizeof(fixture), "%s/fixtures/fd_thief",
		 itest_target_build());
	if (itest_daemon_start(&d) < 0) {
		TAP_OK(0, "the daemon starts");
		return tap_done();
	}
	test_race(&d);
	test_daemonize(&d);
	TAP_OK(itest_daemon_stop(&d) == 0, "the daemon stops cleanly");
	itest_daemon_cleanup(&d);
	return tap_done();
}
