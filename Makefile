# sandboxd — one GNU Makefile (house style R12).
#   make            build build/sandboxd
#   make run        start the daemon on 127.0.0.1:8787 with data in ./data
#   make test       unit tests + black-box API tests (+ attack suite)
#   make SANITIZER=address test   (or undefined)
#   make bench      benchmarks → docs/benchmarks.md
#   make fuzz       libFuzzer runs of every parser (FUZZ_SECONDS each; fuzz-smoke: 10 s)

SANITIZER ?=
BUILD     ?= build$(if $(SANITIZER),-$(SANITIZER))
CC        ?= cc
PKGS      := libmicrohttpd jansson libseccomp sqlite3 libarchive libargon2 libcurl libpq

WARN   := -Wall -Wextra -Werror -Wshadow -Wformat=2 -Wstrict-prototypes \
          -Wmissing-prototypes -Wno-missing-field-initializers -Wvla
CFLAGS ?= -O2 -g
CFLAGS += -std=gnu11 -D_GNU_SOURCE -Isrc $(WARN) -pthread -fno-strict-aliasing
LDLIBS += -pthread -lcrypto -lwslay  # wslay ships no .pc file

ifeq ($(SANITIZER),address)
CFLAGS  += -fsanitize=address -fno-omit-frame-pointer
LDFLAGS += -fsanitize=address
else ifeq ($(SANITIZER),undefined)
CFLAGS  += -fsanitize=undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
LDFLAGS += -fsanitize=undefined
endif

DEPS_STAMP := build/.deps-$(shell cat scripts/install-deps.sh 2>/dev/null | md5sum | cut -c1-12)

# The fork-server shim is loaded into interpreters, not linked into the daemon.
# It links only fork-safe code below it (base/, jail/ helpers without malloc).
SHIM_SRCS := src/shim/forkserver.c src/base/io.c src/jail/landlock.c src/jail/privs.c src/jail/procfs.c
SHIM      := $(BUILD)/libsandboxd-forkserver.so
SRCS      := $(shell find src -name '*.c' ! -name main.c ! -name init_main.c ! -path 'src/shim/*' | sort)
# pid 1 of every jail once guest code runs (src/jail/init_main.c): exec'd,
# so no copy of the daemon's memory stays in the jail. Static: nothing
# but the binary itself is mapped.
INIT      := $(BUILD)/sandboxd-init
OBJS     := $(SRCS:%.c=$(BUILD)/obj/%.o)
MAIN_OBJ := $(BUILD)/obj/src/main.o
UNIT_SRCS := $(shell find tests/unit -name 'test_*.c' | sort)
UNIT_BINS := $(UNIT_SRCS:tests/unit/%.c=$(BUILD)/unit/%)
TAP_OBJ  := $(BUILD)/obj/tests/unit/tap_main.o

.PHONY: all deps node-deps web install uninstall run test unit unit-pg api api-pg cluster attacks check bench fuzz clean layers
.DEFAULT_GOAL := all

all: $(BUILD)/sandboxd $(SHIM) $(INIT)

$(DEPS_STAMP):
	@bash scripts/install-deps.sh
	@mkdir -p build && rm -f build/.deps-* && touch $@

deps: $(DEPS_STAMP)

# pkg-config runs only after the dependency step so a fresh machine works.
PKG_CFLAGS = $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS   = $(shell pkg-config --libs $(PKGS) 2>/dev/null)

