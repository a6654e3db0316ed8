/*
 * render_folded.c - folded stacks, the input of flame-graph tools
 * (flamegraph.pl, speedscope, Pyroscope): one line per group, the command
 * name and then the frames outermost first, joined by ';', a space and the
 * group's thread count:
 *
 *	myserver;start_thread;worker_main;worker_wait;pthread_cond_wait 64
 *
 * A frame is its function (inlined ones included, as frames of their
 * own), else "module+0xOFFSET" with the module's base name, else the raw
 * "0xIP". Control characters and ';' in names become '?', so a name can
 * neither split a frame nor a line.
 */
#include <errno.h>
#include <inttypes.h>
#include <string.h>

#include "model/buf.h"
#include "render.h"

#define FOLDED_MAX (64u << 20) /* bytes of one rendering */

static int add_frame(struct buf *b, const struct sw_dump *d,
		     const struct sw_frame *f)
{
	const char *path, *slash;
	int rc;

	if (f->function)
		return buf_adds_safe(b, f->function, ";");
	if (f->module < 0 || (size_t)f->module >= d->nmodules)
		return buf_addf(b, "0x%" PRIx64, f->ip);
	path = d->modules[f->module].path ? d->modules[f->module].path : "?";
	slash = strrchr(path, '/');
	rc = buf_adds_safe(b, slash ? slash + 1 : path, "; ");
	return rc ? rc : buf_addf(b, "+0x%" PRIx64, f->offset);
}

/*
 * See render.h. *out is a malloc'd string (empty when there are no
 * groups) the caller frees. Returns 0, -ENOMEM or SW_ETOOBIG; reads d
 * only.
 */
int render_folded(const struct sw_dump *d, char **out)
{
	struct buf b;
	int rc = 0;

	*out = NULL;
	buf_init(&b, FOLDED_MAX);
	for (size_t gi = 0; !rc && gi < d->ngroups; gi++) {
		const struct sw_group *g = &d->groups[gi];
		const struct sw_thread *t;

		rc = buf_adds_safe(&b, d->comm, ";");
		if (rc || g->rep >= d->nthreads)
			goto line_end;
		t = &d->threads[g->rep];
		for (size_t i = t->nframes; !rc && i-- > 0;) {
			rc = buf_add(&b, ";", 1);
			if (!rc)
				rc = add_frame(&b, d, &t->frames[i]);
		}
	line_end:
		if (!rc)
			rc = buf_addf(&b, " %zu\n", g->count);
	}
	if (!rc)
		rc = buf_detach(&b, out);
	buf_release(&b);
	return rc;
}
