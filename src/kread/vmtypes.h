/*
 * vmtypes.h - the few kernel types kread.bpf.c reads, declared with
 * preserve_access_index: libbpf finds each field in the running kernel's
 * BTF (/sys/kernel/btf/vmlinux) when it loads the program, so these need
 * not match any one kernel's layout, only its field names and types.
 *
 * A minimal header rather than a vmlinux.h dumped from the build
 * machine's kernel: the build does not depend on the kernel it runs on
 * (CI, packages, containers), and the program says exactly what it
 * touches. Compiled only for the BPF target.
 */
#ifndef SW_KREAD_VMTYPES_H
#define SW_KREAD_VMTYPES_H

typedef unsigned char __u8;
typedef unsigned short __u16;
typedef unsigned int __u32;
typedef unsigned long long __u64;
typedef signed char __s8;
typedef short __s16;
typedef int __s32;
typedef long long __s64;
typedef __u16 __be16;
typedef __u32 __be32;
typedef __u32 __wsum;
typedef __u64 u64;
typedef __u32 u32;
typedef int pid_t;
typedef _Bool bool;
#define true 1
#define false 0

enum bpf_map_type {
	BPF_MAP_TYPE_HASH = 1,
	BPF_MAP_TYPE_ARRAY = 2,
};

enum {
	BPF_ANY = 0,
};

#pragma clang attribute push(__attribute__((preserve_access_index)), \
			     apply_to = record)

struct pt_regs {
	unsigned long r15;
	unsigned long r14;
	unsigned long r13;
	unsigned long r12;
	unsigned long bp;
	unsigned long bx;
	unsigned long r11;
	unsigned long r10;
	unsigned long r9;
	unsigned long r8;
	unsigned long ax;
	unsigned long cx;
	unsigned long dx;
	unsigned long si;
	unsigned long di;
	unsigned long orig_ax;
	unsigned long ip;
	unsigned long sp;
};

struct mm_struct {
	unsigned long start_stack;
};

struct task_struct {
	unsigned int __state;
	unsigned int flags;
	int on_cpu;
	struct mm_struct *mm;
	int exit_state;
	pid_t pid;
	pid_t tgid;
	u64 utime;
	u64 stime;
	unsigned long nvcsw;
	unsigned long nivcsw;
	char comm[16];
};

struct vm_area_struct {
	unsigned long vm_start;
	unsigned long vm_end;
};

struct seq_file;

struct bpf_iter_meta {
	struct seq_file *seq;
	u64 session_id;
	u64 seq_num;
};

struct bpf_iter__task {
	struct bpf_iter_meta *meta;
	struct task_struct *task;
};

#pragma clang attribute pop

#endif /* SW_KREAD_VMTYPES_H */
