/*
 * query.h - the parameters of the daemon's HTTP requests, read and
 * validated apart from the HTTP library, so that they can be fuzzed.
 *
 * The HTTP layer (http.c) looks the raw values up, already URL-decoded,
 * and hands them over; these functions decide what the request asked for
 * or why it is invalid (the reason becomes a 400). Unknown parameters are
 * never looked at, so they are ignored, as INTERFACE.md says.
 */
#ifndef SWD_QUERY_H
#define SWD_QUERY_H

#include <stdbool.h>
#include <sys/types.h>

#define QUERY_MAX_TIMEOUT_MS 10000
#define QUERY_MAX_SINCE_S 86400

enum query_format {
	QUERY_HTML,
	QUERY_JSON,
	QUERY_TEXT,
	QUERY_FOLDED,
	QUERY_PPROF /* gzipped protobuf (/debug/pprof/) */
};

/* The longest profile /debug/pprof/profile takes, in seconds. */
#define QUERY_MAX_SECONDS 300

/* The raw values of a request: NUL-terminated, NULL when absent. */
struct query_args {
	const char *pid;
	const char *format;
	const char *symbols;
	const char *timeout_ms;
	const char *max_frames; /* stacks: frames kept per thread */
	const char *since;
	const char *seconds; /* /debug/pprof/profile */
	const char *debug;   /* /debug/pprof/: 0 protobuf, 1 or 2 text */
	const char *until;   /* /api/v1/profile */
	const char *mode;    /* /api/v1/profile: wall or cpu */
	const char *accept;  /* the Accept header */
};

/* What a stacks request (/stacks, /api/v1/stacks) asked for. */
struct query_stacks {
	pid_t pid; /* 0: every target */
	enum query_format format;
	bool symbols;
	int timeout_ms;
	int max_frames; /* -1: not asked (SW_MAX_FRAMES); 0: all */
};

/* What a diff request (/api/v1/diff) asked for. */
struct query_diff {
	pid_t pid;
	double since; /* seconds */
	int timeout_ms;
};

/* What a /api/v1/profile request asked for. */
struct query_profile {
	pid_t pid;
	double since; /* seconds ago the window starts */
	double until; /* and ends; until < since */
	bool cpu;     /* mode=cpu: running threads only */
};

/* What a /debug/pprof/ request asked for. */
struct query_pprof {
	pid_t pid;		  /* 0: every target */
	enum query_format format; /* QUERY_PPROF, or QUERY_TEXT for debug */
	int timeout_ms;
	int seconds; /* profiles: 1 to QUERY_MAX_SECONDS, default 30 */
};

/*
 * Reads a stacks request: pid (a positive integer), format (json, text,
 * folded; html too where dflt is QUERY_HTML, whose Accept header may ask
 * for JSON instead), symbols (0 or 1), timeout_ms (1 to 10000, else
 * default_timeout_ms), max_frames (0, all, to SW_MAX_FRAMES_HARD). Returns NULL
 * with *q filled, or the reason the request is invalid (a static sentence);
 * q->format is then still the format the error should be written in. Never
 * fails on any bytes.
 */
const char *query_parse_stacks(const struct query_args *a,
			       enum query_format dflt, int default_timeout_ms,
			       struct query_stacks *q);

/*
 * Reads a diff request: pid (required, a positive integer), since
 * (required, seconds from 0 to 86400), timeout_ms (as above). Returns
 * NULL with *q filled, or the reason the request is invalid.
 */
const char *query_parse_diff(const struct query_args *a, int default_timeout_ms,
			     struct query_diff *q);

/*
 * Reads a /debug/pprof/ request: pid (optional, a positive integer),
 * timeout_ms (as above), seconds (1 to QUERY_MAX_SECONDS, default 30),
 * debug (0: the protobuf; 1 or 2: the text format, as Go's debug
 * levels are read by people). Returns NULL with *q filled, or the
 * reason the request is invalid.
 */
const char *query_parse_pprof(const struct query_args *a,
			      int default_timeout_ms, struct query_pprof *q);

/*
 * Reads a /api/v1/profile request: pid (required), since (seconds, 0 to
 * 86400, default 86400: the whole history), until (seconds, default 0,
 * less than since), mode (wall, the default, or cpu). Returns NULL with
 * *q filled, or the reason the request is invalid.
 */
const char *query_parse_profile(const struct query_args *a,
				struct query_profile *q);

#endif /* SWD_QUERY_H */
