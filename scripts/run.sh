#!/bin/sh
# run.sh - "make run": the daemon in the foreground together with a small
# demo workload under the agent, until Ctrl-C.
#
# Usage: sh scripts/run.sh   (make run builds first, then calls this)
#
# Environment:
#   BUILD              the build directory (default build)
#   STACKWATCH_LISTEN  the daemon's address (127.0.0.1:0 picks a free
#                      port); unset: 127.0.0.1:STACKWATCH_RUN_PORT, or a
#                      free port when that one is taken
#   STACKWATCH_RUN_PORT  the port tried first (default 9407)
#   STACKWATCH_RUN_ARGS  extra daemon options (e.g. --log-level info)
#
# The daemon keeps both of its unix sockets (agents', HTTP) in a temp dir
# of its own and ignores /etc/stackwatch/stackwatchd.conf, so an installed
# service is left alone: nothing here touches /run/stackwatch. The dir is
# 0711, so that the agent of another user's program (a server that drops
# to nobody) can reach the socket, which the daemon makes 0666; no one
# else may list or write the dir. Prints "open http://ADDR:PORT/stacks"
# once the demo is registered, and the command that runs any program under
# the agent with this daemon. SIGINT or SIGTERM stops the demo and the
# daemon, waits for both and exits 0; nothing is left behind (processes,
# sockets, temp dir).
set -u

root=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$root/build}
case "$BUILD" in /*) ;; *) BUILD=$root/$BUILD ;; esac
listen=${STACKWATCH_LISTEN:-}
port=${STACKWATCH_RUN_PORT:-9407}
extra=${STACKWATCH_RUN_ARGS:-}

for f in stackwatchd stackwatch libstackwatch-agent.so fixtures/demo; do
	if [ ! -e "$BUILD/$f" ]; then
		echo "run.sh: $BUILD/$f is missing: run make first" >&2
		exit 1
	fi
done

tmp=$(mktemp -d "${TMPDIR:-/tmp}/stackwatch-run.XXXXXX") || exit 1
# Others may reach the sockets by name; they may neither list nor write.
chmod 0711 "$tmp" || exit 1
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

# start_daemon ADDR - the daemon on ADDR, its stderr in a file (where the
# port is read from, and copied to ours by tail later); sets daemon_pid and
# url. Returns 0 once it listens, 2 when ADDR is taken, else 1 (said why).
start_daemon() {
	(umask 077 && : >"$tmp/daemon.log")
	# shellcheck disable=SC2086  # $extra is a list of options
	"$BUILD/stackwatchd" --config /dev/null --listen "$1" \
		--agent-socket "$tmp/agent.sock" --http-socket "$tmp/http.sock" \
		--stuck-after 5 $extra 2>"$tmp/daemon.log" &
	daemon_pid=$!
	url=""
	i=0
	while [ $i -lt 100 ]; do
		url=$(sed -n 's/^listening on \(http:[^ ]*\)$/\1/p' "$tmp/daemon.log")
		[ -n "$url" ] && return 0
		if ! kill -0 "$daemon_pid" 2>/dev/null; then
			wait "$daemon_pid" 2>/dev/null
			daemon_pid=""
			grep -q 'Address already in use' "$tmp/daemon.log" && return 2
			cat "$tmp/daemon.log" >&2
			return 1
		fi
		sleep 0.1
		i=$((i + 1))
	done
	echo "run.sh: the daemon did not start within 10 s" >&2
	return 1
}

if [ -n "$listen" ]; then
	start_daemon "$listen"
	rc=$?
	if [ $rc -eq 2 ]; then
		cat "$tmp/daemon.log" >&2
		echo "run.sh: $listen is taken; try STACKWATCH_LISTEN=127.0.0.1:0" >&2
	fi
else
	start_daemon "127.0.0.1:$port"
	rc=$?
	if [ $rc -eq 2 ]; then
		echo "run.sh: port $port is taken (an installed stackwatchd?):" \
			"using a free port" >&2
		start_daemon 127.0.0.1:0
		rc=$?
	fi
fi
[ $rc -eq 0 ] || exit 1
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

# The CLI by its real path: the commands work from any directory, and
# for other users too.
cli=$(cd "$BUILD" && pwd -P)/stackwatch
if [ "$(id -u)" = 0 ]; then
	who="any user's program registers, a server that drops to nobody too"
else
	who="programs of yours register (run as root for any user's)"
fi
cat <<EOF

stackwatch is running: open $url/stacks
  the demo workload is pid $demo_pid:  $cli --url $url dump $demo_pid
  its spinner thread spins every 20 s for 12 s (flagged as stuck after 5 s)
Run a program under the agent with this daemon ($who):
  $cli run --socket $tmp/agent.sock -- CMD
Point the CLI at this daemon:
  $cli --url $url ps     (or export STACKWATCH_URL=$url)
Ctrl-C stops both.

EOF

# Until a signal (the trap above), or until the daemon ends on its own.
wait "$daemon_pid"
status=$?
daemon_pid=""
echo "run.sh: the daemon exited with status $status" >&2
exit 1
