#!/bin/sh
# install.sh - "make install" into a temporary DESTDIR, then "make
# uninstall": every file in its place, the library's soname and symlinks,
# the unit naming the installed binary (and passing systemd-analyze
# verify), pkg-config flags that compile and link a program against the
# installed library (shared and static) which then dumps itself with
# sw_dump_self, the man pages found by man, the installed CLI finding the
# installed agent, and nothing left after uninstall.
#
# Usage: BUILD=build sh tests/integration/install.sh  (tests/run.sh sets BUILD)
# Prints one "ok - ..." or "not ok - ..." line per check.
set -u

# shellcheck source=tests/tap.sh
. "$(dirname "$0")/../tap.sh"

check() {
	desc=$1
	shift
	if "$@"; then ok "$desc"; else nok "$desc"; fi
}

tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
trap 'exit 1' INT TERM

# A make of our own, not a job of the "make check" that runs us.
unset MAKEFLAGS MFLAGS MAKELEVEL MAKEOVERRIDES
CC=${CC:-cc}
# Under "make asan" and the like the library is instrumented: programs
# linked with it need the same sanitizer runtime.
san=""
syms=$(nm "$BUILD/libstackwatch.a" 2>/dev/null)
case "$syms" in *__asan_*) san="$san,address" ;; esac
case "$syms" in *__ubsan_*) san="$san,undefined" ;; esac
case "$syms" in *__tsan_*) san="$san,thread" ;; esac
san_flags=${san:+-fsanitize=${san#,}}

# sw_make DESTDIR [VAR=VALUE...] TARGET - status in $rc, log in $tmp/make.log
sw_make() {
	make -C "$root" --no-print-directory BUILD="$BUILD" "$@" \
		>"$tmp/make.log" 2>&1
	rc=$?
}

# 1. The default prefix: /usr/local.
d=$tmp/dest
p=/usr/local
sw_make DESTDIR="$d" install
if [ "$rc" -eq 0 ]; then
	ok "make install DESTDIR=... exits 0"
else
	nok "make install DESTDIR=... exits 0 (status $rc)"
	sed 's/^/# /' "$tmp/make.log"
	exit 1
fi

ver=$(sed -n 's/^#define SW_VERSION "\(.*\)"$/\1/p' "$root/include/stackwatch.h")
missing=""
for f in bin/stackwatchd bin/stackwatch \
	"lib/libstackwatch.so.$ver" lib/libstackwatch.so.0 lib/libstackwatch.so \
	lib/libstackwatch.a lib/stackwatch/libstackwatch-agent.so \
	include/stackwatch.h lib/pkgconfig/stackwatch.pc \
	share/man/man1/stackwatch.1 share/man/man8/stackwatchd.8 \
	share/man/man3/libstackwatch.3 share/man/man3/sw_dump_self.3 \
	lib/systemd/system/stackwatchd.service \
	share/doc/stackwatch/example-agent.conf \
	share/doc/stackwatch/stackwatchd.conf.example; do
	[ -e "$d$p/$f" ] || missing="$missing $f"
done
check "every file is installed under \$DESTDIR/usr/local${missing:+ (missing:$missing)}" \
	[ -z "$missing" ]
if [ -x "$d$p/bin/stackwatchd" ] && [ -x "$d$p/bin/stackwatch" ]; then
	ok "the binaries are executable"
else
	nok "the binaries are executable"
fi
if [ "$(readlink "$d$p/lib/libstackwatch.so.0")" = "libstackwatch.so.$ver" ] &&
	[ "$(readlink "$d$p/lib/libstackwatch.so")" = "libstackwatch.so.0" ] &&
	[ -f "$d$p/lib/libstackwatch.so.$ver" ] &&
	[ ! -L "$d$p/lib/libstackwatch.so.$ver" ]; then
	ok "libstackwatch.so.0 -> libstackwatch.so.$ver, libstackwatch.so -> .so.0"
else
	nok "libstackwatch.so.0 -> libstackwatch.so.$ver, libstackwatch.so -> .so.0"
fi
soname=$(readelf -d "$d$p/lib/libstackwatch.so.$ver" 2>/dev/null |
	sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
check "the library's soname is libstackwatch.so.0 (got '$soname')" \
	[ "$soname" = "libstackwatch.so.0" ]
unit=$d$p/lib/systemd/system/stackwatchd.service
check "the installed unit runs $p/bin/stackwatchd" \
	grep -qx "ExecStart=$p/bin/stackwatchd" "$unit"
check "the drop-in example names the installed agent" \
	grep -qx "Environment=LD_PRELOAD=$p/lib/stackwatch/libstackwatch-agent.so" \
	"$d$p/share/doc/stackwatch/example-agent.conf"

if command -v systemd-analyze >/dev/null 2>&1; then
	# verify wants ExecStart= to exist: point it into DESTDIR.
	sed "s|^ExecStart=$p/|ExecStart=$d$p/|" "$unit" >"$tmp/stackwatchd.service"
	systemd-analyze verify --man=no "$tmp/stackwatchd.service" \
		>"$tmp/verify.log" 2>&1
	vrc=$?
	if [ "$vrc" -eq 0 ] && [ ! -s "$tmp/verify.log" ]; then
		ok "systemd-analyze verify passes on the installed unit"
	else
		nok "systemd-analyze verify passes on the installed unit (status $vrc)"
		sed 's/^/# /' "$tmp/verify.log"
	fi
else
	ok "# SKIP systemd-analyze is not installed"
fi

if command -v man >/dev/null 2>&1; then
	check "man finds stackwatchd(8), stackwatch(1) and sw_dump_self(3)" \
		env MANPATH="$d$p/share/man" sh -c \
		'{ man -w stackwatchd && man -w 1 stackwatch &&
		man -w sw_dump_self; } >/dev/null 2>&1'
	out=$(MANPATH="$d$p/share/man" MANWIDTH=80 man 3 sw_dump_self 2>&1)
	case "$out" in
	*"int sw_dump_self(const struct sw_dump_opts"*)
		ok "man sw_dump_self shows libstackwatch(3)" ;;
	*) nok "man sw_dump_self shows libstackwatch(3)" ;;
	esac
