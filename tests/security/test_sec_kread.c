/*
 * test_sec_kread.c - the access check comes before any kernel read.
 *
 * The daemon runs as root with kernel reads on; a process without the
 * agent (`sleep`) runs as root. nobody asks for it 50 times, over the
 * unix socket and over TCP: every answer is a 404, and not one kernel
 * read was asked of the helper (stackwatch_kernel_reads_total, read as
 * root, did not move). Then root asks once, the control: the counter
 * moves by one.
 */
#define _GNU_SOURCE
#include <sys/stat.h>

#include "sectest.h"
#include "tap.h"

#define ASKS 50

static const char *const args[] = { "--sample-interval", "0", "--max-dump-rate",
				    "1000", NULL };

/* /api/v1/status's methods.kernel.active: 1, 0, or -1 when not said. */
static int kernel_active(const struct itest_daemon *d)
{
	int status, active = -1;
	cJSON *doc = itest_get_json(d, "/api/v1/status", &status), *a;

	a = cJSON_GetObjectItem(
		cJSON_GetObjectItem(cJSON_GetObjectItem(doc, "methods"),
				    "kernel"),
		"active");
	if (status == 200 && cJSON_IsBool(a))
		active = cJSON_IsTrue(a);
	cJSON_Delete(doc);
	return active;
}

int main(void)
{
	struct itest_daemon d;
	struct sec_answer *a = calloc(1, sizeof(*a));
	char target[96];
	double before, after;
	int n404 = 0, asked = 0, st;
	pid_t root_sleeper = -1;

	if (geteuid() != 0) {
		TAP_SKIP("needs root: the daemon runs as root, the requester "
			 "as nobody");
		free(a);
		return tap_done();
	}
	if (!a || itest_daemon_start_args(&d, args) < 0) {
		TAP_OK(0, "the daemon starts");
		free(a);
		return tap_done();
	}
	chmod(d.dir, 0711);
	if (kernel_active(&d) != 1) {
		TAP_SKIP("kernel reads are not active here: nothing to count");
		goto out;
	}
	root_sleeper = sec_sleeper(0, 0);
	if (root_sleeper <= 0 || !sec_wait_comm(root_sleeper, "sleep")) {
		TAP_OK(0, "root's sleeping process runs");
		goto out;
	}
	snprintf(target, sizeof(target), "/api/v1/stacks?pid=%d",
		 (int)root_sleeper);
	before = itest_metric(&d, "stackwatch_kernel_reads_total");
	for (; asked < ASKS; asked++) {
		bool unix_socket = asked % 5 != 4; /* one in five over TCP */

		sec_get_as(SEC_NOBODY, SEC_NOBODY, NULL, 0, d.url,
			   unix_socket ? d.http_sock : NULL, NULL, target, a);
		n404 += a->status == 404;
	}
	after = itest_metric(&d, "stackwatch_kernel_reads_total");
	TAP_OK(n404 == ASKS,
	       "nobody asking for root's process %d times: all 404 (%d)", ASKS,
	       n404);
	TAP_OK(before >= 0 && after == before,
	       "and not one kernel read was asked of the helper (%g, then "
	       "%g)",
	       before, after);
	st = sec_root_get(&d, target, 5000, NULL);
	after = itest_metric(&d, "stackwatch_kernel_reads_total");
	TAP_OK(st == 200 && after == before + 1,
	       "the control: root's request for it is one kernel read (%d; "
	       "%g, then %g)",
	       st, before, after);
out:
	itest_kill(root_sleeper);
	TAP_OK(root_sleeper <= 0 || kill(root_sleeper, 0) < 0,
	       "no process of the test is left");
	TAP_OK(itest_daemon_stop(&d) == 0, "the daemon stops cleanly");
	itest_daemon_cleanup(&d);
	free(a);
	return tap_done();
}
