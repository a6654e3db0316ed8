#!/bin/sh
# layers.sh - the tree shows where code runs (src/README.md), and the
# built objects agree with it:
#  - every call or data reference between the objects of src/ goes down
#    the list of folders, never up or sideways into a folder not allowed;
#  - no two modules (a .c file and its header) reach each other, directly
#    or through others: the references form no circle;
#  - code on signal context (src/collector/signal/) includes nothing of
#    ours outside its folder but model/limits.h, model/clock.h,
#    model/callsite.h (header-only, pure) and the public header.
# Read from the symbols of the real objects (nm), not from a list.
. "$(dirname "$0")/../tap.sh"

obj=$BUILD/obj
if [ ! -d "$obj/collector/signal" ]; then
	nok "$obj holds the objects of src/ (make all)"
	exit 1
fi

# folder MODULE - the folder of a module such as collector/signal/handler.
# May module A's folder reference folder B's? Each folder lists what it
# may use besides itself.
allowed() {
	case "$1" in
	model) echo "" ;;
	collector/signal) echo "" ;;
	collector) echo "collector/signal model" ;;
	snapshot) echo "model" ;;
	kread) echo "snapshot model" ;;
	symbols) echo "snapshot model" ;;
	render) echo "symbols model" ;;
	api) echo "collector collector/signal symbols render model" ;;
	agent) echo "collector collector/signal model" ;;
	privsep) echo "snapshot symbols model" ;;
	daemon) echo "collector collector/signal kread privsep snapshot symbols render model" ;;
	cli) echo "kread privsep snapshot symbols render model" ;;
	*) echo "?" ;;
	esac
}

tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT

# One line per symbol: "def MODULE SYMBOL" or "use MODULE SYMBOL".
find "$obj" -name '*.o' | sort | while read -r o; do
	m=${o#"$obj"/}
	m=${m%.o}
	nm -P --defined-only "$o" 2>/dev/null |
		awk -v m="$m" '$2 ~ /^[TDBRVWGS]$/ { print "def", m, $1 }'
	nm -P --undefined-only "$o" 2>/dev/null |
		awk -v m="$m" '{ print "use", m, $1 }'
done >"$tmp/syms"

# Our interposers (dlopen, execve, sigprocmask...) define libc's own
# functions: a call to one is a call to libc's API, not an import.
libc=$(ldd "$BUILD/stackwatch" 2>/dev/null | awk '$1 ~ /^libc\.so/ { print $3 }')
if [ -n "$libc" ] && [ -f "$libc" ]; then
	nm -D --defined-only "$libc" | awk '{ sub(/@.*/, "", $3); print $3 }' |
		sort -u >"$tmp/libc"
else
	nok "libc found for the interposers"
	: >"$tmp/libc"
fi

# The edges A B: A references a symbol of ours that B defines.
awk 'FILENAME == ARGV[1] { libc[$1] = 1; next }
     $1 == "def" && ($3 in libc) { next }
     $1 == "def" && !($3 in def) { def[$3] = $2; next }
     $1 == "use" { use[NR] = $2 " " $3 }
     END {
	for (i in use) {
		split(use[i], f, " ")
		if ((f[2] in def) && def[f[2]] != f[1])
			print f[1], def[f[2]]
	}
     }' "$tmp/libc" "$tmp/syms" | sort -u >"$tmp/edges"

n=$(wc -l <"$tmp/edges")
if [ "$n" -gt 20 ]; then
	ok "$n references between modules found"
else
	nok "only $n references between modules found in $obj"
fi

# Directions between folders.
bad=0
while read -r a b; do
	fa=${a%/*}
	fb=${b%/*}
	[ "$fa" = "$fb" ] && continue
	case " $(allowed "$fa") " in
	*" $fb "*) ;;
	*)
		nok "$a uses $b: $fa may not reference $fb"
		bad=$((bad + 1))
		;;
	esac
done <"$tmp/edges"
[ "$bad" -eq 0 ] && ok "every reference between folders points down"

# Circles: the transitive closure, then any pair that reaches both ways.
awk '{ e[$1 " " $2] = 1; n[$1] = 1; n[$2] = 1 }
     END {
	do {
		grew = 0
		for (p in e) {
			split(p, f, " ")
			for (k in n)
				if ((f[2] " " k) in e && !((f[1] " " k) in e)) {
					e[f[1] " " k] = 1
					grew = 1
				}
		}
	} while (grew)
	for (p in e) {
		split(p, f, " ")
		if (f[1] < f[2] && (f[2] " " f[1]) in e)
			print f[1], f[2]
	}
     }' "$tmp/edges" | sort >"$tmp/circles"
if [ -s "$tmp/circles" ]; then
	while read -r a b; do
		nok "$a and $b reach each other"
	done <"$tmp/circles"
else
	ok "no two modules reach each other"
fi

# Includes of the signal-context code.
bad=0
for f in "$root"/src/collector/signal/*.[ch]; do
	for inc in $(sed -n 's/^#include "\([^"]*\)".*/\1/p' "$f"); do
		case "$inc" in
		*/*)
			case "$inc" in
			model/limits.h | model/clock.h | model/callsite.h) ;;
			*)
				nok "${f#"$root"/} includes $inc"
				bad=$((bad + 1))
				;;
			esac
			;;
		stackwatch.h) ;;
		*)
			if [ ! -f "$(dirname "$f")/$inc" ]; then
				nok "${f#"$root"/} includes $inc"
				bad=$((bad + 1))
			fi
			;;
		esac
	done
done
[ "$bad" -eq 0 ] && ok "collector/signal includes only itself, the clock, the limits and the call check"

[ "$failed" -eq 0 ]