else
	ok "# SKIP man is not installed"
fi

# The installed CLI finds the installed agent (../lib/stackwatch/).
# shellcheck disable=SC2016  # $LD_PRELOAD is for the inner shell
pre=$(env -u LD_PRELOAD STACKWATCH_DISABLE=1 "$d$p/bin/stackwatch" run -- \
	sh -c 'printf %s "$LD_PRELOAD"' 2>&1)
check "the installed stackwatch run preloads the installed agent ($pre)" \
	[ "$pre" = "$d$p/lib/stackwatch/libstackwatch-agent.so" ]

# 2. Another prefix: the pc file and the unit follow it; a program builds
# against the installed library with pkg-config and dumps itself.
d2=$tmp/dest2
p2=/opt/sw-test
sw_make DESTDIR="$d2" PREFIX="$p2" install
check "make install PREFIX=$p2 exits 0" [ "$rc" -eq 0 ]
check "the unit follows PREFIX" \
	grep -qx "ExecStart=$p2/bin/stackwatchd" \
	"$d2$p2/lib/systemd/system/stackwatchd.service"

cat >"$tmp/prog.c" <<'EOF'
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stackwatch.h>

/* Not inlined, so that it is a frame of its own. */
__attribute__((noinline)) static int dump_me(void)
{
	struct sw_dump *d;
	char *text;
	int rc, found;

	rc = sw_dump_self(NULL, &d);
	if (rc < 0) {
		fprintf(stderr, "sw_dump_self: %s\n", sw_strerror(rc));
		return 1;
	}
	rc = sw_dump_text(d, &text);
	sw_dump_free(d);
	if (rc < 0)
		return 1;
	fputs(text, stdout);
	found = strstr(text, "dump_me") && strstr(text, "main");
	free(text);
	return found ? 0 : 2;
}

