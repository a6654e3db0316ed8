/*
 * web.c - looks up the page's files that the build compiled into the
 * daemon (web.h). Names are compared whole, so a request path such as
 * "../x" simply names nothing.
 */
#include <string.h>

#include "web.h"

const struct web_asset *web_asset_find(const char *name)
{
	size_t lo = 0, hi = web_nassets;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = strcmp(name, web_assets[mid].name);

		if (c == 0)
			return &web_assets[mid];
		if (c < 0)
			hi = mid;
		else
			lo = mid + 1;
	}
	return NULL;
}
