#!/bin/sh
# run.sh - runs the benchmarks and prints one Markdown table of figures,
# each beside its target.
#
# Usage: sh tests/bench/run.sh [BUILDDIR]     (default: build)
#
# Builds nothing: `make bench` builds BUILDDIR/bench/* first. Prints the
# machine on top, then one row per figure: what was measured, the target
# (from the foundation issue; "-" where the figure has none) and whether
# it is met. A missed target is a finding, not a failure: the exit status
# is 0 unless a benchmark program itself failed to give its figures.
#
# The machine is noisy (and may be shared), so every figure is a median:
# warm dumps over SW_BENCH_REPS (default 11) dumps in each of
# SW_BENCH_PROCS (default 3) fresh processes, cold dumps over at least 5
# processes, single-thread rates over SW_BENCH_PROCS processes of
# SW_BENCH_SECONDS (default 0.5) per rate. SW_BENCH_THREADS (default
# "100 1000 4000") sets the sizes. Then SW_BENCH_RATE_THREADS (100)
# parked threads sampled at SW_BENCH_RATE_HZ (19, the profile rate) for
# SW_BENCH_RATE_SECONDS (10) each at rest, on the real handler and on the
# empty one: what a profile costs, against the signal's own floor; and
# SW_BENCH_LOCK_THREADS (1000) threads blocked on a mutex, dumped with lock
# owners and without. About
# a minute and a half on an idle 2-vCPU machine.
#
# Then the page's render times in headless Chromium (SW_BENCH_WEB=0 skips
# them; a missed limit prints "not ok"), tests/bench/forkexec.sh (skipped
# with SW_BENCH_FORKEXEC=0: what the agent costs fork, exec and $(...),
# with it and without), and tests/bench/daemon.sh (skipped with SW_BENCH_DAEMON=0) prints a
# second table: stackwatch through the daemon against eu-stack and gdb on
# the same processes, the pause each imposes, the target's RSS and the
# daemon at rest (a few more minutes; see its header).
set -u

build=${1:-build}
bin=$build/bench/bench_collect
if [ ! -x "$bin" ]; then
	echo "run.sh: no $bin (run make bench)" >&2
	exit 2
fi
sizes=${SW_BENCH_THREADS:-100 1000 4000}
reps=${SW_BENCH_REPS:-11}
procs=${SW_BENCH_PROCS:-3}
locks_n=${SW_BENCH_LOCK_THREADS:-1000}
rate_n=${SW_BENCH_RATE_THREADS:-100}
rate_hz=${SW_BENCH_RATE_HZ:-19}
rate_s=${SW_BENCH_RATE_SECONDS:-10}
seconds=${SW_BENCH_SECONDS:-0.5}
status=0

# val KEY OUTPUT - the value of "KEY value" in OUTPUT, empty when absent.
val() {
	printf '%s\n' "$2" | awk -v k="$1" '$1 == k { print $2; exit }'
}

# calc FORMAT ARGS... - awk's printf of FORMAT over numeric ARGS, so the
# arithmetic can be written in the arguments ("1000/3").
calc() {
	fmt=$1
	shift
	awk "BEGIN { printf \"$fmt\", $(printf '%s,' "$@" | sed 's/,$//') }"
}

# met VALUE LIMIT - "yes" when VALUE <= LIMIT, "no" otherwise, "?" if VALUE
# is not a number.
met() {
	awk -v v="$1" -v l="$2" 'BEGIN {
		if (v !~ /^[0-9.]+$/) print "?"
		else print (v + 0 <= l + 0) ? "yes" : "no" }'
}

row() {
	printf '| %s | %s | %s | %s |\n' "$1" "$2" "$3" "$4"
}

# ---- the machine ----
cpu=$(awk -F': *' '/^model name/ { print $2; exit }' /proc/cpuinfo)
nproc_=$(nproc 2>/dev/null || echo '?')
# ulimit -u is not POSIX (dash lacks it): ask the kernel.
lim=$(awk '/^Max processes/ { print $3; exit }' /proc/self/limits)

