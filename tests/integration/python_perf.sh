#!/bin/sh
# python_perf.sh - whole stacks of Python 3.12+ run with -X perf. CPython's
# perf trampolines (one per Python call, made at run time, with no call
# frame information and no frame pointer) used to end every stack at the
# first Python frame, as they end eu-stack's and perf's own
# (--call-graph dwarf). Now each thread of tests/fixtures/py_perf.py is
# unwound from its innermost frame to its start, every Python function
# on the way named from the perf map: by the CLI's own snapshot
# (dump --local), by the daemon from the kernel and by ptrace, under the
# agent by its signal handler, and from a core (gcore). eu-stack
# stops at the first Python frame: its frames are the first of ours.
#
# Usage: BUILD=build sh tests/integration/python_perf.sh (tests/run.sh
# sets BUILD). Needs root and a python 3.12 or later whose -X perf works
# (on PATH as python3.12 and later, or under pyenv: Debian 12's own
# python3 is 3.11, which has no -X perf); prints "ok - # SKIP" without.
set -u

# shellcheck source=tests/tap.sh
. "$(cd "$(dirname "$0")/../.." && pwd)/tests/tap.sh"

if [ "$(id -u)" != 0 ]; then
	echo "ok - # SKIP needs root (kernel reads)"
	exit 0
fi
for tool in curl python3; do
	if ! command -v "$tool" >/dev/null 2>&1; then
		echo "ok - # SKIP $tool is not installed"
		exit 0
	fi
done
need "$BUILD/stackwatchd"
need "$BUILD/stackwatch"

# The first python 3.12+ found whose perf trampolines turn on.
py=""
roots="${PYENV_ROOT:-} $HOME/.pyenv /root/.pyenv /usr/local/pyenv"
for c in $(for v in 14 13 12; do command -v "python3.$v"; done 2>/dev/null) \
	$(for r in $roots; do ls -d "$r"/versions/3.1[2-9]*/bin/python3.1[2-9] \
		2>/dev/null; done); do
	if "$c" -X perf -c 'import sys; sys.exit(not sys.is_stack_trampoline_active())' \
		>/dev/null 2>&1; then
		py=$c
		break
	fi
done
if [ -z "$py" ]; then
	echo "ok - # SKIP no python 3.12 or later with -X perf (Debian 12's python3 is $(python3 -V 2>&1 | cut -d' ' -f2))"
	exit 0
fi
echo "# $py ($("$py" -V 2>&1))"

here=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d /tmp/sw-pyperf-XXXXXX) || exit 1
chmod 0755 "$tmp"
dpid="" d1="" kid="" akid=""
cleanup() {
	for k in $kid $akid; do
		kill -KILL "-$k" 2>/dev/null
		rm -f "/tmp/perf-$k.map"
	done
	for p in $d1 $dpid; do kill -9 "$p" 2>/dev/null; done
	rm -rf "$tmp"
}
trap cleanup EXIT

# start NAME [ENV...] - the program, in a process group of its own (run
# by env with ENV); waits for its "ready"; sets pid.
start() {
	name=$1
	shift
	setsid env "$@" "$py" -X perf "$here/tests/fixtures/py_perf.py" \
		</dev/null >"$tmp/$name.out" 2>&1 &
	pid=$!
	i=0
	while [ $i -lt 100 ] && ! grep -q '^ready' "$tmp/$name.out" 2>/dev/null; do
		sleep 0.1
		i=$((i + 1))
	done
	if ! grep -q '^ready' "$tmp/$name.out"; then
		nok "the Python program starts ($name)"
		sed 's/^/# /' "$tmp/$name.out"
		exit 1
	fi
}

start plain
kid=$pid
ok "the Python program runs with -X perf (pid $kid)"

