/*
 * limits.h - the bounds and flags of a raw dump: how many frames, threads
 * and modules one holds, and what a thread's flags mean.
 *
 * Constants only, so that code on signal context (collector/signal/) can
 * size and flag what it records without importing the rest of the model.
 */
#ifndef SW_LIMITS_H
#define SW_LIMITS_H

#define SW_MAX_FRAMES 256 /* raw ips captured per thread */
/* Frames a dump may be asked to keep (max_frames 0: this many). The
 * agent's slots hold SW_MAX_FRAMES; the offline unwinder goes this far. */
#define SW_MAX_FRAMES_HARD 4096
#define SW_MAX_THREADS 65536 /* threads per dump */
#define SW_MAX_MODULES 4096  /* modules per dump */
#define SW_BUILD_ID_MAX 64   /* bytes of a build-id */
#define SW_COMM_MAX 16	     /* bytes of a task name, NUL included */

/* Thread flags. */
#define SW_TF_FIRST_EXACT 0x1 /* ips[0] is an interrupted pc, not a return */
#define SW_TF_IN_LOADER 0x2   /* stopped inside the dynamic loader */
#define SW_TF_TRUNCATED 0x4   /* more frames than the dump keeps */
#define SW_TF_LOW_STACK 0x8   /* too near the end of its stack to unwind */
#define SW_TF_CUT 0x10	      /* stopped at memory not known to be mapped */
#define SW_TF_NO_ROOM 0x20    /* on a stack of unknown size: pc only */
#define SW_TF_BUSY 0x40	      /* no loader-gate ticket was free: pc only */
#define SW_TF_REUSED 0x80     /* not run since the last read: its stack kept */
#define SW_TF_STACK_CUT 0x100 /* its stack copy stopped short of its end */
#define SW_TF_DUMPER 0x200    /* the thread that took the dump: the agent's */
/* Credentials the process's own may not read (daemon/tcred.h). */
#define SW_TF_OTHER_CREDS 0x400

#endif /* SW_LIMITS_H */
