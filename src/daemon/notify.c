/*
 * notify.c - the daemon's side of systemd's notification protocol
 * (notify.h).
 *
 * One small thread keeps STATUS= current and, until the scheduler takes
 * over by calling notify_watchdog(), feeds the watchdog. The socket to
 * NOTIFY_SOCKET is connected once, at start, while the daemon is still
 * root: the service gives up root later (ptracer_drop()), and a socket
 * that only root may write to stays ours to send on. Datagrams, one per
 * message, so any thread may send; libsystemd's sd_notify() is the
 * fallback when the connection could not be made.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <systemd/sd-daemon.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "cond.h"
#include "notify.h"

#define STATUS_PERIOD_US 2000000u

static bool enabled;		      /* NOTIFY_SOCKET set; written by init */
static uint64_t watchdog_usec;	      /* 0: no watchdog; written by init */
static _Atomic uint64_t last_ping_us; /* CLOCK_MONOTONIC of the last one */
static _Atomic bool pinged_outside;   /* notify_watchdog() was called */
static bool (*health_fn)(void *);     /* written before notify_ready() */
static void *health_arg;
static _Atomic bool unhealthy_said; /* logged once per spell */
static int notify_fd = -1;	    /* connected to NOTIFY_SOCKET */

/* A datagram socket connected to path ("@..." abstract), or -1. */
static int connect_notify(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	size_t n = strlen(path);
	socklen_t len;
	int fd;

	if ((path[0] != '/' && path[0] != '@') || n >= sizeof(sa.sun_path))
		return -1;
	memcpy(sa.sun_path, path, n);
	if (path[0] == '@')
		sa.sun_path[0] = '\0';
	len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n +
			  (path[0] == '/'));
	fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd >= 0 && connect(fd, (struct sockaddr *)&sa, len) < 0) {
		close(fd);
		fd = -1;
	}
	return fd;
}

/* Sends one message; 0 or a negative errno. */
static int say(const char *msg)
{
	/* A manager that made its socket anew (re-executed): by path. */
	if (notify_fd < 0 ||
	    send(notify_fd, msg, strlen(msg), MSG_NOSIGNAL) < 0)
		return sd_notify(0, msg);
	return 0;
}

void notify_set_health(bool (*healthy)(void *arg), void *arg)
{
	health_fn = healthy;
	health_arg = arg;
}

static struct {
	pthread_t thread;
	bool running;
	bool stop; /* under lock */
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct registry *reg;
	char url[128];
} st = {
	.lock = PTHREAD_MUTEX_INITIALIZER,
};

static uint64_t mono_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

void notify_init(void)
{
	uint64_t usec = 0;

	enabled = getenv("NOTIFY_SOCKET") != NULL;
	if (enabled)
		notify_fd = connect_notify(getenv("NOTIFY_SOCKET"));
	/* sd_watchdog_enabled() checks that WATCHDOG_PID, if set, is us. */
	if (enabled && sd_watchdog_enabled(0, &usec) > 0 && usec > 0)
		watchdog_usec = usec;
}

/* Sends WATCHDOG=1 unless one went out less than WatchdogUsec/2 ago. */
static void ping(void)
{
	uint64_t now = mono_us();
	uint64_t last =
		atomic_load_explicit(&last_ping_us, memory_order_relaxed);

	if (last && now - last < watchdog_usec / 2)
		return;
	if (health_fn && !health_fn(health_arg)) {
		if (!atomic_exchange(&unhealthy_said, true))
			log_warn("not feeding the systemd watchdog: the "
				 "symbolizer makes no progress");
		return;
	}
	atomic_store(&unhealthy_said, false);
	/* Whoever wins the exchange sends; the others had nothing to do. */
	if (!atomic_compare_exchange_strong(&last_ping_us, &last, now))
		return;
	(void)say("WATCHDOG=1");
}

void notify_watchdog(void)
{
	if (!watchdog_usec)
		return;
	if (!atomic_load_explicit(&pinged_outside, memory_order_relaxed))
		atomic_store(&pinged_outside, true);
	ping();
}

static void send_status(size_t ntargets)
{
	char msg[256];
	int rc;

	snprintf(msg, sizeof(msg), "STATUS=%zu target%s, serving %s", ntargets,
		 ntargets == 1 ? "" : "s", st.url);
	rc = say(msg);

	if (rc < 0)
		log_debug("sd_notify: %s", strerror(-rc));
}

/*
 * The status thread: wakes every STATUS_PERIOD_US (or WatchdogUsec/4 when
 * it feeds the watchdog), re-sends STATUS= when the count changed.
 */
static void *status_main(void *arg)
{
	size_t shown = (size_t)(uintptr_t)arg;
	uint64_t period = STATUS_PERIOD_US;
	struct timespec until;

	/* Named from inside: for itself glibc uses prctl, not /proc. */
	pthread_setname_np(pthread_self(), "sw-notify");
	if (watchdog_usec && watchdog_usec / 4 < period)
		period = watchdog_usec / 4 ? watchdog_usec / 4 : 1;
	pthread_mutex_lock(&st.lock);
	while (!st.stop) {
		size_t n;

		clock_gettime(CLOCK_MONOTONIC, &until);
		until.tv_sec += (time_t)(period / 1000000u);
		until.tv_nsec += (long)(period % 1000000u) * 1000;
		if (until.tv_nsec >= 1000000000L) {
			until.tv_sec++;
			until.tv_nsec -= 1000000000L;
		}
		while (!st.stop && pthread_cond_timedwait(&st.cond, &st.lock,
							  &until) != ETIMEDOUT)
			;
		if (st.stop)
			break;
		pthread_mutex_unlock(&st.lock);
		if (watchdog_usec && !atomic_load(&pinged_outside))
			ping();
		n = registry_count(st.reg);
		if (n != shown) {
			send_status(n);
			shown = n;
		}
		pthread_mutex_lock(&st.lock);
	}
	pthread_mutex_unlock(&st.lock);
	return NULL;
}

int notify_ready(struct registry *reg, const char *url)
{
	char msg[256];
	size_t n;
	int rc;

	if (!enabled)
		return 0;
	st.reg = reg;
	snprintf(st.url, sizeof(st.url), "%s", url);
	n = registry_count(reg);
	snprintf(msg, sizeof(msg), "READY=1\nSTATUS=%zu target%s, serving %s",
		 n, n == 1 ? "" : "s", st.url);
	rc = say(msg);
	if (rc < 0)
		log_warn("cannot tell systemd we are ready: %s", strerror(-rc));
	if (watchdog_usec)
		ping();

	rc = cond_init_monotonic(&st.cond);
	if (rc != 0)
		goto out_warn;
	st.stop = false;
	rc = pthread_create(&st.thread, NULL, status_main,
			    (void *)(uintptr_t)n);
	if (rc != 0) {
		pthread_cond_destroy(&st.cond);
		goto out_warn;
	}
	st.running = true;
	return 0;

out_warn:
	log_warn("cannot start the systemd status thread: %s", strerror(rc));
	return -rc;
}

void notify_stopping(void)
{
	if (!enabled)
		return;
	(void)say("STOPPING=1\nSTATUS=stopping");
	if (!st.running)
		return;
	pthread_mutex_lock(&st.lock);
	st.stop = true;
	pthread_cond_signal(&st.cond);
	pthread_mutex_unlock(&st.lock);
	pthread_join(st.thread, NULL);
	pthread_cond_destroy(&st.cond);
	st.running = false;
}
