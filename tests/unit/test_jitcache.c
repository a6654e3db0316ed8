/*
 * test_jitcache.c - perf maps shared by file (src/symbols/jitcache.c), on
 * real files: the same file opened twice and through a hard link is one
 * map, charged once (and found without a parse when asked only for a map
 * held); a file that changed is another map; the last
 * reference frees a map and its charge; a map over its owner's limit is
 * refused with nothing left charged; and eight threads asking for one
 * file at once get one map.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "symbols/jitcache.h"
#include "symbols/perfmap.h"
#include "tap.h"

static char dir[] = "/tmp/sw-jitcache-XXXXXX";
static char path_a[64], path_b[64];

/* Writes n entries to path (replacing it), the names starting with tag. */
static int write_map(const char *path, const char *tag, int n)
{
	FILE *f = fopen(path, "w");

	if (!f)
		return -1;
	for (int i = 0; i < n; i++)
		fprintf(f, "%x 10 %s%d\n", 0x100000 + i * 16, tag, i);
	return fclose(f);
}

/* jitcache_get() of the file at path, parsed when need be if parse. */
static int get_as(struct jitcache *c, const char *path, bool parse,
		  struct jitcache_map **m)
{
	struct stat st;
	int fd = open(path, O_RDONLY | O_CLOEXEC), rc;

	*m = NULL;
	if (fd < 0)
		return -errno;
	rc = fstat(fd, &st) < 0 ? -errno : jitcache_get(c, fd, &st, parse, m);
	close(fd);
	return rc;
}

static int get(struct jitcache *c, const char *path, struct jitcache_map **m)
{
	return get_as(c, path, true, m);
}

static const char *name_at(const struct jitcache_map *m, uint64_t ip)
{
	const char *n = perfmap_lookup(jitcache_perfmap(m), ip, NULL);

	return n ? n : "(none)";
}

static void test_shared(void)
{
	struct jitcache *c = NULL;
	struct jitcache_map *m1, *m2, *m3, *m4;
	uid_t me = geteuid();
	size_t one;
	struct stat st;

	TAP_OK(jitcache_new(SIZE_MAX, &c) == 0, "a cache");
	TAP_OK(write_map(path_a, "a", 1000) == 0 && link(path_a, path_b) == 0,
	       "a map of 1000 entries and a hard link to it");
	TAP_OK(get_as(c, path_a, false, &m1) == -ENOENT && !m1,
	       "asked only for a map held, none is held yet");
	TAP_OK(get(c, path_a, &m1) == 0 && get(c, path_a, &m2) == 0 &&
		       get_as(c, path_b, false, &m3) == 0,
	       "the file twice and the link once (held: no parse needed)");
	one = perfmap_bytes(jitcache_perfmap(m1));
	TAP_OK(m1 == m2 && m2 == m3 &&
		       !strcmp(name_at(m3, 0x100000 + 16 * 999), "a999"),
	       "one map for the three");
	TAP_OK(one > 1000 * 24 && jitcache_use_of(c, me) == one,
	       "charged once to its owner: %zu bytes (%zu)",
	       jitcache_use_of(c, me), one);

	/* A changed file is another map; the old one lives while held. */
	TAP_OK(write_map(path_a, "bb", 1000) == 0 && get(c, path_b, &m4) == 0,
	       "the file rewritten and read again");
	TAP_OK(m4 != m1 && !strcmp(name_at(m4, 0x100000), "bb0") &&
		       !strcmp(name_at(m1, 0x100000), "a0"),
	       "a new map, the old one unchanged for who holds it");
	TAP_OK(stat(path_a, &st) == 0 && !jitcache_same(m1, &st) &&
		       jitcache_same(m4, &st),
	       "jitcache_same() tells the old from the new");
	jitcache_put(c, m1);
	jitcache_put(c, m2);
	TAP_OK(jitcache_use_of(c, me) > one, "the old one held by one, still");
	jitcache_put(c, m3);
	TAP_OK(jitcache_use_of(c, me) == perfmap_bytes(jitcache_perfmap(m4)),
	       "its last reference gone, only the new one is charged");
	jitcache_put(c, m4);
	TAP_OK(jitcache_use_of(c, me) == 0, "and nothing once that goes");
	jitcache_free(c);
}

static void test_limit(void)
{
	struct jitcache *c = NULL;
	struct jitcache_map *m = NULL, *small = NULL;
	char path[80];
	int rc;

	snprintf(path, sizeof(path), "%s/small", dir);
	TAP_OK(jitcache_new(64 << 10, &c) == 0 &&
		       write_map(path_a, "big", 20000) == 0 &&
		       write_map(path, "s", 10) == 0,
	       "a cache of 64 KiB per owner, a map of 20000 entries, one of "
	       "10");
	rc = get(c, path_a, &m);
	TAP_OK(rc == -EFBIG && !m && jitcache_use_of(c, geteuid()) == 0,
	       "the big map is refused (%d), nothing left charged", rc);
	rc = get(c, path, &small);
	TAP_OK(rc == 0 && !strcmp(name_at(small, 0x100000 + 16 * 9), "s9"),
	       "the small one fits");
	rc = get(c, path_a, &m);
	TAP_OK(rc == -EFBIG, "the big one, asked again, is refused again");
	jitcache_put(c, small);
	jitcache_free(c);
}

struct asker {
	struct jitcache *c;
	struct jitcache_map *m;
	int rc;
};

static void *asker_main(void *arg)
{
	struct asker *a = arg;

	a->rc = get(a->c, path_b, &a->m);
	return NULL;
}

static void test_at_once(void)
{
	struct asker a[8];
	pthread_t th[8];
	struct jitcache *c = NULL;
	int same = 0;

	TAP_OK(jitcache_new(SIZE_MAX, &c) == 0 &&
		       write_map(path_a, "c", 100000) == 0,
	       "a map of 100000 entries");
	for (int i = 0; i < 8; i++) {
		a[i] = (struct asker){ c, NULL, -1 };
		pthread_create(&th[i], NULL, asker_main, &a[i]);
	}
	for (int i = 0; i < 8; i++)
		pthread_join(th[i], NULL);
	for (int i = 0; i < 8; i++)
		same += a[i].rc == 0 && a[i].m == a[0].m;
	TAP_OK(same == 8 && jitcache_use_of(c, geteuid()) ==
				    perfmap_bytes(jitcache_perfmap(a[0].m)),
	       "eight threads at once: one map, charged once (%d/8)", same);
	for (int i = 0; i < 8; i++)
		jitcache_put(c, a[i].m);
	TAP_OK(jitcache_use_of(c, geteuid()) == 0, "all given back");
	jitcache_free(c);
}

int main(void)
{
	char cmd[96];

	if (!mkdtemp(dir)) {
		TAP_OK(false, "a temp directory");
		return tap_done();
	}
	snprintf(path_a, sizeof(path_a), "%s/a.map", dir);
	snprintf(path_b, sizeof(path_b), "%s/b.map", dir);
	test_shared();
	test_limit();
	test_at_once();
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		TAP_NOTE("could not remove %s", dir);
	return tap_done();
}
