#!/bin/sh
# daemon.sh - stackwatch through the daemon, side by side with eu-stack and
# gdb, on the same processes; prints one Markdown table with the targets of
# the performance issue and whether each is met.
#
# Usage: sh tests/bench/daemon.sh [BUILDDIR]     (default: build)
#
# Builds nothing: `make bench` builds BUILDDIR/stackwatchd, the agent,
# BUILDDIR/bench/bench_target (the process being dumped: N parked threads
# in 8 groups of identical stacks, every 10th one 30 frames deep in a
# static recursion, plus a 1 ms heartbeat thread that keeps the largest
# gap between its wake-ups) and BUILDDIR/bench/bench_time (a wall clock
# for one command). Run by tests/bench/run.sh after its own table.
#
# For each size N (SW_BENCH_THREADS, default "100 1000 4000"):
# - cold: a fresh daemon (--sample-interval 0) and a fresh target, then the
#   first `curl /api/v1/stacks?pid=N` (symbols and lines): the wall time
#   of the curl process, median over SW_BENCH_COLD (3) daemon starts;
# - warm: one more daemon with --max-dump-rate 1000 (its cache then holds
#   a result 1 ms, so every request below is a fresh dump; the table shows
#   the count of requests served from cache), curl back to back for
#   SW_BENCH_WARM_SECONDS (3) and at least 11 requests: the median; the
#   heartbeat's largest gap meanwhile, beside two controls taken before
#   the first dump (2 s idle, 2 s of `curl /healthz` back to back: the
#   same CPU load without a dump); the target's RSS before the first dump
#   and after the last;
# - the same target: `eu-stack -p`, `eu-stack -s -p`, `gdb -p -batch -ex
#   'thread apply all bt'`, each SW_BENCH_PEER_RUNS (3) times back to
#   back (median wall time, the heartbeat's largest gap over the runs).
#   gdb is capped at SW_BENCH_GDB_CAP (60) seconds, eu-stack at
#   SW_BENCH_PEER_CAP (60): a run past the cap is killed and reported; a
#   run that took more than a third of the cap is not repeated (said in
#   the table), so that a loaded machine still finishes in ~10 minutes.
# As root the heartbeat runs at SCHED_FIFO (SW_BENCH_FIFO=0: SCHED_OTHER,
# like the application's own threads): the gaps then show what stops the
# process, not what else loads a shared machine (with SCHED_OTHER the
# idle control alone showed gaps of 60 ms on a busy 2-vCPU machine).
# Then the same without the agent, at SW_BENCH_PTRACE_THREADS (1000), on
# one bench_target that loaded nothing of ours: a fresh daemon reads it
# from the kernel (the default: its threads are blocked), curl back to
# back as above (SW_BENCH_WARM_SECONDS), then the kernel read alone
# (bench_kread: SW_BENCH_KREAD_ROUNDS (21) reads of the whole process,
# and as many given the previous read's switch counts, which copy none
# of the threads that did not run), then a fresh daemon with
# --no-kernel-reads takes ptrace snapshots of it the same way, beside
# `eu-stack -s -p` and gdb on the same process: wall times (for curl the
# request, its time_total, and beside it the whole command, which adds
# curl's own start-up, as `curl /healthz` shows), each answer's
# paused_us_max and paused_us_total (the pause of the longest-held thread
# and the average) and "methods" (threads read each way), and the
# heartbeat's largest gap, against an idle control: what the machine
# itself does to a 1 ms real-time thread.
# Then the early returns of sleeping calls under the agent: a target of
# SW_BENCH_EINTR_THREADS (1000) threads in sleep(), poll(), epoll_wait()
# and sigtimedwait() (bench_target BENCH_TARGET_WAIT=1), sampled by the
# daemon at its default 1 Hz for SW_BENCH_EINTR_SECONDS (60), with
# kernel reads and with --no-kernel-reads (a fresh daemon and target
# each): the returns before time the program saw, and the wake-ups.
# Then pprof: at 1000 threads, the time to serve /debug/pprof/goroutine
# against the JSON of the same (cached: --max-dump-rate 1) dump, in
# SW_BENCH_PPROF_ROUNDS (5) rounds of 4 requests of each, alternated
# within one cache window; and the CPU a SW_BENCH_PROFILE_SECONDS (30) s
# /debug/pprof/profile at the default 19 Hz costs a target of
# SW_BENCH_PROFILE_THREADS (100) threads, beyond its own CPU at rest
# measured just before for as long (the heartbeat thread's), and the
# daemon's own CPU (stackwatchd, its snapshot helper and the helper's
# children) over the profile: with kernel reads and with
# --no-kernel-reads (a fresh daemon and target each).
# Then the daemon at rest: SW_BENCH_REST_TARGETS (50) targets of 10
# threads, --sample-interval 1000, 5 s to settle, its utime+stime over
# SW_BENCH_REST_SECONDS (20) from /proc/PID/stat.
#
# The machine is noisy: ratios measured side by side are what count. A
# missed target is a finding, not a failure: the exit status is 0 unless
# something could not be measured at all.
set -u

build=${1:-build}
sizes=${SW_BENCH_THREADS:-100 1000 4000}
cold_runs=${SW_BENCH_COLD:-3}
warm_s=${SW_BENCH_WARM_SECONDS:-3}
warm_min=11
peer_runs=${SW_BENCH_PEER_RUNS:-3}
gdb_cap=${SW_BENCH_GDB_CAP:-60}
peer_cap=${SW_BENCH_PEER_CAP:-60}
rest_targets=${SW_BENCH_REST_TARGETS:-50}
rest_s=${SW_BENCH_REST_SECONDS:-20}
ptrace_n=${SW_BENCH_PTRACE_THREADS:-1000}
pprof_rounds=${SW_BENCH_PPROF_ROUNDS:-5}
profile_n=${SW_BENCH_PROFILE_THREADS:-100}
profile_s=${SW_BENCH_PROFILE_SECONDS:-30}
kread_rounds=${SW_BENCH_KREAD_ROUNDS:-21}
eintr_n=${SW_BENCH_EINTR_THREADS:-1000}
eintr_s=${SW_BENCH_EINTR_SECONDS:-60}
target_wait=0 # 1: target_start's threads sleep in calls (bench_target)
fifo=${SW_BENCH_FIFO:-$([ "$(id -u)" = 0 ] && echo 1 || echo 0)}
status=0

for f in stackwatchd libstackwatch-agent.so bench/bench_target \
	bench/bench_time; do
	if [ ! -e "$build/$f" ]; then
		echo "daemon.sh: no $build/$f (run make bench)" >&2
		exit 2
	fi
done
for t in curl eu-stack gdb; do
	if ! command -v $t >/dev/null 2>&1; then
		echo "daemon.sh: $t is not installed (scripts/deps.sh bench)" >&2
		exit 2
	fi
done
absbuild=$(cd "$build" && pwd)
daemon_bin=$absbuild/stackwatchd
agent=$absbuild/libstackwatch-agent.so
target_bin=$absbuild/bench/bench_target
timer=$absbuild/bench/bench_time
# Neither peer may go to the network for debug info.
unset DEBUGINFOD_URLS
export DEBUGINFOD_URLS=

work=$(mktemp -d /tmp/sw-bench-XXXXXX)
dpid=""
tpid=""
pids="" # every target we started and have not stopped

