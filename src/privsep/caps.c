/*
 * caps.c - keep the capabilities needed, give up the rest (caps.h).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/capability.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "caps.h"

int caps_keep(uint64_t keep, char *why, size_t size)
{
	struct __user_cap_header_struct hdr = { _LINUX_CAPABILITY_VERSION_3,
						0 };
	struct __user_cap_data_struct c[2];
	int last = CAP_LAST_CAP;

	/* The running kernel may know more than our headers. */
	for (int n = last + 1; n < 64; n++)
		if (prctl(PR_CAPBSET_READ, n, 0, 0, 0) >= 0)
			last = n;
	if (syscall(SYS_capget, &hdr, c) != 0) {
		snprintf(why, size, "capget: %s", strerror(errno));
		return -errno;
	}
	prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
	for (int n = 0; n <= last; n++)
		if (!(keep & CAPS_BIT(n)) &&
		    prctl(PR_CAPBSET_READ, n, 0, 0, 0) == 1 &&
		    prctl(PR_CAPBSET_DROP, n, 0, 0, 0) < 0 && errno != EPERM) {
			snprintf(why, size, "dropping capability %d: %s", n,
				 strerror(errno));
			return -errno;
		}
	for (int i = 0; i < 2; i++) {
		uint32_t k = (uint32_t)(keep >> (32 * i));

		c[i].effective &= k;
		c[i].permitted &= k;
		c[i].inheritable &= k;
	}
	if (syscall(SYS_capset, &hdr, c) != 0) {
		snprintf(why, size, "capset: %s", strerror(errno));
		return -errno;
	}
	return 0;
}
