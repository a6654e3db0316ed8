#!/bin/sh
# make_run.sh - what "make run" starts (scripts/run.sh), non-interactively:
# the daemon serves the demo workload under the agent (targets and a dump
# with each kind of demo thread), SIGINT to the script stops both and
# exits 0, and so does a terminal's Ctrl-C (SIGINT to the whole process
# group); either way no process, socket or temp dir is left behind.
# Every socket the daemon listens on is in the run's own temp dir (none
# in /run/stackwatch); the banner's "stackwatch run --socket PATH -- CMD",
# pasted as another user (nobody, when run as root), registers that
# user's program; with a daemon already on the port it would take (an
# installed service), the run takes a free one and leaves that one alone.
#
# Usage: BUILD=build sh tests/integration/make_run.sh  (tests/run.sh sets BUILD)
# Prints one "ok - ..." or "not ok - ..." line per check.
set -u

# shellcheck source=tests/tap.sh
. "$(dirname "$0")/../tap.sh"

need "$BUILD/fixtures/demo"

tmp=$(mktemp -d) || exit 1
# Another user's program must reach the run's sockets, below this dir.
chmod 0711 "$tmp"
script_pid=""
other_pid=""
decoy_pid=""
cleanup() {
	[ -n "$script_pid" ] && kill -TERM "$script_pid" 2>/dev/null
	[ -n "$other_pid" ] && kill -KILL "$other_pid" 2>/dev/null
	[ -n "$decoy_pid" ] && kill -TERM "$decoy_pid" 2>/dev/null
	wait 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

unset MAKEFLAGS MFLAGS MAKELEVEL STACKWATCH_URL STACKWATCH_TOKEN LD_PRELOAD

# An asynchronous command of a non-interactive shell starts with SIGINT
# ignored, and a shell cannot trap a signal ignored on entry; a terminal's
# Ctrl-C has no such problem. env --default-signal undoes it.
if env --default-signal=INT true 2>/dev/null; then
	defsig="env --default-signal=INT"
else
	defsig=""
fi

# json_pid FILE COMM - the pid of the target whose comm is COMM.
json_pid() {
	tr '{' '\n' <"$1" | sed -n "s/^\"pid\":\([0-9]*\),\"comm\":\"$2\".*/\1/p" |
		head -n 1
}

# get URL FILE - HTTP GET to FILE (curl, else the CLI for /api/v1/targets).
get() {
	if command -v curl >/dev/null 2>&1; then
		curl -sf "$1" >"$2"
	else
		"$BUILD/stackwatch" --url "${1%%/api/*}" dump --format json >"$2"
	fi
}

# leftovers DIR - pids of processes whose command line names DIR.
leftovers() {
	# The brackets keep grep from finding its own command line.
	pat="$(dirname "$1")/$(basename "$1" | sed 's/^\(.\)/[\1]/')"
	grep -l -a -e "$pat" /proc/[0-9]*/cmdline 2>/dev/null |
		sed 's|/proc/\([0-9]*\)/cmdline|\1|' | tr '\n' ' '
}

# listening_paths PID - the paths of the unix sockets PID listens on (its
# descriptors' inodes looked up in /proc/net/unix), one a line.
listening_paths() {
	for fd in /proc/"$1"/fd/*; do
		ino=$(readlink "$fd" 2>/dev/null | sed -n 's/^socket:\[\([0-9]*\)\]$/\1/p')
		[ -n "$ino" ] && awk -v i="$ino" '$7 == i && $8 != "" { print $8 }' \
			/proc/net/unix
	done
}

# check_sockets NAME DIR PID - every socket the daemon PID listens on is in
# DIR: its agent socket and its HTTP socket, none in /run/stackwatch.
check_sockets() {
	paths=$(listening_paths "$3" | sort -u | tr '\n' ' ')
	outside=""
	for p in $paths; do
		case $p in "$2"/*) ;; *) outside="$outside $p" ;; esac
	done
	case " $paths" in
	*/agent.sock\ */http.sock\ * | */http.sock\ */agent.sock\ *)
		if [ -z "$outside" ]; then
			ok "$1: the daemon's agent and HTTP sockets are in the run's own dir ($paths)"
			return
		fi
		;;
	esac
	nok "$1: the daemon's sockets are in the run's own dir (all: $paths; outside:$outside)"
}