cleanup() {
	for p in $pids $dpid; do
		kill -KILL "$p" 2>/dev/null
	done
	rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

say() {
	echo "$*" >&2
}

# ---- helpers ----

# msleep MS
msleep() {
	sleep "$(awk -v m="$1" 'BEGIN { printf "%.3f", m / 1000 }')"
}

# median - the median of the numbers on stdin (one or more a line), empty
# when there are none.
median() {
	tr ' ' '\n' | grep -E '^[0-9.]+$' | sort -n | awk '
		{ a[NR] = $1 }
		END { if (NR == 0) exit
		      if (NR % 2) printf "%g\n", a[(NR + 1) / 2]
		      else printf "%g\n", (a[NR / 2] + a[NR / 2 + 1]) / 2 }'
}

# calc EXPR [FORMAT] - awk's value of EXPR (in parentheses, so that a
# comparison is not taken for a redirection), printed with FORMAT (%.3g).
calc() {
	awk "BEGIN { printf \"${2:-%.3g}\", ($1) }"
}

# stop PID - SIGTERM, up to 15 s, then SIGKILL; reaps it.
stop() {
	kill -TERM "$1" 2>/dev/null
	i=0
	while kill -0 "$1" 2>/dev/null && [ $i -lt 1500 ]; do
		msleep 10
		i=$((i + 1))
	done
	kill -KILL "$1" 2>/dev/null
	wait "$1" 2>/dev/null
	pids=$(echo "$pids" | tr ' ' '\n' | grep -vx "$1" | tr '\n' ' ')
}

# daemon_start ARGS... - a fresh stackwatchd on 127.0.0.1:0; sets dpid,
# sock and url. Returns 1 when it did not come up within 20 s.
daemon_start() {
	sock=$work/agent.sock
	rm -f "$sock" "$work/daemon.log"
	"$daemon_bin" --listen 127.0.0.1:0 --agent-socket "$sock" \
		--config /dev/null "$@" 2>"$work/daemon.log" &
	dpid=$!
	i=0
	while [ $i -lt 2000 ]; do
		port=$(sed -n 's|^listening on http://127\.0\.0\.1:\([0-9]*\).*|\1|p' \
			"$work/daemon.log" 2>/dev/null | head -n 1)
		if [ -n "$port" ]; then
			url=http://127.0.0.1:$port
			return 0
		fi
		kill -0 "$dpid" 2>/dev/null || break
		msleep 10
		i=$((i + 1))
	done
	say "daemon.sh: the daemon did not start:"
	cat "$work/daemon.log" >&2
	return 1
}

daemon_stop() {
	[ -n "$dpid" ] && stop "$dpid"
	dpid=""
}

# registered PID - true when PID is in /api/v1/targets.
registered() {
	curl -s "$url/api/v1/targets" | grep -q "\"pid\":$1,"
}

# target_start N NAME - bench_target with N threads under the agent; sets
# tpid and hb (its heartbeat file). Returns 1 unless it is ready and
# registered within 60 s.
target_start() {
	hb=$work/hb.$2
	BENCH_TARGET_FIFO=$fifo BENCH_TARGET_WAIT=$target_wait \
		LD_PRELOAD=$agent STACKWATCH_SOCKET=$sock \
		"$target_bin" "$1" "$hb" >"$work/out.$2" 2>"$work/err.$2" &
	tpid=$!
	pids="$pids $tpid"
	i=0
	while [ $i -lt 6000 ]; do
		if grep -q '^ready' "$work/out.$2" 2>/dev/null &&
			registered "$tpid"; then
			return 0
		fi
		kill -0 "$tpid" 2>/dev/null || break
		msleep 10
		i=$((i + 1))
	done
	say "daemon.sh: target of $1 threads not ready and registered:"
	cat "$work/err.$2" >&2
	return 1
}

# plain_start N NAME - bench_target with N threads and nothing of ours
# loaded; sets tpid and hb. Returns 1 unless it is ready within 60 s.
plain_start() {
	hb=$work/hb.$2
	BENCH_TARGET_FIFO=$fifo "$target_bin" "$1" "$hb" \
		>"$work/out.$2" 2>"$work/err.$2" &
	tpid=$!
	pids="$pids $tpid"
	i=0
	while [ $i -lt 6000 ]; do
		grep -q '^ready' "$work/out.$2" 2>/dev/null && return 0
		kill -0 "$tpid" 2>/dev/null || break
		msleep 10
		i=$((i + 1))
	done
	say "daemon.sh: plain target of $1 threads not ready:"
	cat "$work/err.$2" >&2
	return 1
}

# heartbeat [NAME N] - reads the heartbeat's window since the previous
# call (or since ready) and starts a new one. With NAME and N, stores the
# largest gap (ms) as gap_NAME_N and the beats later than 2 ms (of all) as
# late_NAME_N.
heartbeat() {
	rm -f "$hb"
	kill -USR1 "$tpid" 2>/dev/null || return
	i=0
	while [ ! -s "$hb" ] && [ $i -lt 1000 ]; do
		msleep 5
		i=$((i + 1))
	done
	[ $# = 2 ] || return 0
	set_cell "gap_$1" "$2" \
		"$(awk '{ printf "%.1f", $2 / 1000 }' "$hb" 2>/dev/null)"
	set_cell "late_$1" "$2" \
		"$(awk '{ printf "%d of %d", $6, $4 }' "$hb" 2>/dev/null)"
}

rss_kb() {
	awk '/^VmRSS:/ { print $2 }' "/proc/$1/status"
}

# cpu_ticks PID... - utime+stime of these processes, in clock ticks.
cpu_ticks() {
	for p in "$@"; do
		sed 's/^.*) //' "/proc/$p/stat" 2>/dev/null
	done | awk '{ s += $12 + $13 } END { print s + 0 }'
}

# timed CAP_S CMD... - runs CMD under bench_time (stdout to $work/cmd.out,
# stderr to $work/cmd.err); sets wall (ms) and wall_status.
timed() {
	"$timer" "$work/time" "$@" >"$work/cmd.out" 2>"$work/cmd.err"
	wall=$(awk '{ print $1 }' "$work/time" 2>/dev/null)
	wall_status=$(awk '{ print $2 }' "$work/time" 2>/dev/null)
}

# dump_sw - one curl of the target's stacks, timed; sets wall, http (curl's
# time_total, ms), ok (threads_ok of the answer) and elapsed (the dump's
# elapsed_us, ms). wall is empty when the answer is not a 200.
dump_sw() {
	timed 0 curl -s -o "$work/resp.json" \
		-w '%{http_code} %{time_total}' "$url/api/v1/stacks?pid=$tpid"
	code=$(awk '{ print $1 }' "$work/cmd.out")
	http=$(awk '{ printf "%.3f", $2 * 1000 }' "$work/cmd.out")
	ok=$(grep -o '"threads_ok":[0-9]*' "$work/resp.json" | head -n 1 |
		cut -d: -f2)
	elapsed=$(grep -o '"elapsed_us":[0-9]*' "$work/resp.json" |
		head -n 1 | cut -d: -f2)
	elapsed=$(calc "${elapsed:-0} / 1000" '%.3f')
	pmax=$(grep -o '"paused_us_max":[0-9]*' "$work/resp.json" |
		head -n 1 | cut -d: -f2)
	ptotal=$(grep -o '"paused_us_total":[0-9]*' "$work/resp.json" |
		head -n 1 | cut -d: -f2)
	# "methods": {"kernel":1002,...} as "kernel 1002, ..."
	methods=$(grep -o '"methods":{[^}]*}' "$work/resp.json" | head -n 1 |
		sed 's/^"methods":{//; s/}$//; s/"//g; s/:/ /g; s/,/, /g')
	if [ "$code" != 200 ] || [ "$wall_status" != 0 ]; then
		say "daemon.sh: curl of pid $tpid: HTTP $code, status $wall_status"
		wall=""
	fi
}

metric() {
	curl -s "$url/metrics" | awk -v k="$1" '$1 == k { print $2; exit }'
}

# methods_range - over the lines on stdin, each a dump's methods ("kernel
# 1002, perf 1"), each method's count as "min–max" (or the one value),
# a method absent from a dump counting 0: "kernel 1000–1002, perf 0–1".
methods_range() {
	awk -F', ' '
		NF == 0 { next }
		{ d++
		  for (i = 1; i <= NF; i++) {
			split($i, kv, " ")
			if (!(kv[1] in seen)) { seen[kv[1]] = 1; order[++m] = kv[1] }
			v[d, kv[1]] = kv[2] } }
		END {
			for (j = 1; j <= m; j++) {
				k = order[j]; lo = ""; hi = ""
				for (i = 1; i <= d; i++) {
					x = ((i, k) in v) ? v[i, k] + 0 : 0
					if (lo == "" || x < lo) lo = x
					if (hi == "" || x > hi) hi = x }
				printf "%s%s %s", (j > 1 ? ", " : ""), k,
					(lo == hi ? lo : lo "–" hi) }
			if (m == 0) printf "none" }'
}

# daemon_ticks - utime+stime of the daemon, of its snapshot helpers (its
# children) and of their children alive (the parser workers), each with
# the children it reaped (a helper's one child per snapshot, workers that
# ended), in clock ticks.
daemon_ticks() {
	cat /proc/[0-9]*/stat 2>/dev/null | awk -v d="$dpid" '
		{ p = $1; sub(/^.*\) /, ""); ppid[p] = $2
		  t[p] = $12 + $13 + $14 + $15 }
		END { for (p in t)
			if (p == d || ppid[p] == d || ppid[ppid[p]] == d)
				s += t[p]
		      print s + 0 }'
}

# kernel_status - "active" when the daemon's /api/v1/status says it reads
# blocked threads from the kernel, else why not.
kernel_status() {
	curl -s "$url/api/v1/status" | awk '{
		if (match($0, /"kernel":\{"active":true/)) { print "active"; exit }
		if (match($0, /"kernel":\{"active":false,"why":"[^"]*"/)) {
			w = substr($0, RSTART, RLENGTH)
			sub(/.*"why":"/, "", w); sub(/"$/, "", w)
			print "not active: " w; exit }
		print "unknown" }'
}

# kv KEY FILE - the value after KEY in FILE's "key value" pairs.
kv() {
	awk -v k="$1" '{ for (i = 1; i < NF; i++) if ($i == k) {
		print $(i + 1); exit } }' "$2" 2>/dev/null
}

