#!/bin/sh
# handler_calls.sh - the code our signal handler can reach calls nothing
# through a PLT slot.
#
# A call into another object goes through a PLT slot, which a program
# linked without -z now binds lazily on the first call: the lazy binder
# then runs inside our handler, on the interrupted thread's stack (it
# saves every vector register, some 3 kB) and may take the loader's lock.
# The library and the agent are linked -z now, but the static library is
# linked into programs as they are. So everything reachable from handler()
# on signal context must reach other objects only through pointers
# resolved before the first signal (libunwind, the clock, errno), and
# make its system calls itself (collector/signal/sys.h).
#
# Read from the real objects: starting at handler() and at every function
# whose address sits in data (libunwind's accessors), follow each call,
# jump and address taken, through every object of src/collector/signal/;
# any symbol reached that none of them defines is a call into another
# object, and fails the test.
. "$(dirname "$0")/../tap.sh"

obj=$BUILD/obj/collector/signal
if [ ! -f "$obj/handler.o" ]; then
	nok "$obj holds the objects of src/collector/signal/ (make all)"
	exit 1
fi

tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT

# FUNC obj addr name: every function defined, with its section offset.
# EDGE obj from target: a relocation in the code of function from.
# ROOT obj target: a relocation in data (a function pointer).
for o in "$obj"/*.o; do
	m=$(basename "$o" .o)
	objdump -t "$o" | awk -v m="$m" '
		$3 == "F" || $2 == "F" { print "FUNC", m, $1, $NF; next }
		/^[0-9a-f]+ / && $0 !~ /\*UND\*/ { print "DATA", m, $NF }'
	# A direct call or an address in the same section has no relocation;
	# one that has (the next line) names its real target instead.
	objdump -dr --no-show-raw-insn "$o" | awk -v m="$m" '
		function flush() {
			if (pend != "")
				print "EDGE", m, f, "LOCAL", pend
			pend = ""
		}
		/^[0-9a-f]+ <[^>]+>:$/ {
			flush(); f = $2; gsub(/[<>:]/, "", f); next }
		/R_X86_64_(PLT32|PC32|GOTPCREL|GOTPCRELX|REX_GOTPCRELX)/ {
			pend = ""
			k = $2; sub(/^R_X86_64_/, "", k)
			print "EDGE", m, f, k, $3; next }
		{ flush() }
		/(call|jmp)[a-z]* +[0-9a-f]+ <[^>+]+>$|# [0-9a-f]+ <[^>+]+>$/ {
			pend = $NF; gsub(/[<>]/, "", pend) }
		END { flush() }'
	for sec in $(objdump -h "$o" | awk '$2 ~ /^\.data|^\.rodata/ { print $2 }'); do
		objdump -r -j "$sec" "$o" | awk -v m="$m" '
			$2 == "R_X86_64_64" { print "ROOT", m, $3 }'
	done
done >"$tmp/facts"

awk '
function hex(h,   v, i, c) {
	v = 0
	h = tolower(h)
	for (i = 1; i <= length(h); i++) {
		c = index("0123456789abcdef", substr(h, i, 1))
		if (!c)
			break
		v = v * 16 + c - 1
	}
	return v
}
# A target as a function name: a local one by its text offset (a PC32
# addend counts from the end of the 4-byte field), else the symbol.
function resolve(m, t, kind,   v) {
	if (t ~ /^\.text[-+]0x/) {
		v = hex(substr(t, 9))
		if (substr(t, 6, 1) == "-")
			v = -v
		if (kind == "PC32")
			v += 4
		return (m SUBSEP v in at) ? at[m, v] : ""
	}
	if (t == ".text")
		return (m SUBSEP 0 in at) ? at[m, 0] : ""
	if (t ~ /^\./)
		return ""
	sub(/[-+]0x[0-9a-f]+$/, "", t)
	return t
}
$1 == "FUNC" { at[$2, hex($3)] = $4; def[$4] = 1; next }
$1 == "DATA" { data[$3] = 1; next }
$1 == "EDGE" { e[++ne] = $3 SUBSEP $2 SUBSEP $4 SUBSEP $5; next }
$1 == "ROOT" { r[++nr] = $2 SUBSEP $3; next }
END {
	n = 0
	q[++n] = "handler"; seen["handler"] = 1
	for (i = 1; i <= nr; i++) {
		split(r[i], a, SUBSEP)
		t = resolve(a[1], a[2], "64")
		if (t != "" && (t in def) && !(t in seen)) {
			seen[t] = 1; q[++n] = t
		}
	}
	for (i = 1; i <= n; i++)
		for (k = 1; k <= ne; k++) {
			split(e[k], a, SUBSEP)
			if (a[1] != q[i])
				continue
			t = resolve(a[2], a[4], a[3])
			if (t == "" || (t in seen) || (t in data))
				continue
			# Only a call or jump leaves through a PLT slot.
			if (!(t in def) && a[3] != "PLT32")
				continue
			seen[t] = 1
			if (t in def)
				q[++n] = t
			else if (t !~ /^__(asan|ubsan|tsan|sanitizer)_/)
				ext[t] = q[i] # (a sanitizer build instruments)
		}
	for (t in seen)
		if (t in def)
			print "REACHED", t
	for (t in ext)
		print "EXTERNAL", t, ext[t]
}' "$tmp/facts" >"$tmp/out"

[ -n "${SW_SHOW_REACHED:-}" ] && cat "$tmp/out" >&2
reached=$(grep -c '^REACHED' "$tmp/out")
if grep -q '^REACHED find_proc_info$' "$tmp/out" &&
	grep -q '^REACHED access_mem$' "$tmp/out"; then
	ok "$reached functions reachable from the handler, libunwind's accessors included"
else
	nok "the handler's code was found ($reached functions: $(grep '^REACHED' "$tmp/out" | tr '\n' ' '))"
fi
bad=0
while read -r kind sym from; do
	[ "$kind" = EXTERNAL ] || continue
	nok "$from calls $sym through a PLT slot"
	bad=$((bad + 1))
done <"$tmp/out"
[ "$bad" -eq 0 ] && ok "nothing reachable from the handler calls into another object"
[ "$failed" -eq 0 ]
