/*
 * main.c - the stackwatch CLI: reads the global options and hands the rest
 * of the command line to one subcommand (commands.h). What
 * they share is in common.c and request.c, so main.c is the top: nothing
 * imports it.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "commands.h"
#include "stackwatch.h"

int main(int argc, char **argv)
{
	const char *env = getenv("STACKWATCH_URL");
	char sock[108];
	struct cli cli;
	const char *name;
	bool url_given = env && *env;
	int i;

	/* A parser worker of a privileged run is this program (sandbox.c). */
	if (argc == 2 && strcmp(argv[1], "--parser-worker") == 0)
		return cli_parser_worker(argc, argv);
	memset(&cli, 0, sizeof(cli));
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
			url_given = true;
		} else if (strncmp(a, "--url=", 6) == 0) {
			cli.url = a + 6;
			url_given = true;
		} else {
			return cli_usage_error("unknown option '%s'", a);
		}
	}
	if (i >= argc)
		return cli_usage_error("no command given");
	snprintf(cli.where, sizeof(cli.where), "%s", cli.url);
	cli.url_given = url_given;
	if (!url_given)
		cli_find_socket(&cli, sock, sizeof(sock));

	name = argv[i];
	if (strcmp(name, "targets") == 0)
		return cmd_targets(&cli, argc - i, argv + i);
	if (strcmp(name, "dump") == 0)
		return cmd_dump(&cli, argc - i, argv + i);
	if (strcmp(name, "run") == 0)
		return cmd_run(&cli, argc - i, argv + i);
	if (strcmp(name, "stuck") == 0)
		return cmd_stuck(&cli, argc - i, argv + i);
	if (strcmp(name, "diff") == 0)
		return cmd_diff(&cli, argc - i, argv + i);
	if (strcmp(name, "ps") == 0)
		return cmd_ps(&cli, argc - i, argv + i);
	return cli_usage_error("unknown command '%s'", name);
}
