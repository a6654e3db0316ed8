#!/bin/sh
# unit-check.sh - runs the installed stackwatchd.service, sandbox and all,
# under a real systemd, and checks that it works: systemd boots as PID 1 in
# private PID, mount, network, UTS and IPC namespaces, with only our units
# (the distribution's are hidden), "make install" bind-mounted on
# /usr/local. A demo workload runs under the agent as user nobody, from a
# directory only nobody may read, in a sandbox of its own, through the
# shipped drop-in example. A probe then checks: the unit is active with
# READY=1 and STATUS=, the demo registered and its frames are symbolized,
# a process without the agent is dumped by the snapshot helper through
# the unit's system call filter, root over TCP (curl on 127.0.0.1:9407) is
# known as root by the socket diagnostics and sees every process, WATCHDOG=1
# keeps a 2 s watchdog happy, a stopped (SIGSTOP) daemon is restarted by the
# watchdog, every HTTP endpoint answers, every process of the daemon has
# the protections it is promised in force (/api/v1/status "processes"),
# and "systemctl stop" ends it with status 0.
#
# Usage: sh scripts/unit-check.sh [BUILD]   (as root; after make)
#        sh scripts/unit-check.sh --can-run
# Prints "ok - ..." / "not ok - ..." lines; exit status 0 when all pass.
# It needs root, systemd, unshare(1) that may make namespaces, curl and a
# cgroup hierarchy it may write, and takes about 15-40 s. --can-run only
# tells whether this machine has those: exit 0, or 2 with the reason on
# stdout (make check runs this script through tests/integration/unit.sh,
# which skips where it cannot run). The namespaced systemd makes its
# cgroups in this host's hierarchies, under a cgroup of this run's own
# (sw-unit-check.PID), so that runs side by side do not meet; the last
# check is that it and every process in it are gone.
set -u

