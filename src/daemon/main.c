/*
 * main.c - stackwatchd: start-up, the signal loop and an orderly shutdown.
 *
 * The main thread blocks the termination signals before any other thread
 * exists (so every thread inherits the mask) and waits for them with
 * sigwait(). SIGTERM or SIGINT: stop accepting, let the requests in flight
 * finish within their deadlines, tell systemd, exit 0. A start-up error
 * exits 1 with one line saying what and why.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "collector/collect.h"
#include "collector/signal/handler.h"
#include "cores.h"
#include "http.h"
#include "log.h"
#include "model/clock.h"
#include "notify.h"
#include "options.h"
#include "privsep/parsers.h"
#include "privsep/worker.h"
#include "gate.h"
#include "guard.h"
#include "ptracer.h"
#include "registry.h"
#include "scheduler.h"
#include "stacks.h"

static void block_signals(sigset_t *set)
{
	sigemptyset(set);
	sigaddset(set, SIGTERM);
	sigaddset(set, SIGINT);
	sigaddset(set, SIGHUP);
	pthread_sigmask(SIG_BLOCK, set, NULL);
	signal(SIGPIPE, SIG_IGN);
}

static int wait_for_stop(const sigset_t *set)
{
	for (;;) {
		int sig;

		if (sigwait(set, &sig) != 0)
			continue;
		if (sig == SIGHUP) {
			log_info("SIGHUP ignored: restart to reload settings");
			continue;
		}
		return sig;
	}
}

/* A symbolization this long is stuck, not slow: past any budget. */
#define SYM_STUCK_NS (30ull * 1000000000ull)

/*
 * For the watchdog: the daemon can do its job: the symbolizer makes
 * progress, and a snapshot helper runs (with none, none can come back).
 */
static bool healthy(void *arg)
{
	return !stacks_sym_stuck(arg, clock_now_ns(), SYM_STUCK_NS) &&
	       cores_state(NULL, 0) < 2;
}

/* The parser workers' pool says what went wrong in our log. */
static void parsers_log(bool warn, const char *line)
{
	if (warn)
		log_warn("%s", line);
	else
		log_info("%s", line);
}

/*
 * The user parser workers run as: stackwatchd's own (a system user the
 * installation makes), else nobody's.
 */
static void worker_user(uid_t *uid, gid_t *gid)
{
	const struct passwd *pw = getpwnam("stackwatchd");

	if (!pw)
		pw = getpwnam("nobody");
	*uid = pw ? pw->pw_uid : 65534;
	*gid = pw ? pw->pw_gid : 65534;
}

