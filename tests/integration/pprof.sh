#!/bin/sh
# pprof.sh - the pprof endpoints decoded by the real `go tool pprof` and by
# the npm package pprof-format: runs tests/web/pprof.test.mjs against the
# real daemon and fixtures in $BUILD.
#
# Usage: BUILD=build sh tests/integration/pprof.sh  (tests/run.sh sets BUILD)
# Installs tests/web/node_modules with "npm ci" when it is missing (as
# web.sh does). Prints one "ok - ..." or "not ok - ..." line per check;
# "ok - # SKIP" only when node or go is not installed at all.
set -u

root=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${BUILD:-$root/build}
web=$root/tests/web
export BUILD

for tool in node go; do
	if ! command -v $tool >/dev/null 2>&1; then
		echo "ok - # SKIP pprof test: $tool is not installed (Debian packages nodejs, golang-go)"
		exit 0
	fi
done
for f in stackwatchd libstackwatch-agent.so fixtures/workload; do
	if [ ! -e "$BUILD/$f" ]; then
		echo "not ok - $BUILD/$f is built"
		exit 1
	fi
done
# shellcheck source=tests/web/modules.sh
. "$web/modules.sh"
web_modules pprof-format || exit 1
exec node --test-reporter=tap "$web/pprof.test.mjs"
