/*
 * commands.h - the subcommands of the stackwatch CLI, one file each
 * (targets.c, dump.c, run.c), called by main.c.
 */
#ifndef SW_COMMANDS_H
#define SW_COMMANDS_H

#include "cli.h"

/*
 * argv[0] is the subcommand's name and argv[argc] is NULL. Each returns
 * the exit status and has printed why when it is not 0; cmd_run returns
 * only when it could not exec.
 */
int cmd_targets(const struct cli *cli, int argc, char **argv);
int cmd_dump(const struct cli *cli, int argc, char **argv);
int cmd_run(const struct cli *cli, int argc, char **argv);

#endif /* SW_COMMANDS_H */
