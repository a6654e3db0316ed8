/*
 * turns.c - one requester's requests, a few at a time (turns.h).
 *
 * A list of the requesters that have requests at work or waiting, each
 * with a ticket counter: a request draws the next ticket and goes when
 * every earlier ticket of its requester has gone and a turn is free, so
 * they go in the order they came. A requester with nothing at work and
 * nobody waiting leaves the list.
 */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "turns.h"

struct requester {
	struct requester *next;
	char key[64];
	unsigned busy;	      /* requests at work */
	uint64_t next_ticket; /* the next request's */
	uint64_t serving;     /* the next ticket to go */
};

struct turns {
	pthread_mutex_t lock;
	pthread_cond_t freed;
	struct requester *list;
	uint64_t waiting, waited;
};

int turns_init(struct turns **out)
{
	struct turns *t = calloc(1, sizeof(*t));

	*out = NULL;
	if (!t)
		return -ENOMEM;
	pthread_mutex_init(&t->lock, NULL);
	pthread_cond_init(&t->freed, NULL);
	*out = t;
	return 0;
}

static struct requester *find(struct turns *t, const char *key)
{
	for (struct requester *r = t->list; r; r = r->next)
		if (strcmp(r->key, key) == 0)
			return r;
	return NULL;
}

int turns_take(struct turns *t, const char *key)
{
	struct requester *r;
	uint64_t ticket;
	bool waited = false;

	pthread_mutex_lock(&t->lock);
	r = find(t, key);
	if (!r) {
		r = calloc(1, sizeof(*r));
		if (!r) {
			pthread_mutex_unlock(&t->lock);
			return -ENOMEM;
		}
		snprintf(r->key, sizeof(r->key), "%s", key);
		r->next = t->list;
		t->list = r;
	}
	ticket = r->next_ticket++;
	while (ticket != r->serving || r->busy >= TURNS_PER_REQUESTER) {
		if (!waited) {
			waited = true;
			t->waiting++;
			t->waited++;
		}
		pthread_cond_wait(&t->freed, &t->lock);
	}
	if (waited)
		t->waiting--;
	r->serving++;
	r->busy++;
	/* The next ticket may go too, when a turn is left. */
	pthread_cond_broadcast(&t->freed);
	pthread_mutex_unlock(&t->lock);
	return 0;
}

void turns_give(struct turns *t, const char *key)
{
	struct requester **pp, *r;

	pthread_mutex_lock(&t->lock);
	for (pp = &t->list; (r = *pp); pp = &r->next)
		if (strcmp(r->key, key) == 0)
			break;
	if (r && r->busy) {
		r->busy--;
		if (!r->busy && r->serving == r->next_ticket) {
			*pp = r->next;
			free(r);
		}
		pthread_cond_broadcast(&t->freed);
	}
	pthread_mutex_unlock(&t->lock);
}

void turns_stats(struct turns *t, uint64_t *waiting, uint64_t *waited)
{
	pthread_mutex_lock(&t->lock);
	*waiting = t->waiting;
	*waited = t->waited;
	pthread_mutex_unlock(&t->lock);
}

void turns_free(struct turns *t)
{
	if (!t)
		return;
	while (t->list) {
		struct requester *r = t->list;

		t->list = r->next;
		free(r);
	}
	pthread_cond_destroy(&t->freed);
	pthread_mutex_destroy(&t->lock);
	free(t);
}
