# libFuzzer targets for every parser of untrusted bytes (docs/security.md, "Fuzzing").
# Included from the Makefile.
#
#   make fuzz            build, then run every fuzzer for FUZZ_SECONDS (default 60) each
#   make fuzz-smoke      the same, 10 s each (CI)
#   make fuzz-build      only build build-fuzz/fuzz_*
#   make fuzz-<name>     run one target, e.g. make fuzz-path FUZZ_SECONDS=300
#                        (names: request path files_op output config route archive jwt cookie ws egress)
#   FUZZ_MERGE=1         afterwards, merge inputs that add coverage into the committed
#                        seed corpus tests/fuzz/corpus/<target>/ (libFuzzer -merge=1)
#   FUZZ_ARGS=...        extra libFuzzer flags (e.g. -jobs=2 -workers=2)
#
# Fuzz builds use clang with ASan + UBSan + libFuzzer, -g -O1, and compile the sources
# each target needs straight into build-fuzz/ (never the gcc-built library). Fresh
# inputs go to the scratch corpus build-fuzz/corpus/<target>/; the committed corpus
# only holds the seeds (and what FUZZ_MERGE=1 adds). Crash inputs are written to
# build-fuzz/artifacts/<target>/ and any crash, leak, sanitizer report or violated
# invariant fails the make target.

FUZZ_CC      ?= clang
FUZZ_BUILD   := build-fuzz
FUZZ_SECONDS ?= 60
FUZZ_MERGE   ?= 0
FUZZ_ARGS    ?=
FUZZ_SAN     := -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
# src/ is warning-clean under gcc (the house compiler). Under clang its warnings are not
# fatal, and three clang-only false positives are silenced (format-nonliteral in
# va_list wrappers, "string + int" on purpose, cleanup-attribute variables seen as
# unused). The harnesses themselves build with -Werror.
FUZZ_CFLAGS   = -g -O1 -std=gnu11 -D_GNU_SOURCE -Isrc $(filter-out -Werror,$(WARN)) -Wno-format-nonliteral -Wno-string-plus-int -Wno-unused-variable -pthread -fno-strict-aliasing $(FUZZ_SAN) \
                $(shell pkg-config --cflags $(PKGS))
FUZZ_LDLIBS   = $(shell pkg-config --libs $(PKGS)) -lcrypto -lwslay -pthread

FUZZ_TARGETS := fuzz_request fuzz_path fuzz_files_op fuzz_output fuzz_config fuzz_route fuzz_archive fuzz_jwt fuzz_cookie fuzz_ws fuzz_egress

# Every target links one archive of all library sources (the same list the
# daemon's library is built from): the linker takes only the objects a target
# reaches, and a file split in src/ needs no edit here.
FUZZ_LIB := $(FUZZ_BUILD)/libsandboxd-fuzz.a

FUZZ_BINS := $(FUZZ_TARGETS:%=$(FUZZ_BUILD)/%)

.PHONY: fuzz fuzz-smoke fuzz-build fuzz-clean $(FUZZ_TARGETS:fuzz_%=fuzz-%)

fuzz-build: $(FUZZ_BINS)

# Library sources: coverage instrumentation without libFuzzer's main().
$(FUZZ_BUILD)/obj/src/%.o: src/%.c $(DEPS_STAMP)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link -MMD -MP -c $< -o $@

$(FUZZ_BUILD)/obj/src/api/bridge/openapi.o: $(EMBEDDED)

$(FUZZ_BUILD)/obj/tests/fuzz/%.o: tests/fuzz/%.c $(DEPS_STAMP)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -Werror -fsanitize=fuzzer -Itests/fuzz -MMD -MP -c $< -o $@

$(FUZZ_LIB): $(SRCS:%.c=$(FUZZ_BUILD)/obj/%.o)
	@rm -f $@
	ar rcs $@ $^

define FUZZ_LINK_RULE
$(FUZZ_BUILD)/$(1): $(FUZZ_BUILD)/obj/tests/fuzz/$(1).o $(FUZZ_LIB)
	$$(FUZZ_CC) $$(FUZZ_SAN) -fsanitize=fuzzer -o $$@ $$^ $$(FUZZ_LDLIBS)
endef
$(foreach t,$(FUZZ_TARGETS),$(eval $(call FUZZ_LINK_RULE,$(t))))

# One target: scratch corpus first (new inputs land there), the committed seeds
# second (read only). tests/fuzz/run.sh fails on any crash and prints the stats.
$(FUZZ_TARGETS:fuzz_%=fuzz-%): fuzz-%: $(FUZZ_BUILD)/fuzz_%
	@bash tests/fuzz/run.sh fuzz_$* $(FUZZ_SECONDS) $(FUZZ_BUILD) $(FUZZ_MERGE) $(FUZZ_ARGS)

# Every target runs even when one fails; the make target fails if any did.
fuzz: $(FUZZ_BINS)
	@failed=""; \
	for t in $(FUZZ_TARGETS); do \
		bash tests/fuzz/run.sh $$t $(FUZZ_SECONDS) $(FUZZ_BUILD) $(FUZZ_MERGE) $(FUZZ_ARGS) || failed="$$failed $$t"; \
	done; \
	if [ -n "$$failed" ]; then echo "fuzz: FAILED:$$failed (inputs in $(FUZZ_BUILD)/artifacts/)"; exit 1; fi; \
	echo "fuzz: all $(words $(FUZZ_TARGETS)) targets ran $(FUZZ_SECONDS) s without a finding"

fuzz-smoke: FUZZ_SECONDS = 10
fuzz-smoke: fuzz

fuzz-clean:
	rm -rf $(FUZZ_BUILD)

clean: fuzz-clean

-include $(shell find $(FUZZ_BUILD)/obj -name '*.d' 2>/dev/null)