# peer NAME KEY N CAP_S CMD... - PEER_RUNS runs of CMD on the target, back
# to back; sets pwall (median ms), pruns (runs done), pnote and pthreads
# (threads in the output of the last run, counted by the caller's pattern
# in $tidre), and the heartbeat's cells for KEY over the runs.
peer() {
	name=$1
	key=$2
	size=$3
	cap=$4
	shift 4
	walls=""
	pnote=""
	pruns=0
	heartbeat
	while [ $pruns -lt "$peer_runs" ]; do
		timed "$cap" "$@"
		pruns=$((pruns + 1))
		if [ "$wall_status" = timeout ]; then
			pnote="killed after ${cap} s"
			kill -CONT "$tpid" 2>/dev/null
			break
		fi
		walls="$walls $wall"
		[ "$wall_status" != 0 ] && say "  $name exited $wall_status"
		# A run that takes a third of the cap is not repeated.
		if [ "$cap" != 0 ] &&
			[ "$(calc "$wall > $cap * 1000 / 3" '%d')" = 1 ]; then
			break
		fi
	done
	heartbeat "$key" "$size"
	pwall=$(echo "$walls" | median)
	pthreads=$(grep -cE "$tidre" "$work/cmd.out")
	if [ -z "$pnote" ] && [ "$pruns" -lt "$peer_runs" ]; then
		pnote="$pruns of $peer_runs runs: one took > $(calc "$cap / 3" '%g') s"
	fi
	say "  $name: $walls ms; gap $(cell "gap_$key" "$size") ms" \
		"($(cell "late_$key" "$size") beats late); $pthreads threads;" \
		"$pnote"
}

# set_cell VAR N VALUE - stores VALUE as VAR_N (shell variables).
set_cell() {
	eval "$1_$2=\$3"
}
cell() {
	eval "printf '%s' \"\${$1_$2:-}\""
}

# ---- the machine ----
busy() {
	a=$(awk '/^cpu / { print $2+$3+$4+$7+$8+$9, $5+$6; exit }' /proc/stat)
	sleep 1
	b=$(awk '/^cpu / { print $2+$3+$4+$7+$8+$9, $5+$6; exit }' /proc/stat)
	echo "$a $b" | awk '{ t = ($3 - $1) + ($4 - $2)
		printf "%.0f", (t > 0 ? 100 * ($3 - $1) / t : 0) }'
}
busy_before=$(busy)
started=$(date +%s)

# ---- each size ----
for n in $sizes; do
	say "running: daemon and peers, $n threads"
	colds=""
	# Cold: fresh daemon, fresh target, first dump.
	k=1
	while [ $k -lt "$cold_runs" ]; do
		if daemon_start --sample-interval 0 &&
			target_start "$n" "cold$n.$k"; then
			msleep 200
			dump_sw
			colds="$colds $wall"
			say "  cold: $wall ms (dump $elapsed ms, $ok threads ok)"
			stop "$tpid"
		else
			status=1
			[ -n "${tpid:-}" ] && stop "$tpid"
		fi
		daemon_stop
		k=$((k + 1))
	done
	# Warm, on a daemon whose first dump is one more cold figure.
	if ! daemon_start --sample-interval 0 --max-dump-rate 1000 ||
		! target_start "$n" "warm$n"; then
		status=1
		[ -n "${tpid:-}" ] && stop "$tpid"
		daemon_stop
		continue
	fi
	msleep 200
	heartbeat
	msleep 2000
	heartbeat idle "$n"
	# The same CPU load from the daemon and curl, without a dump.
	t0=$(date +%s)
	while [ $(($(date +%s) - t0)) -lt 2 ]; do
		curl -s -o /dev/null "$url/healthz"
	done
	heartbeat load "$n"
	rss0=$(rss_kb "$tpid")
	dump_sw
	colds="$colds $wall"
	say "  cold: $wall ms (dump $elapsed ms, $ok threads ok)"
	set_cell cold "$n" "$(echo "$colds" | median)"
	set_cell cold_runs "$n" "$(echo "$colds" | wc -w)"
	heartbeat
	walls=""
	https=""
	elapseds=""
	oks=""
	count=0
	t0=$(date +%s)
	while [ $count -lt $warm_min ] ||
		[ $(($(date +%s) - t0)) -lt "$warm_s" ]; do
		dump_sw
		walls="$walls $wall"
		https="$https $http"
		elapseds="$elapseds $elapsed"
		oks="$oks $ok"
		count=$((count + 1))
		[ $count -ge 2000 ] && break
	done
	heartbeat sw "$n"
	rss1=$(rss_kb "$tpid")
	# What any curl of this daemon costs: start-up, connect, a tiny answer.
	hz=""
	for k in 1 2 3 4 5; do
		timed 0 curl -s -o /dev/null "$url/healthz"
		hz="$hz $wall"
	done
	set_cell healthz "$n" "$(echo "$hz" | median)"
	set_cell warm "$n" "$(echo "$walls" | median)"
	set_cell warm_http "$n" "$(echo "$https" | median)"
	set_cell warm_dump "$n" "$(echo "$elapseds" | median)"
	set_cell warm_count "$n" "$count"
	set_cell warm_cached "$n" "$(metric stackwatch_requests_cached_total)"
	set_cell sw_threads "$n" "$(echo "$oks" | tr ' ' '\n' | grep . |
		sort -n | head -n 1)"
	set_cell rss "$n" "$(calc "($rss1 - $rss0) / $n" '%.1f')"
	set_cell rss_abs "$n" "$rss0 → $rss1 kB"
	say "  warm: $count dumps, median $(cell warm "$n") ms (HTTP" \
		"$(cell warm_http "$n") ms, dump $(cell warm_dump "$n") ms);" \
		"gap $(cell gap_sw "$n") ms ($(cell late_sw "$n") beats late);" \
		"RSS $rss0 → $rss1 kB"

	tidre='^TID [0-9]+:'
	peer eu-stack eu "$n" "$peer_cap" eu-stack -p "$tpid"
	set_cell eu "$n" "$pwall"
	set_cell eu_note "$n" "$pnote"
	set_cell eu_threads "$n" "$pthreads"
	peer "eu-stack -s" eus "$n" "$peer_cap" eu-stack -s -p "$tpid"
	set_cell eus "$n" "$pwall"
	set_cell eus_note "$n" "$pnote"
	set_cell eus_threads "$n" "$pthreads"
	tidre='^Thread [0-9]+ '
	peer gdb gdb "$n" "$gdb_cap" gdb -p "$tpid" -batch \
		-ex 'thread apply all bt'
	set_cell gdb "$n" "$pwall"
	set_cell gdb_threads "$n" "$pthreads"
	set_cell gdb_note "$n" "$pnote"
	stop "$tpid"
	daemon_stop
