# SPDX-License-Identifier: BSD-3-Clause
# Makefile -- mcaptcha-cache, a Redis module (C).
#
#   make            build build/mcaptcha_cache.so (every build output goes under build/)
#   make run        install what is missing (as root), build, serve on 127.0.0.1:$(PORT)
#   make test       install test dependencies (as root), build, run every test: unit (also
#                   under valgrind), integration, integration against the ASan/UBSan build,
#                   then every client: Python, Ruby, Node (test-python, test-ruby, test-node)
#   make install    copy the module to $(MODULEDIR)
#   make deb        the Debian package (debian/, dpkg-buildpackage) into $(BUILD)/deb/
#                   (DEB_MAINTAINER="Name <address>": packaged under that maintainer)
#   make deb-check  make deb, then lintian: any error or warning fails
#   make bench      throughput, CPU and memory against native commands and Lua scripts
#                   (after make bench-instr: instructions per call under callgrind)
#   make fuzz       run every libFuzzer target for FUZZ_SECONDS (default 600) seconds
#   make mutants    apply each hand-written bug in tests/mutants/ and check that its tests fail
#   make soak       the model-based tests and history checkers with many more examples
#   make flake-loop the integration suite RUNS (50) times in a row beside BURNERS (2) CPU burners, JOBS (3) workers
#
# REDISMODULE_H=/path/to/redismodule.h uses that header instead of fetching the
# installed server's from Debian's redis source package (scripts/fetch-redismodule-h.sh).

BUILD    := build
MODULE_NAME := mcaptcha_cache.so
MODULE   := $(BUILD)/$(MODULE_NAME)
PORT     ?= 6379
PYTHON   := /usr/bin/python3
MODULEDIR ?= /usr/lib/redis/modules
REDISMODULE_H ?= $(BUILD)/include/redismodule.h

CC       ?= cc
WARN     := -Wall -Wextra -Werror -Wno-missing-field-initializers -Wstrict-prototypes
# CFLAGS, CPPFLAGS and LDFLAGS from the environment are honoured (dpkg-buildflags' hardening
# flags when debian/rules builds: fortify, stack protector, relro, bindnow).
CFLAGS   ?= -O2 -g
ALL_CFLAGS := -std=gnu11 $(WARN) -fno-common -fPIC $(CPPFLAGS) $(CFLAGS)
LDLIBS   := -ljansson

# One folder per layer (docs/architecture.md): the pure algorithms, what every
# family shares about living inside Redis, one folder per family, the entry point.
CORE_SRC      := src/core/alloc.c src/core/bucket.c src/core/captcha.c src/core/gcra.c src/core/keyslot.c src/core/window.c \
                 src/core/lock.c src/core/histogram.c src/core/policy.c src/core/policy_entry.c src/core/fixed.c
SERVER_SRC    := src/server/args.c src/server/bucket_io.c src/server/clock.c src/server/cluster.c \
                 src/server/commands.c src/server/config.c src/server/events.c src/server/internal.c src/server/keys.c src/server/limitstats.c \
                 src/server/replargs.c src/server/waitq.c
CAPTCHA_SRC   := src/captcha/tracking.c src/captcha/captcha_cmd.c src/captcha/captcha_info.c src/captcha/captcha_type.c \
                 src/captcha/legacy_type.c src/captcha/module_list.c
RATELIMIT_SRC := src/ratelimit/count_cmd.c src/ratelimit/fixed_cmd.c src/ratelimit/limiter.c src/ratelimit/ratelimit_cmd.c \
                 src/ratelimit/policy.c src/ratelimit/policy_sync.c src/ratelimit/ratelimit_info.c src/ratelimit/ratelimit_state_cmd.c \
                 src/ratelimit/ratelimit_type.c
LOCK_SRC      := src/lock/acks.c src/lock/acquire.c src/lock/fencing.c src/lock/inspect.c src/lock/leases.c src/lock/lock_cmd.c \
                 src/lock/lock_info.c src/lock/lock_type.c src/lock/multi.c src/lock/pool_cmd.c src/lock/renames.c \
                 src/lock/sessions.c src/lock/state.c
GLUE_SRC := $(SERVER_SRC) $(CAPTCHA_SRC) $(RATELIMIT_SRC) $(LOCK_SRC) src/module.c
CORE_OBJ := $(CORE_SRC:src/%.c=$(BUILD)/%.o)
GLUE_OBJ := $(GLUE_SRC:src/%.c=$(BUILD)/%.o)
UNIT_TESTS := $(BUILD)/test_bucket $(BUILD)/test_window $(BUILD)/test_captcha $(BUILD)/test_gcra $(BUILD)/test_keyslot $(BUILD)/test_lock \
              $(BUILD)/test_histogram $(BUILD)/test_policy $(BUILD)/test_policy_entry $(BUILD)/test_decimal $(BUILD)/test_fixed

