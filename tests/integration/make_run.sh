#!/bin/sh
# make_run.sh - what "make run" starts (scripts/run.sh), non-interactively:
# the daemon serves the demo workload under the agent (targets and a dump
# with each kind of demo thread), SIGINT to the script stops both and
# exits 0, and so does a terminal's Ctrl-C (SIGINT to the whole process
# group); either way no process, socket or temp dir is left behind.
#
# Usage: BUILD=build sh tests/integration/make_run.sh  (tests/run.sh sets BUILD)
# Prints one "ok - ..." or "not ok - ..." line per check.
set -u

# shellcheck source=tests/tap.sh
. "$(dirname "$0")/../tap.sh"

need "$BUILD/fixtures/demo"

tmp=$(mktemp -d) || exit 1
script_pid=""
cleanup() {
	[ -n "$script_pid" ] && kill -TERM "$script_pid" 2>/dev/null
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

# scenario NAME HOW - HOW is "script" (SIGINT to the script) or "group"
# (SIGINT to its whole process group, as a terminal's Ctrl-C).
scenario() {
	name=$1
	how=$2
	t=$tmp/$name
	mkdir -p "$t"
	: >"$t/out"
	# shellcheck disable=SC2086  # $defsig is a command prefix or nothing
	if [ "$how" = group ]; then
		# setsid: a process group of its own, led by the script.
		TMPDIR=$t BUILD=$BUILD STACKWATCH_LISTEN=127.0.0.1:0 \
			setsid $defsig sh "$root/scripts/run.sh" >"$t/out" 2>&1 &
	else
		TMPDIR=$t BUILD=$BUILD STACKWATCH_LISTEN=127.0.0.1:0 \
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

	demo=$(sed -n 's/^ *the demo workload is pid \([0-9]*\):.*/\1/p' "$t/out")
	get "$url/api/v1/targets" "$t/targets.json"
	daemon=$(json_pid "$t/targets.json" stackwatchd)
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
		! -name targets.json ! -name dump.txt)
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

# "make run" is this script after the dependencies and the build.
if make -C "$root" --no-print-directory -n run BUILD="$BUILD" 2>/dev/null |
	grep -q 'sh scripts/run.sh'; then
	ok "make run builds the demo and runs scripts/run.sh"
else
	nok "make run builds the demo and runs scripts/run.sh"
fi

[ "$failed" -eq 0 ]
