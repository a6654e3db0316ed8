/*
 * mkseed.c - writes seed inputs for the fuzzers into a directory: valid
 * messages of every type and form (a real dump of this process included,
 * a HELLO with and without features, a DUMP_REQ with a skip set), task
 * stat and status files and maps lines, query strings of the daemon's
 * requests, so the fuzzers start from the shapes they must survive
 * mutations of.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "stackwatch.h"
#include "model/wire.h"

struct sw_dump;

static int write_file(const char *dir, const char *name, const void *p,
		      size_t n)
{
	char path[512];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "w");
	if (!f)
		return -1;
	fwrite(p, 1, n, f);
	return fclose(f);
}

static void write_seed(const char *dir, const char *name, const char *s)
{
	write_file(dir, name, s, strlen(s));
}

static void copy_proc(const char *dir, const char *src, const char *name)
{
	char buf[8192];
	int fd = open(src, O_RDONLY);
	ssize_t n;

	if (fd < 0)
		return;
	n = read(fd, buf, sizeof(buf));
	close(fd);
	if (n > 0)
		write_file(dir, name, buf, (size_t)n);
}

int main(int argc, char **argv)
{
	struct wire_hello h = {
		.pid = 42, .signo = 38, .comm = "seed", .cmdline = "seed --flag"
	};
	struct wire_dump_req r = { .timeout_ms = 1000, .window = 64 };
	pid_t skip[] = { 2, 3, 70000 };
	struct wire_dump_req rs = {
		.timeout_ms = 500, .window = 8, .nskip = 3, .skip = skip
	};
	struct sw_dump_opts o;
	struct sw_dump *d;
	struct wire_out w;

	if (argc != 3 && argc != 4) {
		fprintf(stderr,
			"usage: mkseed WIRE_DIR PROC_DIR [QUERY_DIR]\n");
		return 2;
	}
	wire_out_init(&w);
	if (wire_encode_hello(&w, 0, &h) == 0)
		write_file(argv[1], "hello", w.data, w.len);
	h.features = WIRE_FEAT_SKIP;
	if (wire_encode_hello(&w, 0, &h) == 0)
		write_file(argv[1], "hello-features", w.data, w.len);
	if (wire_encode_dump_req(&w, 7, &r) == 0)
		write_file(argv[1], "req", w.data, w.len);
	if (wire_encode_dump_req(&w, 9, &rs) == 0)
		write_file(argv[1], "req-skip", w.data, w.len);
	sw_dump_opts_init(&o);
	o.symbolize = 0;
	if (sw_dump_self(&o, &d) == 0) {
		if (wire_encode_dump_resp(&w, 7, 0, d) == 0)
			write_file(argv[1], "resp", w.data, w.len);
		sw_dump_free(d);
	}
	if (wire_encode_dump_resp(&w, 8, SW_EHANDLER, NULL) == 0)
		write_file(argv[1], "resp-error", w.data, w.len);
	wire_out_release(&w);
	copy_proc(argv[2], "/proc/self/stat", "stat");
	copy_proc(argv[2], "/proc/self/status", "status");
	copy_proc(argv[2], "/proc/self/maps", "maps");
	/* A task in a pid namespace two levels down. */
	write_seed(argv[2], "status-nspid", "Name:\tx\nNSpid:\t4242\t17\t1\n");
	if (argc == 4) {
		write_seed(argv[3], "stacks",
			   "pid=4242&format=json&symbols=0&timeout_ms=1500");
		write_seed(argv[3], "page",
			   "format=html&pid=7\ntext/html,application/json");
		write_seed(argv[3], "diff",
			   "pid=4242&since=2.5&timeout_ms=200");
		write_seed(argv[3], "bad", "pid=-1&format=xml&since=1e9&x=y");
	}
	return 0;
}
