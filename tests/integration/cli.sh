#!/bin/sh
# cli.sh - the stackwatch CLI on its own, with no daemon running: the
# exit statuses of the contract (2 for usage errors, 3 when the daemon
# cannot be reached, with what to do), --version and --help, "run", which
# must exec the command in place (same pid) with the agent first in
# LD_PRELOAD and warn in one line when no daemon listens on the agent's
# socket, dump --core --exe checks, and a hostile server in the daemon's
# place (escapes, an endless answer).
#
# Usage: BUILD=build sh tests/integration/cli.sh  (tests/run.sh sets BUILD)
# Prints one "ok - ..." or "not ok - ..." line per check.
# The single-quoted $ in sh -c scripts below is meant for the inner shell.
# shellcheck disable=SC2016
set -u

# shellcheck source=tests/tap.sh
. "$(dirname "$0")/../tap.sh"
sw=$BUILD/stackwatch
agent=libstackwatch-agent.so

need "$sw"

tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
trap 'exit 1' INT TERM

# Nothing from the caller's environment may steer the CLI.
unset LD_PRELOAD STACKWATCH_URL STACKWATCH_SOCKET STACKWATCH_TOKEN

# sw ARGS... - runs the CLI: status in $rc, output in $tmp/out, $tmp/err.
sw() {
	"$sw" "$@" >"$tmp/out" 2>"$tmp/err" </dev/null
	rc=$?
}

# usage_error DESC ARGS... - the CLI must exit 2, explaining on stderr.
usage_error() {
	desc=$1
	shift
	sw "$@"
	if [ "$rc" -eq 2 ] && [ -s "$tmp/err" ] && [ ! -s "$tmp/out" ] &&
		grep -q '^usage: stackwatch' "$tmp/err"; then
		ok "usage error exits 2: $desc"
	else
		nok "usage error exits 2: $desc (status $rc)"
	fi
}

# --version and --help
want=$(sed -n 's/^#define SW_VERSION "\(.*\)"$/\1/p' "$root/include/stackwatch.h")
sw --version
if [ "$rc" -eq 0 ] && [ "$(cat "$tmp/out")" = "stackwatch $want" ] &&
	[ ! -s "$tmp/err" ]; then
	ok "--version prints 'stackwatch $want'"
else
	nok "--version prints 'stackwatch $want' (status $rc: $(cat "$tmp/out"))"
fi
sw --help
if [ "$rc" -eq 0 ] && grep -q '^usage: stackwatch' "$tmp/out" &&
	grep -q 'dump' "$tmp/out" && [ ! -s "$tmp/err" ]; then
	ok "--help prints the usage to stdout and exits 0"
else
	nok "--help prints the usage to stdout and exits 0 (status $rc)"
fi
# The CLI's own parser worker, run by hand, names the CLI.
sw --parser-worker
if [ "$rc" -eq 2 ] && [ ! -s "$tmp/out" ] &&
	grep -q '^stackwatch: --parser-worker is started by stackwatch itself' \
		"$tmp/err"; then
	ok "--parser-worker by hand exits 2 and names the CLI"
else
	nok "--parser-worker by hand exits 2 and names the CLI (status $rc: $(cat "$tmp/err"))"
fi

# Usage errors
usage_error "no command"
usage_error "unknown command" frobnicate
usage_error "unknown global option" --frob targets
usage_error "--url without a value" --url
usage_error "a URL that is not http://" --url ftp://127.0.0.1 targets
usage_error "a URL with a bad port" --url=http://127.0.0.1:99999 targets
usage_error "targets takes no argument" targets 1
usage_error "dump: a PID that is not a number" dump abc
usage_error "dump: PID 0" dump 0
usage_error "dump: a negative PID" dump -5
usage_error "dump: two PIDs" dump 1 2
usage_error "dump: an unknown format" dump --format xml 1
usage_error "dump: --format without a value" dump --format
usage_error "dump: an unknown option" dump --frob
usage_error "run: no command" run
usage_error "run: only --" run --
usage_error "run: an unknown option" run --frob -- true
usage_error "ps: an unknown sort key" ps --sort size
usage_error "ps: an unknown format" ps --format folded
usage_error "ps takes no argument" ps 1
usage_error "stuck takes no argument" stuck 1
usage_error "diff: no PID" diff
usage_error "diff: a bad duration" diff --since 5d 1
usage_error "diff: more than a day" diff --since 25h 1
usage_error "diff: two PIDs" diff 1 2

