#!/bin/sh
# logs.sh - names a target chose cannot forge or disguise the daemon's log:
# two programs under the agent, whose names (comm, taken from the file
# they run) hold an escape sequence, a carriage return, a "<0>" priority
# and a bell, then an accented letter, a right-to-left override, a lone
# C1 byte and a backslash. The daemon logs them at --log-level info when
# they register and exit; its log must hold no control byte but the end
# of each line, and must show both names with those bytes as \xNN (the
# accented letter as it is, the backslash doubled).
#
# Usage: BUILD=build sh tests/integration/logs.sh  (tests/run.sh sets BUILD)
# Prints one "ok - ..." or "not ok - ..." line per check.
set -u

# shellcheck source=tests/tap.sh
. "$(dirname "$0")/../tap.sh"

if ! command -v setsid >/dev/null 2>&1; then
	echo "ok - # SKIP setsid is not installed"
	exit 0
fi
need "$BUILD/stackwatchd"
need "$BUILD/libstackwatch-agent.so"

tmp=$(mktemp -d /tmp/sw-logs-XXXXXX) || exit 1
dpid="" kids=""
cleanup() {
	for p in $kids; do kill -KILL -- "-$p" 2>/dev/null; done
	[ -n "$dpid" ] && kill -KILL "$dpid" 2>/dev/null
	wait 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
unset LD_PRELOAD STACKWATCH_URL STACKWATCH_TOKEN NOTIFY_SOCKET

# wait_log RE - true once the daemon's log has a line that matches the
# basic regular expression RE, in bytes (10 s at most).
wait_log() {
	i=0
	while [ $i -lt 200 ]; do
		LC_ALL=C grep -q -e "$1" "$tmp/daemon.log" && return 0
		sleep 0.05
		i=$((i + 1))
	done
	return 1
}

# The names, as the bytes of a file name (a program's comm is the name of
# the file it runs, up to 15 bytes), and as the log must show them.
evil=$(printf '\033[2J\r<0>FAKE\007')
evil_log='\x1b[2J\x0d<0>FAKE\x07'
mixed=$(printf 'caf\303\251\342\200\256\233\\x')
mixed_log=$(printf 'caf\303\251\\xe2\\x80\\xae\\x9b\\\\x')

# This daemon's stderr is taken for the journal's stream, as systemd says
# in JOURNAL_STREAM (its device and inode): lines carry "<N>" priorities.
: >"$tmp/daemon.log"
JOURNAL_STREAM=$(stat -c '%d:%i' "$tmp/daemon.log")
export JOURNAL_STREAM
tap_daemon "$tmp" --log-level info --sample-interval 0
unset JOURNAL_STREAM
# run NAME - runs sleep under that name, under the agent, in a process
# group of its own (setsid execs in place); sets pid.
run() {
	ln -s /bin/sleep "$tmp/$1"
	STACKWATCH_SOCKET=$tmp/agent.sock \
		LD_PRELOAD=$BUILD/libstackwatch-agent.so \
		setsid "$tmp/$1" 60 </dev/null >/dev/null 2>&1 &
	pid=$!
	kids="$kids $pid"
}
run "$evil"
evil_pid=$pid
run "$mixed"
mixed_pid=$pid

if wait_log "registered pid $evil_pid " && wait_log "registered pid $mixed_pid "; then
	ok "both programs registered"
else
	nok "both programs registered"
fi
for p in $kids; do kill -KILL -- "-$p" 2>/dev/null; done
for p in $kids; do wait "$p" 2>/dev/null; done
kids=""
for p in $evil_pid $mixed_pid; do
	wait_log "^<6>pid $p (.*) \(exited\|disconnected\)\$" ||
		nok "the daemon logged that pid $p is gone"
done
# Short-lived programs under the agent (a shell loop's commands and
# command substitutions): a process that is gone before the daemon can pin
# or register it is no news, and is logged at debug only, not at info.
STACKWATCH_SOCKET=$tmp/agent.sock LD_PRELOAD=$BUILD/libstackwatch-agent.so \
	sh -c 'i=0; while [ $i -lt 200 ]; do /bin/true; x=$(echo a); i=$((i + 1)); done'
sleep 0.5
n=$(grep -c 'refusing' "$tmp/daemon.log")
if [ "$n" = 0 ]; then
	ok "200 short-lived programs under the agent: no refusal logged at info"
else
	nok "200 short-lived programs under the agent: no refusal logged at info" \
		"($n: $(grep -m 1 'refusing' "$tmp/daemon.log"))"
fi
kill -TERM "$dpid"
wait "$dpid"
dpid=""

# Every byte of 0x00-0x1f and 0x7f but the newlines.
ctl=$(LC_ALL=C tr -d '\n\040-\176\200-\377' <"$tmp/daemon.log" | wc -c)
if [ "$ctl" -eq 0 ]; then
	ok "the log holds no control byte but the ends of its lines"
else
	nok "the log holds no control byte but the ends of its lines ($ctl found)"
	od -c "$tmp/daemon.log" | sed 's/^/# /'
fi
for ev in registered exited; do
	case $ev in
	registered)
		a="registered pid $evil_pid ($evil_log), signal"
		b="registered pid $mixed_pid ($mixed_log), signal"
		;;
	exited)
		a="pid $evil_pid ($evil_log) "
		b="pid $mixed_pid ($mixed_log) "
		;;
	esac
	# (printf, not ok's echo, which would eat a backslash)
	if grep -qF -e "$a" "$tmp/daemon.log"; then
		ok "$ev: escape, CR, bell shown as \\xNN, <0> inside the line"
	else
		nok "$ev: escape, CR, bell shown as \\xNN, <0> inside the line"
		printf '# want: %s\n' "$a"
		sed 's/^/# /' "$tmp/daemon.log"
	fi
	if grep -qF -e "$b" "$tmp/daemon.log"; then
		ok "$ev: bad UTF-8, C1, bidi bytes as \\xNN, backslash doubled, é kept"
	else
		nok "$ev: bad UTF-8, C1, bidi bytes as \\xNN, backslash doubled, é kept"
		printf '# want: %s\n' "$b"
	fi
