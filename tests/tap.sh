# tap.sh - sourced by the shell tests in tests/integration: where the build
# is, and the "ok - ..." / "not ok - ..." lines they print (what tap.h is
# to the C tests). A test ends with [ "$failed" -eq 0 ].
#
# Sets root (the source tree), BUILD (default $root/build, made
# absolute) and failed; and lets an agent built with AddressSanitizer be
# loaded into programs built without it (ASAN_OPTIONS).

root=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${BUILD:-$root/build}
case $BUILD in /*) ;; *) BUILD=$root/$BUILD ;; esac
ASAN_OPTIONS=${ASAN_OPTIONS:-}${ASAN_OPTIONS:+:}verify_asan_link_order=0
export ASAN_OPTIONS
failed=0

ok() {
	echo "ok - $*"
}

nok() {
	echo "not ok - $*"
	failed=$((failed + 1))
}

# need FILE - stops the test with one "not ok" unless FILE is executable.
need() {
	if [ ! -x "$1" ]; then
		nok "$1 is built"
		exit 1
	fi
}
