#!/bin/sh
# glibc_notice.sh - the lock-owner notice tells what is really missing.
# Lock owners are read from glibc's locks, whose release is told by the
# process's libc.so. A Go program built with cgo maps libc.so.6, though
# its threads sleep in the Go runtime and never in libc: glibc is there,
# so no notice. A program linked statically with glibc (gcc -static) has
# glibc but no libc.so: the notice must say so, not that there is none.
# Each program parks a thread in a futex wait (without one there is no
# notice to give) and is dumped by the CLI's own snapshot (--local).
#
# Usage: BUILD=build sh tests/integration/glibc_notice.sh (tests/run.sh
# sets BUILD). Needs cc with a static libc, go (with cgo), setsid and
# timeout; each part says "ok - # SKIP" without its tools.
set -u

# shellcheck source=tests/tap.sh
. "$(cd "$(dirname "$0")/../.." && pwd)/tests/tap.sh"

need "$BUILD/stackwatch"
for tool in cc setsid timeout; do
	if ! command -v "$tool" >/dev/null 2>&1; then
		echo "ok - # SKIP $tool is not installed"
		exit 0
	fi
done

tmp=$(mktemp -d /tmp/sw-glibc-XXXXXX) || exit 1
pg=""
cleanup() {
	[ -n "$pg" ] && kill -KILL "-$pg" 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

# start NAME PROGRAM - runs PROGRAM in a process group of its own, its
# stdin a FIFO held open, until it prints "ready"; sets pid and pg.
start() {
	mkfifo "$tmp/$1.in"
	setsid "$2" <>"$tmp/$1.in" >"$tmp/$1.out" 2>&1 &
	pid=$!
	pg=$pid
	i=0
	while [ $i -lt 300 ] && ! grep -q '^ready' "$tmp/$1.out" 2>/dev/null; do
		sleep 0.1
		i=$((i + 1))
	done
	grep -q '^ready' "$tmp/$1.out"
}

# stop - kills the program's group and checks nothing of it is left.
stop() {
	kill -KILL "-$pg" 2>/dev/null
	wait "$pid" 2>/dev/null
	if kill -0 "-$pg" 2>/dev/null; then
		nok "no process of the program's group is left"
	else
		ok "no process of the program's group is left"
	fi
	pg=""
}

# notice NAME - the dump's "lock_owners_unsupported" ("" when none) in
# $notice, the status of dump --local in $rc.
notice() {
	timeout 30 "$BUILD/stackwatch" dump --local "$pid" --format json \
		>"$tmp/$1.json" 2>"$tmp/$1.err" </dev/null
	rc=$?
	notice=$(sed -n 's/.*"lock_owners_unsupported":"\([^"]*\)".*/\1/p' \
		"$tmp/$1.json")
}

# A program linked statically with glibc: main holds a mutex, a thread
# waits for it in pthread_mutex_lock.
cat >"$tmp/static.c" <<'EOF'
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;

static void *waiter(void *arg)
{
	pthread_mutex_lock(&mu);
	return arg;
}

int main(void)
{
	pthread_t t;

	pthread_mutex_lock(&mu);
	pthread_create(&t, NULL, waiter, NULL);
	sleep(1); /* the waiter reaches its wait */
	printf("ready\n");
	fflush(stdout);
	for (;;)
		pause();
}
EOF
if ! cc -static -O0 -g -pthread -o "$tmp/static" "$tmp/static.c" \
	2>"$tmp/cc.err"; then
	echo "ok - # SKIP cc -static does not link (no static glibc)"
elif ! start static "$tmp/static"; then
	nok "the static program starts"
else
	notice static
	case $notice in
	*"glibc linked in statically"*)
		ok "static glibc: the notice says glibc is linked in statically: $notice" ;;
	*)
		nok "static glibc: the notice says glibc is linked in statically (status $rc, notice '$notice')"
		sed 's/^/# /' "$tmp/static.err" ;;
	esac
	stop
fi

# A Go program built with cgo: it maps libc.so.6; its threads sleep in
# the Go runtime's futex waits.
if ! command -v go >/dev/null 2>&1; then
	echo "ok - # SKIP go is not installed"
	[ "$failed" -eq 0 ]
	exit
fi
mkdir "$tmp/gocgo"
cat >"$tmp/gocgo/main.go" <<'EOF'
package main

// #include <stdlib.h>
import "C"

import (
	"fmt"
	"time"
)

func main() {
	C.free(C.malloc(16))
	fmt.Println("ready")
	for {
		time.Sleep(time.Hour)
	}
}
EOF
if ! (cd "$tmp/gocgo" && HOME=$tmp GOCACHE=$tmp/gocache GOPATH=$tmp/gopath \
	GO111MODULE=off GOFLAGS= CGO_ENABLED=1 \
	timeout 240 go build -o gocgo main.go) >"$tmp/go.err" 2>&1; then
	echo "ok - # SKIP go build with cgo fails here: $(head -1 "$tmp/go.err")"
elif ! start gocgo "$tmp/gocgo/gocgo"; then
	nok "the cgo program starts"
else
	grep -q 'libc\.so' "/proc/$pid/maps" &&
		ok "the cgo program maps libc.so.6" ||
		nok "the cgo program maps libc.so.6"
	# Without a thread in a futex wait there would be no notice to give
	# (202: futex on x86-64, as /proc/PID/task/TID/syscall has it).
	waits=$(cat /proc/"$pid"/task/*/syscall 2>/dev/null | grep -c '^202 ')
	[ "$waits" -gt 0 ] &&
		ok "the cgo program has $waits threads in futex waits" ||
		nok "the cgo program has threads in futex waits"
	notice gocgo
	if [ "$rc" -eq 0 ] && [ -z "$notice" ]; then
		ok "Go with cgo: glibc is found, no lock-owner notice"
	else
		nok "Go with cgo: glibc is found, no lock-owner notice (status $rc, notice '$notice')"
		sed 's/^/# /' "$tmp/gocgo.err"
	fi
	stop
fi

[ "$failed" -eq 0 ]
