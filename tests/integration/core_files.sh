#!/bin/sh
# core_files.sh - "stackwatch dump --core" opens the files a core names
# (and --exe) as module files only: regular files, never blocking. A
# shared library built here is dlopen()ed by a relative path by
# plain_target, which parks a thread inside it; gcore makes a core of
# it. Then the library is replaced by a FIFO, by a symlink to a FIFO and
# by a symlink to /dev/zero: each dump must finish (under timeout 20) with
# the program's own functions named and the library's frame left as its
# module and offset. --exe naming a FIFO must fail at once, and --exe
# through a symlink to the real executable must work.
#
# Usage: BUILD=build sh tests/integration/core_files.sh (tests/run.sh sets
# BUILD). Needs gcore (gdb), cc, setsid and timeout ("ok - # SKIP"
# without). Prints one "ok - ..." or "not ok - ..." line per check.
set -u

# shellcheck source=tests/tap.sh
. "$(cd "$(dirname "$0")/../.." && pwd)/tests/tap.sh"

for tool in gcore cc setsid timeout mkfifo; do
	if ! command -v "$tool" >/dev/null 2>&1; then
		echo "ok - # SKIP $tool is not installed"
		exit 0
	fi
done
need "$BUILD/stackwatch"
need "$BUILD/fixtures/plain_target"
if readelf -d "$BUILD/fixtures/plain_target" 2>/dev/null | grep -q libasan; then
	# Its shadow memory would make a core of terabytes.
	echo "ok - # SKIP a sanitized plain_target: no core file of it"
	exit 0
fi

