#!/bin/sh
# prometheus.sh - Debian's real Prometheus server scrapes the real daemon:
# a scrape config pointing at /metrics, a wait for a scrape, then queries
# of Prometheus's HTTP API: the target is up, stackwatch_targets and
# stackwatch_dumps_total hold the daemon's values, and the per-target
# series (stackwatch_target_threads, stackwatch_target_stuck_threads with
# labels pid and comm) describe a process under the agent whose spinner
# the watchdog flags.
#
# Usage: BUILD=build sh tests/integration/prometheus.sh (tests/run.sh sets BUILD)
# Needs prometheus (Debian package), curl and python3: "ok - # SKIP" when
# one is missing. Prints one "ok - ..." or "not ok - ..." line per check.
set -u

# shellcheck source=tests/tap.sh
. "$(cd "$(dirname "$0")/../.." && pwd)/tests/tap.sh"

for tool in prometheus curl python3; do
	if ! command -v "$tool" >/dev/null 2>&1; then
		echo "ok - # SKIP $tool is not installed"
		exit 0
	fi
done
need "$BUILD/stackwatchd"
need "$BUILD/fixtures/agent_target"

tmp=$(mktemp -d /tmp/sw-prom-XXXXXX) || exit 1
dpid="" tpid="" ppid_=""
cleanup() {
	for p in $tpid $ppid_ $dpid; do kill "$p" 2>/dev/null; done
	sleep 0.2
	for p in $tpid $ppid_ $dpid; do kill -9 "$p" 2>/dev/null; done
	rm -rf "$tmp"
}
trap cleanup EXIT