# check_pasted NAME URL - the banner's "stackwatch run --socket PATH --
# CMD", pasted as nobody (CMD: sleep), registers under nobody's uid, with
# no warning from stackwatch run.
check_pasted() {
	line=$(sed -n 's/^  \(\/.*\/stackwatch run --socket \/.*\/agent\.sock -- \)CMD$/\1/p' \
		"$t/out")
	if [ -z "$line" ]; then
		nok "$1: the banner prints 'stackwatch run --socket PATH -- CMD' with the CLI's real path"
		sed 's/^/# /' "$t/out"
		return
	fi
	ok "$1: the banner prints '${line}CMD'"
	if grep -q "^  /.*/stackwatch --url $2 " "$t/out"; then
		ok "$1: the banner says how to point the CLI at the daemon (--url $2)"
	else
		nok "$1: the banner says how to point the CLI at the daemon (--url $2)"
	fi
	if [ "$(id -u)" != 0 ] || ! command -v setpriv >/dev/null 2>&1; then
		ok "# SKIP another user's program: needs root and setpriv"
		return
	fi
	nobody="setpriv --reuid=65534 --regid=65534 --clear-groups"
	if ! $nobody test -x "${line%% *}"; then
		ok "# SKIP another user's program: nobody cannot reach ${line%% *}"
		return
	fi
	# shellcheck disable=SC2086  # $nobody is a command prefix
	(cd / && exec $nobody sh -c "exec ${line}sleep 60") \
		>"$t/other.out" 2>"$t/other.err" </dev/null &
	other_pid=$!
	i=0
	while [ $i -lt 100 ]; do
		get "$2/api/v1/targets" "$t/other.json"
		tr '{' '\n' <"$t/other.json" |
			grep -q "^\"pid\":$other_pid,.*\"uid\":65534," && break
		sleep 0.1
		i=$((i + 1))
	done
	if tr '{' '\n' <"$t/other.json" |
		grep -q "^\"pid\":$other_pid,.*\"uid\":65534," &&
		[ ! -s "$t/other.err" ]; then
		ok "$1: the pasted command, run as nobody, registers (pid $other_pid, uid 65534), no warning"
	else
		nok "$1: the pasted command, run as nobody, registers (pid $other_pid)"
		sed 's/^/# /' "$t/other.err" "$t/other.json"
	fi
	kill -KILL "$other_pid" 2>/dev/null
	wait "$other_pid" 2>/dev/null
	other_pid=""
}

# scenario NAME HOW [PORT] - HOW is "script" (SIGINT to the script) or
# "group" (SIGINT to its whole process group, as a terminal's Ctrl-C).
# With PORT, STACKWATCH_LISTEN is unset and the run tries PORT first
# (STACKWATCH_RUN_PORT); else it listens on 127.0.0.1:0.
scenario() {
	name=$1
	how=$2
	first=${3:-}
	t=$tmp/$name
	mkdir -p "$t"
	chmod 0711 "$t"
	: >"$t/out"
	if [ -n "$first" ]; then
		listen="-u STACKWATCH_LISTEN STACKWATCH_RUN_PORT=$first"
	else
		listen="STACKWATCH_LISTEN=127.0.0.1:0"
	fi
	# (env takes -u before the assignments.)
	# shellcheck disable=SC2086  # $defsig, $listen: words for env
	if [ "$how" = group ]; then
		# setsid: a process group of its own, led by the script.
		env $listen TMPDIR="$t" BUILD="$BUILD" \
			setsid $defsig sh "$root/scripts/run.sh" >"$t/out" 2>&1 &
	else
		env $listen TMPDIR="$t" BUILD="$BUILD" \
			$defsig sh "$root/scripts/run.sh" >"$t/out" 2>&1 &
	fi
	script_pid=$!

	url=""
	i=0
	while [ $i -lt 300 ] && kill -0 "$script_pid" 2>/dev/null; do
		url=$(sed -n 's/^stackwatch is running: open \(http:[^ ]*\)\/stacks$/\1/p' \
			"$t/out")
		[ -n "$url" ] && break
		sleep 0.1
		i=$((i + 1))
	done
	if [ -z "$url" ]; then
		nok "$name: run.sh prints the URL to open"
		sed 's/^/# /' "$t/out"
		return
	fi
	ok "$name: run.sh prints the URL to open ($url/stacks)"

	if [ -n "$first" ]; then
		case $url in
		*:"$first") nok "$name: a taken port $first: the run listens elsewhere ($url)" ;;
		*) ok "$name: port $first taken: the run listens on $url instead" ;;
		esac
	fi

	demo=$(sed -n 's/^ *the demo workload is pid \([0-9]*\):.*/\1/p' "$t/out")
	get "$url/api/v1/targets" "$t/targets.json"
	daemon=$(json_pid "$t/targets.json" stackwatchd)
	if [ -n "$daemon" ]; then
		check_sockets "$name" "$t" "$daemon"
	else
		nok "$name: the daemon's own entry is listed"
	fi
	[ "$how" = script ] && check_pasted "$name" "$url"
	if [ -n "$demo" ] && [ "$(json_pid "$t/targets.json" demo)" = "$demo" ]; then
		ok "$name: /api/v1/targets lists the demo (pid $demo)"
	else
		nok "$name: /api/v1/targets lists the demo (pid '$demo')"
		sed 's/^/# /' "$t/targets.json"
	fi
	if command -v curl >/dev/null 2>&1; then
		curl -sf "$url/api/v1/stacks?pid=$demo&format=text" >"$t/dump.txt"
		miss=""
		for f in queue_pop worker_main producer_main io_main timer_main \
			spinner_main; do
			grep -q " in $f " "$t/dump.txt" || miss="$miss $f"
		done
		if [ -z "$miss" ]; then
			ok "$name: the demo's dump shows each kind of thread"
		else
			nok "$name: the demo's dump shows each kind of thread (missing:$miss)"
			sed 's/^/# /' "$t/dump.txt"
		fi
	fi

	if [ "$how" = group ]; then
		kill -INT "-$script_pid"
	else
		kill -INT "$script_pid"
	fi
	i=0
	while [ $i -lt 150 ] && kill -0 "$script_pid" 2>/dev/null; do
		sleep 0.1
		i=$((i + 1))
	done
	if kill -0 "$script_pid" 2>/dev/null; then
		nok "$name: run.sh stops within 15 s of SIGINT"
		return
	fi
	wait "$script_pid"
	status=$?
	script_pid=""
	if [ "$status" -eq 0 ]; then
		ok "$name: run.sh exits 0 after SIGINT"
	else
		nok "$name: run.sh exits 0 after SIGINT (status $status)"
		sed 's/^/# /' "$t/out"
	fi
	alive=""
	for p in $demo $daemon; do
		kill -0 "$p" 2>/dev/null && alive="$alive $p"
	done
	left=$(leftovers "$t")
	if [ -z "$alive" ] && [ -z "$left" ] && [ -n "$daemon" ]; then
		ok "$name: the daemon ($daemon) and the demo ($demo) are gone, nothing else left"
	else
		nok "$name: nothing left behind (alive:$alive; naming the temp dir: $left)"
	fi
	extra=$(find "$t" -mindepth 1 -maxdepth 1 ! -name out \
		! -name targets.json ! -name dump.txt ! -name 'other.*')
	if [ -z "$extra" ]; then
		ok "$name: run.sh removed its temp dir and socket"
	else
		nok "$name: run.sh removed its temp dir and socket ($extra)"
	fi
	if grep -q '^Interrupt: stopping$\|^Terminated: stopping$' "$t/out"; then
		ok "$name: the daemon logged its orderly stop"
	else
		nok "$name: the daemon logged its orderly stop"
		sed 's/^/# /' "$t/out"
	fi
}