ASAN_DIR := $(BUILD)/asan
ASAN_MODULE := $(ASAN_DIR)/$(MODULE_NAME)
ASAN_FLAGS := -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=all

.PHONY: all run test unit unit-valgrind integration integration-asan install clean deps-build deps-run deps-test \
	bench deps-bench fuzz fuzz-replay deps-fuzz soak mutants mutants-check servers test-servers readme-acl commands-md flake-loop

all: $(MODULE)

deps-build:
	@sh scripts/deps.sh build
deps-run:
	@sh scripts/deps.sh build run
deps-test:
	@sh scripts/deps.sh build test fuzz

$(BUILD)/include/redismodule.h:
	@mkdir -p $(BUILD)/include
	sh scripts/fetch-redismodule-h.sh $@

$(BUILD)/%.o: src/%.c
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -MMD -MP -Isrc -isystem $(dir $(REDISMODULE_H)) -c $< -o $@

$(GLUE_OBJ): | $(REDISMODULE_H)

$(MODULE): $(CORE_OBJ) $(GLUE_OBJ)
	$(CC) -shared -Wl,-z,defs $(LDFLAGS) -o $@ $^ $(LDLIBS)

# Unit tests: the pure cores with cmocka, no Redis.
$(BUILD)/test_%: tests/unit/test_%.c $(CORE_SRC) src/core/*.h
	@mkdir -p $(BUILD)
	$(CC) -std=gnu11 $(WARN) -g -O1 -Isrc/core $< $(CORE_SRC) -o $@ -ljansson -lcmocka

unit: $(UNIT_TESTS)
	@for t in $(UNIT_TESTS); do echo "== $$t"; $$t || exit 1; done

# The unit tests again under valgrind: any error or leak fails.
unit-valgrind: $(UNIT_TESTS)
	@for t in $(UNIT_TESTS); do echo "== valgrind $$t"; \
	    valgrind -q --error-exitcode=3 --leak-check=full --errors-for-leak-kinds=definite,indirect $$t >/dev/null || exit 1; done

# The module built with ASan + UBSan, loaded into redis-server with the runtimes preloaded.
$(ASAN_DIR)/%.o: src/%.c | $(REDISMODULE_H)
	@mkdir -p $(dir $@)
	$(CC) -std=gnu11 $(WARN) -fno-common -fPIC $(ASAN_FLAGS) -MMD -MP -Isrc -isystem $(dir $(REDISMODULE_H)) -c $< -o $@

$(ASAN_MODULE): $(CORE_SRC:src/%.c=$(ASAN_DIR)/%.o) $(GLUE_SRC:src/%.c=$(ASAN_DIR)/%.o)
	$(CC) -shared $(ASAN_FLAGS) -o $@ $^ $(LDLIBS)

# The module's integration suite: every family, the server layer, the packaging. The clients'
# suites (tests/integration/client, clients/*) run once, in make test (test-python, ...), not
# under ASan nor on every server of the matrix.
MODULE_TESTS := tests/integration --ignore=tests/integration/client

integration-asan: $(ASAN_MODULE)
	@rm -rf $(ASAN_DIR)/reports
	MCAPTCHA_MODULE=$(CURDIR)/$(ASAN_MODULE) REDIS_SERVER=$(CURDIR)/scripts/redis-server-sanitized.sh \
	    SANITIZER_REPORT_DIR=$(CURDIR)/$(ASAN_DIR)/reports \
	    $(PYTHON) -m pytest -q -p no:cacheprovider $(MODULE_TESTS)
	@if ls $(ASAN_DIR)/reports/* >/dev/null 2>&1; then echo "sanitizer reports:"; cat $(ASAN_DIR)/reports/*; exit 1; fi
	@echo "integration-asan: no sanitizer reports"

# SERVER=/path/to/redis-server (or valkey-server): run the integration tests
# against that binary (make servers fetches the newer ones CI runs).
SERVER ?=
SERVER_ENV := $(if $(SERVER),REDIS_SERVER=$(SERVER))
SERVERS := valkey-8.0 valkey-8.1 valkey-9.1 redis-8.0

# WORKERS=n runs the suite in n pytest-xdist workers (each with its own servers).
WORKERS ?=
integration: $(MODULE)
	$(SERVER_ENV) MCAPTCHA_MODULE=$(CURDIR)/$(MODULE) $(PYTHON) -m pytest -q -p no:cacheprovider \
	    $(if $(WORKERS),-p xdist -n $(WORKERS)) $(MODULE_TESTS)

# Everything: unit tests (plain and under valgrind), the fuzz reproducers and
# seed corpora replayed (every loader invariant), integration tests against the
# module, then again against the ASan/UBSan build, then every client's suite;
# any failure or report fails.
CLIENT_TESTS := test-python
test: deps-test
	@$(MAKE) --no-print-directory $(MODULE) mutants-check unit unit-valgrind fuzz-replay integration integration-asan \
	    $(CLIENT_TESTS)

# The stateful model-based tests and the history checkers run bounded in make test;
# here with MC_SOAK=1 (tests/integration/soak.py): many more examples, longer histories.
SOAK_TESTS = $(wildcard tests/integration/*/test_*_model.py tests/integration/*/test_*_history.py) \
             tests/integration/server/test_digest_ttl.py tests/integration/server/test_churn_memory.py
soak: deps-test
	@$(MAKE) --no-print-directory $(MODULE)
	MC_SOAK=1 $(SERVER_ENV) MCAPTCHA_MODULE=$(CURDIR)/$(MODULE) $(PYTHON) -m pytest -q -p no:cacheprovider $(SOAK_TESTS)

deps-fuzz:
	@sh scripts/deps.sh build fuzz

# Fetch (and build) the newer servers of the test matrix into /var/cache/mcaptcha-servers.
servers:
	@sh scripts/deps.sh build servers
	@for s in $(SERVERS); do sh scripts/fetch-server.sh $$s || exit 1; done

# The integration suite on each server of the matrix (CI runs this), serially: in two workers
# (WORKERS=2) it takes half the time, but the rate-limit model failed once that way on Valkey
# 9.1 (a reply after DEBUG RELOAD on a loaded machine), so CI stays serial until that is found.
# The packaging and repository tests (the .deb, make install, versions, the tree's hygiene) do
# not depend on the server: make test runs them once, the matrix leaves them out.
SERVER_INDEPENDENT := --ignore=tests/integration/server/test_deb.py --ignore=tests/integration/server/test_install.py \
    --ignore=tests/integration/server/test_versions.py --ignore=tests/integration/server/test_repo_hygiene.py
test-servers: servers $(MODULE)
	@for s in $(SERVERS); do echo "== integration on $$s"; \
	    $(MAKE) --no-print-directory integration SERVER=$$(sh scripts/fetch-server.sh $$s) \
	        MODULE_TESTS="$(MODULE_TESTS) $(SERVER_INDEPENDENT)" || exit 1; done

# The sources against Valkey's own valkeymodule.h (Debian forky's `valkey` source package,
# unpacked into the server cache by fetch-server.sh --header): every module source through
# src/compat/valkey/redismodule.h (made by scripts/valkey-compat.py, checked up to date),
# linked, then loaded into Valkey 9.1 for a smoke test if `make servers` has cached it.
VALKEY_H_DIR := $(BUILD)/valkey-header
$(VALKEY_H_DIR)/%.o: src/%.c $(VALKEYMODULE_H)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -MMD -MP -Isrc -Isrc/compat/valkey -I$(dir $(VALKEYMODULE_H)) -c $< -o $@
$(VALKEY_H_DIR)/$(MODULE_NAME): $(CORE_SRC:src/%.c=$(VALKEY_H_DIR)/%.o) $(GLUE_SRC:src/%.c=$(VALKEY_H_DIR)/%.o)
	$(CC) -shared -Wl,-z,defs -o $@ $^ $(LDLIBS)
.PHONY: valkey-header-check
valkey-header-check:
	@start=$$(date +%s); h=$$(sh scripts/fetch-server.sh --header valkey-9.1) && \
	$(PYTHON) scripts/valkey-compat.py --check $$h && \
	$(MAKE) --no-print-directory $(VALKEY_H_DIR)/$(MODULE_NAME) VALKEYMODULE_H=$$h && \
	if srv=$$(sh scripts/fetch-server.sh --cached valkey-9.1); then \
	    $(PYTHON) scripts/valkey-compat.py --smoke $$srv $(VALKEY_H_DIR)/$(MODULE_NAME); \
	else echo "valkey-header-check: valkey-9.1 is not cached (make servers): smoke test skipped"; fi && \
	echo "valkey-header-check: built against $$h in $$(($$(date +%s) - start)) s"
-include $(wildcard $(VALKEY_H_DIR)/*/*.d)

