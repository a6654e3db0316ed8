/*
 * common.c - what every subcommand of the stackwatch CLI shares: the usage
 * text, the error messages, output that is safe for a terminal, and the
 * check that stdout really went out.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "model/paths.h"
#include "model/sockcheck.h"

static const char short_usage[] =
	"usage: stackwatch [--url URL] targets\n"
	"       stackwatch [--url URL] dump [--format text|json|folded] "
	"[--max-frames N] [PID]\n"
	"       stackwatch dump --local [--format F] [--max-frames N] PID\n"
	"       stackwatch dump --core FILE [--exe PATH] [--format F] "
	"[--max-frames N]\n"
	"       stackwatch [--url URL] ps [--sort KEY] [--format text|json]\n"
	"       stackwatch [--url URL] stuck [--format text|json]\n"
	"       stackwatch [--url URL] diff [--since DURATION] "
	"[--format text|json] PID\n"
	"       stackwatch run [--socket PATH] -- CMD [ARG...]\n"
	"       stackwatch --version | --help\n";

void cli_usage(FILE *f)
{
	fputs(short_usage, f);
	fputs("\n"
	      "Shows the stack of every thread of running processes, through "
	      "the\nstackwatchd daemon.\n"
	      "\n"
	      "Commands:\n"
	      "  targets         list the processes registered with the "
	      "daemon\n"
	      "  dump [PID]      the stacks of one process, or of all when "
	      "PID is\n"
	      "                  omitted; --format text (default), json or "
	      "folded\n"
	      "  dump --local PID  a ptrace snapshot taken here, no daemon\n"
	      "  dump --core FILE  the stacks of a core file (--exe PATH: its "
	      "program)\n"
	      "                  --max-frames N: frames kept per thread "
	      "(default 256;\n"
	      "                  0: all, up to 4096)\n"
	      "  ps              every process you may see: threads, CPU, "
	      "thread\n"
	      "                  states, stuck threads, deadlock, how it is "
	      "read;\n"
	      "                  --sort pid (default), cpu, threads, stuck, "
	      "user, name\n"
	      "  stuck           the threads the daemon flags as stuck, with "
	      "their\n"
	      "                  innermost frames\n"
	      "  diff PID        what changed in PID's stacks since a sample "
	      "--since\n"
	      "                  ago (default 60s; 90, 90s, 5m, 1h)\n"
	      "  run CMD...      execute CMD in place (same pid) with the "
	      "agent\n"
	      "                  loaded; --socket PATH sets the daemon's "
	      "agent socket\n"
	      "                  (a warning when no daemon listens there)\n"
	      "\n"
	      "Options:\n"
	      "  --url URL       the daemon, http://HOST[:PORT][/PATH]; "
	      "default\n"
	      "                  $STACKWATCH_URL, else the daemon's unix "
	      "socket\n"
	      "                  when there is one ($STACKWATCH_HTTP_SOCKET,\n"
	      "                  /run/stackwatch/http.sock), "
	      "else " CLI_DEFAULT_URL ";\n"
	      "                  a socket not set up by root or you is "
	      "refused\n"
	      "  --version       print the version and exit\n"
	      "  --help          print this help and exit\n"
	      "\n"
	      "Environment: STACKWATCH_URL, STACKWATCH_HTTP_SOCKET, "
	      "STACKWATCH_TOKEN\n(sent as a bearer token).\n"
	      "Exit status: 0 success, 1 the daemon answered with an error, "
	      "2 usage\nerror, 3 the daemon cannot be reached, 4 no such "
	      "process, 5 not a\nprocess you may see (or a token is "
	      "needed), 6 a partial answer (some\nprocesses or threads "
	      "could not be read), 7 nothing to show (dump, ps:\nno process "
	      "you may see; stuck: no stuck thread); run: 126 or 127 when\n"
	      "CMD cannot be executed.\n",
	      f);
}

void cli_error(const char *fmt, ...)
{
	va_list ap;

	fflush(stdout);
	fputs("stackwatch: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

void cli_bad_answer(const struct cli *cli, const char *what)
{
	cli_error("unexpected answer from %s: %s", cli->where, what);
	cli_error("check that it is a stackwatchd (of this version or later); "
		  "name the daemon with --url");
}

int cli_usage_error(const char *fmt, ...)
{
	va_list ap;

	fflush(stdout);
	fputs("stackwatch: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	fputs(short_usage, stderr);
	return CLI_EUSAGE;
}

void cli_put_safe(FILE *f, const char *s)
{
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		putc(c < 0x20 || c == 0x7f ? '?' : c, f);
	}
}

int cli_finish(int status)
{
	if (fflush(stdout) != 0 || ferror(stdout)) {
		cli_error("write error: %s", strerror(errno));
		return status ? status : CLI_EDAEMON;
	}
	return status;
}

/*
 * The message that refuses the socket at path (sc says why) into out (size
 * bytes), control bytes replaced: the path may come from the environment.
 */
