/*
 * caps.h - a process keeps the capabilities it needs and gives up the
 * rest for good: out of its bounding set (no exec can bring one back)
 * and out of its permitted, effective, inheritable and ambient sets.
 */
#ifndef SW_CAPS_H
#define SW_CAPS_H

#include <stddef.h>
#include <stdint.h>

#define CAPS_BIT(n) (1ull << (n))

/*
 * Drops every capability not in keep (a mask of CAPS_BIT(CAP_...)) from
 * the calling thread, for it and every thread and child it starts later.
 * A process without the capability to change its bounding set (not
 * root) drops from the other sets only. 0, or a negative errno with why
 * (size bytes).
 */
int caps_keep(uint64_t keep, char *why, size_t size);

#endif /* SW_CAPS_H */