# busy - percent of all CPU time spent busy over the next second: what
# else runs on the machine while we measure (the load average would count
# our own threads of a moment ago).
busy() {
	a=$(awk '/^cpu / { print $2+$3+$4+$7+$8+$9, $5+$6; exit }' /proc/stat)
	sleep 1
	b=$(awk '/^cpu / { print $2+$3+$4+$7+$8+$9, $5+$6; exit }' /proc/stat)
	echo "$a $b" | awk '{ t = ($3 - $1) + ($4 - $2)
		printf "%.0f", (t > 0 ? 100 * ($3 - $1) / t : 0) }'
}

busy_before=$(busy)
echo "machine: $nproc_ CPUs ($cpu), $(uname -sr)," \
	"$(awk '/MemTotal/ { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo)," \
	"max processes $lim; CPUs ${busy_before}% busy with other work"
if [ "$nproc_" != 2 ]; then
	echo "note: the targets are for a 2-vCPU machine; this one has $nproc_."
fi
if [ "$busy_before" -gt 10 ]; then
	echo "note: other work keeps the CPUs ${busy_before}% busy: figures" \
		"are slower and noisier than on an idle machine."
fi
# Each size runs as one process of N+1 threads; a per-user process limit
# below that makes thread creation fail (root is exempt).
for n in $sizes; do
	if [ "$lim" != unlimited ] && [ "$(id -u)" != 0 ] &&
		[ "$lim" -lt $((n + 64)) ]; then
		echo "note: max processes $lim is too low for $n threads;" \
			"raise it (ulimit -u $((n + 256))) or expect a failure."
	fi
done
echo

# ---- single thread ----
echo "running: single thread" >&2
s=$("$bin" single "$seconds" "$procs") || status=1
s_col=$(val single_collect_per_s "$s")
s_flo=$(val single_collect_floor_per_s "$s")
s_raw=$(val single_raw_per_s "$s")
s_rflo=$(val single_raw_floor_per_s "$s")
s_poll=$(val single_poll_per_s "$s")
s_same=$(val single_raw_same_cpu_per_s "$s")
s_samef=$(val single_raw_same_cpu_floor_per_s "$s")
s_cross=$(val single_raw_cross_cpu_per_s "$s")
s_crossf=$(val single_raw_cross_cpu_floor_per_s "$s")

# rate PER_S - "N dumps/s (X µs each)".
rate() {
	if [ -z "$1" ] || [ "$1" = 0 ]; then
		echo "failed"
		return
	fi
	calc '%.0f dumps/s (%.1f µs each)' "$1" "1e6/$1"
}

rows=""
add() {
	rows="$rows$(row "$1" "$2" "$3" "$4")
"
}

add "1 thread: collector dump (collect_self), real handler" \
	"$(rate "$s_col")" "-" "-"
add "1 thread: collector dump, empty-handler floor" "$(rate "$s_flo")" \
	"-" "-"
if [ -n "$s_col" ] && [ -n "$s_flo" ] && [ "$s_col" != 0 ]; then
	r=$(calc '%.2f' "$s_flo/$s_col")
	add "1 thread: collection / floor (time per dump)" "${r}×" "≤ 1.5×" \
		"$(met "$r" 1.5)"
fi
add "1 thread: signal + futex wake (Kudu's after), real handler" \
	"$(rate "$s_raw")" "-" "-"
add "1 thread: signal + futex wake, empty handler" "$(rate "$s_rflo")" \
	"-" "-"
add "1 thread: signal + poll-and-sleep 10 ms (Kudu's before)" \
	"$(rate "$s_poll")" "-" "-"
if [ -n "$s_raw" ] && [ -n "$s_poll" ] && [ "$s_poll" != 0 ]; then
	add "1 thread: futex / poll-and-sleep speed-up" \
		"$(calc '%.0f×' "$s_raw/$s_poll")" "-" "-"
fi
if [ -n "$s_same" ] && [ "$s_same" != 0 ]; then
	add "1 thread: futex round trip, both pinned to one CPU: real / floor" \
		"$(rate "$s_same") / $(rate "$s_samef")" "-" "-"
	add "1 thread: futex round trip, pinned to two CPUs: real / floor" \
		"$(rate "$s_cross") / $(rate "$s_crossf")" "-" "-"
