/*
 * strerror.c - sw_strerror(): one sentence for every error code the library
 * returns (stackwatch.h). Kept apart so the agent links it without the
 * symbolizer.
 */
#include <string.h>

#include "stackwatch.h"

const char *sw_strerror(int err)
{
	switch (err) {
	case 0:
		return "success";
	case SW_EHANDLER:
		return "signal handler replaced: the application installed "
		       "its own handler on the dump signal";
	case SW_ENOSIGNAL:
		return "no free real-time signal for the dump";
	case SW_ENOTINIT:
		return "the collector could not be installed (is libunwind "
		       "missing?)";
	case SW_EBUSY:
		return "every signal slot is still held by a late handler";
	case SW_EFORMAT:
		return "malformed input";
	case SW_ETOOBIG:
		return "input too large";
	case SW_EINHANDLER:
		return "called from inside a signal handler";
	case SW_EVERSION:
		return "another version of stackwatch's collector is loaded in "
		       "this process (the agent and the library must match)";
	default:
		break;
	}
	if (err < 0 && err > -4096)
		return strerror(-err);
	return "unknown error";
}
