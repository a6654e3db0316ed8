/*
 * gate.c - the test suite's hold on reads (gate.h).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "gate.h"
#include "log.h"
#include "model/clock.h"

static struct sockaddr_un gate_addr;
static int gate_on;

void gate_init(void)
{
	const char *path = getenv("STACKWATCH_TEST_GATE");

	if (!path || !*path)
		return;
	if (strlen(path) >= sizeof(gate_addr.sun_path)) {
		log_warn("STACKWATCH_TEST_GATE is too long: ignored");
		return;
	}
	gate_addr.sun_family = AF_UNIX;
	memcpy(gate_addr.sun_path, path, strlen(path) + 1);
	gate_on = 1;
	log_notice("reads are held at the test gate %s", path);
}

/* The calling thread's read was held already (gate_held()). */
static __thread bool held;

void gate_held(bool on)
{
	held = on;
}

void gate_hold(pid_t pid, const char *method, uid_t uid, int timeout_ms)
{
	uint64_t until = clock_now_ns() + (uint64_t)timeout_ms * 1000000ull;
	char line[96];
	int fd, n;

	if (!gate_on || held)
		return;
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return;
	if (connect(fd, (struct sockaddr *)&gate_addr, sizeof(gate_addr)) < 0)
		goto out;
	n = snprintf(line, sizeof(line), "read %d %s %u\n", (int)pid, method,
		     (unsigned)uid);
	if (send(fd, line, (size_t)n, MSG_NOSIGNAL) != n)
		goto out;
	for (;;) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		uint64_t now = clock_now_ns();

		if (now >= until)
			break;
		n = poll(&p, 1, (int)((until - now) / 1000000u) + 1);
		if (n > 0 || (n < 0 && errno != EINTR))
			break;
	}
out:
	close(fd);
}
