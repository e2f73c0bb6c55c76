# mk/fuzz.mk — libFuzzer harnesses (tests/fuzz/), built with clang.
#
#   make fuzz FUZZ_S=N   run every fuzzer for N seconds (default 60), each on
#                        its committed seed corpus (tests/fuzz/corpus/<name>/)
#                        plus a working corpus in build/fuzz/corpus/<name>/
#                        that grows across runs; a crash leaves its input in
#                        build/fuzz/artifacts/<name>/ and fails the target
#   make test-fuzz       what `make test` runs: every file under
#                        tests/fuzz/regressions/<name>/ replayed, then each
#                        fuzzer for FUZZ_TEST_S seconds (default 5: make test runs in CI's 30 minutes)
#   make fuzz-bins       just build them (build/fuzz/fuzz_<name>)
#
# The harnesses and the library sources they link (dispatcher, kernels,
# proto, server without main.c) are compiled by clang-14 with ASan, UBSan
# and libFuzzer's coverage counters in their own tree, build/fuzz (SAN=fuzz
# in the Makefile), without CUDA. FUZZ=name[,name...] picks some of them.

FUZZ_B      := build/fuzz
FUZZ_ALL    := $(patsubst tests/fuzz/fuzz_%.c,%,$(wildcard tests/fuzz/fuzz_*.c))
FUZZ        ?= $(FUZZ_ALL)
comma       := ,
FUZZ_LIST   := $(subst $(comma), ,$(FUZZ))
FUZZ_S      ?= 60
FUZZ_TEST_S ?= 5
FUZZ_BINS   := $(FUZZ_ALL:%=$(FUZZ_B)/fuzz_%)
# Longest input per fuzzer (name=bytes): the HTTP ones take a request with a body.
FUZZ_LENS := number=256 schema=4096 json=16384 bind=8192 binary=65536 http=65536 infer=65536
FUZZ_ENV := ASAN_OPTIONS=detect_leaks=1:halt_on_error=1:allocator_may_return_null=1 \
            UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 OD_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
# $(1): the shell expression of the name, $(2): seconds. The dictionary and
# the length are looked up by the shell, as the name is the loop's variable.
define fuzz-run
n=$(1); len=4096; for kv in $(FUZZ_LENS); do [ "$${kv%%=*}" = "$$n" ] && len=$${kv#*=}; done; \
dict=tests/fuzz/dict/$$n.dict; [ -f $$dict ] && dict=-dict=$$dict || dict=; \
mkdir -p $(FUZZ_B)/corpus/$$n $(FUZZ_B)/artifacts/$$n && \
$(FUZZ_ENV) $(FUZZ_B)/fuzz_$$n -max_total_time=$(2) -timeout=10 -rss_limit_mb=4096 \
  -max_len=$$len -print_final_stats=1 -artifact_prefix=$(FUZZ_B)/artifacts/$$n/ $$dict \
  $(FUZZ_B)/corpus/$$n tests/fuzz/corpus/$$n 2>&1 | tee $(FUZZ_B)/$$n.log | \
  grep -E '^#[0-9]+[[:space:]]+(INITED|DONE)|^stat::|ERROR|SUMMARY|Test unit written|deadly signal|^==' ; \
  test $${PIPESTATUS[0]} -eq 0
endef

.PHONY: fuzz fuzz-bins test-fuzz fuzz-regressions

fuzz-bins:
	@$(MAKE) --no-print-directory SAN=fuzz CC=clang-14 CUDA=0 B=$(FUZZ_B) $(FUZZ_BINS)

fuzz: fuzz-bins
	@set -e; for f in $(FUZZ_LIST); do echo "== fuzz_$$f for $(FUZZ_S) s"; \
	  $(call fuzz-run,$$f,$(FUZZ_S)); done

# Every saved crash input runs once (no fuzzing): a fixed bug stays fixed.
fuzz-regressions: fuzz-bins
	@set -e; for f in $(FUZZ_ALL); do \
	  d=tests/fuzz/regressions/$$f; [ -d $$d ] && [ -n "$$(ls -A $$d)" ] || continue; \
	  echo "== fuzz_$$f: $$(ls $$d | wc -l) regression input(s)"; \
	  $(FUZZ_ENV) $(FUZZ_B)/fuzz_$$f -runs=1 $$d/* >$(FUZZ_B)/$$f.regressions.log 2>&1 || \
	    { tail -40 $(FUZZ_B)/$$f.regressions.log; exit 1; }; done

test-fuzz: fuzz-regressions
	@$(MAKE) --no-print-directory fuzz FUZZ_S=$(FUZZ_TEST_S)

# ---- inside the SAN=fuzz sub-make ----------------------------------------------
ifeq ($(SAN),fuzz)
# The CPU kernels' per-dtype instantiations take minutes per file under ASan
# with coverage counters (kernels/cpu/elementwise.c: 122 s against 3 s at
# -O0), which would cost make test (CI: 30 minutes) several minutes. The
# fuzzers aim at the parsers, binding and the HTTP layer; the kernels they
# reach run plain -O0 here, and are checked under ASan+UBSan by the
# sanitized integration suite instead.
$(B)/obj/kernels/cpu/%.o: OPT_CFLAGS := -O0 -g -Wno-unknown-pragmas -Wno-unknown-attributes \
                                       -Wno-bitwise-conditional-parentheses
FUZZ_LINK_OBJ := $(PROTO_OBJ) $(SERVER_OBJ)
# shared with the other harness; not an intermediate make may delete
.SECONDARY: $(B)/obj/tests/fuzz/fuzz.o
$(B)/fuzz_%: tests/fuzz/fuzz_%.c $(B)/obj/tests/fuzz/fuzz.o $(LIB_A) $(FUZZ_LINK_OBJ) | $(SETUP_STAMP)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -fsanitize=fuzzer -Itests/fuzz $< $(B)/obj/tests/fuzz/fuzz.o -o $@ \
	  -Wl,--whole-archive $(LIB_A) -Wl,--no-whole-archive $(FUZZ_LINK_OBJ) \
	  $(SAN_LDFLAGS) $(SERVER_LDLIBS) $(LDLIBS) -ldl
-include $(wildcard $(B)/fuzz_*.d)
endif
