/*
 * access.c - who may see what (access.h).
 */
#include <stdlib.h>
#include <unistd.h>

#include "access.h"

void access_init(struct access *a, const struct peer *p, bool token,
		 gid_t admin_gid)
{
	a->peer = *p;
	a->all = token || (p->known && p->uid == 0) ||
		 (admin_gid != (gid_t)-1 && peer_in_group(p, admin_gid));
}

/* The rule itself, for the process pid is now. */
static bool uids_allow(const struct access *a, pid_t pid)
{
	uid_t uids[3];
	bool dumpable;

	if (peer_process_uids(pid, uids, &dumpable) < 0)
		return false;
	return dumpable && uids[0] == a->peer.uid && uids[1] == a->peer.uid &&
	       uids[2] == a->peer.uid;
}

bool access_sees_pid(const struct access *a, pid_t pid)
{
	if (a->all)
		return true;
	return a->peer.known && pid > 0 && uids_allow(a, pid);
}

bool access_sees(const struct access *a, const struct target *t)
{
	if (a->all)
		return true;
	if (!a->peer.known || !target_alive(t))
		return false;
	/* The pidfd pins the process: the pid is still the one we know. */
	return uids_allow(a, t->self ? getpid() : t->pid);
}

int access_list(struct registry *reg, const struct access *a,
		struct target ***out, size_t *n)
{
	struct target **ts;
	size_t all, k = 0;
	int rc = registry_list(reg, &ts, &all);

	if (rc < 0)
		return rc;
	for (size_t i = 0; i < all; i++) {
		if (access_sees(a, ts[i]))
			ts[k++] = ts[i];
		else
			target_put(ts[i]);
	}
	*out = ts;
	*n = k;
	return 0;
}

struct target *access_get(struct registry *reg, const struct access *a,
			  pid_t pid)
{
	struct target *t = registry_get(reg, pid);

	if (t && !access_sees(a, t)) {
		target_put(t);
		return NULL;
	}
	return t;
}

struct target *access_get_process(struct registry *reg, const struct access *a,
				  pid_t pid)
{
	struct target *t = access_get(reg, a, pid);
	int err;

	if (t)
		return t;
	if (!access_sees_pid(a, pid))
		return NULL;
	t = registry_get_process(reg, pid, &err);
	/* Pinned now: the same rule for the process that was pinned. */
	if (t && !access_sees(a, t)) {
		target_put(t);
		return NULL;
	}
	return t;
}
