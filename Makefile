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

# libunwind is loaded at run time (src/lib/unwind.c): headers only here.
LIB_PKGS  := libdw libcjson
PKGS      := libunwind $(LIB_PKGS) libmicrohttpd libsystemd
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
             -Iinclude -Isrc/lib $(PKG_CFLAGS) $(CFLAGS)
SW_LDFLAGS := -pthread $(if $(SANITIZE),-fsanitize=$(SANITIZE)) $(LDFLAGS)
SW_LIBS    = $(PKG_LIBS) -ldl

LIB_SRCS  := $(sort $(wildcard src/lib/*.c))
LIB_OBJS  := $(LIB_SRCS:src/%.c=$(BUILD)/obj/%.o)
SONAME    := libstackwatch.so.0

# The agent carries only the collector (no symbolizer: the daemon does that),
# so a target loads libunwind and nothing else of ours.
AGENT_LIB := collect dump futex handler loader_guard modules procfs wire \
             paths strerror unwind sigmask
AGENT_OBJS := $(patsubst src/%.c,$(BUILD)/obj/%.o,$(sort $(wildcard src/agent/*.c))) \
              $(AGENT_LIB:%=$(BUILD)/obj/lib/%.o)

UNIT_SRCS := $(sort $(wildcard tests/unit/*.c))
UNIT_BINS := $(UNIT_SRCS:tests/unit/%.c=$(BUILD)/tests/%)
IT_SRCS   := $(sort $(wildcard tests/integration/*.c))
IT_BINS   := $(IT_SRCS:tests/integration/%.c=$(BUILD)/tests/%)
FIX_C     := $(sort $(wildcard tests/fixtures/*.c))
FIX_CXX   := $(sort $(wildcard tests/fixtures/*.cc))
FIX_BINS  := $(FIX_C:tests/fixtures/%.c=$(BUILD)/fixtures/%) \
             $(FIX_CXX:tests/fixtures/%.cc=$(BUILD)/fixtures/%)
FUZZ_CC   ?= clang
FUZZ_SECONDS ?= 60
FUZZ_FLAGS := -std=gnu11 -g -O1 -fsanitize=fuzzer,address,undefined \
              -Iinclude -Isrc/lib $(PKG_CFLAGS)
HAVE_FUZZ := $(shell command -v $(FUZZ_CC) >/dev/null 2>&1 && echo yes)
FUZZ_BINS := $(if $(HAVE_FUZZ),$(BUILD)/fuzz/fuzz_wire $(BUILD)/fuzz/fuzz_procfs \
             $(BUILD)/fuzz/mkseed)
BENCH_SRCS := $(sort $(wildcard tests/bench/*.c))
BENCH_BINS := $(BENCH_SRCS:tests/bench/%.c=$(BUILD)/bench/%)

DAEMON_OBJS := $(patsubst src/%.c,$(BUILD)/obj/%.o,$(sort $(wildcard src/daemon/*.c)))
DAEMON_LIBS = $(shell $(PKG_CONFIG) --libs libmicrohttpd libsystemd 2>/dev/null)
CLI_OBJS  := $(patsubst src/%.c,$(BUILD)/obj/%.o,$(sort $(wildcard src/cli/*.c)))

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

$(BUILD)/libstackwatch.so: $(LIB_OBJS) src/lib/libstackwatch.map
	$(CC) -shared -Wl,-soname,$(SONAME) -Wl,--no-undefined \
	    -Wl,--version-script=src/lib/libstackwatch.map \
	    -o $@ $(LIB_OBJS) $(SW_LDFLAGS) $(SW_LIBS)
	ln -sf libstackwatch.so $(BUILD)/$(SONAME)

$(BUILD)/libstackwatch-agent.so: $(AGENT_OBJS) src/agent/agent.map
	$(CC) -shared -Wl,--no-undefined -Wl,--version-script=src/agent/agent.map \
	    -o $@ $(AGENT_OBJS) $(SW_LDFLAGS) -ldl

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
	    $(SW_LIBS)

$(BUILD)/libstackwatch.a: $(LIB_OBJS)
	@rm -f $@
	ar rcs $@ $(LIB_OBJS)

# Tests link the static library so each binary is self-contained; they see
# internal headers too (src/lib) to check the structure under the API.
$(BUILD)/tests/%: tests/unit/%.c $(BUILD)/libstackwatch.a \
		$(wildcard tests/unit/*.h)
	@mkdir -p $(@D)
	$(CC) $(SW_CFLAGS) -O0 -Itests/unit -o $@ $< $(BUILD)/libstackwatch.a \
	    $(SW_LDFLAGS) $(SW_LIBS) -rdynamic

# Integration tests drive the real daemon over HTTP with the CLI's client.
$(BUILD)/tests/%: tests/integration/%.c $(BUILD)/libstackwatch.a \
		$(BUILD)/obj/cli/http_client.o tests/integration/itest.h
	@mkdir -p $(@D)
	$(CC) $(SW_CFLAGS) -O0 -Itests/unit -Itests/integration -o $@ $< \
	    $(BUILD)/obj/cli/http_client.o $(BUILD)/libstackwatch.a \
	    $(SW_LDFLAGS) $(SW_LIBS)

# Fixtures are built without optimization so their frames and lines are
# deterministic; -rdynamic exports sw_loader_depth so that a preloaded agent
# shares the loader guard of the statically linked library.
$(BUILD)/fixtures/%: tests/fixtures/%.c $(BUILD)/libstackwatch.a
	@mkdir -p $(@D)
	$(CC) $(SW_CFLAGS) -O0 -fno-inline -rdynamic -o $@ $< \
	    $(BUILD)/libstackwatch.a $(SW_LDFLAGS) $(SW_LIBS)

# The agent's fixtures are plain programs: nothing of ours linked in, the
# agent preloaded by the tests, as in real use.
$(BUILD)/fixtures/agent_target: tests/fixtures/agent_target.c | $(DEPS_STAMP)
	@mkdir -p $(@D)
	$(CC) -std=gnu11 -O0 -g -fno-inline -pthread $(WARN) \
	    $(if $(WERROR),-Werror) $(if $(SANITIZE),-fsanitize=$(SANITIZE)) \
	    -o $@ $<

$(BUILD)/fixtures/%: tests/fixtures/%.cc $(BUILD)/libstackwatch.a \
		tests/unit/tap.h
	@mkdir -p $(@D)
	$(CXX) -std=gnu++17 -O0 -g -fno-inline -pthread -Wall -Wextra -Wshadow \
	    $(if $(WERROR),-Werror) -Iinclude -Isrc/lib \
	    $(PKG_CFLAGS) $(if $(SANITIZE),-fsanitize=$(SANITIZE)) \
	    -rdynamic -o $@ $< $(BUILD)/libstackwatch.a $(SW_LDFLAGS) $(SW_LIBS)

$(BUILD)/bench/%: tests/bench/%.c $(BUILD)/libstackwatch.a
	@mkdir -p $(@D)
	$(CC) $(SW_CFLAGS) -o $@ $< $(BUILD)/libstackwatch.a \
	    $(SW_LDFLAGS) $(SW_LIBS)

# The daemon benchmark's target is a plain program: nothing of ours is
# linked in, the agent is preloaded (tests/bench/daemon.sh).
$(BUILD)/bench/bench_target: tests/bench/bench_target.c
	@mkdir -p $(@D)
	$(CC) -std=gnu11 $(OPT) -pthread $(WARN) -o $@ $< -pthread

# The client's test includes its source.
$(BUILD)/tests/test_cli_http: src/cli/http_client.c src/cli/http_client.h

test-bins: all $(UNIT_BINS) $(IT_BINS) $(FIX_BINS) $(FUZZ_BINS)

# libFuzzer targets: the decoders of everything that comes from outside.
$(BUILD)/fuzz/fuzz_wire: tests/fuzz/fuzz_wire.c src/lib/wire.c src/lib/dump.c \
		src/lib/strerror.c | $(DEPS_STAMP)
	@mkdir -p $(@D)
	$(FUZZ_CC) $(FUZZ_FLAGS) -o $@ $^

$(BUILD)/fuzz/fuzz_procfs: tests/fuzz/fuzz_procfs.c src/lib/procfs.c \
		src/daemon/modfile.c src/lib/dump.c src/lib/strerror.c | $(DEPS_STAMP)
	@mkdir -p $(@D)
	$(FUZZ_CC) $(FUZZ_FLAGS) -o $@ $^

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

ALL_C := $(LIB_SRCS) $(UNIT_SRCS) $(IT_SRCS) $(FIX_C) $(FIX_CXX) \
         $(BENCH_SRCS) $(wildcard tests/fuzz/*.c) \
         $(wildcard src/agent/*.c src/daemon/*.c src/cli/*.c)
ALL_H := $(wildcard include/*.h src/*/*.h tests/unit/*.h tests/integration/*.h)

lint:
	@sh scripts/deps.sh lint
	cppcheck --quiet --error-exitcode=1 --inline-suppr --std=c11 \
	    --enable=warning,performance,portability \
	    --suppress=missingIncludeSystem -Iinclude -Isrc/lib src
	clang-tidy --quiet $(LIB_SRCS) $(wildcard src/agent/*.c src/daemon/*.c \
	    src/cli/*.c) -- -std=gnu11 -Iinclude -Isrc/lib $(PKG_CFLAGS)

format:
	clang-format -i $(ALL_C) $(ALL_H)

format-check:
	clang-format --dry-run --Werror $(ALL_C) $(ALL_H)

clean:
	rm -rf build

-include $(LIB_OBJS:.o=.d)
