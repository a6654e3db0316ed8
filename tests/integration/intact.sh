#!/bin/sh
# intact.sh - programs run under the agent exactly as without it, while a
# daemon samples them every 100 ms and 100 dumps are asked for each
# (tests/fixtures/intact.c says what each program does):
#
# - seccomp: a worker in strict mode, a worker under a killing allow-list,
#   a filter for every thread (TSYNC) and a SIGSYS handler emulating a
#   trapped getrusage all run to completion; a thread under a mode the
#   program entered is reported "seccomp" and never signalled, one under
#   a filter the program was started with is dumped;
# - a thread that blocks every signal is never signalled (no EINTR), and
#   is reported "blocked-signal";
# - a signal on our number that someone else sends gets what it gets
#   without the agent: the default action (killed by it), left pending
#   for a program that blocks it and taken by its sigtimedwait() with its
#   value, seen by an init that forwards every signal.
#
# The daemon runs without kernel reads: the signal path is what is tested.
#
# Usage: BUILD=build sh tests/integration/intact.sh  (tests/run.sh sets BUILD)
. "$(dirname "$0")/../tap.sh"

need "$BUILD/stackwatchd" "$BUILD/libstackwatch-agent.so" \
	"$BUILD/fixtures/intact"
command -v curl >/dev/null 2>&1 || {
	nok "curl is installed"
	exit 1
}
tmp=$(mktemp -d) || exit 1
pids=""
cleanup() {
	for p in $pids; do kill -9 "$p" 2>/dev/null; done
	[ -n "$dpid" ] && kill "$dpid" 2>/dev/null && wait "$dpid" 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT

tap_daemon "$tmp" --log-level info --sample-interval 100 --no-kernel-reads \
	--max-dump-rate 1000
agent=$BUILD/libstackwatch-agent.so
rt4=$("$BUILD/fixtures/intact" rtmin4)

# Waits (10 s at most) until FILE has a line matching RE.
wait_line() {
	i=0
	while [ $i -lt 100 ] && ! grep -q "$2" "$1" 2>/dev/null; do
		sleep 0.1
		i=$((i + 1))
	done
	grep -q "$2" "$1" 2>/dev/null
}

# start MODE SECONDS: the fixture under the agent in the background; sets
# pid and out (its output), once it said "ready" and registered.
start() {
	out=$tmp/$1.out
	STACKWATCH_SOCKET=$tmp/agent.sock LD_PRELOAD=$agent \
		"$BUILD/fixtures/intact" "$1" "$2" >"$out" 2>&1 &
	pid=$!
	pids="$pids $pid"
	wait_line "$out" '^ready' &&
		wait_line "$tmp/daemon.log" "registered pid $pid "
}

# dumps N: N dumps of $pid (fewer if it ends first), each kept in
# $tmp/dump.N; sets ndumps.
dumps() {
	ndumps=0
	while [ "$ndumps" -lt "$1" ] && kill -0 "$pid" 2>/dev/null; do
		curl -s -o "$tmp/dump.$ndumps" "$url/api/v1/stacks?pid=$pid"
		ndumps=$((ndumps + 1))
	done
}

# finish: waits for $pid, 20 s at most (then kills it: a program that
# hangs); sets rc to its status, "hung" for one that had to be killed.
finish() {
	i=0
	while [ $i -lt 200 ] && kill -0 "$pid" 2>/dev/null; do
		if [ "$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null)" = Z ]; then
			break
		fi
		sleep 0.1
		i=$((i + 1))
	done
	if [ $i -ge 200 ]; then
		kill -9 "$pid" 2>/dev/null
		wait "$pid" 2>/dev/null
		rc=hung
		return
	fi
	wait "$pid"
	rc=$?
}

# Whether any dump kept says STATUS for some thread.
dumped_status() {
	cat "$tmp"/dump.* 2>/dev/null | grep -q "\"status\":\"$1\""
}

# A sanitized agent (make asan) brings its runtime, whose own calls (the
# leak check at exit: clone, ptrace) a filter for every thread kills for.
sanitized=no
readelf -d "$agent" 2>/dev/null | grep -q 'lib[a-z]*san' && sanitized=yes

for mode in strict filter tsync trap blockall; do
	rm -f "$tmp"/dump.*
	if [ "$mode" = tsync ] && [ "$sanitized" = yes ]; then
		echo "ok - # SKIP tsync: a sanitized agent's runtime makes" \
			"calls the program's filter kills for"
		continue
	fi
	if [ "$mode" = tsync ]; then
		# Filtered whole before it settled: the agent's thread, which
		# would be filtered too, never starts; the daemon reads it as a
		# program without the agent.
		if start "$mode" 4; then
			nok "tsync: the agent's thread never starts under the" \
				"program's filter for every thread (it registered)"
		elif grep -q '^ready' "$out"; then
			ok "tsync: the agent's thread never starts under the" \
				"program's filter for every thread"
		else
			nok "tsync: starts under the agent: $(cat "$out")"
			continue
		fi
	elif ! start "$mode" 4; then
		nok "$mode: starts under the agent and registers: $(cat "$out")"
		continue
	fi
	dumps 100
	finish
	if [ "$rc" = 0 ] && grep -q '^done' "$out"; then
		ok "$mode: runs to completion under the agent ($ndumps dumps," \
			"sampled every 100 ms)"
	else
		nok "$mode: runs to completion under the agent: rc $rc," \
			"$(tr '\n' ' ' <"$out") ($ndumps dumps)"
	fi
	case $mode in
	strict | filter)
		if dumped_status seccomp; then
			ok "$mode: the worker is reported seccomp"
		else
			nok "$mode: the worker is reported seccomp:" \
				"$(head -c 300 "$tmp/dump.1")"
		fi
		;;
	blockall)
		if dumped_status blocked-signal; then
			ok "$mode: the thread that blocks every signal is" \
				"reported blocked-signal"
		else
			nok "$mode: the thread that blocks every signal is" \
				"reported blocked-signal: $(head -c 300 "$tmp/dump.1")"
		fi
		;;
	esac
