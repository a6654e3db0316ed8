/*
 * turns.h - one requester's requests, a few at a time.
 *
 * The daemon answers each connection in a thread of its own, and what a
 * request costs is the requester's to choose: a process table of a
 * thousand processes and ten thousand threads, the stacks of all of
 * them, again and again on many connections. Without a bound one user
 * keeps every CPU busy in the daemon's threads, and everybody else's
 * requests wait for a CPU. So each requester (its key, peer.h) has at
 * most TURNS_PER_REQUESTER requests at work at once; the others wait for
 * a turn, in the order they came, holding a connection but no CPU (the
 * connections a requester may hold are bounded by http.c). Root, the
 * admin group and the token holder are never held: they are the
 * operators, and see everything anyway.
 */
#ifndef SWD_TURNS_H
#define SWD_TURNS_H

#include <stdint.h>

#define TURNS_PER_REQUESTER 2

struct turns;

/* 0 or -ENOMEM. */
int turns_init(struct turns **out);

/*
 * Waits until key has a turn free and takes it. Blocks; returns at once
 * for a key with fewer than TURNS_PER_REQUESTER requests at work. On no
 * memory it takes no turn and returns -ENOMEM (the request goes on:
 * refusing it would be worse); else 0.
 */
int turns_take(struct turns *t, const char *key);

/* Gives back the turn that turns_take() returned 0 for. */
void turns_give(struct turns *t, const char *key);

/* Requests waiting for a turn now, and ever (for /metrics). */
void turns_stats(struct turns *t, uint64_t *waiting, uint64_t *waited);

void turns_free(struct turns *t); /* NULL ok */

#endif /* SWD_TURNS_H */