fi
# Every collector dump above reports 2 threads (main and the target).
b=$(val single_blocked "$s")
seen=$(val single_seen "$s")
if [ -n "$b" ] && [ -n "$seen" ]; then
	add "1 thread: collector dumps that misreport the target blocked-signal" \
		"$b of $(calc '%d' "$seen/2")" "0" "$(met "$b" 0)"
fi

# ---- all threads ----
# ms_per N US - "X ms (Y µs/thread)".
ms_per() {
	if [ -z "$2" ] || [ "$2" = -1 ]; then
		echo "failed"
		return
	fi
	calc '%.1f ms (%.1f µs/thread)' "$2/1000" "$2/$1"
}

first_raw=""
first_sym=""
for n in $sizes; do
	echo "running: $n threads" >&2
	t=$("$bin" threads "$n" "$reps" "$procs") || status=1
	if [ -n "$(val threads_failed "$t")" ] || [ -z "$(val warm_raw_us "$t")" ]
	then
		add "$n threads" "failed (see stderr)" "-" "no"
		status=1
		continue
	fi
	cold_raw=$(val cold_raw_us "$t")
	warm_raw=$(val warm_raw_us "$t")
	floor=$(val floor_us "$t")
	cold_sym=$(val cold_sym_us "$t")
	warm_sym=$(val warm_sym_us "$t")
	idle=$(val rss_idle_kb "$t")
	after_raw=$(val rss_raw_kb "$t")
	after_sym=$(val rss_sym_kb "$t")
	cp=$(val cold_procs "$t")
	wp="median of $reps, $(val procs "$t") processes"
	add "$n threads: raw dump, cold (first dump of a process, $cp processes)" \
		"$(ms_per "$n" "$cold_raw")" "-" "-"
	add "$n threads: raw dump, warm ($wp)" \
		"$(ms_per "$n" "$warm_raw")" "-" "-"
	add "$n threads: empty-handler floor, warm ($wp)" \
		"$(ms_per "$n" "$floor")" "-" "-"
	r=$(calc '%.2f' "$warm_raw/$floor")
	add "$n threads: collection / floor per thread" "${r}×" "≤ 1.5×" \
		"$(met "$r" 1.5)"
	add "$n threads: symbolized, cold (first dump of a process, $cp processes)" \
		"$(ms_per "$n" "$cold_sym")" "-" "-"
	if [ "$n" = 1000 ]; then
		add "$n threads: symbolized, warm ($wp)" \
			"$(ms_per "$n" "$warm_sym")" "≤ 15 ms" \
			"$(met "$(calc '%.3f' "$warm_sym/1000")" 15)"
	else
		add "$n threads: symbolized, warm ($wp)" \
			"$(ms_per "$n" "$warm_sym")" "-" "-"
	fi
	g=$(calc '%.1f' "($after_raw-$idle)/$n")
	add "$n threads: RSS growth per thread, idle → after $((reps + 1)) raw + $reps floor dumps" \
		"$g kB ($idle → $after_raw kB)" "≤ 16 kB" "$(met "$g" 16)"
	add "$n threads: RSS added by in-process symbolization (not per thread)" \
		"$(calc '%.1f MB' "($after_sym-$after_raw)/1024")" "-" "-"
	add "$n threads: stacks seen (groups / deepest / not ok / blocked)" \
		"$(val groups "$t") / $(val max_nips "$t") frames / $(val bad "$t") / $(val blocked "$t")" \
		"10 / ≥ 30 / 0 / 0" "-"
	if [ -z "$first_raw" ]; then
		first=$n
		first_raw=$(calc '%.3f' "$warm_raw/$n")
		first_sym=$(calc '%.3f' "$warm_sym/$n")
	fi
	last=$n
	last_raw=$(calc '%.3f' "$warm_raw/$n")
	last_sym=$(calc '%.3f' "$warm_sym/$n")
done
if [ -n "$first_raw" ] && [ "$first" != "$last" ]; then
	r=$(calc '%.2f' "$last_raw/$first_raw")
	add "per-thread cost $last / $first threads, raw warm" "${r}×" \
		"≤ 1.3×" "$(met "$r" 1.3)"
	r=$(calc '%.2f' "$last_sym/$first_sym")
	add "per-thread cost $last / $first threads, symbolized warm" "${r}×" \
		"≤ 1.3×" "$(met "$r" 1.3)"
