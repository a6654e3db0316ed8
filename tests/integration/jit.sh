#!/bin/sh
# jit.sh - JIT frames named from perf maps, on real JITs: node with
# --perf-basic-prof running a hot JS loop (under the agent and without it,
# by ptrace snapshot) and a JVM whose map `jcmd PID Compiler.perfmap`
# wrote. The JS (Java) functions appear by name with module "[jit]", the
# frames below them down to __libc_start_main (Java's main thread: down
# to start_thread). Then the map's checks: a
# map that is not the target user's, a FIFO in its place and a symlink
# are not read (and the dump does not hang), and the owner's map again is.
#
# Usage: BUILD=build sh tests/integration/jit.sh  (tests/run.sh sets BUILD)
# Needs root, node, python3 and setpriv; the JVM part needs java, javac
# and jcmd. Prints "ok - # SKIP" for what is missing.
set -u

# shellcheck source=tests/tap.sh
. "$(cd "$(dirname "$0")/../.." && pwd)/tests/tap.sh"

if [ "$(id -u)" != 0 ]; then
	echo "ok - # SKIP needs root (a program of another user)"
	exit 0
fi
for tool in node python3 setpriv curl; do
	if ! command -v "$tool" >/dev/null 2>&1; then
		echo "ok - # SKIP $tool is not installed"
		exit 0
	fi
done
need "$BUILD/stackwatchd"

tmp=$(mktemp -d /tmp/sw-jit-XXXXXX) || exit 1
chmod 0755 "$tmp"
dpid="" kids=""
cleanup() {
	for p in $kids $dpid; do kill -9 "$p" 2>/dev/null; done
	for p in $kids; do rm -f "/tmp/perf-$p.map"; done
	rm -rf "$tmp"
}
trap cleanup EXIT

tap_daemon "$tmp" --sample-interval 0 --admin-group ""

cat >"$tmp/hot.js" <<'EOF'
function hotInner(n) {
  let s = 0;
  for (let i = 0; i < n; i++) s += Math.sqrt(i) * (i & 7);
  return s;
}
function hotOuter() {
  let t = 0;
  for (;;) { t += hotInner(1e6); if (t === 42) console.log(t); }
}
console.log('ready');
hotOuter();
EOF

# frames PID - one line per thread of PID's dump: "module|function" of
# each frame, innermost first, joined by " / "; nothing on an error. With
# local set, the dump is the CLI's own (stackwatch dump --local).
frames() {
	if [ -n "${local:-}" ]; then
		"$BUILD/stackwatch" dump --local --format json "$1" 2>/dev/null
	else
		curl -s "$url/api/v1/stacks?pid=$1"
	fi | python3 -c '
import json, sys
try:
    d = json.load(sys.stdin)
except Exception:
    sys.exit(0)
for g in d.get("groups", []):
    print(" / ".join("%s|%s" % (f.get("module"), f.get("function"))
                     for f in g["frames"]))'
}

# named PID WANT... - waits up to 20 s (tries / 5) for a thread of PID
# whose frames hold a [jit] frame of each WANT in order, then $bottom
# (__libc_start_main by default); prints that thread's frames.
named() {
	p=$1
	shift
	n=0
	while [ $n -lt "${tries:-100}" ]; do
		frames "$p" >"$tmp/frames"
		if python3 - "$tmp/frames" "${bottom:-__libc_start_main}" "$@" <<'EOF'
import sys
want = sys.argv[3:]
for line in open(sys.argv[1]):
    fr = line.rstrip("\n").split(" / ")
    at = []
    for w in want:
        k = next((i for i, f in enumerate(fr)
                  if f.startswith("[jit]|") and w in f), -1)
        at.append(k)
    bottom = next((i for i, f in enumerate(fr)
                   if f.endswith("|" + sys.argv[2])), -1)
    if all(k >= 0 for k in at) and at == sorted(at) and bottom > at[-1]:
        print(line, end="")
        sys.exit(0)
sys.exit(1)
EOF
		then
			return 0
		fi
		sleep 0.2
		n=$((n + 1))
	done
	return 1
}

# node_start NAME CMD...: starts CMD (node, java) in $tmp, waits for its
# "ready"; sets np.
node_start() {
	name=$1
	shift
	# In $tmp: node writes its V8 log (isolate-*-v8.log) where it runs.
	(cd "$tmp" && exec "$@") >"$tmp/$name.out" 2>&1 &
	np=$!
	kids="$kids $np"
	i=0
	while [ $i -lt 100 ] && ! grep -q '^ready' "$tmp/$name.out"; do
		sleep 0.1
		i=$((i + 1))
	done
}

# Under the agent. An agent built with AddressSanitizer cannot be: any
# sanitized library preloaded into node makes it crash at start (a
# one-line library does the same), so that build skips this check.
if readelf -d "$BUILD/libstackwatch-agent.so" 2>/dev/null | grep -q 'libasan'; then
	echo "ok - # SKIP node under an agent built with AddressSanitizer: ASan's runtime preloaded into node crashes it"
