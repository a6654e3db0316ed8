/*
 * gate.h - a hook for the test suite: holds each read of a process at the
 * moment it begins, until the test lets it go, so that tests of races (a
 * process that runs a set-uid program while it is read, requests that
 * queue for the snapshot helper) are deterministic instead of timed.
 *
 * It is off unless $STACKWATCH_TEST_GATE names a unix socket when the
 * daemon starts (set by whoever starts it: root for the service). Then,
 * before each read, the reading thread connects there, sends one line
 * "read PID METHOD UID\n" (METHOD: agent or ptrace; UID: whom the read is
 * for) and waits for one byte back, or for timeout_ms, or for the socket
 * to close; a gate that cannot be reached holds nothing.
 */
#ifndef SWD_GATE_H
#define SWD_GATE_H

#include <stdbool.h>
#include <sys/types.h>

/* Reads $STACKWATCH_TEST_GATE; call once at start, before any thread. */
void gate_init(void);

/* Holds a read of pid (see above); returns at once when the gate is off. */
void gate_hold(pid_t pid, const char *method, uid_t uid, int timeout_ms);

/*
 * A read made of several (an agent's process: the kernel read, then the
 * agent): after its one gate_hold(), gate_held(true) makes the calling
 * thread's later holds pass until gate_held(false).
 */
void gate_held(bool on);

#endif /* SWD_GATE_H */