fi

# ---- lock owners: what they add to a dump ----
echo "running: $locks_n threads blocked on one mutex, with and without lock owners" >&2
t=$("$bin" locks "$locks_n" "$reps") || status=1
if [ -n "$(val locks_with_us "$t")" ]; then
	r=$(calc '%.2f' "$(val locks_with_us "$t")/$(val locks_without_us "$t")")
	add "$locks_n threads blocked on one mutex: dump, symbolize, group and JSON with lock owners / without (median of $reps; owners named: $(val locks_said "$t") / $(val locks_said_without "$t"))" \
		"${r}× ($(ms_per "$locks_n" "$(val locks_with_us "$t")") / $(ms_per "$locks_n" "$(val locks_without_us "$t")"))" \
		"≤ 1.2×" "$(met "$r" 1.2)"
else
	add "$locks_n threads blocked on one mutex" "failed (see stderr)" "-" "no"
	status=1
fi

# ---- sampling at a rate: what a profile costs the target ----
echo "running: $rate_n threads sampled at $rate_hz Hz" >&2
t=$("$bin" rate "$rate_n" "$rate_hz" "$rate_s") || status=1
if [ -n "$(val rate_real_pct "$t")" ]; then
	add "$rate_n threads sampled at $rate_hz Hz for $rate_s s: the process's CPU beyond its own at rest ($(val rate_rest_pct "$t")%), $(val rate_dumps "$t") dumps" \
		"$(val rate_real_pct "$t")% of a core ($(ms_per "$rate_n" "$(val rate_real_us "$t")") a dump)" "-" "-"
	add "the same with the empty handler (the signal floor: wake, deliver, publish)" \
		"$(val rate_floor_pct "$t")% of a core ($(ms_per "$rate_n" "$(val rate_floor_us "$t")") a dump)" "-" "-"
else
	add "$rate_n threads sampled at $rate_hz Hz" "failed (see stderr)" "-" "no"
	status=1
fi

row "figure" "measured" "target" "met"
row "---" "---" "---" "---"
printf '%s' "$rows"
echo
echo "Raw: collect_self, no symbols (what the agent ships). Floor: the" \
	"same collector with handler_empty set (the handler claims, publishes" \
	"and wakes; no unwind). Symbolized: sw_dump_self (collect, symbolize" \
	"with source lines, group). Cold: the first dump of a fresh process;" \
	"warm: the median of $reps dumps in one process, median over" \
	"processes. Kudu's before/after: the bare signal round trip through" \
	"the handler's slot protocol, waiting by poll-and-sleep or on the" \
	"futex. Threads: 8 shapes of about 10 frames, every 10th thread 30" \
	"frames deeper, all parked in pthread_cond_wait, 64 kB stacks;" \
	"expected groups: 8 + deep + main = 10."
echo
echo "CPUs busy with other work: ${busy_before}% before the run," \
	"$(busy)% after."

# ---- the page in a real browser: render times at 1000 threads ----
if [ "${SW_BENCH_WEB:-1}" != 0 ]; then
	echo
	echo "The /stacks page, headless Chromium (tests/web, limit 1000 ms):"
	weblog=$(SW_WEB_TIMING=1 BUILD=$build sh "$(dirname "$0")/../integration/web.sh" 2>&1)
	printf '%s\n' "$weblog" | grep -E '^(not )?ok .*(render|quick)' || true
	[ -f "$build/web/render-1000.txt" ] && sed 's/^/    /' "$build/web/render-1000.txt"
fi

# ---- fork and exec under the agent ----
if [ "${SW_BENCH_FORKEXEC:-1}" != 0 ]; then
	echo
	sh "$(dirname "$0")/forkexec.sh" "$build" || status=1
fi

# ---- through the daemon, against eu-stack and gdb ----
if [ "${SW_BENCH_DAEMON:-1}" != 0 ]; then
	sh "$(dirname "$0")/daemon.sh" "$build" || status=1
fi
exit $status