# libFuzzer targets (tests/fuzz/README.md), each run for FUZZ_SECONDS; CI uses 60.
FUZZ_SECONDS ?= 600
fuzz: deps-fuzz | $(REDISMODULE_H)
	sh tests/fuzz/run.sh $(FUZZ_SECONDS)

# The fuzz targets without fuzzing: reproducers and seed corpora, each input once.
fuzz-replay: deps-fuzz | $(REDISMODULE_H)
	FUZZ_REPLAY_ONLY=1 sh tests/fuzz/run.sh 0

# Hand-written mutants (tests/mutants/*.patch): each must make its tests fail.
mutants: deps-test | $(REDISMODULE_H)
	sh tests/mutants/run.sh

# Only check that every mutant patch still applies (fast; part of make test).
mutants-check:
	@MUTANTS_CHECK_ONLY=1 sh tests/mutants/run.sh

# Rewrite docs/commands.md from the command metadata and scripts/command_notes.py.
commands-md: $(MODULE)
	$(PYTHON) scripts/commands_md.py

# Rewrite the example ACL users of docs/operations.md from the command table (after adding a command).
readme-acl: $(MODULE)
	$(PYTHON) scripts/readme_acl.py

deps-bench:
	@sh scripts/deps.sh build bench

# The integration suite RUNS times in a row beside BURNERS CPU-burning processes,
# each run in JOBS pytest-xdist workers, stopping at the first failure (logs in
# build/flake-loop/).
RUNS ?= 50
BURNERS ?= 2
JOBS ?= 3
flake-loop: deps-test $(MODULE)
	RUNS=$(RUNS) BURNERS=$(BURNERS) JOBS=$(JOBS) MCAPTCHA_MODULE=$(CURDIR)/$(MODULE) PYTHON=$(PYTHON) sh scripts/flake-loop.sh