free_port() {
	python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# The daemon samples every 200 ms and flags a thread stuck after 1 s.
tap_daemon "$tmp" --sample-interval 200 --stuck-after 1
hostport=${url#http://}

# A process under the agent: 64 waiters, a mover and a spinner on one line.
tail -f /dev/null | LD_PRELOAD="$BUILD/libstackwatch-agent.so" \
	STACKWATCH_SOCKET="$tmp/agent.sock" \
	"$BUILD/fixtures/agent_target" watch spin >"$tmp/target.out" &
tpid=$!
i=0
while [ $i -lt 100 ] && ! grep -q '^ready' "$tmp/target.out"; do
	sleep 0.1
	i=$((i + 1))
done
i=0
while [ $i -lt 100 ] &&
	! curl -s "$url/api/v1/targets" | grep -q "\"pid\":$tpid[,}]"; do
	sleep 0.1
	i=$((i + 1))
done

pport=$(free_port)
cat >"$tmp/prometheus.yml" <<EOF
global:
  scrape_interval: 1s
  scrape_timeout: 1s
scrape_configs:
  - job_name: stackwatch
    static_configs:
      - targets: ['$hostport']
EOF
prometheus --config.file="$tmp/prometheus.yml" \
	--storage.tsdb.path="$tmp/data" \
	--web.listen-address="127.0.0.1:$pport" >"$tmp/prometheus.log" 2>&1 &
ppid_=$!
purl=http://127.0.0.1:$pport

# query PROMQL - "VALUE TIMESTAMP" of the first series of an instant
# query, or nothing.
query() {
	curl -s "$purl/api/v1/query" --data-urlencode "query=$1" |
		python3 -c '
import json, sys
try:
    r = json.load(sys.stdin)["data"]["result"]
    print(r[0]["value"][1], r[0]["value"][0])
except Exception:
    pass'
}

# metric NAME{...} - its value in the daemon's /metrics now.
metric() {
	curl -s "$url/metrics" | awk -v m="$1" '$1 == m { print $2 }'
}

# Wait for the first scrape.
i=0 up=""
while [ $i -lt 300 ]; do
	up=$(query 'up{job="stackwatch"}' | cut -d' ' -f1)
	[ "$up" = 1 ] && break
	sleep 0.1
	i=$((i + 1))
done
if [ "$up" = 1 ]; then
	ok "Prometheus scraped the daemon: up{job=\"stackwatch\"} is 1"
else
	nok "Prometheus scraped the daemon: up is '$up'"
	sed 's/^/# /' "$tmp/prometheus.log" | tail -20
	exit 1
fi

# Values: the daemon's before a scrape <= Prometheus's <= the daemon's
# after it (the counter only grows). An instant query answers with the
# time of the query, not of the scrape: a range query gives each
# scrape's own timestamp.
before_dumps=$(metric 'stackwatch_dumps_total{result="ok"}')
before_t=$(python3 -c 'import time; print(time.time())')
i=0 got=""
while [ $i -lt 100 ]; do
	got=$(curl -s "$purl/api/v1/query" \
		--data-urlencode 'query=stackwatch_dumps_total{result="ok"}[30s]' |
		python3 -c '
import json, sys
try:
    vals = json.load(sys.stdin)["data"]["result"][0]["values"]
    after = [v for v in vals if float(v[0]) > '"$before_t"' + 0.05]
    print(after[-1][1] if after else "")
except Exception:
    pass')
	[ -n "$got" ] && break
	sleep 0.2
	i=$((i + 1))
done
after_dumps=$(metric 'stackwatch_dumps_total{result="ok"}')
pdumps=$got
if [ -n "$pdumps" ] && [ "$before_dumps" -le "$pdumps" ] &&
	[ "$pdumps" -le "$after_dumps" ] && [ "$pdumps" -gt 0 ]; then
	ok "stackwatch_dumps_total in Prometheus ($pdumps) is the daemon's (between $before_dumps and $after_dumps)"
else
	nok "stackwatch_dumps_total in Prometheus '$pdumps', the daemon's $before_dumps..$after_dumps"
fi
targets=$(metric stackwatch_targets)
ptargets=$(query stackwatch_targets | cut -d' ' -f1)
if [ -n "$targets" ] && [ "$ptargets" = "$targets" ]; then
	ok "stackwatch_targets in Prometheus is the daemon's ($targets)"
else
	nok "stackwatch_targets in Prometheus '$ptargets', the daemon's '$targets'"
fi

threads=$(ls "/proc/$tpid/task" | wc -l)
pthreads=$(query "stackwatch_target_threads{pid=\"$tpid\",comm=\"agent_target\"}" | cut -d' ' -f1)
if [ "$pthreads" = "$threads" ]; then
	ok "stackwatch_target_threads{pid,comm} is the target's thread count ($threads)"
else
	nok "stackwatch_target_threads{pid=\"$tpid\"} in Prometheus '$pthreads', /proc says $threads"
fi
i=0 stuck=""
while [ $i -lt 100 ]; do
	stuck=$(query "stackwatch_target_stuck_threads{pid=\"$tpid\",comm=\"agent_target\"}" | cut -d' ' -f1)
	[ -n "$stuck" ] && [ "$stuck" -ge 1 ] 2>/dev/null && break
	sleep 0.2
	i=$((i + 1))
done
if [ -n "$stuck" ] && [ "$stuck" -ge 1 ] 2>/dev/null; then
	ok "stackwatch_target_stuck_threads{pid,comm} shows the spinner ($stuck)"
else
	nok "stackwatch_target_stuck_threads{pid=\"$tpid\"} in Prometheus '$stuck'"
	curl -s "$url/api/v1/stuck" | sed 's/^/# /'
fi
n=$(curl -s "$purl/api/v1/series" --data-urlencode 'match[]=stackwatch_target_threads' |
	python3 -c 'import json,sys; print(len(json.load(sys.stdin)["data"]))')
if [ "$n" = "$targets" ]; then
	ok "one stackwatch_target_threads series per target ($n)"
else
	nok "stackwatch_target_threads series: $n for $targets targets"
fi

# Another user sees no per-target series of root's processes.
chmod 0711 "$tmp"
other=$(setpriv --reuid=nobody --regid=nogroup --clear-groups \
	curl -s --unix-socket "$tmp/http.sock" http://localhost/metrics)
if printf '%s\n' "$other" | grep -q '^stackwatch_targets ' &&
	! printf '%s\n' "$other" | grep -q "pid=\"$tpid\""; then
	ok "nobody's /metrics has no series of root's process"
else
	nok "nobody's /metrics shows root's process"
fi
[ "$failed" -eq 0 ]