done

# ---- without the agent: kernel reads, then ptrace snapshots ----

# changed_reads N - with the daemon just started: N threads of
# plain_target tick, each waking every 20 ms, so that every read finds
# all of them ran since the last one and copies and unwinds each anew
# (no thread's stack kept): the median of 21 requests back to back
# after a first, as cell kchanged at N.
changed_reads() {
	rm -f "$work/tick.in"
	mkfifo "$work/tick.in" || return
	"$absbuild/fixtures/plain_target" tick "$1" <"$work/tick.in" \
		>"$work/tick.out" 2>&1 &
	ttpid=$!
	pids="$pids $ttpid"
	exec 9>"$work/tick.in"
	msleep 3000
	savedtpid=$tpid
	tpid=$ttpid
	dump_sw
	walls=""
	i=0
	while [ $i -lt 21 ]; do
		dump_sw
		walls="$walls $wall"
		i=$((i + 1))
	done
	set_cell kchanged "$1" "$(echo "$walls" | median)"
	say "  changed: median $(cell kchanged "$1") ms of 21 reads of $1" \
		"threads that all ran since the last ($methods)"
	exec 9>&-
	stop "$ttpid"
	tpid=$savedtpid
}

# plain_dumps K - on the plain target tpid and the daemon just started:
# the cold dump, then warm ones back to back (SW_BENCH_WARM_SECONDS, at
# least warm_min), the heartbeat's window over them as gap_sw_K$n; the
# figures as cells K<name> at $n.
plain_dumps() {
	dump_sw
	set_cell "$1cold" "$n" "$wall"
	say "  cold: $wall ms (dump $elapsed ms, $ok threads ok; $methods)"
	heartbeat
	walls=""
	https=""
	pmaxes=""
	ptotals=""
	pavgs=""
	oks=""
	: >"$work/methods"
	count=0
	t0=$(date +%s)
	while [ $count -lt $warm_min ] ||
		[ $(($(date +%s) - t0)) -lt "$warm_s" ]; do
		dump_sw
		walls="$walls $wall"
		[ -n "$wall" ] && https="$https $http"
		pmaxes="$pmaxes $pmax"
		ptotals="$ptotals $ptotal"
		[ -n "$ptotal" ] && [ -n "$ok" ] && [ "$ok" -gt 0 ] &&
			pavgs="$pavgs $(calc "$ptotal / $ok" '%.1f')"
		oks="$oks $ok"
		echo "$methods" >>"$work/methods"
		count=$((count + 1))
		[ $count -ge 2000 ] && break
	done
	heartbeat sw "$1$n"
	set_cell "$1warm" "$n" "$(echo "$walls" | median)"
	set_cell "$1http" "$n" "$(echo "$https" | median)"
	set_cell "$1count" "$n" "$count"
	set_cell "$1avg" "$n" "$(echo "$pavgs" | median)"
	set_cell "$1max_med" "$n" "$(echo "$pmaxes" | median)"
	set_cell "$1max_max" "$n" "$(echo "$pmaxes" | tr ' ' '\n' | grep . |
		sort -n | tail -n 1)"
	set_cell "$1total_max" "$n" "$(echo "$ptotals" | tr ' ' '\n' |
		grep . | sort -n | tail -n 1)"
	set_cell "$1over" "$n" "$(echo "$pmaxes" | tr ' ' '\n' | grep . |
		awk '$1 > 2000 { c++ } END { print c + 0 }')"
	set_cell "$1_threads" "$n" "$(echo "$oks" | tr ' ' '\n' | grep . |
		sort -n | head -n 1)"
	set_cell "$1methods" "$n" "$(methods_range <"$work/methods")"
	say "  warm: $count dumps, median $(cell "$1warm" "$n") ms (request" \
		"$(cell "$1http" "$n") ms);" \
		"paused avg $(cell "$1avg" "$n") us, max" \
		"$(cell "$1max_med" "$n") us (median), $(cell "$1max_max" "$n")" \
		"us (all); gap $(cell gap_sw "$1$n") ms; methods" \
		"$(cell "$1methods" "$n")"
}

n=$ptrace_n
say "running: without the agent, $n threads (kernel reads, then ptrace" \
	"snapshots with --no-kernel-reads)"
if plain_start "$n" "plain$n"; then
	msleep 200
	heartbeat
	msleep 2000
	heartbeat idle "p$n"
	if daemon_start --sample-interval 0 --max-dump-rate 1000; then
		kstatus=$(kernel_status)
		say "  kernel reads: $kstatus"
		plain_dumps k
		changed_reads "$n"
	else
		status=1
	fi
	daemon_stop
	# The helper's part alone: the kernel read of the whole process.
	if [ -x "$absbuild/bench/bench_kread" ] &&
		"$absbuild/bench/bench_kread" "$tpid" "$kread_rounds" \
			>"$work/kread.out" 2>"$work/kread.err"; then
		set_cell kread "$n" "$(awk '$1 == "full" {
			printf "%.3f", $5 / 1000 }' "$work/kread.out")"
		set_cell kread_info "$n" "$(awk '$1 == "full" {
			printf "%s threads, %s copied, %.1f MB; min %.1f ms, max %.1f ms",
			$11, $13, $15 / 1e6, $7 / 1000, $9 / 1000 }' \
			"$work/kread.out")"
		set_cell kread_same "$n" "$(awk '$1 == "same" {
			printf "%.3f", $5 / 1000 }' "$work/kread.out")"
		set_cell kread_same_info "$n" "$(awk '$1 == "same" {
			printf "%s of %s threads not copied, %s copied (%.1f kB)",
			$13, $11, $15, $17 / 1000 }' "$work/kread.out")"
		say "  bench_kread: $(tr '\n' ';' <"$work/kread.out")"
	else
		say "  bench_kread: $(cat "$work/kread.err" 2>/dev/null)"
	fi
	if daemon_start --sample-interval 0 --max-dump-rate 1000 \
		--no-kernel-reads; then
		plain_dumps p
	else
		status=1
	fi
	tidre='^TID [0-9]+:'
	peer "eu-stack -s" eus "p$n" "$peer_cap" eu-stack -s -p "$tpid"
	set_cell peus "$n" "$pwall"
	set_cell peus_note "$n" "$pnote"
	set_cell peus_threads "$n" "$pthreads"
	tidre='^Thread [0-9]+ '
	peer gdb gdb "p$n" "$gdb_cap" gdb -p "$tpid" -batch \
		-ex 'thread apply all bt'
	set_cell pgdb "$n" "$pwall"
	set_cell pgdb_note "$n" "$pnote"
	set_cell pgdb_threads "$n" "$pthreads"
	# Every thread's pause, not only each snapshot's longest.
	if [ -x "$absbuild/bench/bench_snapshot" ]; then
		"$absbuild/bench/bench_snapshot" "$tpid" 10 >"$work/snap.out" \
			2>"$work/snap.err"
		set_cell pq "$n" "$(awk '$1 == "pauses" {
			printf "%s / %s / %s / %s µs, %s over 2 ms, of %s; heartbeat thread %s µs",
			$4, $6, $8, $10, $12, $2, $14 }' "$work/snap.out")"
		say "  bench_snapshot: $(tail -n 1 "$work/snap.out")"
	fi
	# The two unwinders the issue weighs, on one snapshot.
	if [ -x "$absbuild/bench/bench_unwinders" ]; then
		"$absbuild/bench/bench_unwinders" "$tpid" 5 >"$work/unw.out" \
			2>"$work/unw.err"
		set_cell punw "$n" "$(awk '
			$1 == "threads" { t = $2; fd = $4; fl = $6; same = $8; pre = $10; dif = $12 }
			$1 == "dwfl_us_min" { printf "libdwfl %.1f ms, libunwind %.1f ms (medians); frames %s / %s; threads identical %s of %s (%s prefix, %s differ)",
				$4 / 1000, $8 / 1000, fd, fl, same, t, pre, dif }' "$work/unw.out")"
		say "  bench_unwinders: $(cell punw "$n")"
	fi
	stop "$tpid"