static void describe_refusal(const char *path, const struct sockcheck *sc,
			     uid_t euid, char *out, size_t size)
{
	char why[256];

	switch (sc->fault) {
	case SOCKCHECK_LINK:
		snprintf(why, sizeof(why), "it is a symbolic link");
		break;
	case SOCKCHECK_OWNER:
		snprintf(why, sizeof(why),
			 "it belongs to uid %u, not to root or to you (uid %u)",
			 (unsigned)sc->uid, (unsigned)euid);
		break;
	case SOCKCHECK_DIR_LINK:
		snprintf(why, sizeof(why),
			 "its directory %s is a symbolic link", sc->dir);
		break;
	case SOCKCHECK_DIR_OWNER:
		snprintf(
			why, sizeof(why),
			"its directory %s belongs to uid %u, not to root or to "
			"you (uid %u)",
			sc->dir, (unsigned)sc->uid, (unsigned)euid);
		break;
	case SOCKCHECK_DIR_WRITABLE:
		snprintf(
			why, sizeof(why),
			"its directory %s may be written by others (mode %04o)",
			sc->dir, (unsigned)(sc->mode & 07777));
		break;
	default:
		snprintf(why, sizeof(why), "it fails the ownership check");
		break;
	}
	snprintf(out, size,
		 "not using the daemon socket %s: %s; name the daemon with "
		 "--url or STACKWATCH_HTTP_SOCKET",
		 path, why);
	for (char *p = out; *p; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			*p = '?';
}

void cli_find_socket(struct cli *cli, char *buf, size_t size)
{
	const char *env = getenv("STACKWATCH_HTTP_SOCKET");
	const char *cand[3] = { env && *env ? env : NULL, NULL,
				"/run/stackwatch/http.sock" };
	uid_t euid = geteuid();
	struct sockcheck sc;

	if (paths_default_http_socket(buf, size) == 0)
		cand[1] = buf;
	for (int i = 0; i < 3; i++) {
		int rc;

		if (!cand[i])
			continue;
		rc = sockcheck_path(cand[i], euid, &sc);
		/* Nothing there to talk to: the next one, as ever. */
		if (rc && rc != -EPERM && rc != -ELOOP)
			continue;
		cli->unix_socket = cand[i];
		snprintf(cli->where, sizeof(cli->where), "unix:%s", cand[i]);
		if (rc)
			describe_refusal(cand[i], &sc, euid, cli->refused,
					 sizeof(cli->refused));
		return;
	}
}

int cli_parse_pid(const char *s, long *out)
{
	long n = 0;

	if (!*s)
		return -1;
	for (; *s; s++) {
		if (*s < '0' || *s > '9')
			return -1;
		n = n * 10 + (*s - '0');
		if (n > 0x7fffffffL)
			return -1;
	}
	if (n < 1)
		return -1;
	*out = n;
	return 0;
}

bool cli_valid_format(const char *format, bool folded)
{
	return strcmp(format, "text") == 0 || strcmp(format, "json") == 0 ||
	       (folded && strcmp(format, "folded") == 0);
}
