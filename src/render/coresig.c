/*
 * coresig.c - the names of a core's fatal signal and of its si_code, as
 * gdb and the kernel's headers spell them (coresig.h).
 */
#define _GNU_SOURCE
#include "coresig.h"

#include <signal.h>
#include <string.h>

struct code_name {
	int sig; /* 0: any signal */
	int code;
	const char *name;
};

/*
 * The codes the kernel sets: per signal for the faults (positive codes),
 * for any signal those of who sent it (zero and negative ones).
 */
static const struct code_name codes[] = {
	{ SIGSEGV, SEGV_MAPERR, "SEGV_MAPERR" },
	{ SIGSEGV, SEGV_ACCERR, "SEGV_ACCERR" },
	{ SIGSEGV, 3, "SEGV_BNDERR" },
	{ SIGSEGV, 4, "SEGV_PKUERR" },
	{ SIGBUS, BUS_ADRALN, "BUS_ADRALN" },
	{ SIGBUS, BUS_ADRERR, "BUS_ADRERR" },
	{ SIGBUS, BUS_OBJERR, "BUS_OBJERR" },
	{ SIGBUS, 4, "BUS_MCEERR_AR" },
	{ SIGBUS, 5, "BUS_MCEERR_AO" },
	{ SIGILL, ILL_ILLOPC, "ILL_ILLOPC" },
	{ SIGILL, ILL_ILLOPN, "ILL_ILLOPN" },
	{ SIGILL, ILL_ILLADR, "ILL_ILLADR" },
	{ SIGILL, ILL_ILLTRP, "ILL_ILLTRP" },
	{ SIGILL, ILL_PRVOPC, "ILL_PRVOPC" },
	{ SIGILL, ILL_PRVREG, "ILL_PRVREG" },
	{ SIGILL, ILL_COPROC, "ILL_COPROC" },
	{ SIGILL, ILL_BADSTK, "ILL_BADSTK" },
	{ SIGFPE, FPE_INTDIV, "FPE_INTDIV" },
	{ SIGFPE, FPE_INTOVF, "FPE_INTOVF" },
	{ SIGFPE, FPE_FLTDIV, "FPE_FLTDIV" },
	{ SIGFPE, FPE_FLTOVF, "FPE_FLTOVF" },
	{ SIGFPE, FPE_FLTUND, "FPE_FLTUND" },
	{ SIGFPE, FPE_FLTRES, "FPE_FLTRES" },
	{ SIGFPE, FPE_FLTINV, "FPE_FLTINV" },
	{ SIGFPE, FPE_FLTSUB, "FPE_FLTSUB" },
	{ SIGTRAP, TRAP_BRKPT, "TRAP_BRKPT" },
	{ SIGTRAP, TRAP_TRACE, "TRAP_TRACE" },
	{ SIGSYS, 1, "SYS_SECCOMP" },
	{ 0, SI_USER, "SI_USER" },
	{ 0, SI_KERNEL, "SI_KERNEL" },
	{ 0, SI_QUEUE, "SI_QUEUE" },
	{ 0, SI_TIMER, "SI_TIMER" },
	{ 0, SI_MESGQ, "SI_MESGQ" },
	{ 0, SI_ASYNCIO, "SI_ASYNCIO" },
	{ 0, SI_SIGIO, "SI_SIGIO" },
	{ 0, SI_TKILL, "SI_TKILL" },
};

const char *coresig_name(int sig)
{
	static const struct {
		int sig;
		const char *name;
	} names[] = {
		{ SIGHUP, "SIGHUP" },	{ SIGINT, "SIGINT" },
		{ SIGQUIT, "SIGQUIT" }, { SIGILL, "SIGILL" },
		{ SIGTRAP, "SIGTRAP" }, { SIGABRT, "SIGABRT" },
		{ SIGBUS, "SIGBUS" },	{ SIGFPE, "SIGFPE" },
		{ SIGKILL, "SIGKILL" }, { SIGUSR1, "SIGUSR1" },
		{ SIGSEGV, "SIGSEGV" }, { SIGUSR2, "SIGUSR2" },
		{ SIGPIPE, "SIGPIPE" }, { SIGALRM, "SIGALRM" },
		{ SIGTERM, "SIGTERM" }, { SIGXCPU, "SIGXCPU" },
		{ SIGXFSZ, "SIGXFSZ" }, { SIGSYS, "SIGSYS" },
	};

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (names[i].sig == sig)
			return names[i].name;
	return NULL;
}

const char *coresig_text(int sig)
{
	static const struct {
		int sig;
		const char *text;
	} texts[] = {
		{ SIGHUP, "Hangup" },
		{ SIGINT, "Interrupt" },
		{ SIGQUIT, "Quit" },
		{ SIGILL, "Illegal instruction" },
		{ SIGTRAP, "Trace/breakpoint trap" },
		{ SIGABRT, "Aborted" },
		{ SIGBUS, "Bus error" },
		{ SIGFPE, "Arithmetic exception" },
		{ SIGKILL, "Killed" },
		{ SIGUSR1, "User defined signal 1" },
		{ SIGSEGV, "Segmentation fault" },
		{ SIGUSR2, "User defined signal 2" },
		{ SIGPIPE, "Broken pipe" },
		{ SIGALRM, "Alarm clock" },
		{ SIGTERM, "Terminated" },
		{ SIGXCPU, "CPU time limit exceeded" },
		{ SIGXFSZ, "File size limit exceeded" },
		{ SIGSYS, "Bad system call" },
	};

	for (size_t i = 0; i < sizeof(texts) / sizeof(texts[0]); i++)
		if (texts[i].sig == sig)
			return texts[i].text;
	return NULL;
}

const char *coresig_code_name(int sig, int code)
{
	for (size_t i = 0; i < sizeof(codes) / sizeof(codes[0]); i++)
		if ((codes[i].sig == sig || (codes[i].sig == 0 && code <= 0) ||
		     (codes[i].sig == 0 && code == SI_KERNEL)) &&
		    codes[i].code == code)
			return codes[i].name;
	return NULL;
}
