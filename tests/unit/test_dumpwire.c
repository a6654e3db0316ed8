/*
 * test_dumpwire.c - a dump as a parser worker sends it back (src/privsep/
 * dumpwire.c): what the worker may rightly send is read back whole, and
 * what no worker may send is refused.
 *
 * A kernel read of an agent's process skips the threads it cannot copy
 * (they were running), before anything of them is read: no name, no
 * state. Such a dump must come back as it went, or every read of that
 * process falls back to signalling all of its threads (it did: the
 * state check refused state 0, so under load an agent target was read
 * wholly by signal). A state byte that is no state at all is refused.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "model/dump.h"
#include "model/wire.h"
#include "privsep/dumpwire.h"
#include "stackwatch.h"
#include "tap.h"

/* A dump of two threads: one read (state S), one skipped (state 0). */
static struct sw_dump *two_threads(char skipped_state)
{
	struct sw_dump *d = dump_new();

	if (!d)
		return NULL;
	d->pid = 4242;
	d->threads = calloc(2, sizeof(*d->threads));
	if (!d->threads) {
		sw_dump_free(d);
		return NULL;
	}
	d->nthreads = 2;
	d->threads[0].tid = 4242;
	d->threads[0].state = 'S';
	d->threads[0].status = SW_ST_OK;
	d->threads[0].group = -1;
	strcpy(d->threads[0].name, "main");
	d->threads[0].ips = calloc(2, sizeof(uint64_t));
	if (d->threads[0].ips) {
		d->threads[0].ips[0] = 0x1000;
		d->threads[0].ips[1] = 0x2000;
		d->threads[0].nips = 2;
	}
	d->threads[1].tid = 4243;
	d->threads[1].state = skipped_state;
	d->threads[1].group = -1;
	dump_thread_set_error(&d->threads[1], SW_ST_SKIPPED, "skipped");
	return d;
}

/* Sends d and reads it back into *out; dumpwire_get()'s result. */
static int round_trip(const struct sw_dump *d, struct sw_dump **out)
{
	struct wire_out o;
	struct wire_in in;
	int rc;

	*out = NULL;
	wire_out_init(&o);
	dumpwire_put(&o, d);
	if (o.err) {
		wire_out_release(&o);
		return o.err;
	}
	wire_in_init(&in, o.data, o.len);
	rc = dumpwire_get(&in, out);
	wire_out_release(&o);
	return rc;
}

int main(void)
{
	struct sw_dump *d = two_threads('\0'), *back = NULL;
	int rc;

	rc = d ? round_trip(d, &back) : -ENOMEM;
	TAP_OK(rc == 0 && back && back->nthreads == 2,
	       "a dump with a skipped thread of no state comes back (%d)", rc);
	TAP_OK(back && back->nthreads == 2 && back->threads[1].state == 0 &&
		       back->threads[1].status == SW_ST_SKIPPED &&
		       back->threads[0].state == 'S' &&
		       back->threads[0].nips == 2 &&
		       back->threads[0].ips[1] == 0x2000,
	       "its threads as they went: states, status, addresses");
	sw_dump_free(back);
	sw_dump_free(d);

	d = two_threads('\x7f');
	rc = d ? round_trip(d, &back) : -ENOMEM;
	TAP_OK(rc == SW_EFORMAT && !back,
	       "a state that is no state (0x7f) is refused (%d)", rc);
	sw_dump_free(back);
	sw_dump_free(d);

	d = two_threads('\x01');
	rc = d ? round_trip(d, &back) : -ENOMEM;
	TAP_OK(rc == SW_EFORMAT && !back,
	       "a control byte as a state is refused (%d)", rc);
	sw_dump_free(back);
	sw_dump_free(d);
	return tap_done();
}
