# stackwatch - see README.md.
#
#   make            build everything into build/
#   make check      install test dependencies, build, run every test
#   make bench      print the benchmark table
#   make asan|ubsan|tsan   build into build/<variant>/ and run the unit tests
#   make lint       cppcheck + clang-tidy;  make format-check

BUILD     ?= build
PREFIX    ?= /usr/local
DESTDIR   ?=
SANITIZE  ?=
WERROR    ?=

CC        ?= gcc
CXX       ?= g++
PKG_CONFIG ?= pkg-config

# libunwind is loaded at run time (src/collector/signal/unwind.c): headers
# only here.
LIB_PKGS  := libdw liblzma libcjson libprotobuf-c zlib
PKGS      := libunwind $(LIB_PKGS) libmicrohttpd libsystemd libcurl
WARN      := -Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes \
             -Wpointer-arith -Wvla -Wwrite-strings -Wformat=2
OPT       ?= -O2 -g
CFLAGS    ?=
LDFLAGS   ?=

PKG_CFLAGS = $(shell $(PKG_CONFIG) --cflags $(PKGS) 2>/dev/null)
PKG_LIBS   = $(shell $(PKG_CONFIG) --libs $(LIB_PKGS) 2>/dev/null)

SW_CFLAGS := -std=gnu11 $(OPT) -fPIC -pthread $(WARN) \
             $(if $(WERROR),-Werror) \
             $(if $(SANITIZE),-fsanitize=$(SANITIZE) -fno-omit-frame-pointer) \
             -Iinclude -Isrc -I$(BUILD)/gen $(PKG_CFLAGS) $(CFLAGS)
SW_LDFLAGS := -pthread $(if $(SANITIZE),-fsanitize=$(SANITIZE)) $(LDFLAGS)
SW_LIBS    = $(PKG_LIBS) -ldl

