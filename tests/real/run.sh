#!/bin/bash
# run.sh - real servers under the agent, dumped back to back: redis-server,
# memcached, nginx (daemon mode, 4 workers), PostgreSQL (postmaster and
# its backends), node, a JVM with 150+ threads and python3 with 40.
#
# Usage: BUILD=build bash tests/real/run.sh [DUMPS]   (make real)
#
# Starts the real daemon on 127.0.0.1:0, then each program that is
# installed with the agent preloaded; dumps it DUMPS (200) times back to
# back through the daemon, then checks that it still answers its own
# protocol and is alive. Prints one "ok - ..." or "not ok - ..." line per
# check and a table; a program that is not installed is skipped. Needs
# root (PostgreSQL runs as postgres, memcached as nobody).
set -u

root=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${BUILD:-$root/build}
case $BUILD in /*) ;; *) BUILD=$root/$BUILD ;; esac
dumps=${1:-200}
agent=$BUILD/libstackwatch-agent.so
failed=0
table=""

ok() { echo "ok - $*"; }
nok() {
	echo "not ok - $*"
	failed=$((failed + 1))
}

tmp=$(mktemp -d /tmp/sw-real-XXXXXX) || exit 1
chmod 0711 "$tmp"
pids=""
cleanup() {
	for p in $pids; do kill -9 "$p" 2>/dev/null; done
	[ -n "${pgdata:-}" ] && su postgres -s /bin/sh -c \
		"/usr/lib/postgresql/*/bin/pg_ctl -D $pgdata -m immediate stop" \
		>/dev/null 2>&1
	[ -f "$tmp/nginx/nginx.pid" ] && kill "$(cat "$tmp/nginx/nginx.pid")" 2>/dev/null
	kill "$dpid" 2>/dev/null
	wait 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT

"$BUILD/stackwatchd" --listen 127.0.0.1:0 --agent-socket "$tmp/agent.sock" \
	--sample-interval 0 --config /dev/null 2>"$tmp/daemon.log" &
dpid=$!
for _ in $(seq 100); do
	port=$(sed -n 's/.*listening on http:\/\/127.0.0.1:\([0-9]*\).*/\1/p' \
		"$tmp/daemon.log")
	[ -n "$port" ] && break
	sleep 0.1
done
if [ -z "$port" ]; then
	nok "the daemon starts"
	exit 1
fi
url=http://127.0.0.1:$port
export STACKWATCH_SOCKET=$tmp/agent.sock

registered() {
	curl -s "$url/api/v1/targets" | grep -q "\"pid\":[[:space:]]*$1[,}]"
}

wait_registered() {
	for _ in $(seq 100); do
		registered "$1" && return 0
		sleep 0.1
	done
	return 1
}

# hammer NAME PID HEALTHCMD: DUMPS dumps, then the program's own check.
hammer() {
	name=$1 pid=$2 health=$3
	local good=0 whole=0 threads=0 t0 t1 ms body
	if ! wait_registered "$pid"; then
		nok "$name (pid $pid) registered"
		table="$table| $name | - | - | - | not registered |\n"
		return
	fi
	t0=$(date +%s%N)
	for _ in $(seq "$dumps"); do
		body=$(curl -s -w '\n%{http_code}' "$url/api/v1/stacks?pid=$pid")
		[ "${body##*$'\n'}" = 200 ] || continue
		good=$((good + 1))
		body=${body%$'\n'*}
		tt=$(printf '%s' "$body" | sed -n 's/.*"threads_total":[[:space:]]*\([0-9]*\).*/\1/p')
		to=$(printf '%s' "$body" | sed -n 's/.*"threads_ok":[[:space:]]*\([0-9]*\).*/\1/p')
		threads=$tt
		[ -n "$tt" ] && [ "$tt" = "$to" ] && whole=$((whole + 1))
	done
	t1=$(date +%s%N)
	ms=$(((t1 - t0) / 1000000 / dumps))
	if [ "$good" -eq "$dumps" ]; then
		ok "$name: $good of $dumps dumps answered ($whole with every thread ok, $threads threads)"
	else
		nok "$name: $good of $dumps dumps answered"
	fi
	if kill -0 "$pid" 2>/dev/null && bash -c "$health" >/dev/null 2>&1; then
		ok "$name: alive and answering its own protocol afterwards"
		alive=yes
	else
		nok "$name: alive and answering its own protocol afterwards"
		alive=no
	fi
	table="$table| $name | $threads | $good/$dumps | $whole | $alive, ${ms} ms a dump |\n"
}

