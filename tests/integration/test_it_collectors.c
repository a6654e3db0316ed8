/*
 * test_it_collectors.c - one process, one collector, however many copies
 * of our code it loads.
 *
 * tests/fixtures/two_collectors links libstackwatch.so and dlopen()s a
 * copy of it under another name, and runs with the agent preloaded: three
 * collectors' worth of code. Two of its threads dump it back to back
 * through the two library copies while a third loads and unloads libz,
 * and the daemon dumps it through the agent meanwhile. Only one handler
 * may be installed (one real-time signal caught), every copy must report
 * the same signal as the daemon's targets list, and every dump must
 * succeed, in process and over HTTP, without a crash, for several rounds.
 */
#include "itest.h"
#include "tap.h"

#define ROUNDS 3
#define SECONDS 3

static bool copy_file(const char *from, const char *to)
{
	char buf[65536];
	FILE *in = fopen(from, "rb"), *out = fopen(to, "wb");
	size_t n;
	bool ok = in && out;

	while (ok && (n = fread(buf, 1, sizeof(buf), in)) > 0)
		ok = fwrite(buf, 1, n, out) == n;
	if (in)
		fclose(in);
	if (out && fclose(out) != 0)
		ok = false;
	return ok;
}

int main(void)
{
	char fixture[256], lib[256], copy[256], secs[16], line[128];
	struct itest_daemon d;

	snprintf(fixture, sizeof(fixture), "%s/fixtures/two_collectors",
		 itest_build());
	snprintf(lib, sizeof(lib), "%s/libstackwatch.so", itest_build());
	snprintf(secs, sizeof(secs), "%d", SECONDS);
	if (itest_daemon_start(&d) < 0) {
		TAP_OK(0, "the daemon starts");
		return tap_done();
	}
	snprintf(copy, sizeof(copy), "%s/libstackwatch-copy.so", d.dir);
	if (!copy_file(lib, copy)) {
		TAP_OK(0, "copy %s", lib);
		return tap_done();
	}
	for (int round = 0; round < ROUNDS; round++) {
		char *argv[] = { fixture, copy, secs, NULL };
		int out, st = -1, http_ok = 0, http_all = 0, status;
		int s1 = 0, s2 = 0, ok = 0, failed = -1, caught = -1, listed;
		pid_t pid = itest_spawn(&d, argv, &out);
		long end;

		TAP_OK(itest_wait_line(out, "ready") &&
			       itest_wait_registered(&d, pid, 10000),
		       "round %d: three copies of the collector, registered",
		       round + 1);
		listed = itest_target_signal(&d, pid);
		end = itest_now_ms() + (SECONDS - 1) * 1000;
		while (itest_now_ms() < end) {
			char path[64];
			cJSON *j;

			snprintf(path, sizeof(path), "/api/v1/stacks?pid=%d",
				 (int)pid);
			j = itest_get_json(&d, path, &status);
			http_all++;
			http_ok += status == 200 && j;
			cJSON_Delete(j);
		}
		while (itest_read_line(out, line, sizeof(line))) {
			sscanf(line, "signals %d %d", &s1, &s2);
			sscanf(line, "dumps %d %d", &ok, &failed);
			sscanf(line, "caught %d", &caught);
		}
		waitpid(pid, &st, 0);
		close(out);
		TAP_OK(WIFEXITED(st) && WEXITSTATUS(st) == 0,
		       "round %d: the process lives (%s %d)", round + 1,
		       WIFSIGNALED(st) ? "signal" : "exit",
		       WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
		TAP_OK(caught == 1 && s1 == s2 && s1 == listed && s1 > 0,
		       "round %d: one handler, on one signal for all copies "
		       "(%d caught; library %d, copy %d, agent %d)",
		       round + 1, caught, s1, s2, listed);
		TAP_OK(failed == 0 && ok > 0 && http_ok == http_all &&
			       http_all > 0,
		       "round %d: every dump succeeded (%d in process, %d of "
		       "%d "
		       "through the daemon; %d failed)",
		       round + 1, ok, http_ok, http_all, failed);
	}
	unlink(copy);
	TAP_OK(itest_daemon_stop(&d) == 0, "the daemon stops cleanly");
	itest_daemon_cleanup(&d);
	return tap_done();
}