else
	status=1
	[ -n "${tpid:-}" ] && stop "$tpid"
fi
daemon_stop

# ---- sleeping calls under the agent: early returns ----
say "running: $eintr_n threads of an agent target in sleep, poll," \
	"epoll_wait and sigtimedwait, sampled at 1 Hz for $eintr_s s, with" \
	"kernel reads and with --no-kernel-reads"
for mode in k p; do
	flag=""
	[ $mode = p ] && flag=--no-kernel-reads
	target_wait=1
	# shellcheck disable=SC2086 # $flag: no argument when empty
	if daemon_start $flag && target_start "$eintr_n" "wait$mode"; then
		heartbeat # the window starts
		sleep "$eintr_s"
		heartbeat
		set_cell eintr "$mode" "$(kv early "$hb")"
		set_cell eintr_by "$mode" "$(kv early_sleep "$hb") / $(kv early_poll "$hb") / $(kv early_epoll "$hb") / $(kv early_sigtimedwait "$hb")"
		set_cell eintr_wakes "$mode" "$(kv wakes "$hb")"
		set_cell eintr_wakes_by "$mode" "$(kv wakes_sleep "$hb") / $(kv wakes_poll "$hb") / $(kv wakes_epoll "$hb") / $(kv wakes_sigtimedwait "$hb")"
		# Per thread per second (a sample a second) of the threads in
		# sleep, poll and epoll_wait (3 in 4): sigtimedwait is made
		# again by the agent, out of the program's sight.
		e3=$(awk '{ for (i = 1; i < NF; i++)
			if ($i ~ /^early_(sleep|poll|epoll)$/) s += $(i + 1) }
			END { print s + 0 }' "$hb" 2>/dev/null)
		set_cell eintr_rate "$mode" "$(calc "${e3:-0} / ($eintr_n * 3 / 4) / $eintr_s" '%.2f')"
		wk=$(kv wakes "$hb")
		set_cell eintr_wrate "$mode" "$(calc "${wk:-0} / $eintr_n / $eintr_s" '%.2f')"
		dump_sw
		set_cell eintr_methods "$mode" "$methods"
		say "  $flag: $(cat "$hb"); a dump after: $methods"
		stop "$tpid"
	else
		status=1
		[ -n "${tpid:-}" ] && stop "$tpid"
	fi
	target_wait=0
	daemon_stop
done

# ---- pprof ----
say "running: pprof at $ptrace_n threads, a ${profile_s} s profile of $profile_n"
tck=$(getconf CLK_TCK)
if daemon_start --sample-interval 0 --max-dump-rate 1 &&
	target_start "$ptrace_n" pprof; then
	jw="" pw=""
	r=0
	while [ $r -lt "$pprof_rounds" ]; do
		sleep 1.1 # a fresh window: one dump, then all cached
		curl -s -o /dev/null "$url/api/v1/stacks?pid=$tpid"
		k=0
		while [ $k -lt 4 ]; do
			jw="$jw $(curl -s -o /dev/null -w '%{time_total}' \
				"$url/api/v1/stacks?pid=$tpid")"
			pw="$pw $(curl -s -o "$work/g.pb.gz" -w '%{time_total}' \
				"$url/debug/pprof/goroutine?pid=$tpid")"
			k=$((k + 1))
		done
		r=$((r + 1))
	done
	jmed=$(echo $jw | median)
	pmed=$(echo $pw | median)
	set_cell pp_json 0 "$(calc "$jmed * 1000" '%.2f')"
	set_cell pp_pprof 0 "$(calc "$pmed * 1000" '%.2f')"
	set_cell pp_ratio 0 "$(calc "$pmed / $jmed" '%.2f')"
	set_cell pp_bytes 0 "$(wc -c <"$work/g.pb.gz") B"
	say "  goroutine $(cell pp_pprof 0) ms, JSON $(cell pp_json 0) ms"
	stop "$tpid"
	daemon_stop
else
	status=1
	daemon_stop
fi
for mode in k p; do
	flag=""
	[ $mode = p ] && flag=--no-kernel-reads
	# shellcheck disable=SC2086 # $flag: no argument when empty
	if ! daemon_start --sample-interval 0 $flag ||
		! target_start "$profile_n" "prof$mode"; then
		status=1
		[ -n "${tpid:-}" ] && stop "$tpid"
		daemon_stop
		continue
	fi
	sleep 2
	c0=$(cpu_ticks "$tpid")
	sleep "$profile_s"
	c1=$(cpu_ticks "$tpid")
	d1=$(daemon_ticks)
	curl -s -o "$work/p.pb.gz" \
		"$url/debug/pprof/profile?seconds=$profile_s&pid=$tpid"
	c2=$(cpu_ticks "$tpid")
	d2=$(daemon_ticks)
	samples=$(metric 'stackwatch_dumps_total{result="ok"}')
	rest=$(calc "100 * ($c1 - $c0) / $tck / $profile_s" '%.2f')
	busy_p=$(calc "100 * ($c2 - $c1) / $tck / $profile_s" '%.2f')
	cost=$(calc "$busy_p - $rest" '%.2f')
	set_cell prof_cost "$mode" "$cost"
	set_cell prof_rest "$mode" "$rest"
	set_cell prof_samples "$mode" "${samples:-0}"
	set_cell prof_daemon "$mode" "$(calc "100 * ($d2 - $d1) / $tck / $profile_s" '%.2f')"
	# CPU per sample, and per thread per sample, in microseconds.
	set_cell prof_per_sample "$mode" "$(calc "($c2 - $c1 - ($c1 - $c0)) * 1000000 / $tck / (${samples:-1} + 0.000001)" '%.0f')"
	set_cell prof_per_thread "$mode" "$(calc "($c2 - $c1 - ($c1 - $c0)) * 1000000 / $tck / (${samples:-1} + 0.000001) / ($profile_n + 3)" '%.1f')"
	dump_sw
	set_cell prof_methods "$mode" "$methods"
	say "  profile${flag:+ ($flag)}: target $busy_p% of a core (at rest" \
		"$rest%), daemon $(cell prof_daemon "$mode")%, $samples dumps;" \
		"a dump after: $methods"
	stop "$tpid"
	daemon_stop
done

