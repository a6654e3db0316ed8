#!/bin/sh
# run.sh - the soak test: a daemon built with AddressSanitizer and
# UndefinedBehaviorSanitizer samples many busy-threaded targets under the
# agent at 10 Hz for a long time, and must neither grow nor break.
#
# Usage: [SOAK_SECONDS=600] sh tests/soak/run.sh BUILDDIR   (make soak)
#
# BUILDDIR holds a sanitized build (make soak uses build/asan): its
# stackwatchd, its agent and its agent_target fixture. Settings, from the
# environment:
#	SOAK_SECONDS  how long to sample (600)
#	SOAK_TARGETS  how many targets (10)
#	SOAK_THREADS  threads per target (100: main, the agent's, workers)
#	SOAK_INTERVAL the daemon's --sample-interval in ms (100: 10 Hz)
#
# Every 10 s it prints the daemon's RSS and its dump counters. It fails
# (exit 1, with the reason on the last line) when
#  - a target or the daemon dies, or the daemon does not exit 0 on SIGTERM
#    at the end (LeakSanitizer's leak report at exit makes it exit 23);
#  - the daemon's stderr (or a target's) holds a sanitizer report;
#  - the daemon's RSS at the end exceeds its RSS after the warm-up (the
#    first 60 s, or the first third of a shorter run) by more than 8 MiB
#    or 10 %, whichever is larger. After the warm-up every bounded
#    structure is full: each target's history (--history-seconds 6 here,
#    60 samples at 10 Hz; the default 15 minutes would fill for 15
#    minutes, which is growth by design, up to --max-history-mib), the
#    symbol cache, ASan's quarantine (held to 16 MiB
#    here, so that freed memory it keeps back does not pass for growth);
#    what grows after that grows with time, and 10 minutes at this rate
#    are some 60,000 dumps: a leak of 150 bytes a dump passes 8 MiB.
#  - fewer than half the samples asked for were taken (the soak would
#    prove nothing).
set -u