# The daemon cannot be reached: exit 3 (the checks above never got as far
# as connecting; these do, to a port where nothing listens).
sw --url http://127.0.0.1:1 targets
if [ "$rc" -eq 3 ] &&
	grep -q '^stackwatch: cannot reach the daemon at http://127.0.0.1:1: ' \
		"$tmp/err"; then
	ok "targets with no daemon exits 3"
else
	nok "targets with no daemon exits 3 (status $rc: $(cat "$tmp/err"))"
fi
if grep -q 'systemctl start stackwatchd' "$tmp/err" &&
	grep -q 'dump --local PID' "$tmp/err"; then
	ok "no daemon: the error says how to start one, or to use dump --local"
else
	nok "no daemon: the error says how to start one, or to use dump --local ($(cat "$tmp/err"))"
fi
sw --url=http://127.0.0.1:1 dump --format json 1
if [ "$rc" -eq 3 ]; then
	ok "dump with no daemon exits 3 (--url=URL)"
else
	nok "dump with no daemon exits 3 (--url=URL) (status $rc)"
fi
rc=0
STACKWATCH_URL=http://127.0.0.1:1 "$sw" dump >"$tmp/out" 2>"$tmp/err" || rc=$?
if [ "$rc" -eq 3 ] && grep -q 'http://127.0.0.1:1' "$tmp/err"; then
	ok "\$STACKWATCH_URL is the default URL"
else
	nok "\$STACKWATCH_URL is the default URL (status $rc)"
fi

# run: the command cannot be executed
sw run -- /nonexistent/stackwatch-test-cmd
if [ "$rc" -eq 127 ] && [ "$(cat "$tmp/err")" = \
	"stackwatch: /nonexistent/stackwatch-test-cmd: No such file or directory" ]; then
	ok "run: a missing command exits 127"
else
	nok "run: a missing command exits 127 (status $rc: $(cat "$tmp/err"))"
fi
sw run -- stackwatch-test-no-such-command-in-path
if [ "$rc" -eq 127 ]; then
	ok "run: a command not in PATH exits 127"
else
	nok "run: a command not in PATH exits 127 (status $rc)"
fi
printf 'echo hi\n' >"$tmp/noexec"
chmod 644 "$tmp/noexec"
sw run -- "$tmp/noexec"
if [ "$rc" -eq 126 ] && grep -q "^stackwatch: $tmp/noexec: " "$tmp/err"; then
	ok "run: a command that is not executable exits 126"
else
	nok "run: a command that is not executable exits 126 (status $rc)"
fi

# run: nothing listens on the agent's socket: one line says so on stderr,
# and the command runs all the same (the agent itself says nothing).
: >"$tmp/none.sock"
for sock in "$tmp/nowhere.sock" "$tmp/none.sock"; do
	out=$("$sw" run --socket "$sock" -- sh -c 'echo ran; echo own >&2' 2>"$tmp/err")
	rc=$?
	if [ "$rc" -eq 0 ] && [ "$out" = ran ] && [ "$(wc -l <"$tmp/err")" -eq 2 ] &&
		grep -q "^stackwatch: the agent will not register at $sock: no daemon listens there; start a daemon (systemctl start stackwatchd, or make run) or give its socket with --socket PATH\$" "$tmp/err" &&
		[ "$(sed -n 2p "$tmp/err")" = own ]; then
		ok "run: no daemon on $(basename "$sock"): one warning line, the command runs"
	else
		nok "run: no daemon on $(basename "$sock"): one warning line, the command runs (status $rc: $(cat "$tmp/err"))"
	fi