# ---- the daemon at rest ----
say "running: daemon at rest, $rest_targets targets sampled at 1 Hz"
rest_pids=""
if daemon_start --sample-interval 1000; then
	k=0
	while [ $k -lt "$rest_targets" ]; do
		LD_PRELOAD=$agent STACKWATCH_SOCKET=$sock "$target_bin" 10 - \
			>/dev/null 2>&1 &
		rest_pids="$rest_pids $!"
		pids="$pids $!"
		k=$((k + 1))
	done
	i=0
	while [ $i -lt 300 ]; do
		got=$(curl -s "$url/api/v1/targets" | grep -o '"self":false' |
			wc -l)
		[ "$got" -ge "$rest_targets" ] && break
		msleep 100
		i=$((i + 1))
	done
	sleep 5
	tck=$(getconf CLK_TCK)
	d0=$(cpu_ticks "$dpid")
	a0=$(cpu_ticks $rest_pids)
	m0=$(metric 'stackwatch_dumps_total{result="ok"}')
	sleep "$rest_s"
	d1=$(cpu_ticks "$dpid")
	a1=$(cpu_ticks $rest_pids)
	m1=$(metric 'stackwatch_dumps_total{result="ok"}')
	rest_cpu=$(calc "100 * ($d1 - $d0) / $tck / $rest_s" '%.2f')
	rest_agents=$(calc "100 * ($a1 - $a0) / $tck / $rest_s" '%.2f')
	rest_dumps=$((${m1:-0} - ${m0:-0}))
	say "  daemon $rest_cpu% of a core; agents $rest_agents%;" \
		"$got targets; $rest_dumps dumps in $rest_s s"
	for p in $rest_pids; do
		stop "$p"
	done
	daemon_stop
else
	status=1
fi

# ---- the table ----
# Targets apply at 1000 threads (the issue's wording) for the speed
# ratios, at every size for the pause and the memory.
ms() {
	if [ -z "$1" ]; then
		printf 'failed'
	elif [ "$(calc "$1 >= 1000" '%d')" = 1 ]; then
		calc "$1 / 1000" '%.2f s'
	elif [ "$(calc "$1 >= 10" '%d')" = 1 ]; then
		calc "$1" '%.0f ms'
	else
		calc "$1" '%.1f ms'
	fi
}
ratio() { # A B - A/B, or empty
	if [ -n "$1" ] && [ -n "$2" ] && [ "$(calc "$2 > 0" '%d')" = 1 ]; then
		calc "$1 / $2" '%.4g'
	fi
}
hdr="| figure |"
sep="| --- |"
for n in $sizes; do
	hdr="$hdr $n threads |"
	sep="$sep --- |"
done
hdr="$hdr target | met |"
sep="$sep --- | --- |"

# line LABEL TARGET MET FN - one row; FN N prints the cell for size N.
line() {
	l="| $1 |"
	for n in $sizes; do
		l="$l $($4 "$n") |"
	done
	echo "$l $2 | $3 |"
}
# met_all VAR OP LIMIT - "yes" when VAR_N OP LIMIT at every size, else
# "no (N, ...)" naming the sizes that miss.
met_all() {
	miss=""
	for n in $sizes; do
		v=$(cell "$1" "$n")
		if [ -z "$v" ] || [ "$(calc "$v $2 $3" '%d')" != 1 ]; then
			miss="$miss $n"
		fi
	done
	if [ -z "$miss" ]; then
		echo yes
	else
		echo "no (at$(echo "$miss" | sed 's/ /, /g; s/^,//'))"
	fi
}
met_one() { # VALUE OP LIMIT
	if [ -z "$1" ]; then
		echo "?"
	elif [ "$(calc "$1 $2 $3" '%d')" = 1 ]; then
		echo yes
	else
		echo no
	fi
}
# The figures at 1000 threads (or the middle size) for the ratio targets.
ref=1000
case " $sizes " in *" 1000 "*) ;; *) ref=$(echo "$sizes" | awk '{ print $(int((NF + 1) / 2)) }') ;; esac

c_cold() { printf '%s' "$(ms "$(cell cold "$1")")"; }
c_warm() { printf '%s' "$(ms "$(cell warm "$1")")"; }
c_whttp() {
	printf '%s / %s' "$(ms "$(cell warm_http "$1")")" \
		"$(ms "$(cell warm_dump "$1")")"
}
c_healthz() { printf '%s' "$(ms "$(cell healthz "$1")")"; }
# peer_cell KEY N - the median with the note, if any.
peer_cell() {
	v=$(cell "$1" "$2")
	note=$(cell "$1_note" "$2")
	if [ -z "$v" ]; then
		printf '%s' "${note:-failed}"
	else
		printf '%s' "$(ms "$v")${note:+ ($note)}"
	fi
}
c_eu() { peer_cell eu "$1"; }
c_eus() { peer_cell eus "$1"; }
c_gdb() { peer_cell gdb "$1"; }
r_eus() { r=$(ratio "$(cell eus "$1")" "$(cell warm "$1")"); set_cell r_eus "$1" "$r"; printf '%s' "${r:+${r}×}"; }
r_gdb() { r=$(ratio "$(cell gdb "$1")" "$(cell warm "$1")"); set_cell r_gdb "$1" "$r"; printf '%s' "${r:+${r}×}"; }
r_http() {
	a=$(ratio "$(cell eus "$1")" "$(cell warm_http "$1")")
	b=$(ratio "$(cell gdb "$1")" "$(cell warm_http "$1")")
	printf '%s / %s' "${a:+${a}×}" "${b:+${b}×}"
}
r_cold() { r=$(ratio "$(cell cold "$1")" "$(cell eus "$1")"); set_cell r_cold "$1" "$r"; printf '%s' "${r:+$(calc "$r" '%.3f')}"; }
# gap KEY N - "G ms (L of B late)".
gap() {
	v=$(cell "gap_$1" "$2")
	[ -n "$v" ] && printf '%s ms (%s)' "$v" "$(cell "late_$1" "$2")"
}
g_idle() { gap idle "$1"; }
g_load() { gap load "$1"; }
g_sw() { gap sw "$1"; }
g_eu() { gap eu "$1"; }
g_eus() { gap eus "$1"; }
g_gdb() { gap gdb "$1"; }
c_rss() { printf '%s kB (%s)' "$(cell rss "$1")" "$(cell rss_abs "$1")"; }
c_threads() {
	printf '%s / %s / %s / %s' "$(cell sw_threads "$1")" \
		"$(cell eu_threads "$1")" "$(cell eus_threads "$1")" \
		"$(cell gdb_threads "$1")"
}
c_count() {
	printf '%s (%s cached)' "$(cell warm_count "$1")" \
		"$(cell warm_cached "$1")"
}
c_coldruns() { printf '%s' "$(cell cold_runs "$1")"; }

# Compute the ratios first (the cells set r_*), then the verdicts.
for n in $sizes; do
	r_eus "$n" >/dev/null
	r_gdb "$n" >/dev/null
	r_cold "$n" >/dev/null
done
m_eus=$(met_one "$(cell r_eus $ref)" '>=' 50)
m_gdb=$(met_one "$(cell r_gdb $ref)" '>=' 100)
m_cold=$(met_one "$(cell r_cold $ref)" '<=' '1/3')

echo
echo "Through the daemon, against the peers (each on the same process;" \
	"wall time of the whole command)"