if [ $# -ne 1 ]; then
	echo "usage: sh tests/soak/run.sh BUILDDIR" >&2
	exit 2
fi
build=$(cd "$1" 2>/dev/null && pwd) || {
	echo "soak: no build directory '$1'" >&2
	exit 2
}
seconds=${SOAK_SECONDS:-600}
ntargets=${SOAK_TARGETS:-10}
nthreads=${SOAK_THREADS:-100}
interval=${SOAK_INTERVAL:-100}
warmup=60
[ "$seconds" -lt $((warmup * 3)) ] && warmup=$((seconds / 3))
swd=$build/stackwatchd
agent=$build/libstackwatch-agent.so
fixture=$build/fixtures/agent_target
for f in "$swd" "$agent" "$fixture"; do
	if [ ! -e "$f" ]; then
		echo "soak: $f is not built (make soak builds it)" >&2
		exit 2
	fi
done
if ! command -v curl >/dev/null 2>&1; then
	echo "soak: needs curl" >&2
	exit 2
fi

tmp=$(mktemp -d) || exit 2
daemon_pid=""
target_pids=""
cleanup() {
	for p in $target_pids $daemon_pid; do
		kill -KILL "$p" 2>/dev/null
	done
	wait 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
unset LD_PRELOAD STACKWATCH_URL STACKWATCH_TOKEN NOTIFY_SOCKET

# A sanitizer report fails the run; ASan's quarantine is capped (above).
# A sanitized agent preloaded into a program comes before the ASan
# runtime.
ASAN_OPTIONS=verify_asan_link_order=0:quarantine_size_mb=16:detect_leaks=1
UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
export ASAN_OPTIONS UBSAN_OPTIONS

fail() {
	echo "soak: FAILED: $*"
	exit 1
}

# sanitizer_report FILE - true when FILE holds a sanitizer's report.
sanitizer_report() {
	grep -Eq 'ERROR: [A-Za-z]+Sanitizer|WARNING: [A-Za-z]+Sanitizer|runtime error:|^SUMMARY: [A-Za-z]+Sanitizer' "$1"
}

rss_kb() {
	sed -n 's/^VmRSS:[[:space:]]*\([0-9]*\) kB$/\1/p' "/proc/$1/status" \
		2>/dev/null
}

# metric NAME - a value of the daemon's /metrics (0 when absent).
metric() {
	v=$(curl -s -m 10 "$url/metrics" | awk -v n="$1" '$1 == n { print $2 }')
	echo "${v:-0}"
}

# alive PID - true while PID runs (a zombie has died).
alive() {
	state=$(sed -n 's/^State:[[:space:]]*\(.\).*/\1/p' "/proc/$1/status" \
		2>/dev/null)
	[ -n "$state" ] && [ "$state" != Z ] && [ "$state" != X ]
}

check_alive() {
	alive "$daemon_pid" || fail "the daemon died (see its stderr below)
$(tail -n 40 "$tmp/daemon.err")"
	i=0
	for p in $target_pids; do
		alive "$p" || fail "target $i (pid $p) died: $(tail -n 20 "$tmp/target.$i.err")"
		i=$((i + 1))
	done
	if sanitizer_report "$tmp/daemon.err"; then
		fail "a sanitizer report in the daemon's stderr:
$(head -n 60 "$tmp/daemon.err")"
	fi
}

"$swd" --listen 127.0.0.1:0 --agent-socket "$tmp/agent.sock" \
	--config /dev/null --sample-interval "$interval" --history-seconds 6 \
	--log-level info \
	2>"$tmp/daemon.err" &
daemon_pid=$!
url=""
i=0
while [ -z "$url" ] && [ $i -lt 600 ]; do
	url=$(sed -n 's/^listening on \(http:[^ ]*\)$/\1/p' "$tmp/daemon.err")
	alive "$daemon_pid" || fail "the daemon did not start: $(cat "$tmp/daemon.err")"
	[ -z "$url" ] && sleep 0.05
	i=$((i + 1))
done
[ -n "$url" ] || fail "the daemon did not say where it listens"

echo "soak: $ntargets targets x $nthreads threads, sampled every" \
	"$interval ms, for $seconds s; daemon $swd (pid $daemon_pid)," \
	"warm-up $warmup s"
i=0
while [ $i -lt "$ntargets" ]; do
	LD_PRELOAD=$agent STACKWATCH_SOCKET=$tmp/agent.sock \
		"$fixture" sigwait $((nthreads - 2)) \
		>"$tmp/target.$i.out" 2>"$tmp/target.$i.err" &
	target_pids="$target_pids $!"
	i=$((i + 1))
done
# Every target ready and registered (the agent thread makes N).
deadline=$(($(date +%s) + 120))
for p in $target_pids; do
	while ! curl -s -m 10 "$url/api/v1/targets" | grep -q "\"pid\":$p,"; do
		[ "$(date +%s)" -lt "$deadline" ] ||
			fail "pid $p did not register within 120 s"
		check_alive
		sleep 0.2
	done
done
i=0
for p in $target_pids; do
	n=$(ls "/proc/$p/task" | wc -l)
	[ "$n" -eq "$nthreads" ] ||
		fail "target $i (pid $p) has $n threads, not $nthreads"
	i=$((i + 1))
done

start=$(date +%s)
ok0=$(metric 'stackwatch_dumps_total{result="ok"}')
base=""
elapsed=0
while [ "$elapsed" -lt "$seconds" ]; do
	sleep 10
	now=$(date +%s)
	elapsed=$((now - start))
	check_alive
	rss=$(rss_kb "$daemon_pid")
	ok=$(metric 'stackwatch_dumps_total{result="ok"}')
	tmo=$(metric 'stackwatch_dumps_total{result="timeout"}')
	err=$(metric 'stackwatch_dumps_total{result="error"}')
	printf 'soak: %4d s  rss %7d kB  dumps ok %d (%.1f/s), timeout %d, error %d\n' \
		"$elapsed" "$rss" "$ok" "$(echo "$ok $ok0 $elapsed" |
			awk '{ print $3 ? ($1 - $2) / $3 : 0 }')" "$tmo" "$err"
	if [ -z "$base" ] && [ "$elapsed" -ge "$warmup" ]; then
		base=$rss
		echo "soak: RSS after the warm-up: $base kB"
	fi
done
[ -n "$base" ] || base=$rss

# Growth limit: 8 MiB or 10 %, whichever is larger.
limit=$((base / 10))
[ "$limit" -lt 8192 ] && limit=8192
growth=$((rss - base))
echo "soak: RSS $base kB after the warm-up, $rss kB at the end:" \
	"$growth kB (limit $limit kB)"
rate=$(echo "$ok $ok0 $elapsed" | awk '{ printf "%d", ($1 - $2) / $3 }')
want=$(((ntargets + 1) * 1000 / interval))
echo "soak: $rate dumps/s of the $want asked for ($ntargets targets and" \
	"the daemon itself)"
# Why dumps failed, if any did (the daemon logs each at level info).
sed -n 's/^.*dump of pid [0-9]* failed: //p' "$tmp/daemon.err" | sort |
	uniq -c | sed 's/^ */soak: failed dumps: /'

# The end: the targets first (each prints "got SIGTERM" and exits 0),
# then the daemon, which must exit 0 with no report (leaks included).
i=0
for p in $target_pids; do
	kill -TERM "$p"
done
for p in $target_pids; do
	wait "$p"
	st=$?
	[ "$st" -eq 0 ] || fail "target $i (pid $p) exited with status $st"
	if sanitizer_report "$tmp/target.$i.err"; then
		fail "a sanitizer report from target $i:
$(head -n 40 "$tmp/target.$i.err")"
	fi
	i=$((i + 1))
done
target_pids=""
kill -TERM "$daemon_pid"
wait "$daemon_pid"
st=$?
daemon_pid=""
if sanitizer_report "$tmp/daemon.err"; then
	fail "a sanitizer report in the daemon's stderr:
$(head -n 60 "$tmp/daemon.err")"
fi
[ "$st" -eq 0 ] || fail "the daemon exited with status $st on SIGTERM:
$(tail -n 20 "$tmp/daemon.err")"
[ "$growth" -le "$limit" ] ||
	fail "the daemon's RSS grew by $growth kB after the warm-up (limit $limit kB)"
[ "$((rate * 2))" -ge "$want" ] ||
	fail "only $rate dumps/s of the $want asked for: the soak proves little"
echo "soak: ok"