int main(int argc, char **argv)
{
	struct options o;
	struct registry *reg = NULL;
	struct stacks st;
	struct http *http = NULL;
	struct scheduler *sched = NULL;
	char url[128], why[256], lwhy[200] = "";
	sigset_t set;
	int rc, port, sig, prc, lrc;
	uid_t wuid;
	gid_t wgid;

	/* The snapshot helper is this program, started by ptracer_start(). */
	if ((argc == 2 || argc == 3) &&
	    strcmp(argv[1], "--snapshot-helper") == 0)
		return ptracer_main(
			3, !(argc == 3 &&
			     strcmp(argv[2], "--no-kernel-reads") == 0));
	/* So is each parser worker, started by a helper (parsers.h). */
	if (argc >= 2 && strcmp(argv[1], "--parser-worker") == 0)
		return worker_main(argc, argv);
	rc = options_parse(&o, argc, argv);
	if (rc != 0) {
		options_release(&o);
		return rc > 0 ? 0 : 1;
	}
	log_set_level(o.log_level);
	if (o.token_file[0]) {
		char twhy[sizeof(o.token_file) + 160];

		rc = options_read_token(o.token_file, &o.token, twhy,
					sizeof(twhy));
		if (rc < 0) {
			fprintf(stderr,
				"stackwatchd: cannot use the token file %s: "
				"%s\n",
				o.token_file,
				twhy[0]		? twhy
				: rc == -EINVAL ? "empty or malformed token"
						: sw_strerror(rc));
			options_release(&o);
			return 1;
		}
	}
	/* Symbols come from this machine only, never from the network. */
	unsetenv("DEBUGINFOD_URLS");
	gate_init();
	/*
	 * The only process of ours that may ptrace is the helper, started
	 * before any thread; this one forbids itself ptrace from here on.
	 */
	/* Its user is looked up now: no name service once locked. */
	worker_user(&wuid, &wgid);
	parsers_set_log(parsers_log);
	if (parsers_init(wuid, wgid, ptracer_spawn_worker) < 0) {
		fprintf(stderr, "stackwatchd: out of memory\n");
		return 1;
	}
	prc = ptracer_start(o.kernel_reads);
	lrc = prc == 0 ? ptracer_lockdown(wuid, wgid, lwhy, sizeof(lwhy)) : 0;
	guard_service_locked(prc == 0 && lrc == 0,
			     prc < 0 ? "no snapshot helper runs" : lwhy);
	notify_init();
	block_signals(&set);
	/* Our own threads are a target too: install the collector first. */
	rc = collect_install();
	if (rc < 0) {
		fprintf(stderr,
			"stackwatchd: cannot install the dump signal "
			"handler: %s\n",
			sw_strerror(rc));
		return 1;
	}
	/* The helpers' keeper: a thread, so after the lockdown and after
	 * the handler every thread of ours answers with. */
	if (prc == 0 && (rc = cores_supervise()) < 0)
		log_warn("the snapshot helpers are not watched: %s",
			 sw_strerror(rc));
	if ((rc = parsers_start()) < 0)
		log_warn("parser workers are not kept: %s", sw_strerror(rc));
	registry_set_limits(&(struct registry_limits){
		.max_targets_per_user = o.max_targets_per_user,
		.max_dump_addresses = o.max_dump_addresses,
		.max_ptraced_per_user = o.max_ptraced_per_user,
	});
	rc = registry_start(o.agent_socket, &stacks_hooks, &reg);
	if (rc < 0) {
		fprintf(stderr,
			"stackwatchd: cannot listen for agents on %s: %s\n",
			o.agent_socket, sw_strerror(rc));
		return 1;
	}
	if (stacks_init(&st, reg, o.max_dump_rate, o.history, o.stuck_after_s) <
	    0) {
		fprintf(stderr, "stackwatchd: out of memory\n");
		registry_stop(reg);
		return 1;
	}
	stacks_set_limits(&st, o.symbolize_budget_ms,
			  (size_t)o.max_history_mib << 20);
	stacks_set_jit_limit(&st, (size_t)o.max_jit_mib << 20);
	stacks_set_history(
		&st, &(struct stacks_history_opts){
			     .seconds = o.history_seconds,
			     .sample_interval_ms = o.sample_interval_ms,
			     .ptrace_interval_ms =
				     o.sample_ptrace ? o.ptrace_interval_ms : 0,
		     });
	notify_set_health(healthy, &st);
	registry_keep_ptraced(reg, o.sample_ptrace);
	rc = sched_start(reg, &st, o.sample_interval_ms,
			 o.sample_ptrace ? o.ptrace_interval_ms : 0,
			 o.profile_hz, o.timeout_ms, &sched);
	if (rc < 0) {
		fprintf(stderr, "stackwatchd: cannot start sampling: %s\n",
			sw_strerror(rc));
		return 1;
	}
	sched_set_profiles_per_user(sched, o.max_profiles_per_user);
	rc = http_start(&o, reg, &st, sched, &http, &port, why, sizeof(why));
	if (rc < 0) {
		fprintf(stderr, "stackwatchd: %s\n", why);
		/* The samplers use the registry and the service: first. */
		sched_stop(sched);
		registry_stop(reg);
		stacks_release(&st);
		return 1;
	}
	/* Every socket is bound: root is no longer needed here. */
	rc = ptracer_drop(wuid, wgid, why, sizeof(why));
	guard_service_dropped(rc == 0, why);
	if (rc < 0)
		log_warn("the service keeps root and its capabilities: %s",
			 why);
	if (strchr(o.listen_addr, ':'))
		fprintf(stderr, "listening on http://[%s]:%d\n", o.listen_addr,
			port);
	else
		fprintf(stderr, "listening on http://%s:%d\n", o.listen_addr,
			port);
	log_notice("agents register on %s", o.agent_socket);
	if (prc < 0)
		log_warn("no ptrace snapshots: cannot start the snapshot "
			 "helper: %s",
			 sw_strerror(prc));
	else if (lrc == 0)
		log_info("ptrace snapshots by helper pid %d; ptrace is denied "
			 "to this process",
			 (int)ptracer_pid());
	else if (lrc == -ENOSYS) /* a sanitizer build, by design */
		log_info("this process's seccomp filter is not in force (%s)",
			 lwhy);
	else
		log_warn("this process's seccomp filter is not in force (%s): "
			 "ptrace and the rest are not locked out of it",
			 lwhy);
	/* Said at the default level only when something is missing. */
	if (ptracer_kernel_status(why, sizeof(why)) == 0)
		log_info("kernel reads: on (blocked threads are read with no "
			 "signal and no stop)");
	else
		log_notice("kernel reads: off: %s; blocked threads are read "
			   "by signal (agent) or ptrace",
			   why);
	if (http_unix_socket(http))
		log_info("HTTP also on %s", http_unix_socket(http));
	if (strchr(o.listen_addr, ':'))
		snprintf(url, sizeof(url), "http://[%s]:%d", o.listen_addr,
			 port);
	else
		snprintf(url, sizeof(url), "http://%s:%d", o.listen_addr, port);
	notify_ready(reg, url);

	sig = wait_for_stop(&set);
	log_notice("%s: stopping", strsignal(sig));
	notify_stopping();
	http_stop(http);
	sched_stop(sched);
	registry_stop(reg);
	stacks_release(&st);
	parsers_stop();
	ptracer_stop();
	options_release(&o);
	return 0;
}
