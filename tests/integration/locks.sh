#!/bin/sh
# locks.sh - lock owners, chains and deadlocks of real programs, by every
# method: lock_target (tests/fixtures/lock_target.c: ABBA, a chain of
# three, recursive, error-checking and robust mutexes, an owner that
# exited, an rwlock held for writing, 50 condition-variable waiters) under
# the agent, the same program without it (the daemon's ptrace snapshot),
# and a core file of it (gcore); each dump checked scenario by scenario by
# locks_check.py. Then /api/v1/stuck and stackwatch_deadlocks flag the
# deadlock at once, the text format says it, a C++ program deadlocked on
# two std::mutex is diagnosed through curl with both stacks, and a program
# built against musl (musl-gcc) is refused with the reason.
#
# Usage: BUILD=build sh tests/integration/locks.sh (tests/run.sh sets BUILD)
# Needs curl and python3 ("ok - # SKIP" without); gcore (gdb) for the core
# file. Prints one "ok - ..." or "not ok - ..." line per check.
set -u

# shellcheck source=tests/tap.sh
. "$(cd "$(dirname "$0")/../.." && pwd)/tests/tap.sh"

for tool in curl python3; do
	if ! command -v "$tool" >/dev/null 2>&1; then
		echo "ok - # SKIP $tool is not installed"
		exit 0
	fi
done
need "$BUILD/stackwatchd"
need "$BUILD/stackwatch"
need "$BUILD/fixtures/lock_target"
need "$BUILD/fixtures/lock_cxx"

here=$(cd "$(dirname "$0")" && pwd)
check="$here/locks_check.py"
tmp=$(mktemp -d /tmp/sw-locks-XXXXXX) || exit 1
chmod 755 "$tmp"
dpid="" kids=""
cleanup() {
	for p in $kids $dpid; do kill "$p" 2>/dev/null; done
	sleep 0.2
	for p in $kids $dpid; do kill -9 "$p" 2>/dev/null; done
	rm -rf "$tmp"
}
trap cleanup EXIT

# start NAME [env...] PROGRAM - runs it in $tmp, waits for its "ready";
# sets pid.
start() {
	name=$1
	shift
	(cd "$tmp" && exec env "$@") >"$tmp/$name.out" 2>&1 &
	pid=$!
	kids="$kids $pid"
	i=0
	while [ $i -lt 200 ] && ! grep -q '^ready' "$tmp/$name.out" 2>/dev/null; do
		sleep 0.1
		i=$((i + 1))
	done
}

# stacks PID [FORMAT] - the daemon's dump of PID.
stacks() {
	curl -s "$url/api/v1/stacks?pid=$1${2:+&format=$2}"
}

# settled LABEL CMD... - runs CMD until its dump passes every scenario
# (10 s at most: a waiter may still be on its way), then checks it.
settled() {
	label=$1
	shift
	i=0
	while [ $i -lt 50 ]; do
		"$@" >"$tmp/dump.json" 2>/dev/null
		python3 "$check" --quiet "$label" <"$tmp/dump.json" && break
		sleep 0.2
		i=$((i + 1))
	done
	python3 "$check" "$label" <"$tmp/dump.json"
}

tap_daemon "$tmp" --sample-interval 500
agent=$BUILD/libstackwatch-agent.so

# Under the agent.
start agent LD_PRELOAD="$agent" STACKWATCH_SOCKET="$tmp/agent.sock" \
	"$BUILD/fixtures/lock_target"
apid=$pid
i=0
while [ $i -lt 100 ] && ! curl -s "$url/api/v1/targets" | grep -q "\"pid\":$apid,"; do
	sleep 0.1
	i=$((i + 1))
done
settled agent stacks "$apid"

# The watchdog flags the deadlock at the first samples, long before
# --stuck-after (10 s), and only it.
i=0
while [ $i -lt 30 ]; do
	curl -s "$url/api/v1/stuck" >"$tmp/stuck.json"
	grep -q '"deadlock"' "$tmp/stuck.json" && break
	sleep 0.1
	i=$((i + 1))