# The module API's floor (bench/floor/floor.c): measurement only, built for the bench.
FLOOR_MODULE := $(BUILD)/bench/floor.so
$(FLOOR_MODULE): bench/floor/floor.c src/core/decimal.h | $(REDISMODULE_H)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -Isrc -isystem $(dir $(REDISMODULE_H)) -shared $< -o $@

# callgrind's counters driven from the command stream (bench/instr/cgctl.c): measurement only.
CGCTL_MODULE := $(BUILD)/bench/cgctl.so
$(CGCTL_MODULE): bench/instr/cgctl.c | $(REDISMODULE_H)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -isystem $(dir $(REDISMODULE_H)) -shared $< -o $@

# Instructions per call under callgrind, ours beside the same-job floor (bench/instr.py, a few
# minutes); writes bench/instr.json, which make bench reads and decides its goals on.
.PHONY: bench-instr
bench-instr: deps-bench
	@$(MAKE) --no-print-directory $(MODULE) $(FLOOR_MODULE) $(CGCTL_MODULE)
	FLOOR_MODULE=$(CURDIR)/$(FLOOR_MODULE) CGCTL_MODULE=$(CURDIR)/$(CGCTL_MODULE) $(PYTHON) bench/instr.py

# About 5-6 minutes of measuring on 2 cores (331 s in the last run) after bench-instr, plus installing
# gnuplot and the Node.js packages on a first run; writes bench/results.json and bench/chart.png (see bench/README.md).
bench: deps-bench
	@$(MAKE) --no-print-directory bench-instr
	FLOOR_MODULE=$(CURDIR)/$(FLOOR_MODULE) $(PYTHON) bench/bench.py

run: deps-run
	@$(MAKE) --no-print-directory $(MODULE)
	@mkdir -p data
	redis-server --bind 127.0.0.1 --port $(PORT) --dir $(CURDIR)/data \
	    --appendonly yes --appendfsync everysec \
	    --loadmodule $(CURDIR)/$(MODULE)

install: $(MODULE)
	install -d $(DESTDIR)$(MODULEDIR)
	install -m 0755 $(MODULE) $(DESTDIR)$(MODULEDIR)/$(MODULE_NAME)
	@echo "Add to redis.conf:  loadmodule $(MODULEDIR)/$(MODULE_NAME)"

# The Debian package, built the Debian way (debian/: debhelper, dpkg-buildflags hardening,
# an automatic -dbgsym package) by `dpkg-buildpackage -b -us -uc` in a copy of the tree
# under $(BUILD)/deb/ (scripts/build-deb.sh), so every output lands in $(BUILD)/deb/: the
# .deb, the -dbgsym .deb, the .buildinfo and the .changes (whose path it prints last).
# The module, the docs and a commented loadmodule example; no maintainer scripts.
# Tested by tests/integration/server/test_deb.py; deb-check (CI) also runs lintian.
.PHONY: deb deb-check deps-deb
deps-deb:
	@sh scripts/deps.sh build deb
