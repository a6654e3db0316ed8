/*
 * render.h - the output formats of a dump: JSON (the HTTP schema of
 * INTERFACE.md, built with cJSON), pstack-style text and folded stacks.
 * All read a symbolized and grouped dump and never change it.
 */
#ifndef SW_RENDER_H
#define SW_RENDER_H

#include <cjson/cJSON.h>

#include "model/dump.h"

/*
 * Builds the JSON object of one process. On success *out is a cJSON tree
 * the caller frees with cJSON_Delete() (the daemon puts several into one
 * {"processes": [...]} document). Integers in it are raw items, and a
 * group's "tids" one raw array: the tree is made for
 * cJSON_PrintUnformatted(), with which it prints exactly as numbers would
 * (cJSON_Print() differs only in the spacing inside "tids"). Returns 0 or
 * -ENOMEM.
 */
int render_json(const struct sw_dump *d, cJSON **out);

/* JSON array of the frames of t, as in a group's "frames". */
cJSON *render_json_frames(const struct sw_dump *d, const struct sw_thread *t);

/*
 * Writes ts (CLOCK_REALTIME) as ISO-8601 UTC with milliseconds,
 * "2026-11-30T02:30:00.123Z", into buf (at least 32 bytes).
 */
void render_iso_time(const struct timespec *ts, char *buf, size_t size);

/* Text and folded formats, appended to a malloc'd string in *out. */
int render_text(const struct sw_dump *d, char **out);
int render_folded(const struct sw_dump *d, char **out);

#endif /* SW_RENDER_H */