scenario script script
if command -v setsid >/dev/null 2>&1; then
	scenario ctrl-c group
else
	ok "# SKIP setsid is not installed"
fi

# A daemon already there, as an installed service would be: on the port
# the run tries first, with sockets of its own. The run goes elsewhere and
# leaves it serving, its sockets in place.
mkdir -p "$tmp/decoy"
"$BUILD/stackwatchd" --listen 127.0.0.1:0 --config /dev/null \
	--agent-socket "$tmp/decoy/agent.sock" --http-socket "$tmp/decoy/http.sock" \
	--sample-interval 0 2>"$tmp/decoy/daemon.log" &
decoy_pid=$!
i=0
while [ $i -lt 100 ] && ! grep -q '^listening on ' "$tmp/decoy/daemon.log"; do
	sleep 0.1
	i=$((i + 1))
done
decoy_url=$(sed -n 's/^listening on //p' "$tmp/decoy/daemon.log" | head -n 1)
if [ -n "$decoy_url" ]; then
	scenario taken script "${decoy_url##*:}"
	if kill -0 "$decoy_pid" 2>/dev/null && [ -S "$tmp/decoy/agent.sock" ] &&
		[ -S "$tmp/decoy/http.sock" ] && get "$decoy_url/healthz" "$tmp/decoy/health"; then
		ok "the daemon that was there still serves, its sockets in place"
	else
		nok "the daemon that was there still serves, its sockets in place"
	fi
else
	nok "a daemon listens as the installed one would"
	sed 's/^/# /' "$tmp/decoy/daemon.log"
fi
kill -TERM "$decoy_pid" 2>/dev/null
wait "$decoy_pid" 2>/dev/null
decoy_pid=""

# "make run" is this script after the dependencies and the build.
if make -C "$root" --no-print-directory -n run BUILD="$BUILD" 2>/dev/null |
	grep -q 'sh scripts/run.sh'; then
	ok "make run builds the demo and runs scripts/run.sh"
else
	nok "make run builds the demo and runs scripts/run.sh"
fi

[ "$failed" -eq 0 ]
