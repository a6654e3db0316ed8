/*
 * skel.c - wraps the generated skeleton of kread.bpf.c (skel.h).
 */
#include <bpf/libbpf.h>

#include "skel.h"
#include "kread/kread.skel.h"

struct kread_skel *kread_skel_load(void)
{
	return (struct kread_skel *)kread_bpf__open_and_load();
}

struct bpf_program *kread_skel_prog(struct kread_skel *s)
{
	return ((struct kread_bpf *)s)->progs.kread;
}

int kread_skel_ctls(struct kread_skel *s)
{
	return bpf_map__fd(((struct kread_bpf *)s)->maps.ctls);
}

int kread_skel_same(struct kread_skel *s)
{
	return bpf_map__fd(((struct kread_bpf *)s)->maps.same);
}

void kread_skel_free(struct kread_skel *s)
{
	kread_bpf__destroy((struct kread_bpf *)s);
}
