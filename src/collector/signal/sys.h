/*
 * sys.h - system calls made directly, not through libc: what code on
 * signal context uses.
 *
 * A call into libc from the handler goes through a PLT slot, which a
 * program linked without -z now binds lazily, on the first call: the lazy
 * binder then runs on the interrupted thread's stack (saving every vector
 * register, some 3 kB) in the middle of our handler. And libc's wrappers
 * write errno. These write nothing but the registers the kernel's calling
 * convention names, and return the kernel's answer: a negative errno on
 * failure. x86-64 only, as the rest of the collector. Async-signal-safe.
 */
#ifndef SW_SYS_H
#define SW_SYS_H

#include <stdint.h>
#include <sys/syscall.h>
#include <time.h>

static inline long sys_call6(long n, long a, long b, long c, long d, long e,
			     long f)
{
	register long r10 __asm__("r10") = d;
	register long r8 __asm__("r8") = e;
	register long r9 __asm__("r9") = f;
	long ret;

	__asm__ volatile("syscall"
			 : "=a"(ret)
			 : "a"(n), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8),
			   "r"(r9)
			 : "rcx", "r11", "memory");
	return ret;
}

#define SYS_ARG(x) ((long)(x))
#define sys_call0(n) sys_call6((n), 0, 0, 0, 0, 0, 0)
#define sys_call2(n, a, b) sys_call6((n), SYS_ARG(a), SYS_ARG(b), 0, 0, 0, 0)
#define sys_call3(n, a, b, c) \
	sys_call6((n), SYS_ARG(a), SYS_ARG(b), SYS_ARG(c), 0, 0, 0)
#define sys_call4(n, a, b, c, d) \
	sys_call6((n), SYS_ARG(a), SYS_ARG(b), SYS_ARG(c), SYS_ARG(d), 0, 0)
#define sys_call5(n, a, b, c, d, e)                                    \
	sys_call6((n), SYS_ARG(a), SYS_ARG(b), SYS_ARG(c), SYS_ARG(d), \
		  SYS_ARG(e), 0)

/*
 * libc's clock_gettime (the vDSO) and __errno_location, called through
 * pointers resolved by sys_init() before any signal is sent, never through
 * a PLT slot (sys.c).
 */
/* The kernel's struct sigaction, as the raw rt_sigaction() takes it. */
#define SYS_SA_RESTORER 0x04000000
struct sys_sigaction {
	void *handler;
	unsigned long flags;
	void *restorer;
	uint64_t mask;
};

extern int (*sys_clock_gettime)(clockid_t, struct timespec *);
extern int *(*sys_errno_location)(void);

/* Resolves both. Once, before any signal; not async-signal-safe. */
void sys_init(void);

/* CLOCK_MONOTONIC in nanoseconds. Async-signal-safe. */
static inline uint64_t sys_now_ns(void)
{
	struct timespec ts = { 0, 0 };

	if (!sys_clock_gettime || sys_clock_gettime(CLOCK_MONOTONIC, &ts) != 0)
		sys_call2(SYS_clock_gettime, CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* This thread's errno. Async-signal-safe once sys_init() ran. */
static inline int *sys_errno(void)
{
	static int none;

	return sys_errno_location ? sys_errno_location() : &none;
}

#endif /* SW_SYS_H */
