/*
 * options.c - command line and config file of stackwatchd (options.h).
 *
 * The config file holds "key = value" lines with the long option names
 * (without the dashes) and "#" comments; the command line overrides it.
 * An unknown key or a bad value is a start-up error naming the line.
 * A key given twice takes the later value, except allow-host, which adds
 * a name each time; allow-host on the command line replaces the file's.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "options.h"
#include "scheduler.h"
#include "model/paths.h"
#include "stackwatch.h"

#define DEFAULT_CONFIG "/etc/stackwatch/stackwatchd.conf"

static const char usage[] =
	"Usage: stackwatchd [OPTION]...\n"
	"Serve the stacks of every process that loads the stackwatch agent.\n"
	"\n"
	"  --listen ADDR:PORT      HTTP address (default 127.0.0.1:9407;\n"
	"                          port 0 picks a free one)\n"
	"  --agent-socket PATH     unix socket agents register on\n"
	"  --http-socket PATH      HTTP on a unix socket too (default\n"
	"                          /run/stackwatch/http.sock for root; '' "
	"none)\n"
	"  --admin-group NAME      its members see every process (default\n"
	"                          'stackwatch' when that group exists)\n"
	"  --token-file PATH       require 'Authorization: Bearer TOKEN'\n"
	"                          (PATH: this user's alone, chmod 600)\n"
	"  --allow-host NAME       accept this Host header too (repeatable)\n"
	"  --sample-interval MS    periodic sampling, 0 = off (default 1000)\n"
	"  --sample-ptrace         sample processes without the agent too,\n"
	"                          once opened (ptrace snapshots)\n"
	"  --ptrace-interval MS    how often (default 10000)\n"
	"  --no-kernel-reads       never read blocked threads from the\n"
	"                          kernel (BPF): signals and ptrace only\n"
	"  --profile-hz N          samples a second of /debug/pprof/profile\n"
	"                          (default 19)\n"
	"  --stuck-after SECONDS   flag threads stuck this long (default 10)\n"
	"  --timeout MS            deadline of one dump (default 1000)\n"
	"  --max-dump-rate N       dumps per target per second (default 30)\n"
	"  --history-seconds S     how far back each target's samples reach\n"
	"                          (default 900)\n"
	"  --history N             and at most this many of them (default:\n"
	"                          no limit but the time and the memory)\n"
	"  --max-targets-per-user N\n"
	"                          registered processes per user, root\n"
	"                          aside (default 256)\n"
	"  --max-ptraced-per-user N\n"
	"                          processes without the agent one user's\n"
	"                          requests keep open, admins aside\n"
	"                          (default 16)\n"
	"  --max-dump-addresses N  addresses in one dump of a user's process,\n"
	"                          root's aside (default 1048576)\n"
	"  --max-history-mib N     MiB of samples kept per user (default 256)\n"
	"  --max-jit-mib N         MiB of parsed perf maps per user (default\n"
	"                          128)\n"
	"  --symbolize-budget MS   symbolizing time of one dump (default 500)\n"
	"  --max-profiles-per-user N\n"
	"                          profiles in progress per user, root\n"
	"                          aside (default 4)\n"
	"  --config FILE           key = value settings (default\n"
	"                          " DEFAULT_CONFIG " when present)\n"
	"  --log-level LEVEL       error, warning, notice, info or debug\n"
	"  --version               print the version and exit\n"
	"  --help                  print this help and exit\n";

enum {
	O_LISTEN = 256,
	O_SOCKET,
	O_HTTP_SOCKET,
	O_ADMIN_GROUP,
	O_TOKEN,
	O_ALLOW_HOST,
	O_INTERVAL,
	O_SAMPLE_PTRACE,
	O_KREADS,
	O_NO_KREADS,
	O_PTRACE_INTERVAL,
	O_PROFILE_HZ,
	O_STUCK,
	O_TIMEOUT,
	O_RATE,
	O_HISTORY,
	O_HISTORY_SECONDS,
	O_MAX_TARGETS,
	O_MAX_PTRACED,
	O_MAX_ADDRS,
	O_MAX_HISTORY,
	O_MAX_JIT,
	O_SYM_BUDGET,
	O_MAX_PROFILES,
	O_CONFIG,
	O_LOG_LEVEL,
	O_VERSION,
	O_HELP,
};

static const struct option longopts[] = {
	{ "listen", required_argument, NULL, O_LISTEN },
	{ "agent-socket", required_argument, NULL, O_SOCKET },
	{ "http-socket", required_argument, NULL, O_HTTP_SOCKET },
	{ "admin-group", required_argument, NULL, O_ADMIN_GROUP },
	{ "token-file", required_argument, NULL, O_TOKEN },
	{ "allow-host", required_argument, NULL, O_ALLOW_HOST },
	{ "sample-interval", required_argument, NULL, O_INTERVAL },
	{ "sample-ptrace", optional_argument, NULL, O_SAMPLE_PTRACE },
	{ "kernel-reads", optional_argument, NULL, O_KREADS },
	{ "no-kernel-reads", no_argument, NULL, O_NO_KREADS },
	{ "ptrace-interval", required_argument, NULL, O_PTRACE_INTERVAL },
	{ "profile-hz", required_argument, NULL, O_PROFILE_HZ },
	{ "stuck-after", required_argument, NULL, O_STUCK },
	{ "timeout", required_argument, NULL, O_TIMEOUT },
	{ "max-dump-rate", required_argument, NULL, O_RATE },
	{ "history", required_argument, NULL, O_HISTORY },
	{ "history-seconds", required_argument, NULL, O_HISTORY_SECONDS },
	{ "max-targets-per-user", required_argument, NULL, O_MAX_TARGETS },
	{ "max-ptraced-per-user", required_argument, NULL, O_MAX_PTRACED },
	{ "max-dump-addresses", required_argument, NULL, O_MAX_ADDRS },
	{ "max-history-mib", required_argument, NULL, O_MAX_HISTORY },
	{ "max-jit-mib", required_argument, NULL, O_MAX_JIT },
	{ "symbolize-budget", required_argument, NULL, O_SYM_BUDGET },
	{ "max-profiles-per-user", required_argument, NULL, O_MAX_PROFILES },
	{ "config", required_argument, NULL, O_CONFIG },
	{ "log-level", required_argument, NULL, O_LOG_LEVEL },
	{ "version", no_argument, NULL, O_VERSION },
	{ "help", no_argument, NULL, O_HELP },
	{ NULL, 0, NULL, 0 },
};

static int parse_int(const char *s, long lo, long hi, int *out)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < lo || v > hi)
		return -EINVAL;
	*out = (int)v;
	return 0;
}

/* yes/no, true/false, on/off, 1/0. */
static int parse_bool(const char *s, bool *out)
{
	static const char *const yes[] = { "yes", "true", "on", "1" };
	static const char *const no[] = { "no", "false", "off", "0" };

	for (size_t i = 0; i < 4; i++) {
		if (strcmp(s, yes[i]) == 0) {
			*out = true;
			return 0;
		}
		if (strcmp(s, no[i]) == 0) {
			*out = false;
			return 0;
		}
	}
	return -EINVAL;
}