# check LABEL FILE [METHOD] - the dump in FILE (JSON) has each thread
# whole (each read by METHOD, when given).
check() {
	python3 - "$@" <<'PYEOF'
import json, sys

label, path = sys.argv[1], sys.argv[2]
method = sys.argv[3] if len(sys.argv) > 3 else None
try:
    d = json.load(open(path))
except Exception as e:
    print("not ok - %s: a JSON dump (%s)" % (label, e))
    sys.exit(1)
if d.get("symbols_partial"):
    print("# %s: symbols_partial" % label)
groups = d.get("groups", [])
# Each thread's functions, innermost first (inlined ones too).
stacks = []
for t in d.get("threads", []):
    g = t.get("group")
    if isinstance(g, int) and 0 <= g < len(groups):
        fns = [f.get("function") or "??" for f in groups[g]["frames"]]
        stacks.append((t, fns, groups[g]["frames"]))

def py_names(fns):
    return [f[4:].split(":")[0] for f in fns if f.startswith("py::")]

# (what it is, the Python calls innermost first, what it must end in)
want = [
    ("the sleeping thread", ["inner", "middle", "outer"], ("start_thread", "__clone3")),
    ("the spinning thread", ["spin_inner", "spinner"], ("start_thread", "__clone3")),
    ("the main thread", ["<module>"], ("__libc_start_main", "_start")),
]
bad = 0
for what, calls, ends in want:
    found = None
    for t, fns, frames in stacks:
        names = py_names(fns)
        if names[:len(calls)] == calls:
            found = (t, fns, names)
            break
    if not found:
        print("not ok - %s: %s, its Python calls %s from the innermost"
              % (label, what, " <- ".join(calls)))
        for t, fns, frames in stacks:
            print("#   %s: %s" % (t.get("tid"), ";".join(fns)))
        bad += 1
        continue
    t, fns, names = found
    tail = fns[-3:]
    whole = (any(e in tail for e in ends) and not t.get("truncated")
             and (method is None or t.get("method") == method))
    print("%s - %s: %s (%s), every Python call named (%s), down to %s (%d frames%s)"
          % ("ok" if whole else "not ok", label, what, t.get("method"),
             " <- ".join(names), fns[-1], len(fns),
             ", truncated " + t["truncated"] if t.get("truncated") else ""))
    if not whole:
        print("#   " + ";".join(fns))
        bad += 1
sys.exit(1 if bad else 0)
PYEOF
}

# By the CLI's own snapshot.
"$BUILD/stackwatch" dump --local --format json "$kid" >"$tmp/local.json" \
	2>"$tmp/local.err"
check "dump --local" "$tmp/local.json" || failed=$((failed + 1))

# By the daemon: from the kernel, and by ptrace.
tap_daemon "$tmp" --sample-interval 0
d1=$dpid
url1=$url
mkdir "$tmp/p"
tap_daemon "$tmp/p" --sample-interval 0 --no-kernel-reads
# dumped URL FILE [PID] - the daemon's dump (of the plain program), again
# while symbols are partial (a first dump on a busy machine may stop at
# its time budget).
dumped() {
	i=0
	while [ $i -lt 10 ]; do
		curl -s "$1/api/v1/stacks?pid=${3:-$kid}&timeout_ms=5000" >"$2"
		grep -q '"symbols_partial":true' "$2" || break
		sleep 0.2
		i=$((i + 1))
	done
}
dumped "$url1" "$tmp/kernel.json"
check "the daemon" "$tmp/kernel.json" || failed=$((failed + 1))
dumped "$url" "$tmp/ptrace.json"
check "the daemon, by ptrace" "$tmp/ptrace.json" || failed=$((failed + 1))

# Under the agent, every thread read by its own signal handler (the
# daemon without kernel reads): the handler steps past the trampolines.
start agent LD_PRELOAD="$BUILD/libstackwatch-agent.so" \
	STACKWATCH_SOCKET="$tmp/p/agent.sock"
akid=$pid
i=0
while [ $i -lt 100 ] &&
	! curl -s "$url/api/v1/targets" | grep -q "\"pid\":$akid,"; do
	sleep 0.1
	i=$((i + 1))
done
dumped "$url" "$tmp/agent.json" "$akid"
check "under the agent" "$tmp/agent.json" signal || failed=$((failed + 1))

