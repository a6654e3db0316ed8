/*
 * dumpwire.h - a dump between the service and a parser worker: whole (a
 * raw dump to symbolize, or the one a worker unwound from a snapshot),
 * or only what symbolizing added to it (the frames, and what the
 * symbolizer learnt of the process), for the service to put into its
 * own copy.
 *
 * The service decodes what a worker sends, and a worker may be what a
 * hostile file took over: every count, length and index is checked
 * against the limits of model/limits.h and the dump it belongs to, and a
 * decoder leaves nothing behind on error.
 */
#ifndef SW_DUMPWIRE_H
#define SW_DUMPWIRE_H

#include "model/dump.h"
#include "model/wire.h"

/* Appends d, but for its frames, groups and lock names, to o. */
void dumpwire_put(struct wire_out *o, const struct sw_dump *d);

/*
 * Decodes a dump dumpwire_put() wrote into *out (sw_dump_free()).
 * 0, SW_EFORMAT or -ENOMEM.
 */
int dumpwire_get(struct wire_in *in, struct sw_dump **out);

/*
 * Appends what symbolizing added to d: each thread's frames (arrays that
 * threads share sent once), the lock names, symbolized and
 * symbols_partial, the glibc release, and each module's symbols error.
 */
void dumpwire_put_symbols(struct wire_out *o, const struct sw_dump *d);

/*
 * Puts into d (the dump that was sent to be symbolized: the same threads
 * and modules, in the same order) what dumpwire_put_symbols() wrote:
 * frames in d's memory (dump_alloc()), their strings too. On error d
 * keeps no frame (each thread's are released). 0, SW_EFORMAT or -ENOMEM.
 */
int dumpwire_take_symbols(struct wire_in *in, struct sw_dump *d);

#endif /* SW_DUMPWIRE_H */
