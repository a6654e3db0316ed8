#!/bin/sh
# run.sh - runs every test program and prints one verdict.
#
# Usage: sh tests/run.sh BUILDDIR
#
# Runs each executable in BUILDDIR/tests/ (sorted by name), then each
# tests/integration/*.sh script (with sh), one at a time, each under a
# 300 s timeout, with BUILD set to BUILDDIR (made absolute). A test prints
# one line per check, "ok - ..." or "not ok - ..."; the whole output (stdout
# and stderr) goes to BUILDDIR/test-logs/NAME.log. A program that exits
# non-zero (crash, timeout, sanitizer exit) or prints a sanitizer summary
# without having printed a "not ok" line counts as one more failure named
# after it, and so does a program that printed no result at all.
#
# In a ThreadSanitizer build, a report from any process a test started
# (the daemon, a fixture) fails that test too; see below.
#
# SW_TESTS, when set, runs only the tests it names: space-separated shell
# patterns matched against the names above (test_it_sched, integration-*).
#
# Prints every failing line, one summary line per program, and ends with
# the line "N passed, N failed". Exit status 0 only when nothing failed.
set -u

if [ $# -ne 1 ]; then
	echo "usage: sh tests/run.sh BUILDDIR" >&2
	exit 2
fi

root=$(cd "$(dirname "$0")/.." && pwd)
case "$1" in
/*) build=$1 ;;
*) build=$(pwd)/$1 ;;
esac
if [ ! -d "$build" ]; then
	echo "run.sh: no build directory '$1'" >&2
	exit 2
fi
build=$(cd "$build" && pwd)
BUILD=$build
export BUILD
# Sanitized builds: make undefined behaviour fail the program, with a stack.
UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export UBSAN_OPTIONS
# A sanitized agent preloaded into a program comes before the ASan runtime.
ASAN_OPTIONS=${ASAN_OPTIONS:-verify_asan_link_order=0}
export ASAN_OPTIONS

logs=$build/test-logs
mkdir -p "$logs"
cd "$root" || exit 2

# A ThreadSanitizer build (its daemon links libtsan):
#  - the agent starts its thread again in the child of a fork(), by
#    design; TSan kills such a child unless die_after_fork=0;
#  - the daemon's and the fixtures' stderr go elsewhere, so every process
#    writes its reports to NAME.tsan.PID next to the test's log, and any
#    report there fails the test;
#  - TSan runtimes before LLVM 18 cannot map their shadow under the
#    high-entropy ASLR of newer kernels (vm.mmap_rnd_bits=32): tests run
#    with address randomization off (setarch -R) where setarch exists.
tsan=false
if ldd "$build/stackwatchd" 2>/dev/null | grep -q libtsan; then
	tsan=true
	TSAN_OPTIONS=${TSAN_OPTIONS:-die_after_fork=0}
fi
norandom=""
if $tsan && setarch "$(uname -m)" -R true 2>/dev/null; then
	norandom="setarch $(uname -m) -R"
fi

per_test_timeout=${SW_TEST_TIMEOUT:-300}
total_pass=0
total_fail=0
summary=""

# selected NAME - true when SW_TESTS is unset or names NAME.
selected() {
	[ -z "${SW_TESTS:-}" ] && return 0
	set -f # the patterns are for the names, not for files
	for pat in $SW_TESTS; do
		# shellcheck disable=SC2254
		case "$1" in $pat)
			set +f
			return 0
			;;
		esac
	done
	set +f
	return 1
}

# run_one NAME CMD... - runs one test program and adds up its results.
run_one() {
	name=$1
	shift
	selected "$name" || return 0
	log=$logs/$name.log
	rm -f "$logs/$name".tsan.*
	staged=false
	case $name in
	test_sec_* | integration-users | test_it_cli)
		if [ -n "$stage" ]; then
			SW_TARGET_BUILD=$stage
			export SW_TARGET_BUILD
			staged=true
		fi
		;;
	esac
	if $tsan; then
		TSAN_OPTIONS="$TSAN_OPTIONS log_path=$logs/$name.tsan" \
			timeout -k 10 "$per_test_timeout" $norandom "$@" \
			>"$log" 2>&1 </dev/null
	else
		timeout -k 10 "$per_test_timeout" "$@" >"$log" 2>&1 </dev/null
	fi
	status=$?
	if $staged; then
		unset SW_TARGET_BUILD
	fi
	pass=$(grep -c '^ok\b' "$log")
	fail=$(grep -c '^not ok\b' "$log")
	extra=""
	if grep -qs '^SUMMARY: ThreadSanitizer' "$logs/$name".tsan.*; then
		extra="ThreadSanitizer report in $logs/$name.tsan.*"
	elif [ "$fail" -eq 0 ]; then
		if [ "$status" -eq 124 ] || [ "$status" -eq 137 ]; then
			extra="timed out after ${per_test_timeout} s"
		elif [ "$status" -gt 128 ]; then
			extra="killed by signal $((status - 128))"
		elif [ "$status" -ne 0 ]; then
			extra="exited with status $status"
		elif grep -q '^SUMMARY: [A-Za-z]*Sanitizer' "$log"; then
			extra="sanitizer report"
		elif [ "$pass" -eq 0 ]; then
			extra="printed no result"
		fi
	fi
	grep '^not ok\b' "$log" | sed "s|^|$name: |"
	if [ -n "$extra" ]; then
		echo "$name: not ok - $extra (see $log)"
		fail=$((fail + 1))
	fi
	if [ "$fail" -eq 0 ]; then
		line="PASS $name: $pass passed"
	else
		line="FAIL $name: $pass passed, $fail failed (exit $status)"
	fi
	summary="$summary$line
"
	total_pass=$((total_pass + pass))
	total_fail=$((total_fail + fail))
}

# The security tests run programs as nobody. When nobody cannot reach the
# build (a checkout under a 0700 directory, as mktemp -d makes), they take
# them from a copy it can reach: the agent, the CLI, the library and the
# fixtures, staged here and named by SW_TARGET_BUILD for those tests.
stage=""
if [ "$(id -u)" = 0 ] && [ -z "${SW_TARGET_BUILD:-}" ] &&
	command -v setpriv >/dev/null 2>&1 &&
	! setpriv --reuid=65534 --regid=65534 --clear-groups \
		test -r "$build/libstackwatch-agent.so" 2>/dev/null; then
	stage=$(mktemp -d /tmp/sw-stage-XXXXXX) &&
		cp -a "$build"/libstackwatch-agent.so "$build"/stackwatch \
			"$build"/libstackwatch.so* "$build"/fixtures "$stage"/ &&
		chmod -R go+rX "$stage" || stage=""
fi

for t in "$build"/tests/*; do
	[ -f "$t" ] && [ -x "$t" ] || continue
	run_one "$(basename "$t")" "$t"
done

for s in "$root"/tests/integration/*.sh; do
	[ -f "$s" ] || continue
	run_one "integration-$(basename "$s" .sh)" sh "$s"
done

[ -n "$stage" ] && rm -rf "$stage"
printf '%s' "$summary"
echo "$total_pass passed, $total_fail failed"
[ "$total_fail" -eq 0 ]