/* "ADDR:PORT", "[V6]:PORT". */
static int parse_listen(struct options *o, const char *s)
{
	const char *colon = strrchr(s, ':');
	const char *host = s;
	size_t hlen;

	if (!colon)
		return -EINVAL;
	hlen = (size_t)(colon - s);
	if (hlen >= 2 && s[0] == '[' && s[hlen - 1] == ']') {
		host++;
		hlen -= 2;
	}
	if (hlen == 0 || hlen >= sizeof(o->listen_addr))
		return -EINVAL;
	memcpy(o->listen_addr, host, hlen);
	o->listen_addr[hlen] = '\0';
	return parse_int(colon + 1, 0, 65535, &o->listen_port);
}

static int copy_str(char *dst, size_t size, const char *s)
{
	if (!*s || strlen(s) >= size)
		return -EINVAL;
	memcpy(dst, s, strlen(s) + 1);
	return 0;
}

/* Applies one setting; key is a long option name. */
static int apply(struct options *o, int key, const char *val)
{
	enum log_level lvl;

	if (!val && (key == O_SAMPLE_PTRACE || key == O_KREADS))
		val = "yes"; /* the bare flag */
	if (!val && key == O_NO_KREADS)
		val = "yes";
	if (!val)
		return -EINVAL;
	switch (key) {
	case O_LISTEN:
		return parse_listen(o, val);
	case O_SOCKET:
		return copy_str(o->agent_socket, sizeof(o->agent_socket), val);
	case O_HTTP_SOCKET:
		o->http_socket_set = true;
		if (!*val) {
			o->http_socket[0] = '\0';
			return 0;
		}
		return copy_str(o->http_socket, sizeof(o->http_socket), val);
	case O_ADMIN_GROUP:
		o->admin_group_set = true;
		if (!*val) {
			o->admin_group[0] = '\0';
			return 0;
		}
		return copy_str(o->admin_group, sizeof(o->admin_group), val);
	case O_TOKEN:
		return copy_str(o->token_file, sizeof(o->token_file), val);
	case O_ALLOW_HOST:
		if (o->nallow_hosts == OPT_MAX_HOSTS || !*val ||
		    strlen(val) > 255)
			return -EINVAL;
		o->allow_hosts[o->nallow_hosts] = strdup(val);
		if (!o->allow_hosts[o->nallow_hosts])
			return -ENOMEM;
		o->nallow_hosts++;
		return 0;
	case O_INTERVAL:
		return parse_int(val, 0, 86400000, &o->sample_interval_ms);
	case O_SAMPLE_PTRACE:
		return parse_bool(val, &o->sample_ptrace);
	case O_KREADS:
		return parse_bool(val, &o->kernel_reads);
	case O_NO_KREADS: {
		bool no;
		int r = parse_bool(val, &no);

		if (r == 0)
			o->kernel_reads = !no;
		return r;
	}
	case O_PTRACE_INTERVAL:
		return parse_int(val, 100, 86400000, &o->ptrace_interval_ms);
	case O_PROFILE_HZ:
		return parse_int(val, 1, 250, &o->profile_hz);
	case O_STUCK:
		return parse_int(val, 1, 86400, &o->stuck_after_s);
	case O_TIMEOUT:
		return parse_int(val, 1, 10000, &o->timeout_ms);
	case O_RATE:
		return parse_int(val, 1, 1000, &o->max_dump_rate);
	case O_HISTORY:
		return parse_int(val, 1, 10000, &o->history);
	case O_HISTORY_SECONDS:
		return parse_int(val, 1, 86400, &o->history_seconds);
	case O_MAX_TARGETS:
		return parse_int(val, 1, 4096, &o->max_targets_per_user);
	case O_MAX_PTRACED:
		return parse_int(val, 1, 960, &o->max_ptraced_per_user);
	case O_MAX_ADDRS:
		return parse_int(val, 1000, 16777216, &o->max_dump_addresses);
	case O_MAX_HISTORY:
		return parse_int(val, 1, 1048576, &o->max_history_mib);
	case O_MAX_JIT:
		return parse_int(val, 1, 1048576, &o->max_jit_mib);
	case O_SYM_BUDGET:
		return parse_int(val, 10, 60000, &o->symbolize_budget_ms);
	case O_MAX_PROFILES:
		return parse_int(val, 1, SCHED_MAX_PROFILES,
				 &o->max_profiles_per_user);
	case O_LOG_LEVEL:
		if (log_parse_level(val, &lvl) < 0)
			return -EINVAL;
		o->log_level = lvl;
		return 0;
	default:
		return -EINVAL;
	}
}

