/*
 * kread.bpf.c - reads the threads of one process that are not on a CPU,
 * straight from the kernel: a sleepable task iterator (a link scoped to
 * the process) that, for each such thread, copies the user registers the
 * kernel saved when it entered the kernel and the live part of its user
 * stack, from sp up to the end of the mapping that holds sp.
 *
 * A thread off the CPU cannot change its registers or its stack; one
 * that is woken and runs during the copy is caught by its switch counts
 * (or by being on a CPU again) and its record says torn, never a mix.
 * Nothing is signalled or stopped. Each reader (a process of our own)
 * has a buffer slot of its own, found by its tgid in the ctl map,
 * because a sleepable program may sleep in the copy while another
 * reader's run uses the same CPU.
 */
#include "vmtypes.h"

#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>

#include "kread_abi.h"

char LICENSE[] SEC("license") = "GPL";

#define PF_EXITING 0x4
#define PF_KTHREAD 0x00200000

struct kread_buf {
	struct kread_rec rec;
	__u8 stack[KREAD_CHUNK];
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, KREAD_SLOTS);
	__type(key, __u32);
	__type(value, struct kread_ctl);
} ctls SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, KREAD_SLOTS);
	__type(key, __u32);
	__type(value, struct kread_buf);
} bufs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, KREAD_SLOTS);
	__type(key, __u32);
	__type(value, struct kread_same_set);
} same SEC(".maps");

/* Whether tid is in set with the counts nv and niv. */
static bool same_as_before(const struct kread_same_set *set, __s32 tid,
			   __u64 nv, __u64 niv)
{
	__u32 h = kread_same_hash(tid);

	for (int i = 0; i < KREAD_SAME_PROBES; i++) {
		const struct kread_same_ent *e =
			&set->e[(h + i) & (KREAD_SAME_SLOTS - 1)];

		if (e->tid == tid)
			return e->nvcsw == nv && e->nivcsw == niv;
		if (e->tid == 0)
			return false;
	}
	return false;
}

struct vma_hit {
	__u64 start;
	__u64 end;
};

static long vma_cb(struct task_struct *task, struct vm_area_struct *vma,
		   void *data)
{
	struct vma_hit *h = data;

	h->start = vma->vm_start;
	h->end = vma->vm_end;
	return 0;
}

static void take_regs(struct kread_rec *r, struct pt_regs *p)
{
	r->regs[0] = p->ax;
	r->regs[1] = p->dx;
	r->regs[2] = p->cx;
	r->regs[3] = p->bx;
	r->regs[4] = p->si;
	r->regs[5] = p->di;
	r->regs[6] = p->bp;
	r->regs[7] = p->sp;
	r->regs[8] = p->r8;
	r->regs[9] = p->r9;
	r->regs[10] = p->r10;
	r->regs[11] = p->r11;
	r->regs[12] = p->r12;
	r->regs[13] = p->r13;
	r->regs[14] = p->r14;
	r->regs[15] = p->r15;
	r->regs[16] = p->ip;
	r->orig_ax = p->orig_ax;
	r->sp = p->sp;
}

SEC("iter.s/task")
int kread(struct bpf_iter__task *ctx)
{
	struct seq_file *seq = ctx->meta->seq;
	struct task_struct *task = ctx->task;
	__u32 reader = bpf_get_current_pid_tgid() >> 32;
	struct vma_hit hit = { 0, 0 };
	struct kread_ctl *ctl;
	struct kread_buf *b;
	struct kread_rec *r;
	struct pt_regs *p;
	__u64 len = 0, nv, niv;
	__u32 slot;

	if (!task)
		return 0;
	ctl = bpf_map_lookup_elem(&ctls, &reader);
	if (!ctl || task->tgid != ctl->tgid)
		return 0;
	if (ctl->tid && task->pid != (pid_t)ctl->tid)
		return 0;
	slot = ctl->slot;
	b = bpf_map_lookup_elem(&bufs, &slot);
	if (!b)
		return 0;
	r = &b->rec;
	__builtin_memset(r, 0, sizeof(*r));
	r->magic = KREAD_MAGIC;
	r->tid = task->pid;
	r->state = task->__state;
	r->exit_state = task->exit_state;
	r->utime_ns = task->utime;
	r->stime_ns = task->stime;
	bpf_probe_read_kernel_str(r->comm, sizeof(r->comm), task->comm);
	nv = task->nvcsw;
	niv = task->nivcsw;
	r->nvcsw = nv;
	r->nivcsw = niv;
	r->ktime_ns = bpf_ktime_get_ns();
	if (!task->mm || (task->flags & (PF_EXITING | PF_KTHREAD)) ||
	    task->exit_state) {
		r->flags = KREAD_F_NOMM;
		goto out;
	}
	if (task->on_cpu) {
		r->flags = KREAD_F_ONCPU;
		goto out;
	}
	if (ctl->flags & KREAD_CTL_SAME) {
		__u32 slot = ctl->slot;
		struct kread_same_set *set = bpf_map_lookup_elem(&same, &slot);

		if (set && same_as_before(set, task->pid, nv, niv)) {
			r->flags = KREAD_F_SAME; /* has not run since */
			goto out;
		}
	}
	if ((ctl->flags & KREAD_CTL_EXPECT) &&
	    (nv != ctl->nvcsw || niv != ctl->nivcsw)) {
		r->flags = KREAD_F_TORN; /* ran since the first copy */
		goto out;
	}
	p = (struct pt_regs *)bpf_task_pt_regs(task);
	if (!p) {
		r->flags = KREAD_F_NOMM;
		goto out;
	}
	take_regs(r, p);
	r->offset = ctl->offset;
	if (bpf_find_vma(task, r->sp, vma_cb, &hit, 0) != 0 ||
	    hit.end <= r->sp) {
		r->flags = KREAD_F_NOVMA;
		goto check;
	}
	r->vm_start = hit.start;
	r->vm_end = hit.end;
	/*
	 * The copy starts KREAD_REDZONE below sp, where the mapping allows:
	 * stopped on the ret after a leave, a frame's saved frame pointer is
	 * there, where its unwind rules still look for it.
	 */
	r->sp = r->sp - hit.start >= KREAD_REDZONE ? r->sp - KREAD_REDZONE
						   : hit.start;
	if (hit.end - r->sp > ctl->offset)
		len = hit.end - r->sp - ctl->offset;
	if (len > KREAD_CHUNK)
		len = KREAD_CHUNK;
	if (len && bpf_copy_from_user_task(
			   b->stack, len & (KREAD_CHUNK * 2 - 1),
			   (void *)(r->sp + ctl->offset), task, 0) != 0) {
		r->flags = KREAD_F_FAULT;
		len = 0;
		goto check;
	}
	r->flags = KREAD_F_OK;
check:
	/* Ran meanwhile, or runs now: the copy may be a mix. */
	if (task->on_cpu || task->nvcsw != nv || task->nivcsw != niv) {
		r->flags = KREAD_F_TORN;
		len = 0;
	}
	r->stack_len = (__u32)len;
out:
	bpf_seq_write(seq, r, sizeof(*r));
	if (len)
		bpf_seq_write(seq, b->stack, len & (KREAD_CHUNK * 2 - 1));
	return 0;
}
