#!/bin/sh
# service.sh - stackwatchd as an operator meets it: the config file (good
# lines, comments, an unknown key, a bad value, a line without "=", the
# order file < command line), start-up errors in one line, a quiet log at
# the default level, the example config, the systemd unit (systemd-analyze
# verify, the hardening the issue asks for, the security score) and the
# man pages (no warning from man or groff).
#
# Usage: BUILD=build sh tests/integration/service.sh  (tests/run.sh sets BUILD)
# Prints one "ok - ..." or "not ok - ..." line per check.
set -u

# shellcheck source=tests/tap.sh
. "$(dirname "$0")/../tap.sh"
swd=$BUILD/stackwatchd

need "$swd"

tmp=$(mktemp -d) || exit 1
daemon_pid=""
cleanup() {
	if [ -n "$daemon_pid" ]; then
		kill -KILL "$daemon_pid" 2>/dev/null
		wait "$daemon_pid" 2>/dev/null
	fi
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
unset LD_PRELOAD STACKWATCH_URL STACKWATCH_TOKEN NOTIFY_SOCKET

# start LOG ARGS... - starts the daemon, waits for its "listening on"
# line; sets daemon_pid and url, or returns 1 when it exited.
start() {
	log=$1
	shift
	: >"$log"
	"$swd" "$@" 2>"$log" &
	daemon_pid=$!
	url=""
	i=0
	while [ $i -lt 200 ]; do
		url=$(sed -n 's/^listening on \(http:[^ ]*\)$/\1/p' "$log")
		[ -n "$url" ] && return 0
		if ! kill -0 "$daemon_pid" 2>/dev/null; then
			wait "$daemon_pid"
			daemon_pid=""
			return 1
		fi
		sleep 0.05
		i=$((i + 1))
	done
	return 1
}

# stop - SIGTERM, then the exit status in $status.
stop() {
	kill -TERM "$daemon_pid"
	wait "$daemon_pid"
	status=$?
	daemon_pid=""
}

# fails DESC WANT ARGS... - the daemon must exit 1 with exactly one line
# on stderr, matching the grep pattern WANT, and print nothing on stdout.
fails() {
	desc=$1
	want=$2
	shift 2
	timeout 10 "$swd" "$@" >"$tmp/out" 2>"$tmp/err" </dev/null
	rc=$?
	if [ "$rc" -eq 1 ] && [ "$(wc -l <"$tmp/err")" -eq 1 ] &&
		[ ! -s "$tmp/out" ] && grep -q -e "$want" "$tmp/err"; then
		ok "$desc: exit 1, one line: $(cat "$tmp/err")"
	else
		nok "$desc: exit 1 with one line matching '$want' (status $rc)"
		sed 's/^/# /' "$tmp/err"
	fi
}

# 1. A good file: comments, blank lines, spaces, a "#" inside a value.
sock="$tmp/a#b.sock"
cat >"$tmp/good.conf" <<EOF
# stackwatchd settings

listen=127.0.0.1:0
	agent-socket = $sock   # a comment after a blank
http-socket = $tmp/good-http.sock
sample-interval = 0
timeout =   2000
log-level = notice
EOF
if start "$tmp/good.log" --config "$tmp/good.conf"; then
	ok "a config file with comments and blank lines is accepted"
	if grep -qx "agents register on $sock" "$tmp/good.log" && [ -S "$sock" ]; then
		ok "the file's agent-socket is used, '#' inside a value kept"
	else
		nok "the file's agent-socket is used, '#' inside a value kept"
		sed 's/^/# /' "$tmp/good.log"
	fi
	# Some real work: an agent registers and is dumped.
	STACKWATCH_SOCKET=$sock LD_PRELOAD=$BUILD/libstackwatch-agent.so \
		sleep 3 &
	sleeper=$!
	i=0
	while [ $i -lt 100 ]; do
		"$BUILD/stackwatch" --url "$url" targets 2>/dev/null |
			grep -q "^ *${sleeper} " && break
		sleep 0.05
		i=$((i + 1))
	done
	"$BUILD/stackwatch" --url "$url" dump >/dev/null 2>&1
	drc=$?
	"$BUILD/stackwatch" --url "$url" dump 999999999 >/dev/null 2>&1
	kill "$sleeper" 2>/dev/null
	wait "$sleeper" 2>/dev/null
	sleep 0.2
	stop
	if [ "$status" -eq 0 ] && [ "$drc" -eq 0 ]; then
		ok "it serves a registered agent and exits 0 on SIGTERM"
	else
		nok "it serves a registered agent and exits 0 on SIGTERM (dump $drc, exit $status)"
	fi
	# At the default level: where it listens, where agents go, the stop.
	lines=$(wc -l <"$tmp/good.log")
	if [ "$lines" -eq 3 ] && grep -q '^listening on ' "$tmp/good.log" &&
		grep -q '^Terminated: stopping$' "$tmp/good.log"; then
		ok "no noise at the default level: 3 lines for start, work and stop"
	else
		nok "no noise at the default level ($lines lines)"
		sed 's/^/# /' "$tmp/good.log"
	fi
	# A file is no journal: no "<N>" priorities (integration-logs checks
	# that the journal's stream gets them).
	if ! grep -q '^<[0-7]>' "$tmp/good.log"; then
		ok "log lines in a file carry no <N> syslog priority"
	else
		nok "log lines in a file carry no <N> syslog priority"
	fi
else
	nok "a config file with comments and blank lines is accepted"
	sed 's/^/# /' "$tmp/good.log"
fi

# 2. Errors name the file and the line.
printf 'listen = 127.0.0.1:0\n# fine\n\ntimout = 100\n' >"$tmp/key.conf"
fails "an unknown key" "^stackwatchd: $tmp/key.conf:4: unknown key 'timout'\$" \
	--config "$tmp/key.conf"
printf 'listen = 127.0.0.1:0\ntimeout = 0\n' >"$tmp/value.conf"
fails "a bad value" "^stackwatchd: $tmp/value.conf:2: bad value '0' for timeout" \
	--config "$tmp/value.conf"
printf 'listen = 127.0.0.1:99999\n' >"$tmp/port.conf"
fails "a bad port" "^stackwatchd: $tmp/port.conf:1: bad value '127.0.0.1:99999' for listen" \
	--config "$tmp/port.conf"
printf 'log-level = loud\n' >"$tmp/level.conf"
fails "a bad log level" "^stackwatchd: $tmp/level.conf:1: bad value 'loud' for log-level" \
	--config "$tmp/level.conf"
printf 'sample-interval 100\n' >"$tmp/noeq.conf"
fails "a line without '='" "^stackwatchd: $tmp/noeq.conf:1: expected 'key = value'\$" \
	--config "$tmp/noeq.conf"
printf 'config = /etc/other.conf\n' >"$tmp/config.conf"
fails "a config key in a config file" "^stackwatchd: $tmp/config.conf:1: unknown key 'config'\$" \
	--config "$tmp/config.conf"
printf 'timeout =\n' >"$tmp/empty.conf"
fails "an empty value" "^stackwatchd: $tmp/empty.conf:1: bad value '' for timeout" \
	--config "$tmp/empty.conf"
fails "a missing --config file" "^stackwatchd: cannot read $tmp/none.conf: No such file or directory\$" \
	--config "$tmp/none.conf"
fails "a bad value on the command line" "^stackwatchd: bad value 'abc' for --timeout" \
	--config /dev/null --timeout abc
fails "an unknown option" "^stackwatchd: bad option '--bogus'" --bogus
fails "a token file that does not exist" "^stackwatchd: cannot use the token file $tmp/none: " \
	--config /dev/null --listen 127.0.0.1:0 --agent-socket "$tmp/t.sock" \
	--token-file "$tmp/none"
# A token file anyone but the daemon's user may read or change is refused,
# as ssh refuses such a key: the file opened is checked (a link is
# followed), and one that is no regular file is not even read.
tok_fails() {
	fails "$1" "^stackwatchd: cannot use the token file $2: $3" \
		--config /dev/null --listen 127.0.0.1:0 \
		--agent-socket "$tmp/t.sock" --http-socket "$tmp/th.sock" \
		--token-file "$2"
}
echo s3cret >"$tmp/tok644"
chmod 644 "$tmp/tok644"
tok_fails "a token file others may read (0644)" "$tmp/tok644" \
	"group or others have access to it (mode 0644); run: chmod 600 $tmp/tok644\$"
echo s3cret >"$tmp/tok620"
chmod 620 "$tmp/tok620"
tok_fails "a token file the group may write (0620)" "$tmp/tok620" \
	".*(mode 0620); run: chmod 600 $tmp/tok620\$"
ln -s "$tmp/tok644" "$tmp/toklink"
tok_fails "a link to a 0644 token file (the file is checked)" "$tmp/toklink" \
	".*(mode 0644); run: chmod 600 $tmp/toklink\$"
mkfifo "$tmp/tokfifo"
chmod 600 "$tmp/tokfifo"
tok_fails "a FIFO as the token file (not opened for reading)" "$tmp/tokfifo" \
	"not a regular file\$"
if [ "$(id -u)" = 0 ]; then
	echo s3cret >"$tmp/toknobody"
	chmod 600 "$tmp/toknobody"
	chown 65534 "$tmp/toknobody"
	tok_fails "a token file of another user (nobody's, 0600)" "$tmp/toknobody" \
		"owned by uid 65534, not by the daemon's user (uid 0); run: chown 0 $tmp/toknobody\$"
else
	ok "# SKIP a token file of another user: needs root"
fi
# A bad line stops at once, even when the command line would fix it.
fails "a bad file is fatal even with the option on the command line" \
	"$tmp/value.conf:2:" --config "$tmp/value.conf" --timeout 100

# 3. The command line overrides the file.
cat >"$tmp/order.conf" <<EOF
listen = 127.0.0.1:0
agent-socket = $tmp/file.sock
sample-interval = 0
log-level = error
EOF
if start "$tmp/order.log" --config "$tmp/order.conf" \
	--agent-socket "$tmp/cli.sock" --log-level notice; then
	stop
	if grep -qx "agents register on $tmp/cli.sock" "$tmp/order.log" &&
		[ ! -e "$tmp/file.sock" ]; then
		ok "the command line overrides the file (agent-socket, log-level)"
	else
		nok "the command line overrides the file (agent-socket, log-level)"
		sed 's/^/# /' "$tmp/order.log"
	fi
else
	nok "the daemon starts with --config and overrides"
fi
if start "$tmp/quiet.log" --config "$tmp/order.conf"; then
	stop
	# log-level = error: only the contract's "listening on" line.
	if [ "$(wc -l <"$tmp/quiet.log")" -eq 1 ]; then
		ok "without overrides the file's log-level applies"
	else
		nok "without overrides the file's log-level applies"
		sed 's/^/# /' "$tmp/quiet.log"
	fi
else
	nok "the daemon starts with the file alone"
fi

# 4. Start-up errors of the running kind are one line too.
printf 'listen = 127.0.0.1:0\nsample-interval = 0\n' >"$tmp/busy.conf"
if start "$tmp/busy.log" --config "$tmp/busy.conf" --agent-socket "$tmp/busy1.sock"; then
	port=${url##*:}
	fails "a port in use" "^stackwatchd: cannot listen on 127.0.0.1:$port: Address already in use\$" \
		--config /dev/null --listen "127.0.0.1:$port" --agent-socket "$tmp/busy2.sock"
	stop
fi
fails "an agent socket in a missing place" "^stackwatchd: cannot listen for agents on /proc/nonexistent/a.sock: " \
	--config /dev/null --listen 127.0.0.1:0 --agent-socket /proc/nonexistent/a.sock

# 5. The shipped example config, every setting switched on, is valid.
sed -e 's/^#\([a-z-]* = \)/\1/' \
	-e "s|^listen = .*|listen = 127.0.0.1:0|" \
	-e "s|^agent-socket = .*|agent-socket = $tmp/example.sock|" \
	-e "s|^http-socket = .*|http-socket = $tmp/example-http.sock|" \
	-e "s|^admin-group = .*|admin-group = root|" \
	-e "s|^token-file = .*|token-file = $tmp/token|" \
	"$root/systemd/stackwatchd.conf.example" >"$tmp/example.conf"
echo "  s3cret  " >"$tmp/token"
chmod 600 "$tmp/token"
if start "$tmp/example.log" --config "$tmp/example.conf"; then
	ok "the example config, all settings on, is accepted"
	if command -v curl >/dev/null 2>&1; then
		code=$(curl -s -o /dev/null -w '%{http_code}' "$url/api/v1/targets")
		code2=$(curl -s -o /dev/null -w '%{http_code}' \
			-H 'Authorization: Bearer s3cret' "$url/api/v1/targets")
		if [ "$code" = 401 ] && [ "$code2" = 200 ]; then
			ok "its token-file (0600) applies (401 without, 200 with the token)"
		else
			nok "its token-file applies (got $code and $code2)"
		fi
	fi
	stop
else
	nok "the example config, all settings on, is accepted"
	sed 's/^/# /' "$tmp/example.log"
fi

# 6. The unit.
unit=$root/systemd/stackwatchd.service
for key in Type=notify WatchdogSec= RuntimeDirectory=stackwatch \
	Restart=on-failure NoNewPrivileges=yes ProtectSystem=strict \
	ProtectHome=read-only ProtectKernelTunables=yes \
	ProtectKernelModules=yes ProtectControlGroups=yes \
	"RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6" \
	RestrictNamespaces=yes LockPersonality=yes MemoryDenyWriteExecute=yes \
	SystemCallArchitectures=native IPAddressDeny=any \
	IPAddressAllow=localhost; do
	grep -q "^$key" "$unit" || miss="${miss:-} '$key'"
done
if [ -z "${miss:-}" ]; then
	ok "the unit sets Type=notify, the watchdog and the hardening asked for"
else
	nok "the unit sets everything asked for (missing:$miss)"
fi
if command -v systemd-analyze >/dev/null 2>&1; then
	sed "s|^ExecStart=/usr/local/bin/stackwatchd|ExecStart=$swd|" "$unit" \
		>"$tmp/stackwatchd.service"
	systemd-analyze verify --man=no "$tmp/stackwatchd.service" \
		>"$tmp/verify.log" 2>&1
	vrc=$?
	if [ "$vrc" -eq 0 ] && [ ! -s "$tmp/verify.log" ]; then
		ok "systemd-analyze verify passes, without a warning"
	else
		nok "systemd-analyze verify passes (status $vrc)"
		sed 's/^/# /' "$tmp/verify.log"
	fi
	score=$(systemd-analyze security --offline=yes "$tmp/stackwatchd.service" \
		2>/dev/null | sed -n 's/.*Overall exposure level for [^:]*: \([0-9.]*\).*/\1/p')
	# 3.0: ProtectProc=default since the service gives up root and
	# CAP_SYS_PTRACE (docs/security.md, "The unit").
	if [ -n "$score" ] && awk "BEGIN { exit !($score <= 3.0) }"; then
		ok "systemd-analyze security scores the unit $score (at most 3.0)"
	else
		nok "systemd-analyze security scores the unit at most 3.0 (got '$score')"
	fi
else
	ok "# SKIP systemd-analyze is not installed"
fi

# 7. The man pages render without a warning.
for m in "$root"/docs/man/*.[0-9]; do
	name=$(basename "$m")
	if command -v man >/dev/null 2>&1; then
		out=$(LC_ALL=C.UTF-8 MANWIDTH=80 man -l "$m" 2>&1 >/dev/null)
	else
		out=""
	fi
	out2=$(groff -ww -z -man "$m" 2>&1)
	if [ -z "$out$out2" ]; then
		ok "man page $name renders without a warning"
	else
		nok "man page $name renders without a warning: $out $out2"
	fi
done

[ "$failed" -eq 0 ]
