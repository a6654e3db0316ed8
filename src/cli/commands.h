/*
 * commands.h - the subcommands of the stackwatch CLI, one file each
 * (targets.c, dump.c, offline.c, run.c, stuck.c, diff.c, ps.c), called by
 * main.c.
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
int cmd_stuck(const struct cli *cli, int argc, char **argv);
int cmd_diff(const struct cli *cli, int argc, char **argv);
int cmd_ps(const struct cli *cli, int argc, char **argv);

/*
 * dump --local PID and dump --core FILE [--exe PATH] (offline.c): the
 * stacks taken here, without the daemon, printed in format. Return the
 * exit status.
 */
/* max_frames: as --max-frames (0 all, up to SW_MAX_FRAMES_HARD), or -1
 * for the default (SW_MAX_FRAMES). */
int cli_dump_local(long pid, const char *format, long max_frames);
int cli_dump_core(const char *core, const char *exe, const char *format,
		  long max_frames);

#endif /* SW_COMMANDS_H */