free_port() {
	echo $((20000 + RANDOM % 20000))
}

# redis-server
if command -v redis-server >/dev/null && command -v redis-cli >/dev/null; then
	p=$(free_port)
	LD_PRELOAD=$agent redis-server --port "$p" --save '' --appendonly no \
		--io-threads 4 --daemonize no >"$tmp/redis.log" 2>&1 &
	pids="$pids $!"
	sleep 0.5
	hammer redis-server "$!" "redis-cli -p $p ping | grep -q PONG"
else
	ok "# SKIP redis-server is not installed"
fi

# memcached
if command -v memcached >/dev/null; then
	p=$(free_port)
	LD_PRELOAD=$agent memcached -u nobody -l 127.0.0.1 -p "$p" -t 4 \
		>"$tmp/memcached.log" 2>&1 &
	pids="$pids $!"
	sleep 0.5
	hammer memcached "$!" \
		"exec 3<>/dev/tcp/127.0.0.1/$p && printf 'version\r\n' >&3 && head -c 7 <&3 | grep -q VERSION"
else
	ok "# SKIP memcached is not installed"
fi

# nginx, daemon mode: the master and its workers (nobody)
if [ -x /usr/sbin/nginx ]; then
	p=$(free_port)
	mkdir -p "$tmp/nginx"
	cat >"$tmp/nginx/nginx.conf" <<EOF
worker_processes 4;
pid $tmp/nginx/nginx.pid;
error_log $tmp/nginx/error.log;
events { worker_connections 64; }
http { access_log off; client_body_temp_path $tmp/nginx; proxy_temp_path $tmp/nginx;
  fastcgi_temp_path $tmp/nginx; uwsgi_temp_path $tmp/nginx; scgi_temp_path $tmp/nginx;
  server { listen 127.0.0.1:$p; return 200 "ok\n"; } }
EOF
	LD_PRELOAD=$agent /usr/sbin/nginx -c "$tmp/nginx/nginx.conf" -p "$tmp/nginx"
	sleep 0.5
	master=$(cat "$tmp/nginx/nginx.pid" 2>/dev/null)
	hammer "nginx master" "$master" "curl -sf http://127.0.0.1:$p/"
	w=$(cut -d' ' -f1 <"/proc/$master/task/$master/children" 2>/dev/null)
	[ -n "$w" ] && hammer "nginx worker" "$w" "curl -sf http://127.0.0.1:$p/"
else
	ok "# SKIP nginx is not installed"
fi