# The tree says where code runs (see each folder's README):
#   collector/signal  in the target, reachable from the signal handler
#   collector         in the target, the dumper
#   model             the raw dump and the wire protocol, both sides
#   snapshot          ptrace snapshots of processes without the agent
#   symbols, render   in the daemon or a library caller
#   api               libstackwatch's public entry points
COLLECTOR_SRCS := $(sort $(wildcard src/collector/signal/*.c src/collector/*.c))
MODEL_SRCS := $(sort $(wildcard src/model/*.c))
LIB_SRCS  := $(COLLECTOR_SRCS) $(MODEL_SRCS) \
             $(sort $(wildcard src/snapshot/*.c src/symbols/*.c src/render/*.c src/api/*.c))
# The pprof schema (src/render/profile.proto) is compiled by protoc-c.
PROTO_C   := $(BUILD)/gen/render/profile.pb-c.c
PROTO_H   := $(PROTO_C:.c=.h)
LIB_OBJS  := $(LIB_SRCS:src/%.c=$(BUILD)/obj/%.o) $(PROTO_C:.c=.o)
SONAME    := libstackwatch.so.0

# The agent is the collector plus the model (no symbolizer: the daemon
# does that), so a target loads libunwind and nothing else of ours; the
# linker drops the model's helpers that only the daemon uses.
AGENT_OBJS := $(patsubst src/%.c,$(BUILD)/obj/%.o,$(sort $(wildcard src/agent/*.c)) \
              $(COLLECTOR_SRCS) $(MODEL_SRCS))

UNIT_SRCS := $(sort $(wildcard tests/unit/*.c))
UNIT_BINS := $(UNIT_SRCS:tests/unit/%.c=$(BUILD)/tests/%)
IT_SRCS   := $(sort $(wildcard tests/integration/*.c))
IT_BINS   := $(IT_SRCS:tests/integration/%.c=$(BUILD)/tests/%)
SEC_SRCS  := $(sort $(wildcard tests/security/*.c))
SEC_BINS  := $(SEC_SRCS:tests/security/%.c=$(BUILD)/tests/%)
FIX_C     := $(sort $(wildcard tests/fixtures/*.c))
FIX_CXX   := $(sort $(wildcard tests/fixtures/*.cc))
FIX_BINS  := $(FIX_C:tests/fixtures/%.c=$(BUILD)/fixtures/%) \
             $(FIX_CXX:tests/fixtures/%.cc=$(BUILD)/fixtures/%)
FUZZ_CC   ?= clang
FUZZ_SECONDS ?= 60
FUZZ_FLAGS := -std=gnu11 -g -O1 -fsanitize=fuzzer,address,undefined \
              -Iinclude -Isrc $(PKG_CFLAGS)
HAVE_FUZZ := $(shell command -v $(FUZZ_CC) >/dev/null 2>&1 && echo yes)
FUZZ_BINS := $(if $(HAVE_FUZZ),$(BUILD)/fuzz/fuzz_wire $(BUILD)/fuzz/fuzz_procfs \
             $(BUILD)/fuzz/fuzz_query $(BUILD)/fuzz/mkseed)
BENCH_SRCS := $(sort $(wildcard tests/bench/*.c))
BENCH_BINS := $(BENCH_SRCS:tests/bench/%.c=$(BUILD)/bench/%)

DAEMON_OBJS := $(patsubst src/%.c,$(BUILD)/obj/%.o,$(sort $(wildcard src/daemon/*.c)))
DAEMON_LIBS = $(shell $(PKG_CONFIG) --libs libmicrohttpd libsystemd 2>/dev/null)
CLI_OBJS  := $(patsubst src/%.c,$(BUILD)/obj/%.o,$(sort $(wildcard src/cli/*.c)))
CURL_LIBS  = $(shell $(PKG_CONFIG) --libs libcurl 2>/dev/null)

DEPS_STAMP := $(BUILD)/.deps-build

.PHONY: all lib agent daemon cli deps fuzz test-bins check test bench asan ubsan tsan lint format format-check \
        clean
.DEFAULT_GOAL := all

all: lib agent daemon cli

daemon: $(BUILD)/stackwatchd

cli: $(BUILD)/stackwatch

lib: $(BUILD)/libstackwatch.so $(BUILD)/libstackwatch.a

agent: $(BUILD)/libstackwatch-agent.so

deps: $(DEPS_STAMP)

$(DEPS_STAMP): scripts/deps.sh
	@mkdir -p $(@D)
	@sh scripts/deps.sh build
	@touch $@

$(BUILD)/obj/%.o: src/%.c | $(DEPS_STAMP)
	@mkdir -p $(@D)
	$(CC) $(SW_CFLAGS) -MMD -MP -c -o $@ $<

$(PROTO_C): src/render/profile.proto | $(DEPS_STAMP)
	@mkdir -p $(@D)
	protoc-c --proto_path=src --c_out=$(BUILD)/gen src/render/profile.proto

$(PROTO_H): $(PROTO_C)

$(PROTO_C:.c=.o): $(PROTO_C) $(PROTO_H)
	$(CC) $(SW_CFLAGS) -c -o $@ $<

# Whatever includes the generated header waits for it.
$(BUILD)/obj/render/pprof.o: $(PROTO_H)

$(BUILD)/libstackwatch.so: $(LIB_OBJS) src/api/libstackwatch.map
	$(CC) -shared -Wl,-soname,$(SONAME) -Wl,--no-undefined -Wl,-z,now \
	    -Wl,--version-script=src/api/libstackwatch.map \
	    -o $@ $(LIB_OBJS) $(SW_LDFLAGS) $(SW_LIBS)
	ln -sf libstackwatch.so $(BUILD)/$(SONAME)

$(BUILD)/libstackwatch-agent.so: $(AGENT_OBJS) src/agent/agent.map
	$(CC) -shared -Wl,--no-undefined -Wl,-z,now \
	    -Wl,--version-script=src/agent/agent.map \
	    -Wl,--gc-sections -o $@ $(AGENT_OBJS) $(SW_LDFLAGS) -ldl

# The page (web/) is compiled into the daemon: a build-time tool writes
# every file as C data (src/daemon/web.h).
WEB_FILES := $(sort $(wildcard web/*.html web/*.js web/*.css web/*.svg))
WEB_OBJ   := $(BUILD)/gen/web_assets.o

$(BUILD)/tools/embed: src/daemon/tools/embed.c
	@mkdir -p $(@D)
	$(CC) -std=gnu11 -O2 $(WARN) $(if $(WERROR),-Werror) -o $@ $<

$(BUILD)/gen/web_assets.c: $(BUILD)/tools/embed $(WEB_FILES)
	@mkdir -p $(@D)
	$(BUILD)/tools/embed $@ $(WEB_FILES)

$(WEB_OBJ): $(BUILD)/gen/web_assets.c src/daemon/web.h
	$(CC) $(SW_CFLAGS) -Isrc/daemon -c -o $@ $<

$(BUILD)/stackwatchd: $(DAEMON_OBJS) $(WEB_OBJ) $(BUILD)/libstackwatch.a
	$(CC) -o $@ $(DAEMON_OBJS) $(WEB_OBJ) $(BUILD)/libstackwatch.a \
	    $(SW_LDFLAGS) $(DAEMON_LIBS) $(SW_LIBS)

$(BUILD)/stackwatch: $(CLI_OBJS) $(BUILD)/libstackwatch.a
	$(CC) -o $@ $(CLI_OBJS) $(BUILD)/libstackwatch.a $(SW_LDFLAGS) \
	    $(CURL_LIBS) $(SW_LIBS)

$(BUILD)/libstackwatch.a: $(LIB_OBJS)
	@rm -f $@
	ar rcs $@ $(LIB_OBJS)

# Tests link the static library so each binary is self-contained; they see
# internal headers too (under src/) to check the structure under the API.
$(BUILD)/tests/%: tests/unit/%.c $(BUILD)/libstackwatch.a \
		$(wildcard tests/unit/*.h)
	@mkdir -p $(@D)
	$(CC) $(SW_CFLAGS) -O0 -Itests/unit -o $@ $< $(BUILD)/libstackwatch.a \
	    $(SW_LDFLAGS) $(SW_LIBS) -rdynamic

# Unit tests of the daemon's parts link its objects (all but main).
DAEMON_TEST_OBJS = $(filter-out $(BUILD)/obj/daemon/main.o,$(DAEMON_OBJS)) $(WEB_OBJ)
$(BUILD)/tests/test_notify $(BUILD)/tests/test_peer \
		$(BUILD)/tests/test_registry_skip: $(BUILD)/tests/%: \
		tests/unit/%.c $(DAEMON_TEST_OBJS) \
		$(BUILD)/libstackwatch.a $(wildcard tests/unit/*.h)
	@mkdir -p $(@D)
	$(CC) $(SW_CFLAGS) -O0 -Itests/unit -o $@ $< $(DAEMON_TEST_OBJS) \
	    $(BUILD)/libstackwatch.a $(SW_LDFLAGS) $(DAEMON_LIBS) $(SW_LIBS)

# Integration tests drive the real daemon over HTTP with the CLI's client.
$(BUILD)/tests/%: tests/integration/%.c $(BUILD)/libstackwatch.a \
		$(BUILD)/obj/cli/http.o tests/integration/itest.h
	@mkdir -p $(@D)
	$(CC) $(SW_CFLAGS) -O0 -Itests/unit -Itests/integration -o $@ $< \
	    $(BUILD)/obj/cli/http.o $(BUILD)/libstackwatch.a \
	    $(SW_LDFLAGS) $(CURL_LIBS) $(SW_LIBS)

# The security tests run the real daemon as root against requesters and
# hostile agents running as nobody (tests/security/).
$(BUILD)/tests/%: tests/security/%.c $(BUILD)/libstackwatch.a \
		$(BUILD)/obj/cli/http.o tests/integration/itest.h \
		tests/security/sectest.h
	@mkdir -p $(@D)
	$(CC) $(SW_CFLAGS) -O0 -Itests/unit -Itests/integration -Itests/security \
	    -o $@ $< $(BUILD)/obj/cli/http.o $(BUILD)/libstackwatch.a \
	    $(SW_LDFLAGS) $(CURL_LIBS) $(SW_LIBS)

# Fixtures are built without optimization so their frames and lines are
# deterministic; -rdynamic exports sw_loader_depth so that a preloaded agent
# shares the loader guard of the statically linked library.
$(BUILD)/fixtures/%: tests/fixtures/%.c $(BUILD)/libstackwatch.a
	@mkdir -p $(@D)
	$(CC) $(SW_CFLAGS) -O0 -fno-inline -rdynamic -o $@ $< \
	    $(BUILD)/libstackwatch.a $(SW_LDFLAGS) $(SW_LIBS)

# The agent's fixtures are plain programs: nothing of ours linked in, the
# agent preloaded by the tests, as in real use.
$(BUILD)/fixtures/agent_target $(BUILD)/fixtures/demo \
		$(BUILD)/fixtures/hostile_http $(BUILD)/fixtures/sandbox \
		$(BUILD)/fixtures/plain_target $(BUILD)/fixtures/lock_target: \
		$(BUILD)/fixtures/%: tests/fixtures/%.c tests/fixtures/agent_idle.h \
		| $(DEPS_STAMP)
	@mkdir -p $(@D)
	$(CC) -std=gnu11 -O0 -g -fno-inline -pthread $(WARN) \
	    $(if $(WERROR),-Werror) $(if $(SANITIZE),-fsanitize=$(SANITIZE)) \
	    -o $@ $<

# A shared object that lies about its build-id (see the file); the tests
# patch the pattern in a copy.
$(BUILD)/fixtures/stub.so: tests/fixtures/stub.so.c
	@mkdir -p $(@D)
	$(CC) -shared -fPIC -O0 -nostdlib \
	    -Wl,--build-id=0x5357535455425354554253545542535455425354 \
	    -o $@ $<

# A program that links the shared library (and dlopens a copy of it):
# the agent preloaded makes three collectors in one process.
$(BUILD)/fixtures/two_collectors: tests/fixtures/two_collectors.c \
		$(BUILD)/libstackwatch.so
	@mkdir -p $(@D)
	$(CC) -std=gnu11 -O0 -g -pthread $(WARN) $(if $(WERROR),-Werror) \
	    $(if $(SANITIZE),-fsanitize=$(SANITIZE)) -Iinclude -o $@ $< \
	    -L$(BUILD) -lstackwatch -Wl,-rpath,$(abspath $(BUILD)) -ldl

# A plain C++ program too (std::mutex): nothing of ours linked in.
$(BUILD)/fixtures/lock_cxx: tests/fixtures/lock_cxx.cc | $(DEPS_STAMP)
	@mkdir -p $(@D)
	$(CXX) -std=gnu++17 -O0 -g -pthread -Wall -Wextra -Wshadow \
	    $(if $(WERROR),-Werror) $(if $(SANITIZE),-fsanitize=$(SANITIZE)) \
	    -o $@ $<

$(BUILD)/fixtures/%: tests/fixtures/%.cc $(BUILD)/libstackwatch.a \
		tests/unit/tap.h
	@mkdir -p $(@D)
	$(CXX) -std=gnu++17 -O0 -g -fno-inline -pthread -Wall -Wextra -Wshadow \
	    $(if $(WERROR),-Werror) -Iinclude -Isrc \
	    $(PKG_CFLAGS) $(if $(SANITIZE),-fsanitize=$(SANITIZE)) \
	    -rdynamic -o $@ $< $(BUILD)/libstackwatch.a $(SW_LDFLAGS) $(SW_LIBS)

$(BUILD)/bench/%: tests/bench/%.c tests/bench/shapes.h $(BUILD)/libstackwatch.a
	@mkdir -p $(@D)
	$(CC) $(SW_CFLAGS) -o $@ $< $(BUILD)/libstackwatch.a \
	    $(SW_LDFLAGS) $(SW_LIBS)

# libunwind's remote API against ours: it links libunwind-ptrace, and
# keeps the collector's sigprocmask interposers (collector/signal/
# sigmask.c) from libunwind, whose lock masking would time them instead.
$(BUILD)/bench/bench_unwinders: tests/bench/bench_unwinders.c \
		$(BUILD)/libstackwatch.a
	@mkdir -p $(@D)
	$(CC) $(SW_CFLAGS) -o $@ $< $(BUILD)/libstackwatch.a \
	    $(SW_LDFLAGS) $(SW_LIBS) -Wl,--exclude-libs,libstackwatch.a \
	    $(shell $(PKG_CONFIG) --libs libunwind-ptrace libunwind-generic)

# The daemon benchmark's target is a plain program: nothing of ours is
# linked in, the agent is preloaded (tests/bench/daemon.sh).
$(BUILD)/bench/bench_target: tests/bench/bench_target.c tests/bench/shapes.h
	@mkdir -p $(@D)
	$(CC) -std=gnu11 $(OPT) -pthread $(WARN) $(if $(WERROR),-Werror) -o $@ $<

# The test of the daemon's pid namespace translation includes its source.
$(BUILD)/tests/test_nspid: src/daemon/nspid.c src/daemon/nspid.h

test-bins: all $(UNIT_BINS) $(IT_BINS) $(SEC_BINS) $(FIX_BINS) $(FUZZ_BINS)

# libFuzzer targets: the decoders of everything that comes from outside.
$(BUILD)/fuzz/fuzz_wire: tests/fuzz/fuzz_wire.c src/model/wire.c src/model/dump.c \
		src/model/strerror.c | $(DEPS_STAMP)
	@mkdir -p $(@D)
	$(FUZZ_CC) $(FUZZ_FLAGS) -o $@ $^

$(BUILD)/fuzz/fuzz_procfs: tests/fuzz/fuzz_procfs.c src/model/procfs.c \
		src/daemon/modfile.c src/symbols/modopen.c src/daemon/nspid.c \
		src/model/dump.c src/model/strerror.c | $(DEPS_STAMP)
	@mkdir -p $(@D)
	$(FUZZ_CC) $(FUZZ_FLAGS) -o $@ $^

$(BUILD)/fuzz/fuzz_query: tests/fuzz/fuzz_query.c src/daemon/query.c \
		src/daemon/query.h | $(DEPS_STAMP)
	@mkdir -p $(@D)
	$(FUZZ_CC) $(FUZZ_FLAGS) -o $@ $(filter %.c,$^)

$(BUILD)/fuzz/mkseed: tests/fuzz/mkseed.c $(BUILD)/libstackwatch.a
	@mkdir -p $(@D)
	$(CC) $(SW_CFLAGS) -o $@ $< $(BUILD)/libstackwatch.a $(SW_LDFLAGS) \
	    $(SW_LIBS)

fuzz: $(FUZZ_BINS)
	@sh tests/fuzz/run.sh $(BUILD)/fuzz $(FUZZ_SECONDS)


check:
	@sh scripts/deps.sh check
	@$(MAKE) --no-print-directory test-bins
	@BUILD=$(BUILD) sh tests/run.sh $(BUILD)

test: check

bench:
	@sh scripts/deps.sh bench
	@$(MAKE) --no-print-directory OPT="-O2 -g" all $(BENCH_BINS) $(FIX_BINS)
	@BUILD=$(BUILD) sh tests/bench/run.sh $(BUILD)

asan:
	@$(MAKE) --no-print-directory BUILD=build/asan OPT="-O1 -g" \
	    SANITIZE=address,undefined check
ubsan:
	@$(MAKE) --no-print-directory BUILD=build/ubsan OPT="-O1 -g" \
	    SANITIZE=undefined check
tsan:
	@$(MAKE) --no-print-directory BUILD=build/tsan OPT="-O1 -g" \
	    SANITIZE=thread check

ALL_C := $(LIB_SRCS) $(UNIT_SRCS) $(IT_SRCS) $(SEC_SRCS) $(FIX_C) $(FIX_CXX) \
         $(BENCH_SRCS) $(wildcard tests/fuzz/*.c) \
         $(wildcard src/agent/*.c src/daemon/*.c src/cli/*.c)
ALL_H := $(wildcard include/*.h src/*/*.h src/*/*/*.h tests/unit/*.h \
         tests/integration/*.h tests/security/*.h)

lint: $(PROTO_H)
	@sh scripts/deps.sh lint
	cppcheck --quiet --error-exitcode=1 --inline-suppr --std=c11 \
	    --enable=warning,performance,portability \
	    --suppress=missingIncludeSystem -Iinclude -Isrc -I$(BUILD)/gen src
	clang-tidy --quiet $(LIB_SRCS) $(wildcard src/agent/*.c src/daemon/*.c \
	    src/cli/*.c) -- -std=gnu11 -Iinclude -Isrc -I$(BUILD)/gen $(PKG_CFLAGS)

format:
	clang-format -i $(ALL_C) $(ALL_H)

format-check:
	clang-format --dry-run --Werror $(ALL_C) $(ALL_H)

clean:
	rm -rf build

-include $(sort $(LIB_OBJS:.o=.d) $(AGENT_OBJS:.o=.d) $(DAEMON_OBJS:.o=.d) $(CLI_OBJS:.o=.d))

# ---------------------------------------------------------------------------
# make install / uninstall / run / man-check
#
#   make install [PREFIX=/usr/local] [DESTDIR=]   binaries, libraries, the
#       agent, the header, stackwatch.pc, man pages, the systemd unit
#   make uninstall                                 removes exactly those
#   make run      the daemon and a demo workload, until Ctrl-C
#                 (STACKWATCH_LISTEN=127.0.0.1:0 for a free port)
#
# The CLI finds the agent at ../lib/stackwatch/ from its own directory, so
# BINDIR and AGENTDIR keep that relation unless both are moved together.

BINDIR         ?= $(PREFIX)/bin
LIBDIR         ?= $(PREFIX)/lib
AGENTDIR       ?= $(PREFIX)/lib/stackwatch
INCLUDEDIR     ?= $(PREFIX)/include
PKGCONFIGDIR   ?= $(LIBDIR)/pkgconfig
MANDIR         ?= $(PREFIX)/share/man
DOCDIR         ?= $(PREFIX)/share/doc/stackwatch
SYSTEMDUNITDIR ?= $(PREFIX)/lib/systemd/system
INSTALL        ?= install

SW_VERSION_STR := $(shell sed -n 's/^\#define SW_VERSION "\(.*\)"$$/\1/p' \
                    include/stackwatch.h)
LIB_REAL       := libstackwatch.so.$(SW_VERSION_STR)
MAN_PAGES      := docs/man/stackwatch.1 docs/man/stackwatchd.8 \
                  docs/man/libstackwatch.3
# Other names of libstackwatch(3), installed as ".so" links to it.
MAN3_LINKS     := sw_dump_self sw_dump_opts_init sw_dump_json sw_dump_text \
                  sw_dump_folded sw_dump_free sw_strerror sw_signal

.PHONY: install uninstall run man-check

# stackwatch.pc and the unit are written at install time, so that they
# name the PREFIX and BINDIR of this install.
define SW_PC
prefix=$(PREFIX)
libdir=$(LIBDIR)
includedir=$(INCLUDEDIR)

Name: stackwatch
Description: the stack of every thread of the calling process, without stopping it
Version: $(SW_VERSION_STR)
Cflags: -I$${includedir}
Libs: -L$${libdir} -lstackwatch
Libs.private: -ldw -lelf -llzma -lcjson -ldl -pthread
endef
export SW_PC

install: all
	$(INSTALL) -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(LIBDIR) \
	    $(DESTDIR)$(AGENTDIR) $(DESTDIR)$(INCLUDEDIR) \
	    $(DESTDIR)$(PKGCONFIGDIR) $(DESTDIR)$(MANDIR)/man1 \
	    $(DESTDIR)$(MANDIR)/man3 $(DESTDIR)$(MANDIR)/man8 \
	    $(DESTDIR)$(SYSTEMDUNITDIR) $(DESTDIR)$(DOCDIR)
	$(INSTALL) -m 755 $(BUILD)/stackwatchd $(BUILD)/stackwatch \
	    $(DESTDIR)$(BINDIR)/
	$(INSTALL) -m 755 $(BUILD)/libstackwatch.so $(DESTDIR)$(LIBDIR)/$(LIB_REAL)
	ln -sf $(LIB_REAL) $(DESTDIR)$(LIBDIR)/$(SONAME)
	ln -sf $(SONAME) $(DESTDIR)$(LIBDIR)/libstackwatch.so
	$(INSTALL) -m 644 $(BUILD)/libstackwatch.a $(DESTDIR)$(LIBDIR)/
	$(INSTALL) -m 755 $(BUILD)/libstackwatch-agent.so $(DESTDIR)$(AGENTDIR)/
	$(INSTALL) -m 644 include/stackwatch.h $(DESTDIR)$(INCLUDEDIR)/
	printf '%s\n' "$$SW_PC" >$(DESTDIR)$(PKGCONFIGDIR)/stackwatch.pc
	$(INSTALL) -m 644 docs/man/stackwatch.1 $(DESTDIR)$(MANDIR)/man1/
	$(INSTALL) -m 644 docs/man/libstackwatch.3 $(DESTDIR)$(MANDIR)/man3/
	$(INSTALL) -m 644 docs/man/stackwatchd.8 $(DESTDIR)$(MANDIR)/man8/
	for n in $(MAN3_LINKS); do \
	    echo '.so man3/libstackwatch.3' >$(DESTDIR)$(MANDIR)/man3/$$n.3 || exit 1; \
	done
	sed 's|^ExecStart=/usr/local/bin/stackwatchd|ExecStart=$(BINDIR)/stackwatchd|' \
	    systemd/stackwatchd.service \
	    >$(DESTDIR)$(SYSTEMDUNITDIR)/stackwatchd.service
	sed 's|/usr/local/lib/stackwatch/|$(AGENTDIR)/|' \
	    systemd/example-agent.conf >$(DESTDIR)$(DOCDIR)/example-agent.conf
	$(INSTALL) -m 644 systemd/stackwatchd.conf.example $(DESTDIR)$(DOCDIR)/
	@if [ -z "$(DESTDIR)" ] && [ "$$(id -u)" = 0 ]; then \
	    ldconfig 2>/dev/null || true; \
	    echo "installed; now: systemctl daemon-reload && systemctl enable --now stackwatchd"; \
	fi

uninstall:
	rm -f $(DESTDIR)$(BINDIR)/stackwatchd $(DESTDIR)$(BINDIR)/stackwatch \
	    $(DESTDIR)$(LIBDIR)/$(LIB_REAL) $(DESTDIR)$(LIBDIR)/$(SONAME) \
	    $(DESTDIR)$(LIBDIR)/libstackwatch.so \
	    $(DESTDIR)$(LIBDIR)/libstackwatch.a \
	    $(DESTDIR)$(AGENTDIR)/libstackwatch-agent.so \
	    $(DESTDIR)$(INCLUDEDIR)/stackwatch.h \
	    $(DESTDIR)$(PKGCONFIGDIR)/stackwatch.pc \
	    $(DESTDIR)$(MANDIR)/man1/stackwatch.1 \
	    $(DESTDIR)$(MANDIR)/man3/libstackwatch.3 \
	    $(MAN3_LINKS:%=$(DESTDIR)$(MANDIR)/man3/%.3) \
	    $(DESTDIR)$(MANDIR)/man8/stackwatchd.8 \
	    $(DESTDIR)$(SYSTEMDUNITDIR)/stackwatchd.service \
	    $(DESTDIR)$(DOCDIR)/example-agent.conf \
	    $(DESTDIR)$(DOCDIR)/stackwatchd.conf.example
	rmdir $(DESTDIR)$(AGENTDIR) $(DESTDIR)$(DOCDIR) 2>/dev/null || true
	@if [ -z "$(DESTDIR)" ] && [ "$$(id -u)" = 0 ]; then \
	    ldconfig 2>/dev/null || true; \
	fi

# make run: dependencies, build, then the daemon and the demo in the
# foreground (scripts/run.sh) until Ctrl-C.
run:
	@sh scripts/deps.sh build
	@$(MAKE) --no-print-directory all $(BUILD)/fixtures/demo
	@BUILD=$(BUILD) sh scripts/run.sh

# The man pages render without a warning.
man-check:
	@for m in $(MAN_PAGES); do \
	    out=$$(LC_ALL=C.UTF-8 MANWIDTH=80 man -l "$$m" 2>&1 >/dev/null; \
	           groff -ww -z -man "$$m" 2>&1); \
	    if [ -n "$$out" ]; then echo "$$m: $$out"; exit 1; fi; \
	done; echo "man pages: no warnings"

# ---------------------------------------------------------------------------
# make real [REAL_DUMPS=200]: real servers (redis-server, memcached, nginx,
# PostgreSQL, node, a JVM, python3, each when installed) under the agent,
# dumped back to back through the daemon, then asked to do their own work
# (tests/real/run.sh). As root.

REAL_DUMPS ?= 200

.PHONY: real
real:
	@sh scripts/deps.sh real
	@$(MAKE) --no-print-directory all
	@BUILD=$(abspath $(BUILD)) bash tests/real/run.sh $(REAL_DUMPS)

# ---------------------------------------------------------------------------
# make soak [SOAK_SECONDS=600]: the daemon built with ASan + UBSan
# (build/asan, as make asan builds it) samples 10 targets of 100 threads
# each at 10 Hz, printing its RSS every 10 s; tests/soak/run.sh says what
# fails it.

SOAK_SECONDS ?= 600

.PHONY: soak
soak:
	@sh scripts/deps.sh check
	@$(MAKE) --no-print-directory BUILD=build/asan OPT="-O1 -g" \
	    SANITIZE=address,undefined all build/asan/fixtures/agent_target
	@SOAK_SECONDS=$(SOAK_SECONDS) sh tests/soak/run.sh build/asan

# make tsan-sched: the scheduler and coalescing test (test_it_sched)
# against a daemon built with ThreadSanitizer (build/tsan); the programs
# it watches come from the plain build, since TSan defers signals in the
# programs it instruments. Any TSan report fails it.
.PHONY: tsan-sched
tsan-sched:
	@sh scripts/deps.sh check
	@$(MAKE) --no-print-directory all $(BUILD)/fixtures/agent_target \
	    $(BUILD)/fixtures/workload
	@$(MAKE) --no-print-directory BUILD=build/tsan OPT="-O1 -g" \
	    SANITIZE=thread all build/tsan/tests/test_it_sched
	@SW_TESTS=test_it_sched SW_TARGET_BUILD=$(abspath $(BUILD)) \
	    sh tests/run.sh build/tsan
