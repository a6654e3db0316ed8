#!/bin/sh
# run.sh - "make run": the daemon in the foreground together with a small
# demo workload under the agent, until Ctrl-C.
#
# Usage: sh scripts/run.sh   (make run builds first, then calls this)
#
# Environment:
#   BUILD              the build directory (default build)
#   STACKWATCH_LISTEN  the daemon's address (default 127.0.0.1:9407;
#                      127.0.0.1:0 picks a free port)
#   STACKWATCH_RUN_ARGS  extra daemon options (e.g. --log-level info)
#
# The daemon runs with a private agent socket in a temp dir and ignores
# /etc/stackwatch/stackwatchd.conf, so an installed service is left alone.
# Prints "open http://ADDR:PORT/stacks" once the demo is registered.
# SIGINT or SIGTERM stops the demo and the daemon, waits for both and
# exits 0; nothing is left behind (processes, socket, temp dir).
set -u

root=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$root/build}
case "$BUILD" in /*) ;; *) BUILD=$root/$BUILD ;; esac
listen=${STACKWATCH_LISTEN:-127.0.0.1:9407}
extra=${STACKWATCH_RUN_ARGS:-}

for f in stackwatchd stackwatch libstackwatch-agent.so fixtures/demo; do
	if [ ! -e "$BUILD/$f" ]; then
		echo "run.sh: $BUILD/$f is missing: run make first" >&2
		exit 1
	fi
done

tmp=$(mktemp -d "${TMPDIR:-/tmp}/stackwatch-run.XXXXXX") || exit 1
daemon_pid=""
demo_pid=""
tail_pid=""

# stop - ends whatever was started, waits for it, removes the temp dir.
# Runs once: it clears the pids it waited for. (Called from traps.)
# shellcheck disable=SC2317
stop() {
	trap '' INT TERM
	[ -n "$demo_pid" ] && kill -TERM "$demo_pid" 2>/dev/null
	[ -n "$daemon_pid" ] && kill -TERM "$daemon_pid" 2>/dev/null
	[ -n "$demo_pid" ] && wait "$demo_pid" 2>/dev/null
	[ -n "$daemon_pid" ] && wait "$daemon_pid" 2>/dev/null
	demo_pid=""
	daemon_pid=""
	if [ -n "$tail_pid" ]; then
		# Let tail copy the daemon's last lines first.
		sleep 0.3
		kill -TERM "$tail_pid" 2>/dev/null
		wait "$tail_pid" 2>/dev/null
		tail_pid=""
	fi
	rm -rf "$tmp"
}

trap 'stop; exit 0' INT TERM
trap 'stop' EXIT

# The daemon. Its stderr goes to a file, so that we can read the port,
# and from there to ours through tail.
# shellcheck disable=SC2086  # $extra is a list of options
"$BUILD/stackwatchd" --config /dev/null --listen "$listen" \
	--agent-socket "$tmp/agent.sock" --stuck-after 5 $extra \
	2>"$tmp/daemon.log" &
daemon_pid=$!

url=""
i=0
while [ $i -lt 100 ]; do
	url=$(sed -n 's/^listening on \(http:[^ ]*\)$/\1/p' "$tmp/daemon.log")
	[ -n "$url" ] && break
	if ! kill -0 "$daemon_pid" 2>/dev/null; then
		cat "$tmp/daemon.log" >&2
		case "$listen" in
		*:9407) echo "run.sh: is another stackwatchd on port 9407?" \
			"Try: make run STACKWATCH_LISTEN=127.0.0.1:0" >&2 ;;
		esac
		daemon_pid=""
		exit 1
	fi
	sleep 0.1
	i=$((i + 1))
done
if [ -z "$url" ]; then
	echo "run.sh: the daemon did not start within 10 s" >&2
	exit 1
fi
tail -n +1 -f "$tmp/daemon.log" >&2 &
tail_pid=$!

# The demo, under the agent: "stackwatch run" execs it in place.
"$BUILD/stackwatch" run --socket "$tmp/agent.sock" -- "$BUILD/fixtures/demo" &
demo_pid=$!

i=0
while [ $i -lt 100 ]; do
	"$BUILD/stackwatch" --url "$url" targets 2>/dev/null |
		grep -q "^ *${demo_pid}[^0-9]" && break
	if ! kill -0 "$demo_pid" 2>/dev/null; then
		echo "run.sh: the demo workload exited" >&2
		demo_pid=""
		exit 1
	fi
	sleep 0.1
	i=$((i + 1))
done

# Paths as the user would type them from the top of the tree.
cli=$BUILD/stackwatch
[ "$(pwd)" = "$root" ] && cli=${cli#"$root"/}
cat <<EOF

stackwatch is running: open $url/stacks
  the demo workload is pid $demo_pid:  $cli --url $url dump $demo_pid
  its spinner thread spins every 20 s for 12 s (flagged as stuck after 5 s)
Ctrl-C stops both.

EOF

# Until a signal (the trap above), or until the daemon ends on its own.
wait "$daemon_pid"
status=$?
daemon_pid=""
echo "run.sh: the daemon exited with status $status" >&2
exit 1
