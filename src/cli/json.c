/*
 * json.c - reading the daemon's JSON answers for the subcommands that
 * print them as text (targets.c, stuck.c, diff.c, ps.c): fields that may
 * be missing or of the wrong type, and frames printed the way the daemon's
 * text format prints them. Everything from the daemon is untrusted: a
 * missing field prints as "?" or "-", never as a crash, and every string
 * goes through cli_put_safe().
 */
#include <stdio.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "cli.h"

long long cli_json_number(const cJSON *obj, const char *key)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);

	if (!cJSON_IsNumber(v) || v->valuedouble < 0 ||
	    v->valuedouble >= 9.2e18)
		return -1;
	return (long long)v->valuedouble;
}

double cli_json_double(const cJSON *obj, const char *key)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);

	if (!cJSON_IsNumber(v) || !(v->valuedouble >= 0) ||
	    v->valuedouble > 1e15)
		return -1;
	return v->valuedouble;
}

const char *cli_json_string(const cJSON *obj, const char *key)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);

	return cJSON_IsString(v) ? v->valuestring : NULL;
}

const cJSON *cli_json_array(const cJSON *obj, const char *key)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);

	return cJSON_IsArray(v) ? v : NULL;
}

static const char *base_name(const char *path)
{
	const char *slash = strrchr(path, '/');

	return slash ? slash + 1 : path;
}

/* One frame as render_text.c has it: "#N  0xIP in FUNC () at FILE:LINE". */
static void print_frame(FILE *f, const cJSON *fr, int i)
{
	const char *ip = cli_json_string(fr, "ip");
	const char *fn = cli_json_string(fr, "function");
	const char *file = cli_json_string(fr, "file");
	const char *module = cli_json_string(fr, "module");
	long long line = cli_json_number(fr, "line");

	fprintf(f, "#%-2d ", i);
	cli_put_safe(f, ip ? ip : "?");
	fputs(" in ", f);
	cli_put_safe(f, fn ? fn : "??");
	/* gdb's "func ()", but not for C++ names or placeholders. */
	if (!fn || (fn[0] != '[' && !strchr(fn, '(')))
		fputs(" ()", f);
	if (file && line > 0) {
		fputs(" at ", f);
		cli_put_safe(f, base_name(file));
		fprintf(f, ":%lld", line);
	} else if (module) {
		fputs(" from ", f);
		cli_put_safe(f, module);
	}
	if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(fr, "inlined")))
		fputs(" (inlined)", f);
	fputc('\n', f);
}

void cli_print_frames(FILE *f, const cJSON *frames, const char *indent, int max)
{
	const cJSON *fr;
	int i = 0, n = cJSON_IsArray(frames) ? cJSON_GetArraySize(frames) : 0;

	if (n == 0) {
		fprintf(f, "%s(no frames)\n", indent);
		return;
	}
	cJSON_ArrayForEach(fr, frames)
	{
		if (max > 0 && i >= max) {
			fprintf(f, "%s... %d more frame%s\n", indent, n - i,
				n - i == 1 ? "" : "s");
			return;
		}
		fputs(indent, f);
		print_frame(f, fr, i++);
	}
}

void cli_print_thread(FILE *f, const cJSON *th)
{
	const char *name = cli_json_string(th, "name");
	long long tid = cli_json_number(th, "tid");

	cli_put_safe(f, name ? name : "?");
	if (tid >= 0)
		fprintf(f, " (%lld)", tid);
	else
		fputs(" (?)", f);
}