deb: deps-deb | $(REDISMODULE_H)
	@DEB_MAINTAINER="$(DEB_MAINTAINER)" sh scripts/build-deb.sh $(BUILD)/deb $(REDISMODULE_H)
deb-check: deps-deb
	@changes=$$($(MAKE) --no-print-directory deb | tail -n 1) && \
	lintian --fail-on error,warning --display-info --info "$$changes" && \
	echo "deb-check: lintian reports no error and no warning on $$changes"

clean:
	rm -rf $(BUILD)/*.o $(BUILD)/*.d $(BUILD)/core $(BUILD)/server $(BUILD)/captcha $(BUILD)/ratelimit \
	    $(BUILD)/lock $(BUILD)/test_* $(ASAN_DIR) $(MODULE)

-include $(wildcard $(BUILD)/*.d $(BUILD)/*/*.d $(ASAN_DIR)/*.d $(ASAN_DIR)/*/*.d)

# The Python client (clients/python): mypy --strict on the package (Debian's python3-mypy),
# then its tests (tests/integration/client: redis-py drop-in locks, the limits storage with
# Flask-Limiter, Cluster, install without `wheel`) against $(MODULE).
.PHONY: test-python deps-python
deps-python:
	@sh scripts/deps.sh build test python
test-python: deps-python
	@$(MAKE) --no-print-directory $(MODULE)
	cd clients/python && $(PYTHON) -m mypy --strict mcaptcha_cache
	$(SERVER_ENV) MCAPTCHA_MODULE=$(CURDIR)/$(MODULE) $(PYTHON) -m pytest -q -p no:cacheprovider tests/integration/client

# The Node.js client (clients/node; docs/node.md): npm ci from its package-lock.json (skipped
# when node_modules was installed from that same lockfile, so it also runs offline), the type
# check of its hand-written index.d.ts, its tests (node --test on real servers: standalone and
# a 3-primary Cluster, ioredis and node-redis, an Express app), then `npm pack` and an install
# of the tarball into a scratch directory, where it must load.
NODE_DIR := clients/node
CLIENT_TESTS += test-node
.PHONY: test-node
test-node:
	@sh scripts/deps.sh build run node
	@$(MAKE) --no-print-directory $(MODULE)
	@cd $(NODE_DIR) && if cmp -s package-lock.json node_modules/.mcaptcha-lock 2>/dev/null; then \
	    echo "clients/node/node_modules is current"; \
	else npm ci --no-audit --no-fund --prefer-offline && cp package-lock.json node_modules/.mcaptcha-lock; fi
	cd $(NODE_DIR) && node_modules/.bin/tsc -p test/types
	cd $(NODE_DIR) && $(SERVER_ENV) MCAPTCHA_MODULE=$(CURDIR)/$(MODULE) node --test test/unit.test.js \
	    test/standalone.test.js test/cluster.test.js test/express.test.js
	@rm -rf $(BUILD)/node-pack && mkdir -p $(BUILD)/node-pack/app
	cd $(NODE_DIR) && npm pack --silent --pack-destination $(CURDIR)/$(BUILD)/node-pack
	cd $(BUILD)/node-pack/app && echo '{"name": "pack-check", "version": "0.0.0", "private": true}' >package.json && \
	    npm install --silent --no-audit --no-fund --offline ../mcaptcha-cache-*.tgz && \
	    test -f node_modules/mcaptcha-cache/index.d.ts && \
	    node -e "const m = require('mcaptcha-cache'); for (const k of ['Lock', 'Semaphore', 'MultiLock', 'RateLimiter', \
	        'Captcha', 'SlidingWindowStore', 'LockLost', 'CrossSlot']) if (typeof m[k] !== 'function') throw new Error(k); \
	        if (m.keySlot('123456789') !== 12739) throw new Error('keySlot'); console.log('npm pack: the tarball installs and loads')"

# The Ruby client (clients/ruby, gem mcaptcha_cache): its rspec suite against $(MODULE), on a
# standalone server and a 3-primary Redis Cluster that the specs start on free ports and kill
# at the end; the suite also packs the gem offline (gem build). Needs the deps.sh group ruby.
CLIENT_TESTS += test-ruby
.PHONY: test-ruby deps-ruby
deps-ruby:
	@sh scripts/deps.sh build ruby
test-ruby: deps-ruby
	@$(MAKE) --no-print-directory $(MODULE)
	cd clients/ruby && $(SERVER_ENV) MCAPTCHA_MODULE=$(CURDIR)/$(MODULE) rspec
