#!/bin/sh
# unit.sh - the shipped systemd unit, sandbox and all, under a real
# systemd: scripts/unit-check.sh boots systemd as PID 1 in private
# namespaces with the installed stackwatchd.service and checks it end to
# end, root's view over TCP included (the unit must leave the daemon the
# socket diagnostics that name a TCP client's owner).
#
# Usage: BUILD=build sh tests/integration/unit.sh  (tests/run.sh sets BUILD)
# Prints one "ok - ..." or "not ok - ..." line per check; "ok - # SKIP"
# where the machine cannot run it (not root, no systemd, no namespaces or
# no writable cgroup hierarchy).
set -u

# shellcheck source=tests/tap.sh
. "$(dirname "$0")/../tap.sh"

if ! why=$(sh "$root/scripts/unit-check.sh" --can-run); then
	echo "ok - # SKIP the unit under systemd: $why"
	exit 0
fi
need "$BUILD/stackwatchd"
need "$BUILD/fixtures/demo"
# A make of our own (make install), not a job of the "make check" that
# runs us.
unset MAKEFLAGS MFLAGS MAKELEVEL MAKEOVERRIDES
exec sh "$root/scripts/unit-check.sh" "$BUILD"