done
if ! grep -q '^<0>' "$tmp/daemon.log"; then
	ok "no line starts with a forged <0> priority"
else
	nok "no line starts with a forged <0> priority"
fi
if grep -q '^<5>agents register on ' "$tmp/daemon.log"; then
	ok "stderr is the journal's stream: lines start with their priority (<5>)"
else
	nok "stderr is the journal's stream: lines start with their priority (<5>)"
	head -5 "$tmp/daemon.log" | sed 's/^/# /'
fi

# On a terminal or in a file, a priority is noise: none is written. Also
# when JOURNAL_STREAM names another stream
# (a child of a service whose stderr was redirected).
mkdir "$tmp/plain"
JOURNAL_STREAM=1:1 "$BUILD/stackwatchd" --listen 127.0.0.1:0 \
	--agent-socket "$tmp/plain/agent.sock" --http-socket "$tmp/plain/http.sock" \
	--config /dev/null --sample-interval 0 \
	2>"$tmp/plain/daemon.log" &
dpid=$!
i=0
while [ $i -lt 100 ] && ! grep -q 'agents register on' "$tmp/plain/daemon.log"; do
	sleep 0.1
	i=$((i + 1))
done
kill -TERM "$dpid"
wait "$dpid"
dpid=""
if grep -q '^agents register on ' "$tmp/plain/daemon.log" &&
	grep -q '^Terminated: stopping$' "$tmp/plain/daemon.log" &&
	! grep -q '^<[0-9]>' "$tmp/plain/daemon.log"; then
	ok "stderr is a file: no line starts with a <N> priority"
else
	nok "stderr is a file: no line starts with a <N> priority"
	sed 's/^/# /' "$tmp/plain/daemon.log"
fi

left=""
for p in $evil_pid $mixed_pid; do
	kill -0 "$p" 2>/dev/null && left="$left $p"
done
if [ -z "$left" ]; then
	ok "no process of the test is left"
else
	nok "no process of the test is left:$left"
fi

[ "$failed" -eq 0 ]
