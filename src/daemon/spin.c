/*
 * spin.c - who wanted the CPU between two samples (spin.h).
 */
#define _GNU_SOURCE
#include "spin.h"

#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "model/procfs.h"

/* The name the agent gives its thread (src/agent/agent.c). */
#define AGENT_THREAD_NAME "sw-agent"

/* Thread tid's run and wait ns from its schedstat under taskfd, or 0s. */
static void read_one(int taskfd, struct sw_thread *t)
{
	char path[32], buf[96];
	uint64_t run, wait;

	t->run_ns = 0;
	t->wait_ns = 0;
	snprintf(path, sizeof(path), "%d/schedstat", (int)t->tid);
	if (procfs_read_at(taskfd, path, buf, sizeof(buf)) <= 0 ||
	    sscanf(buf, "%" SCNu64 " %" SCNu64, &run, &wait) != 2)
		return;
	t->run_ns = run;
	t->wait_ns = wait;
}

void spin_read(pid_t pid, struct sw_dump *d)
{
	char path[48];
	int taskfd;

	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	taskfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	for (size_t i = 0; i < d->nthreads; i++) {
		d->threads[i].run_ns = 0;
		d->threads[i].wait_ns = 0;
		/* Only a thread on a CPU or waiting for one can be spinning:
		 * the idle thousand of a server cost no read. */
		if (taskfd >= 0 && d->threads[i].tid > 0 &&
		    d->threads[i].state == 'R')
			read_one(taskfd, &d->threads[i]);
	}
	if (taskfd >= 0)
		close(taskfd);
}

static bool known(const struct sw_thread *t)
{
	/* A live thread has been on a CPU: all 0 is a kernel that keeps
	 * no figures (schedstat reads "0 0 0" then). */
	return t->run_ns || t->wait_ns;
}

bool spin_wanted_cpu(const struct sw_thread *o, uint64_t o_ns,
		     const struct sw_thread *n, uint64_t n_ns)
{
	uint64_t dt, run, wanted, cpu_o, cpu_n;

	/* Not runnable at either end: it did not want the CPU throughout
	 * (and was not read, spin_read()). */
	if (n_ns <= o_ns || o->state != 'R' || n->state != 'R')
		return false;
	dt = n_ns - o_ns;
	if (known(o) && known(n)) {
		/* Less than before: not the same thread (a tid reused). */
		if (n->run_ns < o->run_ns || n->wait_ns < o->wait_ns)
			return false;
		run = n->run_ns - o->run_ns;
		wanted = run + (n->wait_ns - o->wait_ns);
		return wanted / SPIN_WANTED_PCT >= dt / 100 &&
		       run / SPIN_RAN_PCT >= dt / 100;
	}
	cpu_o = o->utime_ms + o->stime_ms;
	cpu_n = n->utime_ms + n->stime_ms;
	return cpu_n > cpu_o && (cpu_n - cpu_o) * 1000000ull * 2 >= dt;
}

pid_t spin_dumper(const struct sw_dump *d)
{
	for (size_t i = 0; i < d->nthreads; i++)
		if (d->threads[i].flags & SW_TF_DUMPER)
			return d->threads[i].tid;
	return 0;
}

bool spin_is_agent(const struct sw_dump *d, const struct sw_thread *t,
		   pid_t agent_tid)
{
	if (t->flags & SW_TF_DUMPER)
		return true;
	if (agent_tid)
		return t->tid == agent_tid;
	/* An agent that marks nothing (an older one), or a dump in which
	 * the kernel read its thread: then only the name tells. */
	return !spin_dumper(d) && strcmp(t->name, AGENT_THREAD_NAME) == 0;
}