static int key_of(const char *name)
{
	for (const struct option *lo = longopts; lo->name; lo++)
		if (strcmp(lo->name, name) == 0 && lo->has_arg &&
		    lo->val != O_CONFIG)
			return lo->val;
	return -1;
}

static const char *name_of(int key)
{
	for (const struct option *lo = longopts; lo->name; lo++)
		if (lo->val == key)
			return lo->name;
	return "?";
}

/* What a good value of key looks like, for the error message. */
static const char *expected(int key)
{
	switch (key) {
	case O_LISTEN:
		return "ADDR:PORT with a numeric address";
	case O_SOCKET:
	case O_HTTP_SOCKET:
	case O_TOKEN:
		return "a path";
	case O_ADMIN_GROUP:
		return "a group name";
	case O_SAMPLE_PTRACE:
	case O_KREADS:
	case O_NO_KREADS:
		return "yes or no";
	case O_PTRACE_INTERVAL:
		return "milliseconds, 100 to 86400000";
	case O_PROFILE_HZ:
		return "a number, 1 to 250";
	case O_ALLOW_HOST:
		return "a host name, at most 16 of them";
	case O_INTERVAL:
		return "milliseconds, 0 to 86400000";
	case O_STUCK:
		return "seconds, 1 to 86400";
	case O_TIMEOUT:
		return "milliseconds, 1 to 10000";
	case O_RATE:
		return "a number, 1 to 1000";
	case O_HISTORY:
		return "a number, 1 to 10000";
	case O_HISTORY_SECONDS:
		return "seconds, 1 to 86400";
	case O_MAX_TARGETS:
		return "a number, 1 to 4096";
	case O_MAX_PTRACED:
		return "a number, 1 to 960";
	case O_MAX_ADDRS:
		return "a number, 1000 to 16777216";
	case O_MAX_HISTORY:
		return "MiB, 1 to 1048576";
	case O_SYM_BUDGET:
		return "milliseconds, 10 to 60000";
	case O_MAX_PROFILES:
		return "a number, 1 to 64";
	case O_LOG_LEVEL:
		return "error, warning, notice, info or debug";
	default:
		return "?";
	}
}