echo
echo "$hdr"
echo "$sep"
line "stackwatch cold: first \`curl /api/v1/stacks?pid=N\` after daemon start, fresh target (median of daemon starts)" "-" "-" c_cold
line "stackwatch warm: \`curl /api/v1/stacks?pid=N\`, symbols and lines (median, back to back, --max-dump-rate 1000)" "-" "-" c_warm
line "… of which HTTP request (curl time_total) / dump in the daemon (elapsed_us)" "-" "-" c_whttp
line "… \`curl /healthz\` of the same daemon, for scale (median of 5)" "-" "-" c_healthz
line "\`eu-stack -p N\` (median of $peer_runs, cap ${peer_cap} s)" "-" "-" c_eu
line "\`eu-stack -s -p N\` (median of $peer_runs, cap ${peer_cap} s)" "-" "-" c_eus
line "\`gdb -p N -batch -ex 'thread apply all bt'\` (median of $peer_runs, cap ${gdb_cap} s)" "-" "-" c_gdb
line "warm speed-up over \`eu-stack -s\`" "≥ 50× at $ref" "$m_eus" r_eus
line "warm speed-up over gdb" "≥ 100× at $ref" "$m_gdb" r_gdb
line "… the same two on the HTTP time alone (curl's time_total: no curl start-up): eu-stack -s / gdb" "-" "-" r_http
line "cold / \`eu-stack -s\`" "≤ 0.333 at $ref" "$m_cold" r_cold
policy=SCHED_OTHER
[ "$fifo" = 1 ] && policy=SCHED_FIFO
line "heartbeat ($policy): largest gap (beats > 2 ms of all), nobody dumping (2 s)" "-" "-" g_idle
line "heartbeat's largest gap, \`curl /healthz\` back to back (2 s: the load without a dump)" "-" "-" g_load
line "heartbeat's largest gap, stackwatch dumping back to back (the warm requests)" "≤ 2 ms" "$(met_all gap_sw '<=' 2)" g_sw
line "heartbeat's largest gap, \`eu-stack -p\` back to back" "-" "-" g_eu
line "heartbeat's largest gap, \`eu-stack -s -p\` back to back" "-" "-" g_eus
line "heartbeat's largest gap, gdb back to back" "-" "-" g_gdb
line "target RSS growth per thread, before the first dump → after the warm ones" "≤ 16 kB" "$(met_all rss '<=' 16)" c_rss
line "threads in the answer: stackwatch ok / eu-stack / eu-stack -s / gdb" "N + 3" "-" c_threads
line "warm requests (of them answered from the daemon's cache)" "-" "-" c_count
line "cold samples (daemon starts)" "-" "-" c_coldruns
if [ -n "${rest_cpu:-}" ]; then
	l="| daemon CPU at rest: $rest_targets targets × 10 threads, --sample-interval 1000, over $rest_s s (% of one core) |"
	first=1
	for n in $sizes; do
		if [ $first = 1 ]; then
			l="$l $rest_cpu% ($rest_dumps dumps) |"
			first=0
		else
			l="$l |"
		fi
	done
	echo "$l ≤ 2% | $(met_one "$rest_cpu" '<=' 2) |"
	l="| the $rest_targets targets' CPU meanwhile (their threads are parked: the agents' dumps), together (% of one core) |"
	first=1
	for n in $sizes; do
		if [ $first = 1 ]; then
			l="$l $rest_agents% |"
			first=0
		else
			l="$l |"
		fi
	done
	echo "$l - | - |"
fi
echo
echo "Targets: bench_target (not linked with stackwatch; the agent" \
	"preloaded): N threads in 8 groups of identical stacks, every 10th" \
	"one 30 frames deep in a static recursion, parked in" \
	"pthread_cond_wait; plus main, the agent thread and a 1 ms heartbeat." \
	"Wall times are whole commands (fork to reap, process start-up" \
	"included, for curl as for the peers). Cold: a fresh daemon and a" \
	"fresh target each time (nothing cached on either side). Warm:" \
	"--max-dump-rate 1000, so every request is a fresh dump (the daemon" \
	"reuses a result only for 1 ms). Gaps: the largest interval between" \
	"two wake-ups of the target's 1 ms heartbeat thread ($policy;" \
	"SW_BENCH_FIFO=0 for SCHED_OTHER, as the application's threads)," \
	"and how many of its intervals exceeded 2 ms, of all in the window."
n=$ptrace_n
pw=$(cell pwarm "$n")
r_pe=$(ratio "$(cell peus "$n")" "$pw")
r_pg=$(ratio "$(cell pgdb "$n")" "$pw")
pgap=$(cell gap_sw "p$n")
echo
echo "Without the agent: ptrace snapshots through the daemon" \
	"(--no-kernel-reads), against the peers, on one process of $n" \
	"threads that loaded nothing of ours"
echo
echo "| figure | value | target | met |"
echo "| --- | --- | --- | --- |"
echo "| stackwatch cold: first \`curl /api/v1/stacks?pid=N\` | $(ms "$(cell pcold "$n")") | - | - |"
echo "| stackwatch warm: \`curl /api/v1/stacks?pid=N\`, symbols and lines (median of $(cell pcount "$n"), back to back) | $(ms "$pw") | - | - |"
echo "| \`eu-stack -s -p N\` (median of $peer_runs) | $(peer_cell peus "$n") | - | - |"
echo "| \`gdb -p N -batch -ex 'thread apply all bt'\` (median of $peer_runs) | $(peer_cell pgdb "$n") | - | - |"
echo "| speed-up over \`eu-stack -s\` | ${r_pe:+${r_pe}×} | ≥ 10× | $(met_one "$r_pe" '>=' 10) |"
echo "| speed-up over gdb | ${r_pg:+${r_pg}×} | ≥ 10× | $(met_one "$r_pg" '>=' 10) |"
echo "| each thread's pause, average (paused_us_total / threads, median over snapshots) | $(cell pavg "$n") µs | ≤ 50 µs | $(met_one "$(cell pavg "$n")" '<=' 50) |"
echo "| longest pause of one thread in a snapshot (paused_us_max): median over snapshots | $(cell pmax_med "$n") µs | - | - |"
echo "| … the longest over all snapshots (snapshots over 2 ms) | $(cell pmax_max "$n") µs ($(cell pover "$n") of $(cell pcount "$n")) | ≤ 2000 µs | $(met_one "$(cell pmax_max "$n")" '<=' 2000) |"
echo "| every thread's pause over 10 more snapshots (bench_snapshot): p50 / p99 / p99.9 / max, and the heartbeat thread's own longest | $(cell pq "$n") | - | - |"
echo "| unwinding one snapshot offline: libdwfl (ours) against libunwind's remote API (bench_unwinders, 5 rounds) | $(cell punw "$n") | - | - |"
echo "| heartbeat ($policy, 1 ms): largest gap, nobody dumping (2 s) | $(gap idle "p$n") | - | - |"
echo "| heartbeat's largest gap, snapshots back to back (a miss of 3 ms: a gap of 4 ms) | $(gap sw "p$n") | ≤ 4 ms | $(met_one "$pgap" '<=' 4) |"
echo "| heartbeat's largest gap, \`eu-stack -s\` / gdb back to back | $(gap eus "p$n") / $(gap gdb "p$n") | - | - |"
echo "| threads: stackwatch ok / eu-stack -s / gdb | $(cell p_threads "$n") / $(cell peus_threads "$n") / $(cell pgdb_threads "$n") | N + 2 | - |"
echo
echo "pprof (/debug/pprof/goroutine and /debug/pprof/profile)"
echo
echo "| figure | value | target | met |"
echo "| --- | --- | --- | --- |"
echo "| \`curl /debug/pprof/goroutine?pid=N\` of $ptrace_n threads, the dump cached (median of $((pprof_rounds * 4))) | $(cell pp_pprof 0) ms ($(cell pp_bytes 0)) | - | - |"
echo "| \`curl /api/v1/stacks?pid=N\` of the same dump, alternated with it | $(cell pp_json 0) ms | - | - |"
echo "| goroutine / JSON | $(cell pp_ratio 0) | ≤ 1.5 | $(met_one "$(cell pp_ratio 0)" '<=' 1.5) |"
echo "| a ${profile_s} s profile at 19 Hz of $profile_n threads: the target's CPU beyond its own at rest ($(cell prof_rest k)%) | $(cell prof_cost k)% of a core | < 3% | $(met_one "$(cell prof_cost k)" '<' 3) |"
echo "| … the dumps it took, and the target's CPU per dump / per thread per dump | $(cell prof_samples k); $(cell prof_per_sample k) µs / $(cell prof_per_thread k) µs | - | - |"
echo
echo "A gap of the idle control above its limit is the machine's own: then" \
	"the snapshot's figure can be no better. tests/bench/bench_snapshot" \
	"PID ROUNDS gives each phase, the pause's quantiles and the" \
	"heartbeat thread's own pause."

