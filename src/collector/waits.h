/*
 * waits.h - the signal waits and masked waits, with our signal left out
 * (waits.c). The interposers themselves are libc's names.
 */
#ifndef SW_COLLECTOR_WAITS_H
#define SW_COLLECTOR_WAITS_H

/*
 * Resolves libc's functions. Idempotent; the collector calls it before
 * its first dump (which also links waits.c into a static program).
 */
void waits_init(void);

#endif /* SW_COLLECTOR_WAITS_H */