done
out=$(STACKWATCH_SOCKET=$tmp/nowhere.sock "$sw" run -- sh -c 'echo ran' 2>"$tmp/err")
if [ "$out" = ran ] && grep -q "will not register at $tmp/nowhere.sock: " "$tmp/err"; then
	ok "run: the warning names \$STACKWATCH_SOCKET when it is set"
else
	nok "run: the warning names \$STACKWATCH_SOCKET when it is set ($(cat "$tmp/err"))"
fi

out=$(STACKWATCH_DISABLE=1 "$sw" run --socket "$tmp/nowhere.sock" -- sh -c 'echo ran' 2>"$tmp/err")
if [ "$out" = ran ] && [ ! -s "$tmp/err" ]; then
	ok "run: with the agent turned off (STACKWATCH_DISABLE=1), no warning"
else
	nok "run: with the agent turned off (STACKWATCH_DISABLE=1), no warning ($(cat "$tmp/err"))"
fi

# run: the agent goes first in LD_PRELOAD, by its absolute path
out=$("$sw" run -- sh -c 'echo "$LD_PRELOAD"' 2>"$tmp/err")
rc=$?
case $out in
/*/$agent)
	if [ "$rc" -eq 0 ] && [ -f "$out" ]; then
		ok "run: LD_PRELOAD is the agent's absolute path ($out)"
	else
		nok "run: LD_PRELOAD is the agent's absolute path ($out, status $rc)"
	fi
	;;
*) nok "run: LD_PRELOAD is the agent's absolute path (got '$out', status $rc)" ;;
esac
agent_path=$out

out=$(LD_PRELOAD="/nonexistent/libone.so /nonexistent/libtwo.so" \
	"$sw" run -- sh -c 'echo "$LD_PRELOAD"' 2>/dev/null)
if [ "$out" = "$agent_path:/nonexistent/libone.so /nonexistent/libtwo.so" ]; then
	ok "run: existing LD_PRELOAD entries are kept after the agent"
else
	nok "run: existing LD_PRELOAD entries are kept after the agent (got '$out')"
fi
out=$(LD_PRELOAD=$agent_path "$sw" run -- sh -c 'echo "$LD_PRELOAD"' 2>/dev/null)
if [ "$out" = "$agent_path" ]; then
	ok "run: the agent is not preloaded twice"
else
	nok "run: the agent is not preloaded twice (got '$out')"
fi

# run: same pid, arguments and exit status passed through
out=$(sh -c 'echo $$; exec "$1" run -- sh -c "echo \$\$"' sh "$sw" 2>"$tmp/err")
first=$(echo "$out" | sed -n 1p)
second=$(echo "$out" | sed -n 2p)
if [ -n "$first" ] && [ "$first" = "$second" ]; then
	ok "run: the command keeps the pid ($first)"
else
	nok "run: the command keeps the pid (got '$first' and '$second')"
fi
out=$("$sw" run -- sh -c 'printf "%s|" "$@"' zero "a b" "" '$x' -- 2>/dev/null)
if [ "$out" = 'a b||$x|--|' ]; then
	ok "run: arguments reach the command unchanged"
else
	nok "run: arguments reach the command unchanged (got '$out')"
fi
sw run sh -c 'exit 7'
if [ "$rc" -eq 7 ]; then
	ok "run: the command's exit status is ours (no -- needed)"
else
	nok "run: the command's exit status is ours (status $rc)"
fi

# run --socket: STACKWATCH_SOCKET, made absolute
out=$("$sw" run --socket /tmp/sw-test.sock -- sh -c 'echo "$STACKWATCH_SOCKET"' \
	2>/dev/null)
if [ "$out" = /tmp/sw-test.sock ]; then
	ok "run --socket sets STACKWATCH_SOCKET"
else
	nok "run --socket sets STACKWATCH_SOCKET (got '$out')"
fi
out=$(cd "$tmp" && "$sw" run --socket=rel.sock -- sh -c 'echo "$STACKWATCH_SOCKET"' \
	2>/dev/null)
if [ "$out" = "$(cd "$tmp" && pwd -P)/rel.sock" ] || [ "$out" = "$tmp/rel.sock" ]; then
	ok "run --socket=PATH makes a relative path absolute"
else
	nok "run --socket=PATH makes a relative path absolute (got '$out')"
fi

# run: where the agent is looked for
mkdir -p "$tmp/flat" "$tmp/inst/bin" "$tmp/inst/lib/stackwatch" "$tmp/alone"
cp "$sw" "$tmp/flat/stackwatch"
cp "$agent_path" "$tmp/flat/$agent"
cp "$sw" "$tmp/inst/bin/stackwatch"
cp "$agent_path" "$tmp/inst/lib/stackwatch/$agent"
cp "$sw" "$tmp/alone/stackwatch"
real=$(cd "$tmp" && pwd -P)
out=$("$tmp/flat/stackwatch" run -- sh -c 'echo "$LD_PRELOAD"' 2>/dev/null)
if [ "$out" = "$real/flat/$agent" ]; then
	ok "run: finds the agent next to the executable"
else
	nok "run: finds the agent next to the executable (got '$out')"
fi
out=$("$tmp/inst/bin/stackwatch" run -- sh -c 'echo "$LD_PRELOAD"' 2>/dev/null)
if [ "$out" = "$real/inst/lib/stackwatch/$agent" ]; then
	ok "run: finds the agent in ../lib/stackwatch (installed layout)"
else
	nok "run: finds the agent in ../lib/stackwatch (installed layout) (got '$out')"
fi
rc=0
out=$("$tmp/alone/stackwatch" run -- sh -c 'echo "$LD_PRELOAD"' 2>"$tmp/err") ||
	rc=$?
if [ "$rc" -eq 1 ] && [ -z "$out" ] &&
	grep -q "^stackwatch: cannot find the agent $agent" "$tmp/err"; then
	ok "run: no agent anywhere exits 1 and says so"
elif [ "$rc" -eq 0 ] && case $out in /*/$agent) true ;; *) false ;; esac; then
	ok "run: no agent next to it: the compiled-in SW_AGENT_PATH ($out)"
