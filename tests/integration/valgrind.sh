#!/bin/sh
# valgrind.sh - a program under the agent is clean under Valgrind's
# memcheck: nothing of ours reads memory it never wrote. The agent primes
# its signal handler at start with a context from getcontext(), which
# leaves rax unset; the handler reads rax (is the thread in a system
# call?), so that context must be fully written first.
#
# Usage: BUILD=build sh tests/integration/valgrind.sh  (tests/run.sh sets BUILD)
. "$(dirname "$0")/../tap.sh"

need "$BUILD/libstackwatch-agent.so"
# A sanitized agent (make asan) cannot run under Valgrind: both want the
# process's memory for themselves.
if readelf -d "$BUILD/libstackwatch-agent.so" 2>/dev/null |
	grep -q 'lib[a-z]*san'; then
	echo "ok - # SKIP a sanitized agent: not under Valgrind"
	exit 0
fi
if ! command -v valgrind >/dev/null 2>&1; then
	nok "valgrind is installed (scripts/deps.sh check)"
	exit 1
fi
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT

# No daemon: the agent's socket is one nobody listens on.
for prog in /bin/true "/bin/sh -c exit"; do
	STACKWATCH_SOCKET=$tmp/none.sock \
		LD_PRELOAD=$BUILD/libstackwatch-agent.so \
		valgrind -q --error-exitcode=99 $prog >"$tmp/out" 2>&1
	rc=$?
	if [ "$rc" = 0 ]; then
		ok "valgrind -q --error-exitcode=99 $prog under the agent: rc 0"
	else
		nok "valgrind -q --error-exitcode=99 $prog under the agent: rc $rc:" \
			"$(grep -m 3 '==[0-9]*== [A-Z]' "$tmp/out" | tr '\n' ' ')"
	fi
done
[ "$failed" -eq 0 ]