done
if python3 - "$apid" "$tmp/stuck.json" <<'EOF'
import json, sys
pid = int(sys.argv[1])
d = json.load(open(sys.argv[2]))
mine = [t for t in d["threads"] if t["pid"] == pid]
dead = sorted(t["name"] for t in mine if t["reason"] == "deadlock")
cyc = [c for c in d["deadlocks"] if c["pid"] == pid]
ok = (dead == ["abba-1", "abba-2"] and len(mine) == 2 and len(cyc) == 1 and
      sorted(t["name"] for t in cyc[0]["threads"]) == ["abba-1", "abba-2"] and
      all(t["deadlock"]["locks"] == cyc[0]["locks"] for t in mine) and
      all(t["unchanged_s"] < 10 for t in mine))
sys.exit(0 if ok else 1)
EOF
then
	ok "/api/v1/stuck: abba-1 and abba-2 flagged with reason deadlock before --stuck-after, the cycle's threads and locks with them"
else
	nok "/api/v1/stuck does not flag the deadlock (alone) at once"
	sed 's/^/# /' "$tmp/stuck.json" | head -c 2000
	echo
fi
n=$(curl -s "$url/metrics" | sed -n 's/^stackwatch_deadlocks \([0-9]*\)$/\1/p')
if [ "$n" = 1 ]; then
	ok "stackwatch_deadlocks is 1"
else
	nok "stackwatch_deadlocks is '$n', not 1"
fi
stacks "$apid" text >"$tmp/text"
if grep -q '^DEADLOCK: abba-[12] ([0-9]*) waits for mutex 0x[0-9a-f]* (abba_[ab]) held by abba-[12] ([0-9]*), which waits for mutex 0x[0-9a-f]* (abba_[ab]) held by abba-[12] ([0-9]*): deadlock$' "$tmp/text" &&
	grep -q '^chain-1 ([0-9]*): waiting for mutex 0x[0-9a-f]* (chain_m2) held by chain-2 ([0-9]*), which waits for mutex 0x[0-9a-f]* (chain_far+0x10000) held by chain-3 ([0-9]*)$' "$tmp/text" &&
	grep -q '^rw-reader ([0-9]*), rw-reader ([0-9]*): waiting for rwlock (to read) 0x[0-9a-f]* (rw) held by rw-writer ([0-9]*)$' "$tmp/text"; then
	ok "text: a DEADLOCK line, and the chain chain-1 -> chain-2 -> chain-3 under its group, each wait line naming its threads and its lock's global"
else
	nok "text: no DEADLOCK line or chain"
	grep -n 'DEADLOCK\|waiting for' "$tmp/text" | sed 's/^/# /'
fi
# jstack-like: each group says its threads' states and their CPU time.
if grep -A1 '^50 threads: cv-waiter' "$tmp/text" | grep -q '^state: 50 S; cpu [0-9.]* \(ms\|s\|min\)$' &&
	[ "$(grep -c '^state: ' "$tmp/text")" = "$(grep -c '^[0-9]* threads\{0,1\}: ' "$tmp/text")" ]; then
	ok "text: every group has its state line, the 50 cv-waiters 'state: 50 S; cpu N ms'"
else
	nok "text: no state line for the groups"
	grep -n -A1 'threads\{0,1\}: ' "$tmp/text" | head -20 | sed 's/^/# /'
fi
# The owner's group says what it holds, as jstack's "- locked <0x...>".
if grep -q '^chain-3 ([0-9]*): holds mutex 0x[0-9a-f]* (chain_far+0x10000), 1 thread waiting$' "$tmp/text" &&
	grep -q '^rw-writer ([0-9]*): holds rwlock 0x[0-9a-f]* (rw), 3 threads waiting$' "$tmp/text" &&
	! grep -q '^cv-waiter.*holds' "$tmp/text"; then
	ok "text: chain-3 holds mutex (chain_far+0x10000), rw-writer holds rwlock (rw) with its 3 waiters"
else
	nok "text: the owners do not say what they hold"
	grep -n 'holds' "$tmp/text" | sed 's/^/# /'
fi

# Without the agent: the daemon's ptrace snapshot.
start plain "$BUILD/fixtures/lock_target"
ppid_=$pid
settled ptrace stacks "$ppid_"

