/*
 * options.h - the daemon's settings: command line, config file, defaults
 * (INTERFACE.md, "stackwatchd").
 */
#ifndef SWD_OPTIONS_H
#define SWD_OPTIONS_H

#include <stdbool.h>
#include <stddef.h>

#include "log.h"

#define OPT_MAX_HOSTS 16

struct options {
	char listen_addr[64]; /* numeric IPv4 or IPv6 */
	int listen_port;      /* 0: pick a free one */
	char agent_socket[108];
	char http_socket[108]; /* "": none */
	bool http_socket_set;  /* given: failing to serve it is fatal */
	char admin_group[64];  /* "": none */
	bool admin_group_set;
	char token_file[4096];
	char *token;		/* read from token_file at start-up; owned */
	int sample_interval_ms; /* 0: no periodic sampling */
	bool sample_ptrace;	/* sample processes without the agent too */
	int ptrace_interval_ms; /* and how often */
	bool kernel_reads;	/* blocked threads read from the kernel */
	int profile_hz;		/* /debug/pprof/profile's sampling rate */
	int stuck_after_s;
	int timeout_ms;
	int max_dump_rate;   /* per target per second */
	int history;	     /* samples kept per target at most; 0: no limit */
	int history_seconds; /* how far back they reach */
	/* What one user (root aside where said) may cost the daemon. */
	int max_targets_per_user;  /* registered processes, root aside */
	int max_ptraced_per_user;  /* ptrace entries, admins aside */
	int max_dump_addresses;	   /* in one dump, root's aside */
	int max_history_mib;	   /* samples kept, all of the user's */
	int max_jit_mib;	   /* parsed perf maps, all of the user's */
	int symbolize_budget_ms;   /* symbolizing one dump, then no more */
	int max_profiles_per_user; /* profile runs at a time, root aside */
	char config[4096];
	enum log_level log_level;
	char *allow_hosts[OPT_MAX_HOSTS]; /* extra Host names, owned */
	int nallow_hosts;
};

/*
 * Fills o from the defaults, then the config file (--config, else
 * /etc/stackwatch/stackwatchd.conf when present), then the command line.
 * Returns 0 to run, 1 when --help or --version was answered (exit 0), or
 * -1 after printing one line saying what is wrong (exit 1).
 */
int options_parse(struct options *o, int argc, char **argv);

/*
 * Reads a token file: its content with surrounding whitespace removed.
 * Returns 0 with *out malloc'd; -EPERM with the reason and its fix in why
 * when the file is not a regular file of the daemon's euid that only that
 * user may read and write (mode 0600 or less), as ssh demands of a key;
 * -EINVAL when it is empty or holds whitespace inside; or the error of
 * opening or reading it (why empty then).
 */
int options_read_token(const char *path, char **out, char *why, size_t whylen);

/* Frees what o owns. */
void options_release(struct options *o);

#endif /* SWD_OPTIONS_H */