# PostgreSQL: the postmaster, and a backend busy in a query
pgbin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | tail -n 1)
if [ -n "$pgbin" ] && id postgres >/dev/null 2>&1; then
	p=$(free_port)
	pgdata=$tmp/pg
	mkdir -p "$pgdata" && chown postgres "$pgdata"
	su postgres -s /bin/sh -c "$pgbin/initdb -D $pgdata -A trust" \
		>"$tmp/initdb.log" 2>&1
	su postgres -s /bin/sh -c "LD_PRELOAD=$agent STACKWATCH_SOCKET=$tmp/agent.sock \
		$pgbin/pg_ctl -D $pgdata -o '-p $p -k $pgdata' -l $pgdata/server.log -w start" \
		>/dev/null 2>&1
	pm=$(head -n 1 "$pgdata/postmaster.pid" 2>/dev/null)
	(su postgres -s /bin/sh -c "$pgbin/psql -h $pgdata -p $p -c 'select pg_sleep(600)' postgres" \
		>/dev/null 2>&1 &)
	sleep 1
	hammer "postgres postmaster" "$pm" \
		"su postgres -s /bin/sh -c \"$pgbin/psql -h $pgdata -p $p -Atc 'select 1' postgres\" | grep -q 1"
	be=$(pgrep -P "$pm" -f "postgres: .*idle|postgres: .*SELECT" | head -n 1)
	[ -z "$be" ] && be=$(pgrep -P "$pm" | tail -n 1)
	[ -n "$be" ] && hammer "postgres backend" "$be" "kill -0 $be"
else
	ok "# SKIP PostgreSQL is not installed"
fi

# node: an HTTP server and its libuv pool
if command -v node >/dev/null; then
	p=$(free_port)
	LD_PRELOAD=$agent node -e "
	  require('http').createServer((q, s) => s.end('ok')).listen($p);
	  setInterval(() => require('fs').stat('/', () => {}), 5);" \
		>"$tmp/node.log" 2>&1 &
	pids="$pids $!"
	sleep 1
	hammer node "$!" "curl -sf http://127.0.0.1:$p/"
else
	ok "# SKIP node is not installed"
fi

# A JVM with 150 threads of its own parked, plus an HTTP server
if command -v java >/dev/null && command -v javac >/dev/null; then
	p=$(free_port)
	mkdir -p "$tmp/java"
	cat >"$tmp/java/Busy.java" <<'EOF'
import com.sun.net.httpserver.HttpServer;
import java.net.InetSocketAddress;
public class Busy {
    public static void main(String[] a) throws Exception {
        for (int i = 0; i < 150; i++) {
            Thread t = new Thread(() -> {
                Object o = new Object();
                synchronized (o) { try { o.wait(); } catch (InterruptedException e) {} }
            }, "parked-" + i);
            t.setDaemon(true);
            t.start();
        }
        HttpServer s = HttpServer.create(new InetSocketAddress("127.0.0.1", Integer.parseInt(a[0])), 0);
        s.createContext("/", x -> { byte[] b = "ok".getBytes(); x.sendResponseHeaders(200, b.length); x.getResponseBody().write(b); x.close(); });
        s.start();
    }
}
EOF
	javac -d "$tmp/java" "$tmp/java/Busy.java" 2>"$tmp/javac.log"
	LD_PRELOAD=$agent java -cp "$tmp/java" Busy "$p" >"$tmp/java.log" 2>&1 &
	pids="$pids $!"
	for _ in $(seq 50); do curl -sf "http://127.0.0.1:$p/" >/dev/null && break; sleep 0.2; done
	hammer "java (JVM)" "$!" "curl -sf http://127.0.0.1:$p/"
else
	ok "# SKIP java is not installed"
fi

# python3 with 40 threads and an HTTP server
if command -v python3 >/dev/null; then
	p=$(free_port)
	LD_PRELOAD=$agent python3 -c "
import threading, time, http.server
def work():
    while True:
        sum(range(1000)); time.sleep(0.01)
for i in range(40):
    threading.Thread(target=work, daemon=True, name='worker-%d' % i).start()
http.server.ThreadingHTTPServer(('127.0.0.1', $p), http.server.SimpleHTTPRequestHandler).serve_forever()
" >"$tmp/python.log" 2>&1 &
	pids="$pids $!"
	sleep 1
	hammer python3 "$!" "curl -sf http://127.0.0.1:$p/ -o /dev/null"
else
	ok "# SKIP python3 is not installed"
fi

echo
echo "| program | threads | dumps answered | with every thread ok | afterwards |"
echo "| --- | --- | --- | --- | --- |"
printf "$table"
[ "$failed" -eq 0 ]