else
	nok "run: no agent anywhere exits 1 and says so (status $rc: $(cat "$tmp/err"))"
fi

# dump --core --exe: a missing or non-ELF --exe is named as such, with
# what to do, before the core is read.
printf 'not a core\n' >"$tmp/core"
printf '#!/bin/sh\n' >"$tmp/script"
for exe in /nonexistent/stackwatch-exe "$tmp/script" "$tmp"; do
	sw dump --core "$tmp/core" --exe "$exe"
	case $exe in
	/nonexistent/*) why="No such file or directory" ;;
	"$tmp") why="not a regular file" ;;
	*) why="not an ELF file" ;;
	esac
	if [ "$rc" -eq 1 ] && [ ! -s "$tmp/out" ] &&
		[ "$(sed -n 1p "$tmp/err")" = "stackwatch: --exe $exe: $why" ] &&
		grep -q "name the program the core was dumped from" "$tmp/err"; then
		ok "dump --core --exe $exe: '$why', exit 1"
	else
		nok "dump --core --exe $exe: '$why', exit 1 (status $rc: $(cat "$tmp/err"))"
	fi
done
sw dump --core "$tmp/core"
if [ "$rc" -eq 1 ] && grep -q '^stackwatch: cannot read the core file: ' "$tmp/err" &&
	grep -q 'give a core file' "$tmp/err"; then
	ok "dump --core of something else: the reason and what to do, exit 1"
else
	nok "dump --core of something else: the reason and what to do, exit 1 (status $rc: $(cat "$tmp/err"))"
fi

# A hostile answer (tests/fixtures/hostile_http.c): nothing from it reaches
# the terminal as a control byte, and a server that never finishes is cut
# off at the CLI's one total deadline (15 s), with exit 3.
hostile=$BUILD/fixtures/hostile_http
need "$hostile"

# serve MODE - starts the hostile server; its port in $port, pid in $hpid.
serve() {
	: >"$tmp/port"
	"$hostile" "$1" >"$tmp/port" &
	hpid=$!
	i=0
	while [ ! -s "$tmp/port" ] && [ $i -lt 100 ]; do
		sleep 0.05
		i=$((i + 1))
	done
	port=$(cat "$tmp/port")
}

# clean FILE - true when FILE holds no control byte but newlines.
clean() {
	! LC_ALL=C grep -q "$(printf '[\001-\011\013-\037\177]')" "$1"
}

serve json
sw --url "http://127.0.0.1:$port" dump 1
if [ "$rc" -eq 1 ] && clean "$tmp/err" && grep -q 'evil' "$tmp/err" &&
	[ "$(wc -l <"$tmp/err")" -eq 1 ]; then
	ok "a JSON error with escapes is shown on one line, escapes replaced"
else
	nok "a JSON error with escapes is shown on one line, escapes replaced" \
		"(status $rc: $(od -c "$tmp/err" | head -5))"
fi
kill "$hpid" 2>/dev/null
wait "$hpid" 2>/dev/null

serve text
sw --url "http://127.0.0.1:$port" dump --format text 1
if [ "$rc" -eq 1 ] && clean "$tmp/err" && grep -q 'evil' "$tmp/err"; then
	ok "a text error with an OSC sequence is shown with it replaced"
else
	nok "a text error with an OSC sequence is shown with it replaced" \
		"(status $rc: $(od -c "$tmp/err" | head -5))"
fi
kill "$hpid" 2>/dev/null
wait "$hpid" 2>/dev/null

serve reason
sw --url "http://127.0.0.1:$port" targets
if [ "$rc" -ne 0 ] && [ "$rc" -ne 2 ] && clean "$tmp/err" &&
	[ -s "$tmp/err" ]; then
	ok "a reason phrase with control bytes is refused or shown replaced ($rc)"
else
	nok "a reason phrase with control bytes is refused or shown replaced" \
		"(status $rc: $(od -c "$tmp/err" | head -5))"
fi
kill "$hpid" 2>/dev/null
wait "$hpid" 2>/dev/null

serve targets
sw --url "http://127.0.0.1:$port" targets
if [ "$rc" -eq 0 ] && clean "$tmp/out" && grep -q '4242' "$tmp/out"; then
	ok "targets: a command line and a name with escapes are printed replaced"
else
	nok "targets: a command line and a name with escapes are printed replaced" \
		"(status $rc: $(od -c "$tmp/out" | head -5))"
fi
kill "$hpid" 2>/dev/null
wait "$hpid" 2>/dev/null

serve drip
t0=$(date +%s)
sw --url "http://127.0.0.1:$port" dump --format text 1
t1=$(date +%s)
if [ "$rc" -eq 3 ] && [ $((t1 - t0)) -le 25 ] && clean "$tmp/err"; then
	ok "an answer that never ends is cut off at the deadline, exit 3 ($((t1 - t0)) s)"
else
	nok "an answer that never ends is cut off at the deadline, exit 3" \
		"(status $rc after $((t1 - t0)) s: $(cat "$tmp/err"))"
fi
kill "$hpid" 2>/dev/null
wait "$hpid" 2>/dev/null

[ "$failed" -eq 0 ]
