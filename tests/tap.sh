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

# tap_daemon DIR ARGS... - the daemon on 127.0.0.1:0 with its agent and
# HTTP sockets in DIR, its log DIR/daemon.log, and ARGS; sets dpid and
# url. Stops the test with one "not ok" (and the log) unless it listens
# within 10 s.
tap_daemon() {
	dir=$1
	shift
	"$BUILD/stackwatchd" --listen 127.0.0.1:0 --agent-socket "$dir/agent.sock" \
		--http-socket "$dir/http.sock" --config /dev/null "$@" \
		2>"$dir/daemon.log" &
	dpid=$!
	i=0
	while [ $i -lt 100 ] && ! grep -q '^listening on ' "$dir/daemon.log"; do
		sleep 0.1
		i=$((i + 1))
	done
	url=$(sed -n 's/^listening on //p' "$dir/daemon.log" | head -n 1)
	if [ -z "$url" ]; then
		nok "the daemon listens"
		sed 's/^/# /' "$dir/daemon.log"
		exit 1
	fi
}