done

# Started under a filter it inherited (systemd's SystemCallFilter=, a
# container's profile): made for the whole program, it lets our handler
# through; its threads are dumped as any.
rm -f "$tmp"/dump.*
if start inherit 3; then
	dumps 20
	finish
	if [ "$rc" = 0 ] && grep -q '^done' "$out" && dumped_status ok &&
		! dumped_status seccomp; then
		ok "inherit: a program started under a filter runs to" \
			"completion and is dumped ($ndumps dumps)"
	else
		nok "inherit: a program started under a filter runs to" \
			"completion and is dumped: rc $rc, $(tr '\n' ' ' <"$out")" \
			"$(head -c 300 "$tmp/dump.1")"
	fi
else
	nok "inherit: starts under the agent and registers: $(cat "$out")"
fi

# Someone else's signal on our number.
start sleep 5 || nok "sleep: starts under the agent and registers"
kill -s $rt4 "$pid"
finish
if [ "$rc" = $((128 + $rt4)) ]; then
	ok "kill -s RTMIN+4: the program is killed by it, as without the agent"
else
	nok "kill -s RTMIN+4: the program is killed by it, as without the" \
		"agent: rc $rc"
fi

out=$tmp/queue.out
STACKWATCH_SOCKET=$tmp/agent.sock LD_PRELOAD=$agent \
	timeout 20 "$BUILD/fixtures/intact" queue >"$out" 2>&1
want="pending 1 got $rt4 value 42"
if grep -q "^$want\$" "$out"; then
	ok "sigqueue to itself, every signal blocked: $want"
else
	nok "sigqueue to itself, every signal blocked: $want: $(cat "$out")"
fi

start forward 5 || nok "forward: starts under the agent and registers"
kill -s USR1 "$pid"
wait_line "$out" "^got 10\$"
kill -s $rt4 "$pid"
if wait_line "$out" "^got $rt4\$"; then
	ok "an init that takes every signal gets RTMIN+4"
else
	nok "an init that takes every signal gets RTMIN+4: $(tr '\n' ' ' <"$out")"
fi
dumps 20
finish
[ "$rc" = 0 ] && ok "the init runs to completion, dumped $ndumps times" ||
	nok "the init runs to completion: rc $rc"

for p in $pids; do
	if kill -0 "$p" 2>/dev/null; then
		nok "no program left running ($p)"
	fi
done
[ "$failed" -eq 0 ]
