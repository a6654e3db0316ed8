/*
 * fuzz_procfs.c - libFuzzer target for the /proc parsers: stat and status
 * lines of a task (NSpid included), and lines of /proc/PID/maps. Their input is
 * text the kernel writes, but a task name is chosen by the program itself.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "model/procmaps.h"
#include "../../src/daemon/nspid.h"
#include "model/procfs.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *buf = (const char *)data;
	struct procfs_task t;
	struct procmaps_line ml;
	uint64_t blk;
	int64_t v;
	pid_t outer, inner;
	char *line;

	procfs_parse_stat(buf, size, &t);
	procfs_parse_status_task(buf, size, &t, &blk);
	procfs_parse_status_hex(buf, size, "SigBlk", &blk);
	procfs_parse_status_dec(buf, size, "TracerPid", &v);
	procfs_parse_nspid(buf, size, &outer, &inner);
	line = malloc(size + 1);
	if (!line)
		return 0;
	memcpy(line, data, size);
	line[size] = '\0';
	if (procmaps_parse_line(line, &ml))
		procmaps_is_file(&ml);
	free(line);
	return 0;
}
