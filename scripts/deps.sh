#!/bin/sh
# deps.sh - makes sure the packages a make target needs are installed.
#
# Usage: deps.sh build|check|bench|lint|real
# On Debian/Ubuntu as root, installs what is missing with apt-get; as
# another user, prints the exact command to run and fails. Quiet when
# nothing is missing.
set -eu

build="gcc g++ make pkg-config libunwind-dev libdw-dev libelf-dev liblzma-dev \
libcjson-dev libmicrohttpd-dev libsystemd-dev libcurl4-openssl-dev \
protobuf-c-compiler libprotobuf-c-dev zlib1g-dev libbpf-dev bpftool clang \
libseccomp-dev"
# libbpf-dev, bpftool, clang (build): the kernel reads' BPF program
# (src/kread/), compiled for the BPF target and turned into a skeleton.
# libseccomp-dev: the seccomp filters of the daemon's processes
# (src/privsep/).
# clang: also the libFuzzer pass; prometheus: promtool checks /metrics;
# strace: proves the daemon sends no signal; curl: the README's examples;
# nginx-light: a real daemonizing server under the agent; python3: a real
# program of another user (tests/integration/users.sh).
# golang-go: `go tool pprof` decodes the pprof endpoints. gdb: gcore
# makes the core files whose lock owners tests/integration/locks.sh reads;
# musl-tools: a musl program whose locks it refuses. libcap2-bin: capsh
# starts a daemon without the capabilities for BPF (test_it_kread).
# valgrind: a program under the agent is clean under memcheck
# (tests/integration/valgrind.sh).
testtools="clang strace prometheus curl nginx-light python3 golang-go gdb \
musl-tools libcap2-bin valgrind"
# chromium, nodejs, npm: the browser test of the page (tests/web); a
# NodeSource nodejs carries its own npm and conflicts with Debian's.
web="chromium nodejs"
command -v npm >/dev/null 2>&1 || web="$web npm"
# systemd: systemd-analyze checks the unit; man-db, groff-base: the man
# pages render; util-linux: setsid for the make run test.
service="systemd man-db groff-base util-linux"
# redis-server, memcached, postgresql, a JDK: real programs without the
# agent, whose ptrace snapshots test_it_ptrace compares with eu-stack
# (nginx, node and python3 come with the sets above).
servers="redis-server memcached postgresql default-jdk-headless"
check="$build $testtools $web $service $servers binutils elfutils procps"
bench="$check gdb elfutils"
# make real: real servers under the agent (node and a JVM are used when
# installed); the servers come with $check.
real="$check"
lint="$build cppcheck clang-tidy clang-format"

case "${1:-build}" in
build) want=$build ;;
check) want=$check ;;
bench) want=$bench ;;
real) want=$real ;;
lint) want=$lint ;;
*) echo "deps.sh: unknown set '$1'" >&2; exit 2 ;;
esac

# The system user the daemon's unprivileged processes run as (its HTTP
# service, its parser workers): made here for the tests' daemons, by
# systemd/stackwatchd.sysusers on an installation. Without it they run as
# nobody, and the CLI trusts no TCP listener of nobody's.
if [ "$(id -u)" = 0 ] && ! getent passwd stackwatchd >/dev/null 2>&1; then
	echo "adding the system user stackwatchd" >&2
	useradd --system --user-group --no-create-home \
		--home-dir /nonexistent --shell /usr/sbin/nologin stackwatchd >&2 ||
		echo "deps.sh: could not add the user stackwatchd" >&2
fi

missing=""
for p in $want; do
	case " $missing " in *" $p "*) continue ;; esac
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null |
		grep -q 'install ok installed'; then
		missing="$missing $p"
	fi
done
[ -z "$missing" ] && exit 0

if ! command -v apt-get >/dev/null 2>&1; then
	echo "stackwatch needs:$missing (not a Debian/Ubuntu system: install them by hand)" >&2
	exit 1
fi
if [ "$(id -u)" != 0 ]; then
	echo "stackwatch needs:$missing" >&2
	echo "run: sudo apt-get install -y$missing" >&2
	exit 1
fi
echo "installing:$missing" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get install -y -q $missing >&2 ||
	{ apt-get update -q >&2 && apt-get install -y -q $missing >&2; }
