#!/bin/sh
# web.sh - the /stacks page in a real browser: runs tests/web/page.test.mjs
# (headless Debian chromium driven by playwright-core) against the real
# daemon and fixtures in $BUILD.
#
# Usage: BUILD=build sh tests/integration/web.sh  (tests/run.sh sets BUILD)
# Installs tests/web/node_modules with "npm ci" (from package-lock.json)
# when it is missing. Prints one "ok - ..." or "not ok - ..." line per
# check; "ok - # SKIP" only when node or chromium is not installed at all.
# Screenshots and the measured render time go to $BUILD/web/.
set -u

root=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${BUILD:-$root/build}
web=$root/tests/web
CHROMIUM=${CHROMIUM:-/usr/bin/chromium}
export BUILD CHROMIUM

if ! command -v node >/dev/null 2>&1; then
	echo "ok - # SKIP browser test: node is not installed (Debian package nodejs)"
	exit 0
fi
if [ ! -x "$CHROMIUM" ]; then
	echo "ok - # SKIP browser test: $CHROMIUM is not installed (Debian package chromium)"
	exit 0
fi
for f in stackwatchd libstackwatch-agent.so fixtures/workload; do
	if [ ! -e "$BUILD/$f" ]; then
		echo "not ok - $BUILD/$f is built"
		exit 1
	fi
done

# shellcheck source=tests/web/modules.sh
. "$web/modules.sh"
web_modules playwright-core pprof-format || exit 1

# Top-level tests print "ok N - NAME"; their details are indented.
exec node --test-reporter=tap "$web/page.test.mjs"