# A core file of it: no thread names in a core, so they come from /proc.
if readelf -d "$BUILD/fixtures/lock_target" 2>/dev/null | grep -q libasan; then
	# Its shadow memory would make a core of terabytes.
	echo "ok - # SKIP a sanitized lock_target: no core file of it"
elif command -v gcore >/dev/null 2>&1; then
	for t in /proc/"$ppid_"/task/*; do
		echo "${t##*/} $(cat "$t/comm")"
	done >"$tmp/names"
	if gcore -o "$tmp/core" "$ppid_" >/dev/null 2>&1 &&
		"$BUILD/stackwatch" dump --core "$tmp/core.$ppid_" --format json \
			>"$tmp/core.json"; then
		python3 "$check" --names "$tmp/names" core <"$tmp/core.json"
	else
		nok "gcore and stackwatch dump --core of lock_target"
	fi
	rm -f "$tmp/core.$ppid_"
else
	echo "ok - # SKIP gcore (gdb) is not installed: no core file"
fi

# A C++ program deadlocked on two std::mutex, under the agent, by curl.
start cxx LD_PRELOAD="$agent" STACKWATCH_SOCKET="$tmp/agent.sock" \
	"$BUILD/fixtures/lock_cxx"
cpid=$pid
i=0
while [ $i -lt 50 ]; do
	stacks "$cpid" >"$tmp/cxx.json"
	grep -q '"deadlocks"' "$tmp/cxx.json" && break
	sleep 0.2
	i=$((i + 1))
done
if python3 - "$tmp/cxx.json" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
by = {t["name"]: t for t in d["threads"]}
l, r = by["left"], by["right"]
wl, wr = l["waiting_for"], r["waiting_for"]
cyc = d["deadlocks"]
stack = lambda t: [f.get("function") or "" for f in d["groups"][t["group"]]["frames"]]
ok = (wl["owner_tid"] == r["tid"] and wr["owner_tid"] == l["tid"] and
      wl["deadlock"] and wr["deadlock"] and len(cyc) == 1 and
      sorted(cyc[0]["threads"]) == sorted([l["tid"], r["tid"]]) and
      all(any("hold_then_take" in f for f in stack(t)) and
          any("mutex" in f and "lock" in f for f in stack(t)) for t in (l, r)))
sys.exit(0 if ok else 1)
EOF
then
	ok "C++ std::mutex ABBA through curl: left and right wait for each other, one deadlock, both stacks in hold_then_take"
else
	nok "C++ std::mutex ABBA not diagnosed"
	head -c 1500 "$tmp/cxx.json" | sed 's/^/# /'
	echo
fi

# musl: its locks are not glibc's; refused with the reason, no owner said.
if command -v musl-gcc >/dev/null 2>&1; then
	cat >"$tmp/musl.c" <<'EOF'
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>
static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static void *waiter(void *arg) { pthread_mutex_lock(&m); return arg; }
int main(void)
{
	pthread_t t;

	pthread_mutex_lock(&m);
	pthread_create(&t, NULL, waiter, NULL);
	sleep(1);
	printf("ready\n");
	fflush(stdout);
	for (;;)
		pause();
}
EOF
	if musl-gcc -O0 -g -o "$tmp/musl" "$tmp/musl.c" 2>"$tmp/musl.err"; then
		start musl "$tmp/musl"
		"$BUILD/stackwatch" dump --local --format json "$pid" >"$tmp/musl.json" 2>&1
		if python3 - "$tmp/musl.json" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
why = d.get("lock_owners_unsupported", "")
sys.exit(0 if "musl" in why and
         not any(t.get("waiting_for") for t in d["threads"]) else 1)
EOF
		then
			ok "a musl program: lock owners refused, naming musl"
		else
			nok "a musl program: no refusal"
			head -c 600 "$tmp/musl.json" | sed 's/^/# /'
			echo
		fi
	else
		nok "musl-gcc builds a program"
		sed 's/^/# /' "$tmp/musl.err"
	fi
else
	echo "ok - # SKIP musl-gcc (musl-tools) is not installed"
fi
