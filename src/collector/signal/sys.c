/*
 * sys.c - the two libc functions signal-context code calls, resolved once
 * into pointers (sys.h).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>

#include "sys.h"

int (*sys_clock_gettime)(clockid_t, struct timespec *);
int *(*sys_errno_location)(void);

void sys_init(void)
{
	*(void **)&sys_clock_gettime = dlsym(RTLD_DEFAULT, "clock_gettime");
	*(void **)&sys_errno_location = dlsym(RTLD_DEFAULT, "__errno_location");
}
