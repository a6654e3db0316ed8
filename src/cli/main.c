/*
 * main.c - the stackwatch CLI: reads the global options, hands the rest
 * of the command line to one subcommand (targets.c, dump.c, run.c), and
 * holds the usage text and the message helpers they share.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "stackwatch.h"

static const char short_usage[] =
	"usage: stackwatch [--url URL] targets\n"
	"       stackwatch [--url URL] dump [--format text|json|folded] [PID]\n"
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
	      "  run CMD...      execute CMD in place (same pid) with the "
	      "agent\n"
	      "                  loaded; --socket PATH sets the daemon's "
	      "agent socket\n"
	      "\n"
	      "Options:\n"
	      "  --url URL       the daemon, http://HOST[:PORT][/PATH]; "
	      "default\n"
	      "                  $STACKWATCH_URL, else " CLI_DEFAULT_URL "\n"
	      "  --version       print the version and exit\n"
	      "  --help          print this help and exit\n"
	      "\n"
	      "Environment: STACKWATCH_URL, STACKWATCH_TOKEN (sent as a "
	      "bearer token).\n"
	      "Exit status: 0 success, 1 the daemon answered with an error, "
	      "2 usage\nerror, 3 the daemon cannot be reached; run: 126 or "
	      "127 when CMD\ncannot be executed.\n",
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

int main(int argc, char **argv)
{
	const char *env = getenv("STACKWATCH_URL");
	struct cli cli;
	const char *name;
	int i;

	cli.url = env && *env ? env : CLI_DEFAULT_URL;
	for (i = 1; i < argc && argv[i][0] == '-'; i++) {
		const char *a = argv[i];

		if (strcmp(a, "--") == 0) {
			i++;
			break;
		}
		if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
			cli_usage(stdout);
			return cli_finish(CLI_OK);
		}
		if (strcmp(a, "--version") == 0) {
			printf("stackwatch %s\n", SW_VERSION);
			return cli_finish(CLI_OK);
		}
		if (strcmp(a, "--url") == 0) {
			if (i + 1 >= argc)
				return cli_usage_error("--url needs a value");
			cli.url = argv[++i];
		} else if (strncmp(a, "--url=", 6) == 0) {
			cli.url = a + 6;
		} else {
			return cli_usage_error("unknown option '%s'", a);
		}
	}
	if (i >= argc)
		return cli_usage_error("no command given");

	name = argv[i];
	if (strcmp(name, "targets") == 0)
		return cmd_targets(&cli, argc - i, argv + i);
	if (strcmp(name, "dump") == 0)
		return cmd_dump(&cli, argc - i, argv + i);
	if (strcmp(name, "run") == 0)
		return cmd_run(&cli, argc - i, argv + i);
	return cli_usage_error("unknown command '%s'", name);
}
