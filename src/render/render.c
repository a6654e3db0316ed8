/*
 * render.c - the public rendering functions of stackwatch.h
 * (sw_dump_json, sw_dump_text, sw_dump_folded) on top of the renderers of
 * render.h. The dump they get is symbolized and grouped by sw_dump_self().
 */
#include <errno.h>
#include <stdlib.h>

#include "render.h"

/*
 * The JSON of one process, unformatted, as a malloc'd string the caller
 * frees. Returns 0, -EINVAL for NULL arguments, or -ENOMEM.
 */
int sw_dump_json(const struct sw_dump *d, char **out)
{
	cJSON *root;
	int rc;

	if (!out)
		return -EINVAL;
	*out = NULL;
	if (!d)
		return -EINVAL;
	rc = render_json(d, &root);
	if (rc)
		return rc;
	*out = cJSON_PrintUnformatted(root);
	cJSON_Delete(root);
	return *out ? 0 : -ENOMEM;
}

int sw_dump_text(const struct sw_dump *d, char **out)
{
	if (!out)
		return -EINVAL;
	*out = NULL;
	return d ? render_text(d, out) : -EINVAL;
}

int sw_dump_folded(const struct sw_dump *d, char **out)
{
	if (!out)
		return -EINVAL;
	*out = NULL;
	return d ? render_folded(d, out) : -EINVAL;
}
