#!/bin/sh
# run.sh - builds nothing; runs each fuzzer in $1 (the fuzz build dir) for
# $2 seconds (default 10) from fresh seeds, printing "ok"/"not ok" lines
# for tests/run.sh. A crash, leak or sanitizer report fails the run and
# leaves the reproducer in $1/crashes/.
set -u
dir=$1
secs=${2:-10}
if [ ! -x "$dir/fuzz_wire" ]; then
	echo "ok - # SKIP fuzzers not built (no clang with libFuzzer)"
	exit 0
fi
mkdir -p "$dir/corpus/wire" "$dir/corpus/procfs" "$dir/corpus/query" \
	"$dir/crashes"
"$dir/mkseed" "$dir/corpus/wire" "$dir/corpus/procfs" "$dir/corpus/query" ||
	echo "not ok - writing the fuzz seeds"
rc=0
for f in wire procfs query; do
	if "$dir/fuzz_$f" -max_total_time="$secs" -max_len=65536 \
		-artifact_prefix="$dir/crashes/$f-" -print_final_stats=1 \
		"$dir/corpus/$f" >"$dir/fuzz_$f.log" 2>&1; then
		runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' \
			"$dir/fuzz_$f.log" | grep -o '[0-9]*$')
		echo "ok - fuzz_$f: ${secs}s without a crash ${runs:+($runs runs)}"
	else
		echo "not ok - fuzz_$f crashed: see $dir/fuzz_$f.log"
		tail -n 20 "$dir/fuzz_$f.log"
		rc=1
	fi
done
exit $rc
