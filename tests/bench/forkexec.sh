#!/bin/sh
# forkexec.sh - what the agent costs a program that forks and execs: three
# loops timed without the agent and with it (LD_PRELOAD, a daemon of our
# own listening on STACKWATCH_SOCKET), side by side; prints one Markdown
# table with each time, the ratio and whether it is within 1.3×.
#
# Usage: sh tests/bench/forkexec.sh [BUILDDIR]     (default: build)
#
# Builds nothing: `make bench` builds BUILDDIR/stackwatchd, the agent,
# BUILDDIR/bench/bench_fork and BUILDDIR/bench/bench_time. The loops:
# - fork(), _exit() in the child, waitpid(): SW_BENCH_FORK_ROUNDS (1000)
#   rounds of bench_fork, the time per round;
# - /bin/true run SW_BENCH_TRUE_RUNS (300) times from a sh loop;
# - SW_BENCH_SUBST_RUNS (1000) command substitutions x=$(true) in bash.
# Each runs SW_BENCH_FORK_REPS (9) times, with and without the agent in
# turn; the table shows the medians, and the median of the ratios of
# each pair of runs. Run by tests/bench/run.sh (skipped
# with SW_BENCH_FORKEXEC=0).
set -u

build=${1:-build}
rounds=${SW_BENCH_FORK_ROUNDS:-1000}
runs_true=${SW_BENCH_TRUE_RUNS:-300}
runs_subst=${SW_BENCH_SUBST_RUNS:-1000}
reps=${SW_BENCH_FORK_REPS:-9}
limit=1.3

for f in stackwatchd libstackwatch-agent.so bench/bench_fork \
	bench/bench_time; do
	if [ ! -e "$build/$f" ]; then
		echo "forkexec.sh: no $build/$f (run make bench)" >&2
		exit 2
	fi
done
absbuild=$(cd "$build" && pwd)
agent=$absbuild/libstackwatch-agent.so
timer=$absbuild/bench/bench_time
bash_=$(command -v bash) || {
	echo "forkexec.sh: no bash" >&2
	exit 2
}

work=$(mktemp -d) || exit 2
dpid=
cleanup() {
	[ -n "$dpid" ] && kill "$dpid" 2>/dev/null && wait "$dpid" 2>/dev/null
	rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

"$absbuild/stackwatchd" --listen 127.0.0.1:0 \
	--agent-socket "$work/agent.sock" --http-socket "$work/http.sock" \
	--config /dev/null 2>"$work/daemon.log" &
dpid=$!
i=0
while [ $i -lt 100 ] && ! grep -q '^listening on ' "$work/daemon.log"; do
	sleep 0.1
	i=$((i + 1))
done
if ! grep -q '^listening on ' "$work/daemon.log"; then
	echo "forkexec.sh: the daemon did not start:" >&2
	cat "$work/daemon.log" >&2
	exit 1
fi

# median - the median of the numbers on stdin, one a line.
median() {
	sort -n | awk '{ v[NR] = $1 } END {
		if (NR == 0) print ""
		else if (NR % 2) print v[(NR + 1) / 2]
		else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

# once WITH CMD... - one run of CMD, with the agent when WITH is 1; prints
# its figure: bench_fork's microseconds per round, else the wall time in
# milliseconds.
once() {
	with=$1
	shift
	if [ "$1" = fork ]; then
		if [ "$with" = 1 ]; then
			STACKWATCH_SOCKET=$work/agent.sock LD_PRELOAD=$agent \
				"$absbuild/bench/bench_fork" "$rounds"
		else
			env -u LD_PRELOAD "$absbuild/bench/bench_fork" "$rounds"
		fi | awk '$1 == "fork_us_per_round" { print $2 }'
		return
	fi
	if [ "$1" = fork-idle ]; then
		# "with": an idle thread of the program's own, no agent
		env -u LD_PRELOAD "$absbuild/bench/bench_fork" "$rounds" \
			$([ "$with" = 1 ] && echo idle) |
			awk '$1 == "fork_us_per_round" { print $2 }'
		return
	fi
	if [ "$with" = 1 ]; then
		STACKWATCH_SOCKET=$work/agent.sock LD_PRELOAD=$agent \
			"$timer" "$work/t" 120 "$@" >/dev/null
	else
		env -u LD_PRELOAD "$timer" "$work/t" 120 "$@" >/dev/null
	fi
	awk '$2 == 0 { print $1 }' "$work/t"
}

# measure NAME UNIT CMD... - REPS runs each way, alternated; one row.
rows=""
measure() {
	name=$1
	unit=$2
	shift 2
	: >"$work/without"
	: >"$work/with"
	r=0
	while [ $r -lt "$reps" ]; do
		once 0 "$@" >>"$work/without"
		once 1 "$@" >>"$work/with"
		r=$((r + 1))
	done
	a=$(median <"$work/without")
	b=$(median <"$work/with")
	# The ratio is the median of each run's with the run just before it
	# without: the machine's speed moves by 2-3x from one minute to the
	# next, far more than from one run to the next.
	ratio=$(paste "$work/without" "$work/with" | awk '$1 + 0 > 0 && $2 != "" {
		printf "%.4f\n", $2 / $1 }' | median)
	ratio=$(awk -v r="$ratio" 'BEGIN {
		if (r != "") printf "%.2f", r; else print "?" }')
	met=$(awk -v r="$ratio" -v l="$limit" 'BEGIN {
		if (r !~ /^[0-9.]+$/) print "?"; else print (r + 0 <= l + 0) ? "yes" : "no" }')
	rows="$rows| $name | $a $unit | $b $unit | ${ratio}× | ≤ ${limit}× | $met |
"
	echo "forkexec: $name: without $a $unit, with $b $unit," \
		"ratio $ratio (≤ $limit: $met)" >&2
}

echo "running: fork, exec and command substitution, with the agent and without" >&2
measure "fork + _exit + waitpid ($rounds rounds of bench_fork)" "µs/round" fork
measure "for comparison, no agent: the same with one idle thread of the program's own (the \"with\" column)" "µs/round" fork-idle
measure "/bin/true $runs_true times from a sh loop" "ms" \
	sh -c "i=0; while [ \$i -lt $runs_true ]; do /bin/true; i=\$((i + 1)); done"
measure "$runs_subst command substitutions x=\$(true) in bash" "ms" \
	"$bash_" -c "i=0; while [ \$i -lt $runs_subst ]; do x=\$(true); i=\$((i + 1)); done"

echo
echo "What the agent costs a program that forks and execs (a daemon of our" \
	"own on STACKWATCH_SOCKET; medians of $reps runs each, alternated;" \
	"the ratio is the median of the $reps pairs' ratios):"
echo
echo "| loop | without the agent | with the agent | ratio | target | met |"
echo "| --- | --- | --- | --- | --- | --- |"
printf '%s' "$rows"
exit 0