int main(void)
{
	return dump_me();
}
EOF

if command -v pkg-config >/dev/null 2>&1; then
	export PKG_CONFIG_PATH="$d2$p2/lib/pkgconfig"
	# (pkgconf ends its output with a blank: normalized by the echo)
	# shellcheck disable=SC2046,SC2005
	flags=$(echo $(PKG_CONFIG_SYSROOT_DIR=$d2 pkg-config --cflags --libs \
		stackwatch 2>&1))
	check "pkg-config --cflags --libs stackwatch: $flags" \
		[ "$flags" = "-I$d2$p2/include -L$d2$p2/lib -lstackwatch" ]
	# shellcheck disable=SC2046,SC2005
	plain=$(echo $(pkg-config --cflags --libs stackwatch 2>&1))
	check "without a sysroot the flags name $p2: $plain" \
		[ "$plain" = "-I$p2/include -L$p2/lib -lstackwatch" ]
	check "pkg-config --modversion stackwatch is $ver" \
		[ "$(pkg-config --modversion stackwatch)" = "$ver" ]

	# shellcheck disable=SC2086  # $flags is a list of options
	if $CC -g -O0 $san_flags -o "$tmp/prog" "$tmp/prog.c" $flags \
		>"$tmp/cc.log" 2>&1; then
		ok "a program compiles and links against the installed library"
		LD_LIBRARY_PATH="$d2$p2/lib" "$tmp/prog" >"$tmp/prog.out" 2>&1
		prc=$?
		check "it runs sw_dump_self and finds its own frames (status $prc)" \
			[ "$prc" -eq 0 ]
		lib=$(LD_LIBRARY_PATH="$d2$p2/lib" ldd "$tmp/prog" 2>/dev/null |
			sed -n 's/.*libstackwatch.so.0 => \([^ ]*\).*/\1/p')
		check "it loads libstackwatch.so.0 from the install ($lib)" \
			[ "$lib" = "$d2$p2/lib/libstackwatch.so.0" ]
	else
		nok "a program compiles and links against the installed library"
		head -n 20 "$tmp/cc.log" | sed 's/^/# /'
	fi

	static=$(PKG_CONFIG_SYSROOT_DIR=$d2 pkg-config --static --libs stackwatch |
		sed "s|-lstackwatch|$d2$p2/lib/libstackwatch.a|")
	# shellcheck disable=SC2086
	if $CC -g -O0 $san_flags -I"$d2$p2/include" -o "$tmp/prog-static" \
		"$tmp/prog.c" $static >"$tmp/cc.log" 2>&1; then
		"$tmp/prog-static" >"$tmp/prog.out" 2>&1
		prc=$?
		check "linked with libstackwatch.a and Libs.private, it dumps itself (status $prc)" \
			[ "$prc" -eq 0 ]
	else
		nok "a program links with libstackwatch.a and Libs.private"
		head -n 20 "$tmp/cc.log" | sed 's/^/# /'
	fi
else
	ok "# SKIP pkg-config is not installed"
fi

# 3. Uninstall leaves nothing but empty directories.
sw_make DESTDIR="$d" uninstall
check "make uninstall exits 0" [ "$rc" -eq 0 ]
left=$(find "$d" ! -type d | sed "s|^$d||" | tr '\n' ' ')
check "make uninstall removes every file${left:+ (left: $left)}" [ -z "$left" ]
if [ ! -e "$d$p/lib/stackwatch" ] && [ ! -e "$d$p/share/doc/stackwatch" ]; then
	ok "make uninstall removes lib/stackwatch and share/doc/stackwatch"
else
	nok "make uninstall removes lib/stackwatch and share/doc/stackwatch"
fi
sw_make DESTDIR="$d2" PREFIX="$p2" uninstall
left=$(find "$d2" ! -type d | sed "s|^$d2||" | tr '\n' ' ')
check "make uninstall PREFIX=$p2 removes every file${left:+ (left: $left)}" \
	[ -z "$left" ]

[ "$failed" -eq 0 ]
