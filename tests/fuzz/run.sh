#!/bin/sh
# run.sh - builds nothing; runs each fuzzer in $1 (the fuzz build dir) for
# $2 seconds (default 10) from fresh seeds, printing "ok"/"not ok" lines
# for tests/run.sh. $3, the fixtures' build dir, gives the module file
# fuzzers their seeds (small ELF files, a snapshot of plain_target); without
# it they start from nothing. A crash, leak, hang or sanitizer report fails
# the run and leaves the reproducer in $1/crashes/.
set -u
dir=$1
secs=${2:-10}
fixtures=${3:-}
if [ ! -x "$dir/fuzz_wire" ]; then
	echo "ok - # SKIP fuzzers not built (no clang with libFuzzer)"
	exit 0
fi
mkdir -p "$dir/corpus/wire" "$dir/corpus/procfs" "$dir/corpus/query" \
	"$dir/corpus/symbolize" "$dir/corpus/unwind" "$dir/crashes"
"$dir/mkseed" "$dir/corpus/wire" "$dir/corpus/procfs" "$dir/corpus/query" \
	${fixtures:+"$dir/corpus/symbolize" "$dir/corpus/unwind" "$fixtures"} ||
	echo "not ok - writing the fuzz seeds"
# Inputs that once failed a target, run again first.
here=$(dirname "$0")
for f in symbolize unwind; do
	if [ -d "$here/regress/$f" ]; then
		cp "$here/regress/$f"/* "$dir/corpus/$f/" 2>/dev/null
	fi
done
rc=0
for f in wire procfs query symbolize unwind; do
	# A module's file is larger than a message.
	case $f in
	symbolize | unwind) len=262144 ;;
	*) len=65536 ;;
	esac
	if "$dir/fuzz_$f" -max_total_time="$secs" -max_len="$len" \
		-timeout=30 -artifact_prefix="$dir/crashes/$f-" \
		-print_final_stats=1 \
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