static void free_hosts(struct options *o)
{
	for (int i = 0; i < o->nallow_hosts; i++)
		free(o->allow_hosts[i]);
	o->nallow_hosts = 0;
}

static char *trim(char *s)
{
	char *e;

	while (*s == ' ' || *s == '\t')
		s++;
	e = s + strlen(s);
	while (e > s && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\n' ||
			 e[-1] == '\r'))
		*--e = '\0';
	return s;
}

/*
 * Cuts a "#" comment off line: one that starts the line or follows a
 * blank, so that a value may still hold a "#" (a path like /srv/a#b).
 */
static void cut_comment(char *line)
{
	for (char *p = line; *p; p++) {
		if (*p == '#' && (p == line || p[-1] == ' ' || p[-1] == '\t')) {
			*p = '\0';
			return;
		}
	}
}

/*
 * Applies the config file at path to o. A missing file is fine unless
 * required (given with --config). Returns 0, or -1 after printing one line
 * that names the file and the line.
 */
static int read_config(struct options *o, const char *path, bool required)
{
	char line[4096];
	int lineno = 0, rc = 0;
	FILE *f;

	f = fopen(path, "re");
	if (!f) {
		if (!required && errno == ENOENT)
			return 0;
		fprintf(stderr, "stackwatchd: cannot read %s: %s\n", path,
			strerror(errno));
		return -1;
	}
	snprintf(o->config, sizeof(o->config), "%s", path);
	while (fgets(line, sizeof(line), f)) {
		char *eq, *key, *val;
		size_t len = strlen(line);
		int k;

		lineno++;
		if (len == sizeof(line) - 1 && line[len - 1] != '\n' &&
		    !feof(f)) {
			fprintf(stderr,
				"stackwatchd: %s:%d: line longer than %zu "
				"bytes\n",
				path, lineno, sizeof(line) - 2);
			rc = -1;
			break;
		}
		cut_comment(line);
		key = trim(line);
		if (!*key)
			continue;
		eq = strchr(key, '=');
		if (!eq) {
			fprintf(stderr,
				"stackwatchd: %s:%d: expected 'key = value'\n",
				path, lineno);
			rc = -1;
			break;
		}
		*eq = '\0';
		key = trim(key);
		val = trim(eq + 1);
		k = key_of(key);
		if (k < 0) {
			fprintf(stderr,
				"stackwatchd: %s:%d: unknown key '%s'\n", path,
				lineno, key);
			rc = -1;
			break;
		}
		if (apply(o, k, val) < 0) {
			fprintf(stderr,
				"stackwatchd: %s:%d: bad value '%s' for %s "
				"(expected %s)\n",
				path, lineno, val, key, expected(k));
			rc = -1;
			break;
		}
	}
	if (rc == 0 && ferror(f)) {
		fprintf(stderr, "stackwatchd: cannot read %s: %s\n", path,
			strerror(errno));
		rc = -1;
	}
	fclose(f);
	return rc;
}

static void set_defaults(struct options *o)
{
	memset(o, 0, sizeof(*o));
	snprintf(o->listen_addr, sizeof(o->listen_addr), "127.0.0.1");
	o->listen_port = 9407;
	if (paths_default_socket(o->agent_socket, sizeof(o->agent_socket)) < 0)
		o->agent_socket[0] = '\0';
	if (paths_default_http_socket(o->http_socket, sizeof(o->http_socket)) <
	    0)
		o->http_socket[0] = '\0';
	snprintf(o->admin_group, sizeof(o->admin_group), "stackwatch");
	o->sample_interval_ms = 1000;
	o->ptrace_interval_ms = 10000;
	o->profile_hz = 19;
	o->kernel_reads = true;
	o->stuck_after_s = 10;
	o->timeout_ms = SW_DEFAULT_TIMEOUT_MS;
	o->max_dump_rate = 30;
	o->history = 0; /* no count of its own: history_seconds */
	o->history_seconds = 900;
	o->max_targets_per_user = 256;
	o->max_ptraced_per_user = 16;
	o->max_dump_addresses = 1 << 20;
	o->max_history_mib = 256;
	o->max_jit_mib = 128;
	o->symbolize_budget_ms = 500;
	o->max_profiles_per_user = SCHED_PROFILES_PER_USER;
	o->log_level = LOG_LVL_NOTICE;
}