$(BUILD)/obj/%.o: %.c $(DEPS_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(PKG_CFLAGS) -MMD -MP -c $< -o $@

# Files assembled into an object (.incbin): -MMD does not see them.
$(BUILD)/obj/src/api/bridge/openapi.o: src/api/bridge/openapi.json
$(BUILD)/obj/src/api/workers/openapi.o: src/api/workers/openapi.json
$(BUILD)/obj/src/api/controller/openapi.o: src/api/controller/openapi.json
$(BUILD)/obj/src/api/common/openapi.o: src/api/common/openapi.html
# The playground (web/dist) is committed: building it needs npm, building
# the daemon does not (`make web` rebuilds web/dist from web/src).
WEB_DIST := web/dist/index.html web/dist/app.js web/dist/app.css
$(BUILD)/obj/src/api/web/web.o: $(WEB_DIST)

$(BUILD)/libsandboxd.a: $(OBJS)
	@rm -f $@
	ar rcs $@ $^

$(BUILD)/sandboxd: $(MAIN_OBJ) $(BUILD)/libsandboxd.a
	$(CC) $(LDFLAGS) -o $@ $^ $(PKG_LIBS) $(LDLIBS)

# Never sanitized (it runs inside python/perl, which lack the runtimes);
# base/io.c, jail/landlock.c, privs.c and procfs.c are plain system calls,
# shared with the jail. Hidden visibility: only read() (and the constructor)
# reach the interpreter's symbol table, so no helper name can interpose on
# a symbol of the interpreter or of an extension module.
$(SHIM): $(SHIM_SRCS) $(wildcard src/shim/*.h src/jail/*.h src/base/*.h) $(DEPS_STAMP)
	@mkdir -p $(dir $@)
	$(CC) -O2 -g -std=gnu11 -D_GNU_SOURCE -Isrc $(WARN) -fPIC -shared -fvisibility=hidden -o $@ $(SHIM_SRCS)

INIT_SRCS := src/jail/init_main.c src/jail/command.c src/base/io.c
$(INIT): $(INIT_SRCS) src/jail/internal.h src/jail/jail.h src/base/io.h $(DEPS_STAMP)
	@mkdir -p $(dir $@)
	$(CC) -O2 -g -std=gnu11 -D_GNU_SOURCE -Isrc $(WARN) -static -o $@ $(INIT_SRCS)

$(BUILD)/unit/%: tests/unit/%.c $(TAP_OBJ) $(BUILD)/libsandboxd.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(PKG_CFLAGS) -Itests/unit $(LDFLAGS) -o $@ $< $(TAP_OBJ) $(BUILD)/libsandboxd.a $(PKG_LIBS) $(LDLIBS)
# It includes test_jail.c (every jail test again, through the spawner).
$(BUILD)/unit/jail/test_jail_spawner: tests/unit/jail/test_jail.c

run: $(BUILD)/sandboxd $(SHIM) $(INIT)
	$(BUILD)/sandboxd --listen 127.0.0.1:8787 --data-dir ./data

# Fails on an #include that points up the layers (docs/architecture.md).
layers:
	@bash scripts/check-layers.sh

unit: $(UNIT_BINS)
	@fail=0; for t in $(UNIT_BINS); do echo "# $$t"; $$t || fail=1; done; exit $$fail

# The backend-agnostic store suites again, on PostgreSQL: a throwaway
# cluster (tests/pg/pg_cluster.sh; a TAP skip line when it cannot start).
# Every tests/unit/store/test_store_*.c but the SQLite backend's own tests
# and the ops-table check: a new suite runs on both without a Makefile edit.
PG_UNIT := $(filter-out %/test_store_sqlite %/test_store_ops,$(filter $(BUILD)/unit/store/%,$(UNIT_BINS)))
unit-pg: $(PG_UNIT)
	@tests/pg/pg_cluster.sh run sh -c 'fail=0; for t in $(PG_UNIT); do echo "# $$t (postgres)"; $$t || fail=1; done; exit $$fail'

# Black-box smoke on PostgreSQL: these files with every daemon started
# --store postgresql://... (tests/pg/pg_plugin.py). Deselected: tests that
# open the SQLite file itself to look at what is stored.
PG_SMOKE := tests/pg tests/api/test_sandboxes.py tests/api/test_daemon.py tests/api/test_runtime_api.py \
	tests/bridge/test_bridge_basics.py tests/bridge/test_bridge_sessions.py tests/controller/test_controller_repl.py $(addprefix tests/controller/test_controller_,sandboxes.py keys.py \
	secrets.py events.py queue.py checkpoints.py audit.py idempotency.py identity.py artifacts.py github.py \
	egress.py snapshots.py sso.py webhooks.py)
PG_SMOKE_SKIP := not encrypted_at_rest and not key_from_the_environment and not tampered_ciphertext \
	and not no_secret_is_ever_recorded and not providers_and_health_routes and not no_secret_is_stored_in_the_clear
api-pg: $(BUILD)/sandboxd $(SHIM) $(INIT)
	PYTHONPATH=tests/pg SANDBOXD_BIN=$(abspath $(BUILD)/sandboxd) /usr/bin/python3 -m pytest -q -p no:cacheprovider \
		-p pg_plugin -k "$(PG_SMOKE_SKIP)" $(PG_SMOKE) $(PYTEST_ARGS)

# Cluster mode (issue 16), black-box: several daemons on one PostgreSQL
# database (tests/pg/pg_plugin.py starts the server); plain pass only,
# like api-pg.
cluster: $(BUILD)/sandboxd $(SHIM) $(INIT)
	PYTHONPATH=tests/pg:tests/cluster SANDBOXD_BIN=$(abspath $(BUILD)/sandboxd) /usr/bin/python3 -m pytest -q \
		-p no:cacheprovider -p pg_plugin tests/cluster $(PYTEST_ARGS)

# npm test tools (s3rver, playwright-core, an OpenAPI validator), pinned by
# tests/node/package-lock.json; reinstalled when the lockfile changes.
NODE_STAMP := tests/node/node_modules/.stamp-$(shell md5sum tests/node/package-lock.json 2>/dev/null | cut -c1-12)
$(NODE_STAMP): tests/node/package-lock.json $(DEPS_STAMP)
	cd tests/node && npm ci --no-audit --no-fund --loglevel=error
	@rm -f tests/node/node_modules/.stamp-* && touch $@

node-deps: $(NODE_STAMP)

# The playground's bundle (web/dist, committed) from web/src: needs npm once
# for CodeMirror and xterm.js (pinned by web/package-lock.json).
WEB_STAMP := web/node_modules/.stamp-$(shell md5sum web/package-lock.json 2>/dev/null | cut -c1-12)
$(WEB_STAMP): web/package-lock.json $(DEPS_STAMP)
	cd web && npm ci --no-audit --no-fund --loglevel=error
	@rm -f web/node_modules/.stamp-* && touch $@

web: $(WEB_STAMP)
	bash web/build.sh

api: $(BUILD)/sandboxd $(SHIM) $(INIT) $(NODE_STAMP)
	SANDBOXD_BIN=$(abspath $(BUILD)/sandboxd) /usr/bin/python3 -m pytest -q -p no:cacheprovider tests/tools tests/api tests/bridge tests/controller tests/cli tests/web tests/mcp tests/kernels tests/attacks $(PYTEST_ARGS)

# Fuzzers carry their own ASan+UBSan build, so the short fuzz runs happen
# once, in the plain `make test`, not again under SANITIZER=; so does the
# PostgreSQL black-box smoke (its daemons are the same code as `api`'s).
test: layers unit unit-pg api $(if $(SANITIZER),,api-pg cluster fuzz-smoke)

check: test

# The C microbenchmarks: bench/jail_true.c (the jail alone), bench/ws_open.c
# (a workspace from a ready image vs mkfs), bench/store_ops.c (the store
# alone, SQLite vs PostgreSQL), bench/idle_wake.c (two process wake-ups,
# back to back and after an idle pause: the floor under the idle rows),
# bench/ideal_server.c (HTTP + a daemon kernel with no daemon in between:
# what any daemon could answer an idle execution in).
$(BUILD)/bench/%: bench/%.c bench/stats.h $(BUILD)/libsandboxd.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(PKG_CFLAGS) $(LDFLAGS) -o $@ $< $(BUILD)/libsandboxd.a $(PKG_LIBS) $(LDLIBS)

# After the main run, the fast paths and the per-request floor
# (bench/request_floor.py: GET /health, a warm context cell and a stateless
# one, with and without http.inline, and strace syscall counts), 8-client
# throughput with its CPU breakdown per request (bench/thru.py, printed), what an idle
# pause costs perl itself without the daemon (bench/idle_perl.py, printed), the scale-out figures
# (docs/benchmarks.md, "Scale-out"): the store's operations per second,
# SQLite vs a throwaway PostgreSQL (skipped with a message where Debian's
# server is not installed), and two cluster nodes (exit 2, tolerated, with a
# message: no cluster mode in this build, or no PostgreSQL).
bench: $(BUILD)/sandboxd $(SHIM) $(INIT) $(BUILD)/bench/jail_true $(BUILD)/bench/ws_open $(BUILD)/bench/store_ops $(BUILD)/bench/idle_wake \
       $(BUILD)/bench/ideal_server
	/usr/bin/python3 bench/run.py --bin $(abspath $(BUILD)/sandboxd)
	/usr/bin/python3 bench/fast_paths.py --bin $(abspath $(BUILD)/sandboxd)
	/usr/bin/python3 bench/request_floor.py --bin $(abspath $(BUILD)/sandboxd) --strace
	/usr/bin/python3 bench/thru.py --binary $(abspath $(BUILD)/sandboxd) --secs 5 --rounds 3
	$(BUILD)/bench/idle_wake
	/usr/bin/python3 bench/idle_perl.py
	/usr/bin/python3 bench/store.py --bin $(abspath $(BUILD)/bench/store_ops)
	/usr/bin/python3 bench/cluster.py --bin $(abspath $(BUILD)/sandboxd) || [ $$? -eq 2 ]

# `sandboxd` on PATH for the CLI and MCP clients: a symlink, so the binary
# still finds its kernels and helpers beside the tree (/proc/self/exe is the
# real path), plus bash completion.
PREFIX ?= /usr/local
install: all
	ln -sfn $(abspath $(BUILD)/sandboxd) $(DESTDIR)$(PREFIX)/bin/sandboxd
	@if [ -d $(DESTDIR)/etc/bash_completion.d ]; then \
	  $(BUILD)/sandboxd completion bash > $(DESTDIR)/etc/bash_completion.d/sandboxd && \
	  echo "bash completion: /etc/bash_completion.d/sandboxd"; fi

uninstall:
	rm -f $(DESTDIR)$(PREFIX)/bin/sandboxd $(DESTDIR)/etc/bash_completion.d/sandboxd

clean:
	rm -rf build build-address build-undefined

-include $(shell find $(BUILD)/obj -name '*.d' 2>/dev/null)
include mk/fuzz.mk