else
	node_start agent env LD_PRELOAD="$BUILD/libstackwatch-agent.so" \
		STACKWATCH_SOCKET="$tmp/agent.sock" \
		node --perf-basic-prof --interpreted-frames-native-stack "$tmp/hot.js"
	if named "$np" hotInner hotOuter >"$tmp/line"; then
		ok "node under the agent: hotInner and hotOuter named [jit], frames down to __libc_start_main"
	else
		nok "node under the agent: no [jit] hotInner/hotOuter down to __libc_start_main"
		sed 's/^/# /' "$tmp/frames" | head -20
		sed 's/^/# /' "$tmp/agent.out" | head -20
	fi
	kill "$np"
fi

# Without the agent: the ptrace snapshot.
node_start plain node --perf-basic-prof --interpreted-frames-native-stack \
	"$tmp/hot.js"
if named "$np" hotInner hotOuter >"$tmp/line"; then
	ok "node without the agent (ptrace): hotInner and hotOuter named [jit], down to __libc_start_main"
else
	nok "node without the agent: no [jit] hotInner/hotOuter"
	sed 's/^/# /' "$tmp/frames" | head -20
fi
# The CLI's own snapshot reads the map the same way.
if local=1 tries=25 named "$np" hotInner hotOuter >"$tmp/line"; then
	ok "stackwatch dump --local: hotInner and hotOuter named [jit], down to __libc_start_main"
else
	nok "stackwatch dump --local: no [jit] hotInner/hotOuter"
	sed 's/^/# /' "$tmp/frames" | head -20
fi
kill "$np"

# Another user's node: its map is read only while it is that user's.
node_start nobody setpriv --reuid=nobody --regid=nogroup --clear-groups \
	node --perf-basic-prof --interpreted-frames-native-stack "$tmp/hot.js"
map=/tmp/perf-$np.map
if named "$np" hotInner; then
	ok "nobody's node: its own map names its frames"
else
	nok "nobody's node: its own map names nothing"
fi
chown root "$map"
if frames "$np" >"$tmp/f2" && [ -s "$tmp/f2" ] &&
	! grep -q '\[jit\]|' "$tmp/f2"; then
	ok "a map owned by another user than the target's is not read"
else
	nok "a root-owned map was used for nobody's process"
fi
mv "$map" "$map.real"
mkfifo "$map"
chown nobody "$map"
start=$(date +%s)
frames "$np" >"$tmp/f3"
took=$(($(date +%s) - start))
if [ -s "$tmp/f3" ] && ! grep -q '\[jit\]|' "$tmp/f3" && [ "$took" -lt 5 ]; then
	ok "a FIFO in the map's place is not read, and the dump does not wait on it"
else
	nok "a FIFO as the map: ${took} s, $(grep -c '\[jit\]|' "$tmp/f3") jit frames"
fi
rm -f "$map"
ln -s "$map.real" "$map"
chown -h nobody "$map"
if frames "$np" >"$tmp/f4" && [ -s "$tmp/f4" ] &&
	! grep -q '\[jit\]|' "$tmp/f4"; then
	ok "a symlink in the map's place is not followed"
else
	nok "a symlink as the map was followed"
fi
rm -f "$map"
mv "$map.real" "$map"
chown nobody "$map"
if named "$np" hotInner; then
	ok "the owner's map again: named again"
else
	nok "the owner's map again: not named"
fi
kill "$np"

# A JVM: the map jcmd writes.
if command -v java >/dev/null 2>&1 && command -v javac >/dev/null 2>&1 &&
	command -v jcmd >/dev/null 2>&1; then
	mkdir -p "$tmp/java"
	cat >"$tmp/java/Hot.java" <<'EOF'
public class Hot {
    static double inner(int n) {
        double s = 0;
        for (int i = 0; i < n; i++) s += Math.sqrt(i) * (i & 7);
        return s;
    }
    static void outer() {
        double t = 0;
        for (;;) { t += inner(1000000); if (t == 42) System.out.println(t); }
    }
    public static void main(String[] a) {
        System.out.println("ready");
        outer();
    }
}
EOF
	javac -d "$tmp/java" "$tmp/java/Hot.java"
	node_start java java -XX:+PreserveFramePointer -cp "$tmp/java" Hot
	jp=$np
	n=0
	ok_java=0
	while [ $n -lt 10 ]; do
		jcmd "$jp" Compiler.perfmap >/dev/null 2>&1
		# Java's main runs on a thread of its own (JavaMain).
		if tries=10 bottom=start_thread named "$jp" Hot.inner \
			>"$tmp/line"; then
			ok_java=1
			break
		fi
		n=$((n + 1))
	done
	if [ $ok_java = 1 ]; then
		ok "a JVM (jcmd Compiler.perfmap): Hot.inner named [jit], down to start_thread"
	else
		nok "a JVM: no [jit] Hot.inner"
		sed 's/^/# /' "$tmp/frames" | head -20
	fi
	kill "$jp"
else
	echo "ok - # SKIP no JDK (java, javac, jcmd)"
fi
[ "$failed" -eq 0 ]