# ---- kernel reads beside --no-kernel-reads ----
n=$ptrace_n
kw=$(cell kwarm "$n")
kh=$(cell khttp "$n")
# The request (curl's time_total) is what the daemon answers in; the
# whole command adds curl's own start-up, the same for any request
# (`curl /healthz` above), and is shown beside it.
r_ke=$(ratio "$(cell peus "$n")" "$kh")
r_kg=$(ratio "$(cell pgdb "$n")" "$kh")
r_kew=$(ratio "$(cell peus "$n")" "$kw")
r_kgw=$(ratio "$(cell pgdb "$n")" "$kw")
ph=$(cell phttp "$n")
r_peh=$(ratio "$(cell peus "$n")" "$ph")
r_pgh=$(ratio "$(cell pgdb "$n")" "$ph")
kpm=$(cell kmax_max "$n")
kpt=$(cell ktotal_max "$n")
paused_met="?"
if [ -n "$kpm" ] && [ -n "$kpt" ]; then
	paused_met=$(met_one "$((kpm + kpt))" '<=' 0)
fi
# early EINTR_MODE - "E (sleep / poll / epoll / sigtimedwait)".
early() {
	v=$(cell eintr "$1")
	[ -n "$v" ] && printf '%s (%s)' "$v" "$(cell eintr_by "$1")"
}
wakes() {
	v=$(cell eintr_wakes "$1")
	[ -n "$v" ] && printf '%s (%s); %s a thread a second' "$v" \
		"$(cell eintr_wakes_by "$1")" "$(cell eintr_wrate "$1")"
}
pct() { [ -n "$1" ] && printf '%s%%' "$1"; }
echo
echo "Kernel reads (the default: blocked threads read from the kernel, no" \
	"signal and no stop) beside --no-kernel-reads (signals for agent" \
	"targets, ptrace stops otherwise), in this run; the daemon's kernel" \
	"reads: ${kstatus:-unknown}"
echo
echo "| figure | kernel reads | --no-kernel-reads | target | met |"
echo "| --- | --- | --- | --- | --- |"
echo "| no agent, $n threads: warm symbolized request, \`curl /api/v1/stacks?pid=N\` back to back (median of $(cell kcount "$n") / $(cell pcount "$n")): the request (curl's time_total) | $(ms "$kh") | $(ms "$ph") | - | - |"
echo "| … the whole curl command, its own start-up included (\`curl /healthz\`: $(c_healthz "$n")) | $(ms "$kw") | $(ms "$(cell pwarm "$n")") | - | - |"
echo "| changed reads: \`curl /api/v1/stacks?pid=N\` of $n threads that all ran since the last read (plain_target tick), median of 21 | $(ms "$(cell kchanged "$n")") | - | - | - |"
echo "| … speed-up of the request over \`eu-stack -s -p N\` on the same process ($(peer_cell peus "$n")); whole command in brackets | ${r_ke:+${r_ke}×}${r_kew:+ (${r_kew}×)} | ${r_peh:+${r_peh}×}${r_pe:+ (${r_pe}×)} | ≥ 100× with kernel reads | $(met_one "$r_ke" '>=' 100) |"
echo "| … speed-up of the request over \`gdb -p N -batch -ex 'thread apply all bt'\` ($(peer_cell pgdb "$n")); whole command in brackets | ${r_kg:+${r_kg}×}${r_kgw:+ (${r_kgw}×)} | ${r_pgh:+${r_pgh}×}${r_pg:+ (${r_pg}×)} | ≥ 100× with kernel reads | $(met_one "$r_kg" '>=' 100) |"
echo "| … the kernel read alone of the whole process, the helper's part (bench_kread: kread_process, median of $kread_rounds) | $(ms "$(cell kread "$n")") ($(cell kread_info "$n")) | - | ≤ 6 ms | $(met_one "$(cell kread "$n")" '<=' 6) |"
echo "| … the same given the previous read's switch counts (kread_process_same, median of $kread_rounds): threads that did not run are not copied | $(ms "$(cell kread_same "$n")") ($(cell kread_same_info "$n")) | - | - | - |"
echo "| … each answer's paused_us_max / paused_us_total, the largest over the warm dumps | $kpm / $kpt µs | $(cell pmax_max "$n") / $(cell ptotal_max "$n") µs | 0 with kernel reads | $paused_met |"
echo "| … heartbeat ($policy, 1 ms): largest gap at rest (2 s, nobody dumping; one control for both) | $(gap idle "p$n") | $(gap idle "p$n") | - | - |"
echo "| … heartbeat's largest gap, dumps back to back (the warm requests) | $(gap sw "k$n") | $(gap sw "p$n") | ≤ 2 ms with kernel reads | $(met_one "$(cell gap_sw "k$n")" '<=' 2) |"
echo "| agent, $eintr_n threads in sleep / poll / epoll_wait / sigtimedwait, sampled at 1 Hz for $eintr_s s: early returns the program saw (sleep / poll / epoll / sigtimedwait) | $(early k) | $(early p) | 0 with kernel reads | $(met_one "$(cell eintr k)" '<=' 0) |"
echo "| … a thread in sleep, poll or epoll_wait a second (the agent makes a sigtimedwait its signal cut short again, out of the program's sight) | $(cell eintr_rate k) | $(cell eintr_rate p) | - | - |"
echo "| … those threads' wake-ups (context switches, /proc: sleep / poll / epoll / sigtimedwait) | $(wakes k) | $(wakes p) | - | - |"
echo "| agent, $profile_n threads parked, a ${profile_s} s profile at 19 Hz: the target's CPU beyond its own at rest ($(cell prof_rest k)% / $(cell prof_rest p)%), % of one core | $(pct "$(cell prof_cost k)") | $(pct "$(cell prof_cost p)") | ≤ 0.5% with kernel reads | $(met_one "$(cell prof_cost k)" '<=' 0.5) |"
echo "| … the daemon's own CPU over the profile (stackwatchd, its snapshot helper and the helper's children), % of one core | $(pct "$(cell prof_daemon k)") | $(pct "$(cell prof_daemon p)") | - | - |"
echo "| … the dumps it took | $(cell prof_samples k) | $(cell prof_samples p) | - | - |"
echo
echo "Threads each dump read each way (its answer's \"methods\"; a range" \
	"over the dumps): no agent, $n threads: kernel reads" \
	"$(cell kmethods "$n") ($(cell kcount "$n") dumps), --no-kernel-reads" \
	"$(cell pmethods "$n") ($(cell pcount "$n") dumps); agent, threads in" \
	"calls (a dump after the window): kernel reads" \
	"$(cell eintr_methods k), --no-kernel-reads $(cell eintr_methods p);" \
	"agent, the profile's target (a dump after it): kernel reads" \
	"$(cell prof_methods k), --no-kernel-reads $(cell prof_methods p)."
echo
echo "CPUs busy with other work: ${busy_before}% before the daemon run," \
	"$(busy)% after; it took $(($(date +%s) - started)) s."
exit $status