int options_parse(struct options *o, int argc, char **argv)
{
	const char *config = NULL;
	bool cli_hosts = false;
	int c;

	set_defaults(o);
	/* First pass: only --config, --help, --version and usage errors. */
	opterr = 0;
	optind = 1;
	while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		if (c == O_HELP) {
			fputs(usage, stdout);
			return 1;
		}
		if (c == O_VERSION) {
			printf("stackwatchd %s\n", SW_VERSION);
			return 1;
		}
		if (c == O_CONFIG)
			config = optarg;
		if (c == '?' || c == ':') {
			fprintf(stderr,
				"stackwatchd: bad option '%s' (see --help)\n",
				argv[optind - 1]);
			return -1;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "stackwatchd: unexpected argument '%s'\n",
			argv[optind]);
		return -1;
	}
	if (read_config(o, config ? config : DEFAULT_CONFIG, config != NULL) <
	    0)
		return -1;
	optind = 1;
	while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		if (c == O_CONFIG)
			continue;
		/* The command line's host list replaces the file's. */
		if (c == O_ALLOW_HOST && !cli_hosts) {
			free_hosts(o);
			cli_hosts = true;
		}
		if (apply(o, c, optarg) < 0) {
			fprintf(stderr,
				"stackwatchd: bad value '%s' for --%s "
				"(expected %s)\n",
				optarg, name_of(c), expected(c));
			return -1;
		}
	}
	if (!o->agent_socket[0]) {
		fprintf(stderr, "stackwatchd: no usable agent socket path\n");
		return -1;
	}
	return 0;
}

/*
 * Checks the token file open on fd, as ssh checks a private key: a
 * regular file of the daemon's own user that nobody else may read or
 * write (no group or other permission bit at all). 0, or -EPERM with the
 * reason and the fix in why.
 */
static int check_token_file(int fd, const char *path, char *why, size_t whylen)
{
	struct stat st;

	if (fstat(fd, &st) < 0)
		return -errno;
	if (!S_ISREG(st.st_mode)) {
		snprintf(why, whylen, "not a regular file");
		return -EPERM;
	}
	if (st.st_uid != geteuid()) {
		snprintf(why, whylen,
			 "owned by uid %u, not by the daemon's user (uid %u); "
			 "run: chown %u %s",
			 (unsigned)st.st_uid, (unsigned)geteuid(),
			 (unsigned)geteuid(), path);
		return -EPERM;
	}
	if (st.st_mode & 077) {
		snprintf(why, whylen,
			 "group or others have access to it (mode %04o); "
			 "run: chmod 600 %s",
			 (unsigned)(st.st_mode & 07777), path);
		return -EPERM;
	}
	return 0;
}

/*
 * Reads the token: the file's content with surrounding whitespace removed.
 * An empty token is an error: it would let anyone in. The file opened is
 * the one checked (a symbolic link is followed, then the file behind it is
 * judged), without blocking on a FIFO or a device.
 */
int options_read_token(const char *path, char **out, char *why, size_t whylen)
{
	char buf[4097], *s, *e;
	size_t got = 0;
	ssize_t n;
	int fd, rc;

	why[0] = '\0';
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (fd < 0)
		return -errno;
	rc = check_token_file(fd, path, why, whylen);
	if (rc < 0)
		goto out_close;
	while (got < sizeof(buf) - 1) {
		n = read(fd, buf + got, sizeof(buf) - 1 - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			rc = -errno;
			goto out_close;
		}
		if (n == 0)
			break;
		got += (size_t)n;
	}
	buf[got] = '\0';
	s = buf;
	while (*s && strchr(" \t\r\n", *s))
		s++;
	e = s + strlen(s);
	while (e > s && strchr(" \t\r\n", e[-1]))
		*--e = '\0';
	if (!*s || strlen(s) != (size_t)(e - s)) {
		rc = -EINVAL;
		goto out_close;
	}
	*out = strdup(s);
	rc = *out ? 0 : -ENOMEM;
out_close:
	close(fd);
	return rc;
}

void options_release(struct options *o)
{
	free(o->token);
	o->token = NULL;
	free_hosts(o);
}
