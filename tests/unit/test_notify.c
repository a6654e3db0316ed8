/*
 * test_notify.c - the watchdog is fed only while the daemon's parts make
 * progress (src/daemon/notify.c, stacks_sym_stuck() of stacks.c): a
 * health check that fails withholds WATCHDOG=1, so that systemd restarts
 * a daemon whose symbolizer is wedged, and one that passes again lets it
 * through. The datagrams go to a real socket of ours, as systemd's.
 */
#define _GNU_SOURCE
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "daemon/notify.h"
#include "daemon/stacks.h"
#include "model/clock.h"
#include "tap.h"

static bool well = true;

static bool health(void *arg)
{
	return !stacks_sym_stuck(arg, clock_now_ns(), 30ull * 1000000000ull) &&
	       well;
}

/* Whether a WATCHDOG=1 arrives on fd within ms. */
static bool got_ping(int fd, int ms)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	char buf[512];
	ssize_t n;

	while (poll(&p, 1, ms) > 0) {
		n = recv(fd, buf, sizeof(buf) - 1, 0);
		if (n <= 0)
			return false;
		buf[n] = '\0';
		if (strstr(buf, "WATCHDOG=1"))
			return true;
	}
	return false;
}

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts))
		;
}

int main(void)
{
	char dir[] = "/tmp/sw-notify-XXXXXX", pid[16];
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	static struct stacks st; /* only its symbolizer clock is used */
	int fd;

	if (!mkdtemp(dir))
		return 1;
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/notify.sock", dir);
	fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	TAP_OK(fd >= 0 && bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0,
	       "a notify socket");
	setenv("NOTIFY_SOCKET", sa.sun_path, 1);
	setenv("WATCHDOG_USEC", "200000", 1);
	snprintf(pid, sizeof(pid), "%d", (int)getpid());
	setenv("WATCHDOG_PID", pid, 1);
	notify_init();
	notify_set_health(health, &st);

	notify_watchdog();
	TAP_OK(got_ping(fd, 100), "healthy: WATCHDOG=1 goes out");

	/* A symbolization under way for 40 s: stuck. */
	atomic_store(&st.sym_busy_since_ns, clock_now_ns() - 40000000000ull);
	TAP_OK(stacks_sym_stuck(&st, clock_now_ns(), 30000000000ull),
	       "a symbolization 40 s long is stuck");
	sleep_ms(150);
	notify_watchdog();
	TAP_OK(!got_ping(fd, 150), "the symbolizer stuck: no WATCHDOG=1");
	notify_watchdog();
	TAP_OK(!got_ping(fd, 100), "nor on the next pass");

	/* One 1 s long is slow, not stuck. */
	atomic_store(&st.sym_busy_since_ns, clock_now_ns() - 1000000000ull);
	TAP_OK(!stacks_sym_stuck(&st, clock_now_ns(), 30000000000ull),
	       "a symbolization 1 s long is not stuck");
	notify_watchdog();
	TAP_OK(got_ping(fd, 100), "so WATCHDOG=1 goes out again");

	atomic_store(&st.sym_busy_since_ns, 0);
	well = false;
	sleep_ms(150);
	notify_watchdog();
	TAP_OK(!got_ping(fd, 150), "any failing check withholds it");
	well = true;
	notify_watchdog();
	TAP_OK(got_ping(fd, 100), "and it comes back when the check passes");

	close(fd);
	unlink(sa.sun_path);
	rmdir(dir);
	return tap_done();
}
