/*
 * kread_abi.h - what kread.bpf.c writes and what kread.c reads: the
 * records of one run of the task iterator, and the per-reader control
 * entry. Shared by the BPF program and user space, so only fixed-width
 * types and no padding the two could lay out differently.
 *
 * One run writes, for each thread of the process, one record followed
 * by rec.stack_len bytes of its stack, copied from rec.sp + rec.offset.
 */
#ifndef SW_KREAD_ABI_H
#define SW_KREAD_ABI_H

#define KREAD_MAGIC 0x4b525731u /* "KRW1" */
#define KREAD_CHUNK 16384u	/* stack bytes copied per record */
#define KREAD_SLOTS 16		/* readers at once (one buffer each) */
#define KREAD_NREGS 17		/* x86-64 DWARF registers 0..16 */
#define KREAD_REDZONE 128	/* bytes copied below sp: the ABI's red zone */

/* rec.flags */
#define KREAD_F_OK 0x1	   /* registers and stack copy are whole */
#define KREAD_F_ONCPU 0x2  /* on a CPU when met: not read */
#define KREAD_F_TORN 0x4   /* ran during the copy: discarded */
#define KREAD_F_NOVMA 0x8  /* sp in no mapping (or mm busy): regs only */
#define KREAD_F_NOMM 0x10  /* a kernel thread, or exiting: no user state */
#define KREAD_F_FAULT 0x20 /* the stack copy failed */
#define KREAD_F_SAME 0x40  /* switch counts as the reader expected: no copy */

#define KREAD_CTL_EXPECT 0x1  /* tid must have switched exactly as counted */
#define KREAD_CTL_SAME 0x2    /* look up each thread in the same map */
#define KREAD_SAME_MAX 4096   /* threads in one reader's same set */
#define KREAD_SAME_SLOTS 8192 /* its table: at most half full */
#define KREAD_SAME_PROBES 8   /* a thread is this near its hash, or absent */

/*
 * A reader's same set (the entry of its buffer slot in the same map): the
 * threads it read before, with the switch counts they had then. Still
 * blocked with the same counts, a thread has not run since, so its stack
 * is the same: no copy (KREAD_F_SAME). An open-addressed table by tid
 * (kread_same_hash(), tid 0: empty), written whole before the run: no
 * per-thread map updates and deletes, which cost more than the run for a
 * thousand threads, and a lookup of a few probes that the verifier
 * follows in one path.
 */
struct kread_same_ent {
	__s32 tid;
	__u32 pad;
	__u64 nvcsw;
	__u64 nivcsw;
};

struct kread_same_set {
	struct kread_same_ent e[KREAD_SAME_SLOTS];
};

static inline __u32 kread_same_hash(__s32 tid)
{
	return ((__u32)tid * 2654435761u) >> 19; /* 13 bits: the table */
}

/* What one reader asks of a run; the map entry is keyed by its tgid. */
struct kread_ctl {
	__u32 slot;   /* its buffer, < KREAD_SLOTS */
	__s32 tgid;   /* the process read */
	__u64 offset; /* bytes above the copy's start (kread_rec.sp) */
	__u32 tid;    /* this thread only; 0: every thread of tgid */
	__u32 flags;  /* KREAD_CTL_* */
	__u64 nvcsw;  /* with EXPECT: the counts the first copy saw */
	__u64 nivcsw;
};

struct kread_rec {
	__u32 magic;
	__s32 tid;
	__u32 flags;
	__u32 state; /* task __state when met */
	__u32 exit_state;
	__u32 stack_len; /* bytes that follow */
	__u64 nvcsw;	 /* switch counts before the copy */
	__u64 nivcsw;
	__u64 utime_ns;
	__u64 stime_ns;
	__u64 ktime_ns; /* CLOCK_MONOTONIC when read */
	__u64 regs[KREAD_NREGS];
	__u64 orig_ax;	/* the system call it is in, or -1 */
	__u64 sp;	/* where the stack copy starts: sp less the red
			 * zone, as far as the mapping goes (regs[7] is
			 * sp itself) */
	__u64 offset;	/* this record's bytes start at sp + offset */
	__u64 vm_start; /* the mapping that holds sp */
	__u64 vm_end;
	char comm[16];
};

#endif /* SW_KREAD_ABI_H */