root=$(cd "$(dirname "$0")/.." && pwd)
systemd=/lib/systemd/systemd
cg=sw-unit-check.$$
cg_mounts=$(awk '$3 == "cgroup" || $3 == "cgroup2" { print $2 }' /proc/self/mounts)
# systemd's root cgroup is where it starts in the hierarchy that tracks
# its processes (v1's name=systemd, or the unified one).
own=$(awk '($3 == "cgroup" && $4 ~ /(^|,)name=systemd(,|$)/) ||
	$3 == "cgroup2" { print $2 }' /proc/self/mounts)

# cannot_run - prints why this machine cannot run the check, or nothing.
cannot_run() {
	if [ "$(id -u)" != 0 ]; then
		echo "needs root"
	elif [ ! -x "$systemd" ]; then
		echo "needs systemd ($systemd)"
	elif ! command -v unshare >/dev/null 2>&1 ||
		! command -v curl >/dev/null 2>&1; then
		echo "needs unshare and curl"
	elif ! unshare --pid --fork --mount --mount-proc --net --uts --ipc \
		true 2>/dev/null; then
		echo "unshare cannot make PID, mount and network namespaces here"
	elif [ -z "$own" ]; then
		echo "no cgroup hierarchy for systemd (name=systemd or cgroup2)"
	else
		for m in $own; do
			if ! mkdir "$m/$cg" 2>/dev/null; then
				echo "cannot make a cgroup in $m"
				return
			fi
			rmdir "$m/$cg"
		done
	fi
}

why=$(cannot_run)
if [ "${1:-}" = --can-run ]; then
	[ -z "$why" ] && exit 0
	echo "$why"
	exit 2
fi
if [ -n "$why" ]; then
	echo "unit-check.sh: $why" >&2
	exit 2
fi
BUILD=${1:-${BUILD:-$root/build}}
case "$BUILD" in /*) ;; *) BUILD=$root/$BUILD ;; esac
if [ ! -x "$BUILD/fixtures/demo" ]; then
	echo "unit-check.sh: $BUILD/fixtures/demo is missing: make test-bins" >&2
	exit 2
fi

t=$(mktemp -d /tmp/sw-unit-check.XXXXXX) || exit 1
chmod 755 "$t"
ns_pid=""

# teardown - kills systemd and so its whole PID namespace, then removes
# every cgroup of this run, deepest first; once their processes are gone
# (a killed process leaves its cgroup a moment later), each within 10 s.
# Returns 1 when something is left.
teardown() {
	if [ -n "$ns_pid" ]; then
		kill -KILL "$ns_pid" 2>/dev/null
		wait "$ns_pid" 2>/dev/null
		ns_pid=""
	fi
	left=""
	for m in $cg_mounts; do
		[ -d "$m/$cg" ] || continue
		while IFS= read -r d; do
			i=0
			while [ -d "$d" ] && ! rmdir "$d" 2>/dev/null && [ $i -lt 100 ]; do
				sleep 0.1
				i=$((i + 1))
			done
			[ -d "$d" ] && left="$left $d"
		done <<-EOF
			$(find "$m/$cg" -depth -type d 2>/dev/null)
		EOF
	done
	[ -z "$left" ]
}
cleanup() {
	teardown
	rm -rf "$t"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

unset MAKEFLAGS MFLAGS MAKELEVEL
make -C "$root" --no-print-directory BUILD="$BUILD" DESTDIR="$t/inst" \
	install >"$t/make.log" 2>&1 || { cat "$t/make.log" >&2; exit 1; }

# The demo, where only nobody may read it.
priv=$t/inst/usr/local/libexec/sw-private
mkdir -p "$priv" "$t/units" "$t/empty" "$t/log"
cp "$BUILD/fixtures/demo" "$priv/demo"
chown -R nobody "$priv"
chmod 700 "$priv" "$priv/demo"
chmod 777 "$t/log"

u=$t/units
for n in sysinit basic shutdown multi-user default network local-fs sockets \
	timers paths slices; do
	printf '[Unit]\nDescription=stub %s\n' "$n" >"$u/$n.target"
done
cp "$t/inst/usr/local/lib/systemd/system/stackwatchd.service" "$u/"
mkdir -p "$u/stackwatchd.service.d" "$u/demo.service.d"
cat >"$u/stackwatchd.service.d/check.conf" <<EOF
[Service]
StandardOutput=append:$t/log/daemon.log
StandardError=append:$t/log/daemon.log
WatchdogSec=2s
TimeoutStopSec=3s
EOF
cat >"$u/demo.service" <<EOF
[Unit]
Description=demo workload under the agent, as nobody, sandboxed
[Service]
ExecStart=/usr/local/libexec/sw-private/demo 5 3
User=nobody
# An agent built with AddressSanitizer (make asan) in a demo built without.
Environment=ASAN_OPTIONS=verify_asan_link_order=0
StandardError=append:$t/log/demo.log
PrivateTmp=yes
ProtectSystem=strict
ProtectHome=yes
NoNewPrivileges=yes
SystemCallFilter=@system-service mincore
SystemCallArchitectures=native
MemoryDenyWriteExecute=yes
RestrictAddressFamilies=AF_UNIX
EOF
cp "$t/inst/usr/local/share/doc/stackwatch/example-agent.conf" \
	"$u/demo.service.d/stackwatch.conf"
cat >"$u/sleeper.service" <<EOF
[Unit]
Description=a process without the agent, as nobody
[Service]
ExecStart=/bin/sleep 600
User=nobody
EOF
cat >"$u/probe.service" <<EOF
[Unit]
After=stackwatchd.service demo.service sleeper.service
Wants=stackwatchd.service demo.service sleeper.service
[Service]
Type=oneshot
StandardOutput=append:$t/log/probe.log
StandardError=append:$t/log/probe.log
ExecStart=/bin/sh $t/probe.sh
ExecStartPost=/bin/sh -c 'echo PROBE-DONE >>$t/log/probe.log'
EOF
printf '[Unit]\nWants=probe.service\n' >"$u/unit-check.target"

cat >"$t/probe.sh" <<'EOF'
show() { systemctl show stackwatchd -p "$1" --value; }
sleep 6
echo "state=$(show ActiveState)/$(show SubState)"
echo "status=$(show StatusText)"
echo "restarts=$(show NRestarts)"
demo=$(systemctl show demo -p MainPID --value)
echo "demo=$demo"
curl -s --max-time 5 --unix-socket /run/stackwatch/http.sock http://localhost/api/v1/targets >"$LOG/targets.json"
curl -s --max-time 5 --unix-socket /run/stackwatch/http.sock "http://localhost/api/v1/stacks?pid=$demo&format=text" \
	>"$LOG/demo.txt"
sleeper=$(systemctl show sleeper -p MainPID --value)
curl -s --max-time 5 --unix-socket /run/stackwatch/http.sock "http://localhost/api/v1/stacks?pid=$sleeper&format=text" \
	>"$LOG/sleeper.txt"
echo "sleeper-state=$(awk '/^State:/ { print $2 }' /proc/$sleeper/status)"
# Root over TCP, known by the socket diagnostics (AF_NETLINK): the same
# targets as on the unix socket, and root's own processes (the daemon).
curl -s --max-time 5 http://127.0.0.1:9407/api/v1/targets >"$LOG/targets-tcp.json"
echo "tcp-root-process=$(curl -s --max-time 5 -o /dev/null -w '%{http_code}' \
	"http://127.0.0.1:9407/api/v1/stacks?pid=$(show MainPID)&format=text")"
# nobody, over both sockets: its own processes, the kernel's rule asked
# by the snapshot helper under nobody's credentials (setresuid and capset
# through the unit's filter), and not root's.
asnobody() { setpriv --reuid=65534 --regid=65534 --clear-groups "$@"; }
asnobody curl -s --max-time 5 --unix-socket /run/stackwatch/http.sock \
	http://localhost/api/v1/targets >"$LOG/targets-nobody.json"
asnobody curl -s --max-time 5 http://127.0.0.1:9407/api/v1/targets \
	>"$LOG/targets-nobody-tcp.json"
code() { asnobody curl -s --max-time 5 -o /dev/null -w '%{http_code}' "$@"; }
echo "nobody-codes=$(code --unix-socket /run/stackwatch/http.sock \
	"http://localhost/api/v1/stacks?pid=$sleeper") $(code \
	--unix-socket /run/stackwatch/http.sock \
	"http://localhost/api/v1/stacks?pid=$(show MainPID)") $(code \
	"http://127.0.0.1:9407/api/v1/stacks?pid=$sleeper") $(code \
	"http://127.0.0.1:9407/api/v1/stacks?pid=$(show MainPID)")"
codes=""
for path in /stacks "/stacks?pid=$demo" "/stacks?format=folded" \
	/api/v1/stacks /api/v1/stuck "/api/v1/diff?pid=$demo&since=2" \
	/metrics /healthz; do
	codes="$codes $(curl -s --max-time 5 --unix-socket /run/stackwatch/http.sock -o /dev/null -w '%{http_code}' \
		"http://localhost$path")"
done
echo "codes=$codes"
# Every process of the daemon and its protections, as the kernel says.
curl -s --max-time 5 --unix-socket /run/stackwatch/http.sock \
	http://localhost/api/v1/status >"$LOG/status.json"
pid=$(show MainPID)
kill -STOP "$pid"
# Watchdog 2 s, then SIGABRT, SIGKILL 3 s later, RestartSec=2s: ~8 s.
i=0
while [ $i -lt 40 ]; do
	sleep 0.5
	[ "$(show NRestarts)" = 1 ] && [ "$(show ActiveState)" = active ] && break
	i=$((i + 1))
done
echo "after-stop=$(show ActiveState) restarts=$(show NRestarts) pid-changed=$([ "$(show MainPID)" != "$pid" ] && echo yes)"
systemctl stop stackwatchd
echo "stopped=$(show Result)/$(show ExecMainStatus)"
EOF
sed -i "1i LOG=$t/log" "$t/probe.sh"

cat >"$t/boot.sh" <<EOF
set -e
mount --make-rprivate /
mount -t tmpfs tmpfs /run
mount --bind $u /etc/systemd/system
mount --bind $t/empty /lib/systemd/system
mount --bind $t/inst/usr/local /usr/local
exec env container=other $systemd --system --unit=unit-check.target \
	--log-target=console --log-level=warning
EOF

# systemd runs in a cgroup of this run's own, which it takes as its root:
# init.scope, system.slice and the services' cgroups go under it. It uses
# a v1 controller (memory, pids, ...) only where that cgroup exists there
# too; not v1's cpu and cpuset: a new cgroup there has no real-time time
# (the snapshot helper's SCHED_FIFO would fail) and no CPUs.
awk '$3 == "cgroup" && $4 !~ /(^|,)cpu(set)?(,|$)/ { print $2 }' \
	/proc/self/mounts | while IFS= read -r m; do
	mkdir "$m/$cg" 2>/dev/null
done
set --
for m in $own; do
	set -- "$@" "$m/$cg"
done
sh -c 'for m; do
	mkdir -p "$m" && echo $$ >"$m/cgroup.procs" || exit 1
done
exec unshare --pid --fork --mount --mount-proc --net --uts --ipc \
	--kill-child=SIGKILL sh "'"$t"'/boot.sh"' sh "$@" >"$t/boot.log" 2>&1 &
ns_pid=$!
i=0
while [ $i -lt 60 ] && ! grep -q PROBE-DONE "$t/log/probe.log" 2>/dev/null &&
	kill -0 "$ns_pid" 2>/dev/null; do
	sleep 1
	i=$((i + 1))
done

failed=0
check() {
	if [ "$2" = yes ]; then echo "ok - $1"; else
		echo "not ok - $1"
		failed=$((failed + 1))
	fi
}
is() { grep -q "$1" "$2" 2>/dev/null && echo yes; }

p=$t/log/probe.log
if ! grep -q PROBE-DONE "$p" 2>/dev/null; then
	echo "not ok - systemd booted and ran the probe (see below)"
	tail -n 20 "$t/boot.log"
	exit 1
fi
check "the unit is active (Type=notify: READY=1 arrived)" "$(is '^state=active/running$' "$p")"
check "STATUS= shows the targets: $(sed -n 's/^status=//p' "$p")" \
	"$(is '^status=2 targets, serving http://127.0.0.1:9407$' "$p")"
check "the 2 s watchdog is fed: no restart in 6 s" "$(is '^restarts=0$' "$p")"
check "the demo (user nobody, sandboxed) registered" \
	"$(is '"comm":"demo","cmdline":"/usr/local/libexec/sw-private/demo 5 3","uid":65534' "$t/log/targets.json")"
check "its frames are symbolized from a file only nobody may read" \
	"$(is 'in queue_pop () at demo.c' "$t/log/demo.txt")"
check "a process without the agent (sleep, as nobody) is dumped by ptrace" \
	"$(is '(ptrace snapshot: each thread was paused' "$t/log/sleeper.txt")"
check "with its frames symbolized" \
	"$(is 'in clock_nanosleep ()' "$t/log/sleeper.txt")"
check "and left running, not stopped (state $(sed -n 's/^sleeper-state=//p' "$p"))" "$(is '^sleeper-state=[SRD]$' "$p")"
check "every endpoint answers 200 in the sandbox:$(sed -n 's/^codes=//p' "$p")" \
	"$(is '^codes= 200 200 200 200 200 200 200 200$' "$p")"
check "root over TCP sees the demo of user nobody in the targets" \
	"$(is '"comm":"demo","cmdline":"/usr/local/libexec/sw-private/demo 5 3","uid":65534' "$t/log/targets-tcp.json")"
check "root over TCP dumps a process of root's (the daemon): $(sed -n 's/^tcp-root-process=//p' "$p")" \
	"$(is '^tcp-root-process=200$' "$p")"
check "nobody over the unix socket lists its own demo" \
	"$(is '"comm":"demo","cmdline":"/usr/local/libexec/sw-private/demo 5 3","uid":65534' "$t/log/targets-nobody.json")"
check "and over TCP" \
	"$(is '"comm":"demo","cmdline":"/usr/local/libexec/sw-private/demo 5 3","uid":65534' "$t/log/targets-nobody-tcp.json")"
check "nobody does not list the daemon (root's)" \
	"$(grep -q '"self":true' "$t/log/targets-nobody.json" "$t/log/targets-nobody-tcp.json" || echo yes)"
check "nobody dumps its sleep (200) but not the daemon (404), over both:$(sed -n 's/^nobody-codes=//p' "$p")" \
	"$(is '^nobody-codes=200 404 200 404$' "$p")"
# Each process's promised protections are in force: a filter of its own
# (seccomp 2), no_new_privs, nothing listed as missing.
prot=$(python3 -c '
import json, sys
try:
    d = json.load(open(sys.argv[1]))
    ps = d["processes"]
except Exception as e:
    print("no status: %s" % e)
    sys.exit(0)
bad = []
for p in ps:
    if p["seccomp"] != 2 or not p["no_new_privs"] or p["missing"]:
        bad.append("%s %d: seccomp %s, no_new_privs %s, missing %s" % (
            p["role"], p["pid"], p["seccomp"], p["no_new_privs"],
            "; ".join("%s (%s)" % (m["protection"], m["why"]) for m in p["missing"])))
print("; ".join(bad) if bad else "ok %d processes" % len(ps))
' "$t/log/status.json" 2>&1)
check "every process's protections are in force under the unit: $prot" \
	"$(case "$prot" in "ok "*) echo yes ;; esac)"
check "a stopped daemon is restarted by the watchdog" \
	"$(is '^after-stop=active restarts=1 pid-changed=yes$' "$p")"
check "systemctl stop: STOPPING=1, exit status 0" "$(is '^stopped=success/0$' "$p")"
check "the daemon's log has no warning or error" \
	"$(grep -q '^<[0-4]>\|^stackwatchd:' "$t/log/daemon.log" || echo yes)"
if [ "$failed" -ne 0 ]; then
	sed 's/^/# /' "$p" "$t/log/daemon.log" "$t/log/targets.json" \
		"$t/log/status.json" \
		"$t/log/targets-tcp.json" "$t/log/sleeper.txt" "$t/log/demo.log"
fi
if teardown; then
	check "no process and no cgroup left (sw-unit-check.$$)" yes
else
	check "no process and no cgroup left:$left" no
fi
[ "$failed" -eq 0 ]
