/*
 * web.c - looks up the page's files that the build compiled into the
 * daemon (web.h), and makes the page's error pages from its shell. Names
 * are compared whole, so a request path such as "../x" simply names
 * nothing.
 */
#include <errno.h>
#include <string.h>

#include "model/buf.h"
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

static void escape_html(struct buf *b, const char *s)
{
	for (; *s; s++) {
		switch (*s) {
		case '<':
			buf_adds(b, "&lt;");
			break;
		case '>':
			buf_adds(b, "&gt;");
			break;
		case '&':
			buf_adds(b, "&amp;");
			break;
		case '"':
			buf_adds(b, "&quot;");
			break;
		default:
			buf_add(b, s, 1);
		}
	}
}

static const char *error_title(unsigned status)
{
	switch (status) {
	case 400:
		return "This address asks for something the daemon cannot do";
	case 403:
		return "Refused";
	case 404:
		return "No such process to show";
	case 409:
		return "Another tracer holds this process";
	case 422:
		return "This process has no stacks to show";
	default:
		return status >= 500 ? "The daemon could not answer" : "Error";
	}
}

int web_error_page(unsigned status, const char *why, char **out)
{
	const struct web_asset *a = web_asset_find("index.html");
	const char *open, *body, *close;
	struct buf b;

	*out = NULL;
	open = a ? strstr((const char *)a->data, "<main") : NULL;
	body = open ? strchr(open, '>') : NULL;
	close = body ? strstr(body, "</main>") : NULL;
	if (!close)
		return -ENOENT;
	buf_init(&b, (size_t)a->len + 8192);
	buf_add(&b, a->data, (size_t)(body + 1 - (const char *)a->data));
	buf_addf(&b,
		 "<div class=\"error\" role=\"alert\" data-status=\"%u\">"
		 "<strong>%s (%u)</strong><p class=\"why\">",
		 status, error_title(status), status);
	escape_html(&b, why);
	buf_adds(&b, "</p><p class=\"back\"><a href=\"/stacks\">Back to the "
		     "process table</a></p></div>");
	buf_adds(&b, close);
	if (buf_detach(&b, out) < 0) {
		buf_release(&b);
		return -ENOMEM;
	}
	return 0;
}
