#!/bin/sh
# users.sh - two real programs of two users under the agent, one root
# daemon: python3 (40 threads and an HTTP server) as nobody, nginx (a
# master and two workers) as daemon (uid 1). Each user, with curl over
# TCP, with curl over the daemon's unix socket and with the CLI, sees
# its own program and not the other's (absent from the list, 404 by
# pid); root sees both.
#
# Usage: BUILD=build sh tests/integration/users.sh  (tests/run.sh sets BUILD)
# Needs root, setpriv, curl, python3 and nginx; prints "ok - # SKIP" when
# one is missing. Prints one "ok - ..." or "not ok - ..." line per check.
set -u

root=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${BUILD:-$root/build}
# shellcheck source=tests/tap.sh
. "$root/tests/tap.sh"

if [ "$(id -u)" != 0 ]; then
	echo "ok - # SKIP needs root: the daemon runs as root, programs as users"
	exit 0
fi
for tool in setpriv curl python3 nginx; do
	if ! command -v "$tool" >/dev/null 2>&1 && [ ! -x "/usr/sbin/$tool" ]; then
		echo "ok - # SKIP $tool is not installed"
		exit 0
	fi
done
NGINX=$(command -v nginx || echo /usr/sbin/nginx)

tmp=$(mktemp -d /tmp/sw-users-XXXXXX) || exit 1
chmod 0711 "$tmp"
dpid="" py="" ngx=""
cleanup() {
	# nginx stops its workers and reaps them itself on SIGTERM; killed
	# first, it would leave them to init (which may never reap them).
	if [ -n "$ngx" ] && kill -TERM "$ngx" 2>/dev/null; then
		i=0
		while [ $i -lt 100 ] && kill -0 "$ngx" 2>/dev/null &&
			[ "$(awk '{ print $3 }' "/proc/$ngx/stat" 2>/dev/null)" != Z ]; do
			sleep 0.05
			i=$((i + 1))
		done
		pkill -9 -P "$ngx" 2>/dev/null
	fi
	for p in $py $ngx; do kill -9 "$p" 2>/dev/null; done
	[ -n "$dpid" ] && kill "$dpid" 2>/dev/null
	wait 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT

free_port() {
	python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

"$BUILD/stackwatchd" --listen 127.0.0.1:0 --agent-socket "$tmp/agent.sock" \
	--http-socket "$tmp/http.sock" --config /dev/null --sample-interval 0 \
	--admin-group "" 2>"$tmp/daemon.log" &
dpid=$!
i=0
while [ $i -lt 100 ] && ! grep -q '^listening on ' "$tmp/daemon.log"; do
	sleep 0.05
	i=$((i + 1))
done
url=$(sed -n 's/^listening on //p' "$tmp/daemon.log" | head -n 1)
if [ -z "$url" ] || [ ! -S "$tmp/http.sock" ]; then
	nok "the daemon listens on TCP and on $tmp/http.sock"
	sed 's/^/# /' "$tmp/daemon.log"
	exit 1
fi
ok "the daemon (root) listens on $url and $tmp/http.sock"

# as UID CMD... - runs CMD as uid (its own group, no others).
as() {
	u=$1
	shift
	setpriv --reuid="$u" --regid="$u" --clear-groups "$@"
}
# What the users run comes from where they can read it (tests/run.sh
# stages a copy when the build is out of their reach).
TB=${SW_TARGET_BUILD:-$BUILD}
agent_env="LD_PRELOAD=$TB/libstackwatch-agent.so STACKWATCH_SOCKET=$tmp/agent.sock"

# python3 as nobody: 40 named threads and an HTTP server.
pport=$(free_port)
# shellcheck disable=SC2086
# (It serves / : the checkout may be out of nobody's reach.)
(cd / && exec setpriv --reuid=65534 --regid=65534 --clear-groups env $agent_env python3 -c "
import threading, time, http.server
def work():
    while True:
        sum(range(1000)); time.sleep(0.01)
for i in range(40):
    threading.Thread(target=work, daemon=True, name='worker-%d' % i).start()
http.server.ThreadingHTTPServer(('127.0.0.1', $pport), http.server.SimpleHTTPRequestHandler).serve_forever()
") >"$tmp/python.log" 2>&1 &
py=$!

# nginx as daemon (uid 1), in the foreground: a master and two workers.
nport=$(free_port)
mkdir -p "$tmp/nginx"
chown 1:1 "$tmp/nginx"
cat >"$tmp/nginx/nginx.conf" <<EOF
worker_processes 2;
daemon off;
pid $tmp/nginx/nginx.pid;
error_log $tmp/nginx/error.log;
events { worker_connections 64; }
http { access_log off; client_body_temp_path $tmp/nginx; proxy_temp_path $tmp/nginx;
  fastcgi_temp_path $tmp/nginx; uwsgi_temp_path $tmp/nginx; scgi_temp_path $tmp/nginx;
  server { listen 127.0.0.1:$nport; return 200 "ok\n"; } }
EOF
# shellcheck disable=SC2086
(exec setpriv --reuid=1 --regid=1 --clear-groups env $agent_env "$NGINX" \
	-e stderr -c "$tmp/nginx/nginx.conf" -p "$tmp/nginx") >"$tmp/nginx.log" 2>&1 &
ngx=$!

# listed_by_root PID - true once root's list has PID.
listed_by_root() {
	curl -s "$url/api/v1/targets" | grep -q "\"pid\":$1[,}]"
}
i=0
while [ $i -lt 200 ] && ! { listed_by_root "$py" && listed_by_root "$ngx"; }; do
	sleep 0.05
	i=$((i + 1))
done
if listed_by_root "$py" && listed_by_root "$ngx" &&
	curl -sf "http://127.0.0.1:$pport/" -o /dev/null &&
	curl -sf "http://127.0.0.1:$nport/" -o /dev/null; then
	ok "python3 (nobody, pid $py) and nginx (daemon, pid $ngx) serve and are registered"
else
	nok "python3 and nginx serve and are registered"
	sed 's/^/# /' "$tmp/python.log" "$tmp/nginx.log" "$tmp/daemon.log"
	exit 1
fi

# check UID NAME OWN OTHER - what uid sees, in three ways.
check() {
	u=$1 name=$2 own=$3 other=$4
	for way in tcp unix; do
		# get PATH - the body in $tmp/body (the user cannot write
		# there: the shell does), the status printed.
		if [ $way = tcp ]; then
			get() {
				as "$u" curl -s -w '%{stderr}%{http_code}' \
					"$url$1" >"$tmp/body" 2>"$tmp/code"
				cat "$tmp/code"
			}
		else
			get() {
				as "$u" curl -s -w '%{stderr}%{http_code}' \
					--unix-socket "$tmp/http.sock" \
					"http://localhost$1" >"$tmp/body" 2>"$tmp/code"
				cat "$tmp/code"
			}
		fi
		code=$(get /api/v1/targets)
		if [ "$code" = 200 ] && grep -q "\"pid\":$own[,}]" "$tmp/body" &&
			! grep -q "\"pid\":$other[,}]" "$tmp/body"; then
			ok "$name, curl over $way: lists its own $own, not $other"
		else
			nok "$name, curl over $way: lists its own $own, not $other ($code: $(head -c 300 "$tmp/body"))"
		fi
		code=$(get "/api/v1/stacks?pid=$own")
		if [ "$code" = 200 ] && grep -q '"frames"' "$tmp/body"; then
			ok "$name, curl over $way: dumps its own $own"
		else
			nok "$name, curl over $way: dumps its own $own ($code)"
		fi
		code=$(get "/api/v1/stacks?pid=$other")
		c2=$(get "/api/v1/stacks")
		if [ "$code" = 404 ] && [ "$c2" = 200 ] &&
			! grep -q "\"pid\":$other[,}]" "$tmp/body"; then
			ok "$name, curl over $way: the other's $other is 404, absent from all-target dumps"
		else
			nok "$name, curl over $way: the other's $other is 404 ($code), absent from all ($c2)"
		fi
	done
	as "$u" env STACKWATCH_HTTP_SOCKET="$tmp/http.sock" \
		"$TB/stackwatch" targets >"$tmp/cli" 2>&1
	rc=$?
	if [ $rc = 0 ] && grep -q "^ *$own " "$tmp/cli" &&
		! grep -q "^ *$other " "$tmp/cli"; then
		ok "$name, the CLI (unix socket): lists its own $own, not $other"
	else
		nok "$name, the CLI (unix socket): lists its own $own, not $other (exit $rc)"
		sed 's/^/# /' "$tmp/cli"
	fi
	as "$u" "$TB/stackwatch" --url "$url" dump "$own" >"$tmp/cli" 2>&1
	rc=$?
	as "$u" "$TB/stackwatch" --url "$url" dump "$other" >"$tmp/cli2" 2>&1
	rc2=$?
	if [ $rc = 0 ] && grep -q '^#0 ' "$tmp/cli" && [ $rc2 = 5 ] &&
		grep -q 'not a process you may see' "$tmp/cli2"; then
		ok "$name, the CLI over TCP: dumps its own, the other's is not found (exit 5)"
	else
		nok "$name, the CLI over TCP: dumps its own ($rc), the other's not found, exit 5 ($rc2)"
		sed 's/^/# /' "$tmp/cli2"
	fi
}

check 65534 nobody "$py" "$ngx"
check 1 daemon "$ngx" "$py"

# Root sees both, and python's stacks are the interpreter's.
curl -s "$url/api/v1/stacks?pid=$py&format=text" >"$tmp/py.txt"
if curl -s "$url/api/v1/targets" | grep -q "\"pid\":$py[,}]" &&
	curl -s --unix-socket "$tmp/http.sock" http://localhost/api/v1/targets |
	grep -q "\"pid\":$ngx[,}]" && grep -q '_PyEval_EvalFrameDefault' "$tmp/py.txt"; then
	ok "root sees both, over TCP and the unix socket"
else
	nok "root sees both"
	head -c 1000 "$tmp/py.txt" | sed 's/^/# /'
fi
if curl -sf "http://127.0.0.1:$pport/" -o /dev/null &&
	curl -sf "http://127.0.0.1:$nport/" -o /dev/null; then
	ok "both programs still serve"
else
	nok "both programs still serve"
fi
[ "$failed" -eq 0 ]
