/*
 * web.h - the page's files (web/), compiled into stackwatchd at build time.
 *
 * The build turns every file of web/ into an entry of web_assets[] (see
 * src/daemon/tools/embed.c, which writes $(BUILD)/gen/web_assets.c), so the
 * daemon serves its page with nothing installed beside it and no network.
 */
#ifndef SW_DAEMON_WEB_H
#define SW_DAEMON_WEB_H

#include <stddef.h>

struct web_asset {
	const char *name;	   /* base name in web/: "index.html" */
	const unsigned char *data; /* len bytes, then a NUL not counted */
	size_t len;
	const char *content_type; /* from the name's extension */
	const char *etag;	  /* quoted hash of the bytes */
};

/* The generated table, sorted by name. */
extern const struct web_asset web_assets[];
extern const size_t web_nassets;

/*
 * The asset called name (a base name, no slash), or NULL when there is
 * none. The result is static: never freed, valid for the whole run.
 * Thread-safe; never blocks.
 */
const struct web_asset *web_asset_find(const char *name);

/*
 * The page's shell (index.html) with an error in place of its content:
 * a title for status, why (HTML-escaped), and a link back to the process
 * table; the page's script adds what to do next. *out is malloc'd (the
 * caller frees it). 0, -ENOMEM, or -ENOENT when the shell has no <main>.
 */
int web_error_page(unsigned status, const char *why, char **out);

#endif
