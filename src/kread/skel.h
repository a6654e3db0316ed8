/*
 * skel.h - the BPF object of kread.bpf.c, as bpftool's generated
 * skeleton gives it (skel.c), behind four calls: the generated code is
 * compiled in one file of its own and kept out of our lint.
 */
#ifndef SW_KREAD_SKEL_H
#define SW_KREAD_SKEL_H

struct kread_skel;
struct bpf_program;

/* Opens and loads the object; NULL with errno set. */
struct kread_skel *kread_skel_load(void);

/* The task iterator program, and the fd of the readers' control map. */
struct bpf_program *kread_skel_prog(struct kread_skel *s);
int kread_skel_ctls(struct kread_skel *s);
int kread_skel_same(struct kread_skel *s);

void kread_skel_free(struct kread_skel *s);

#endif /* SW_KREAD_SKEL_H */