# A core of it (gcore): each thread through every trampoline to its
# start. A core keeps no perf map, so the Python functions stay unnamed
# ("??" in anonymous memory): the frames CPython calls them from are
# counted instead, py_trampoline_evaluator once per Python call (the
# sleeping thread makes 6, the spinning one 5, the main thread 1).
if command -v gcore >/dev/null 2>&1; then
	gcore -o "$tmp/core" "$kid" >/dev/null 2>&1
	"$BUILD/stackwatch" dump --core "$tmp/core.$kid" --format json \
		>"$tmp/core.json" 2>"$tmp/core.err"
	python3 - "$tmp/core.json" <<'PYEOF'
import json, sys

try:
    d = json.load(open(sys.argv[1]))
except Exception as e:
    print("not ok - dump --core: a JSON dump (%s)" % e)
    sys.exit(1)
groups = d.get("groups", [])
seen = []
whole = True
for t in d.get("threads", []):
    fns = [f.get("function") or "??" for f in groups[t["group"]]["frames"]]
    seen.append(fns.count("py_trampoline_evaluator"))
    if not any(e in fns[-3:] for e in ("start_thread", "__clone3", "_start")):
        whole = False
        print("#   %s: %s" % (t.get("tid"), ";".join(fns)))
good = whole and sorted(seen) == [1, 5, 6]
print("%s - dump --core: every thread down to its start, past %s Python calls (1, 5 and 6 wanted)"
      % ("ok" if good else "not ok", ", ".join(map(str, sorted(seen)))))
sys.exit(0 if good else 1)
PYEOF
	[ $? -eq 0 ] || failed=$((failed + 1))
	rm -f "$tmp/core.$kid"
else
	echo "ok - # SKIP gcore is not installed"
fi

# eu-stack ends at the first Python frame: its frames are ours, and ours
# go on. Compared on the sleeping thread, by address.
if command -v eu-stack >/dev/null 2>&1; then
	eu-stack -p "$kid" >"$tmp/eu.txt" 2>&1
	python3 - "$tmp/eu.txt" "$tmp/local.json" <<'PYEOF'
import json, re, sys

eu = {}
tid = None
for line in open(sys.argv[1]):
    m = re.match(r"TID (\d+):", line)
    if m:
        tid = int(m.group(1))
        eu[tid] = []
        continue
    m = re.match(r"#\d+\s+(0x[0-9a-f]+)", line)
    if m and tid is not None:
        eu[tid].append(int(m.group(1), 16))
d = json.load(open(sys.argv[2]))
groups = d["groups"]
for t in d["threads"]:
    frames = groups[t["group"]]["frames"]
    fns = [f.get("function") or "" for f in frames]
    if not any(f.startswith("py::inner:") for f in fns):
        continue
    ours = [int(f["ip"], 16) for f in frames if not f.get("inlined")]
    theirs = eu.get(t["tid"], [])
    good = theirs and ours[:len(theirs)] == theirs and len(ours) > len(theirs)
    print("%s - eu-stack's %d frames of the sleeping thread are our first, and ours go on to %d"
          % ("ok" if good else "not ok", len(theirs), len(ours)))
    sys.exit(0 if good else 1)
print("not ok - the sleeping thread in the --local dump")
sys.exit(1)
PYEOF
	[ $? -eq 0 ] || failed=$((failed + 1))
else
	echo "ok - # SKIP eu-stack is not installed"
fi

for k in $kid $akid; do
	kill -KILL "-$k" 2>/dev/null
	wait "$k" 2>/dev/null
done
i=0
while [ $i -lt 50 ] && { kill -0 "-$kid" || kill -0 "-$akid"; } 2>/dev/null; do
	sleep 0.1
	i=$((i + 1))
done
if { kill -0 "-$kid" || kill -0 "-$akid"; } 2>/dev/null; then
	nok "the Python programs' process groups are gone"
else
	ok "the Python programs' process groups are gone"
fi
[ "$failed" -eq 0 ]