tmp=$(mktemp -d /tmp/sw-corefiles-XXXXXX) || exit 1
pg=""
cleanup() {
	[ -n "$pg" ] && kill -KILL "-$pg" 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

# The library: its function calls back into the program, which parks.
mkdir "$tmp/lib"
cat >"$tmp/libfoo.c" <<'EOF'
void plain_lib_block(void (*fn)(void));

void plain_lib_block(void (*fn)(void))
{
	fn();
}
EOF
if ! cc -shared -fPIC -O0 -g -fno-omit-frame-pointer \
	-o "$tmp/lib/libfoo.so" "$tmp/libfoo.c" 2>"$tmp/cc.err"; then
	nok "cc -shared builds the library"
	sed 's/^/# /' "$tmp/cc.err"
	exit 1
fi
# Where plain_lib_block lies in the library: [lo, hi) as file offsets
# (its first segment is mapped from offset 0 at address 0).
set -- $(nm -S "$tmp/lib/libfoo.so" | sed -n 's/^\([0-9a-f]*\) \([0-9a-f]*\) T plain_lib_block$/\1 \2/p')
fn_lo=$((0x${1:-0}))
fn_hi=$((0x${1:-0} + 0x${2:-0}))

# The program, in a process group of its own, stdin a FIFO it holds open
# for reading and writing (so never at end of file), the library loaded
# by the relative path lib/libfoo.so.
mkfifo "$tmp/in"
(cd "$tmp" && exec setsid "$BUILD/fixtures/plain_target" dlopen \
	lib/libfoo.so <>"$tmp/in" >"$tmp/out" 2>&1) &
pid=$!
pg=$pid
i=0
while [ $i -lt 200 ] && ! grep -q '^ready' "$tmp/out" 2>/dev/null; do
	sleep 0.1
	i=$((i + 1))
done
if ! grep -q '^ready' "$tmp/out" ||
	[ "$(ps -o pgid= -p "$pid" | tr -d ' ')" != "$pid" ]; then
	nok "plain_target dlopen lib/libfoo.so starts in its own process group"
	sed 's/^/# /' "$tmp/out"
	exit 1
fi

if timeout 60 gcore -o "$tmp/core" "$pid" >"$tmp/gcore.out" 2>&1 &&
	[ -f "$tmp/core.$pid" ]; then
	ok "gcore made a core of the program"
else
	nok "gcore made a core of the program"
	sed 's/^/# /' "$tmp/gcore.out"
	exit 1
fi
core=$tmp/core.$pid

kill -KILL "-$pg"
wait "$pid" 2>/dev/null
if kill -0 "-$pg" 2>/dev/null; then
	nok "no process of the program's group is left"
else
	ok "no process of the program's group is left"
	pg=""
fi

# dump LABEL ARGS... - stackwatch dump ARGS under timeout 20: status in
# $rc, output in $tmp/LABEL.out and .err.
dump() {
	out=$tmp/$1
	shift
	timeout 20 "$BUILD/stackwatch" dump "$@" >"$out.out" 2>"$out.err" \
		</dev/null
	rc=$?
}

# has LABEL FUNCTION... - every FUNCTION is named in LABEL's text dump.
has() {
	out=$tmp/$1
	shift
	for f in "$@"; do
		grep -q " in $f (" "$out.out" || return 1
	done
}

# The library intact: every frame named, the library's too.
dump intact --core "$core"
if [ "$rc" -eq 0 ] && has intact main lib_park plain_park plain_lib_block; then
	ok "the intact core: main, lib_park, plain_park and plain_lib_block named"
else
	nok "the intact core: main, lib_park, plain_park and plain_lib_block named (status $rc)"
	sed 's/^/# /' "$tmp/intact.out" "$tmp/intact.err"
fi

# unreadable LABEL - the library, now no regular file, is a module left
# unresolved; the dump is complete otherwise.
unreadable() {
	label=$1
	dump "$label" --core "$core"
	if [ "$rc" -eq 124 ]; then
		nok "$label: dump --core finishes (timeout 20 fired)"
		return
	fi
	if [ "$rc" -eq 0 ] && has "$label" main lib_park plain_park &&
		grep -q " in ?? () from $tmp/lib/libfoo.so\$" "$tmp/$label.out" &&
		! grep -q "plain_lib_block" "$tmp/$label.out"; then
		ok "$label: dump --core finishes, main's functions named, the library's frame '?? () from $tmp/lib/libfoo.so'"
	else
		nok "$label: dump --core finishes, main's functions named, the library's frame '?? () from $tmp/lib/libfoo.so' (status $rc)"
		sed 's/^/# /' "$tmp/$label.out" "$tmp/$label.err"
		return
	fi
	# The frame's offset is the call's in the library's file.
	dump "$label-json" --core "$core" --format json
	offs=$(tr ',{}' '\n\n\n' <"$tmp/$label-json.out" |
		grep -A1 "\"module\":\"$tmp/lib/libfoo.so\"" |
		sed -n 's/^"offset":"0x\([0-9a-f]*\)"$/\1/p')
	good=0
	for o in $offs; do
		o=$((0x$o))
		[ "$o" -gt "$fn_lo" ] && [ "$o" -le "$fn_hi" ] && good=1
	done
	if [ "$rc" -eq 0 ] && [ "$good" -eq 1 ]; then
		ok "$label: the JSON frame in the library has module and offset within plain_lib_block"
	else
		nok "$label: the JSON frame in the library has module and offset within plain_lib_block (status $rc, offsets: $offs)"
	fi
}

# The library replaced by a FIFO.
mv "$tmp/lib/libfoo.so" "$tmp/libfoo.so.real"
mkfifo "$tmp/lib/libfoo.so"
unreadable fifo

# By a symlink to a FIFO elsewhere.
rm -f "$tmp/lib/libfoo.so"
mkfifo "$tmp/other.fifo"
ln -s "$tmp/other.fifo" "$tmp/lib/libfoo.so"
unreadable symlink-fifo

# By a symlink to a device.
rm -f "$tmp/lib/libfoo.so"
ln -s /dev/zero "$tmp/lib/libfoo.so"
unreadable symlink-device

# --exe naming a FIFO: refused at once, with the reason.
mkfifo "$tmp/exe.fifo"
dump exe-fifo --core "$core" --exe "$tmp/exe.fifo"
if [ "$rc" -eq 1 ] && grep -q "exe.fifo: not a regular file" "$tmp/exe-fifo.err"; then
	ok "--exe naming a FIFO fails at once: $(cat "$tmp/exe-fifo.err")"
else
	nok "--exe naming a FIFO fails at once (status $rc)"
	sed 's/^/# /' "$tmp/exe-fifo.err"
fi

# --exe through a symlink to the real executable: resolved and used.
ln -s "$BUILD/fixtures/plain_target" "$tmp/exe-link"
dump exe-link --core "$core" --exe "$tmp/exe-link"
if [ "$rc" -eq 0 ] && has exe-link main lib_park plain_park; then
	ok "--exe through a symlink to the executable: main's functions named"
else
	nok "--exe through a symlink to the executable: main's functions named (status $rc)"
	sed 's/^/# /' "$tmp/exe-link.out" "$tmp/exe-link.err"
fi

[ "$failed" -eq 0 ]
