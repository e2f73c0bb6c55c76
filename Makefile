# opdispatch — build, test, bench, run.
#
#   make run     set up, build, start opdispatchd on 127.0.0.1:8000
#   make test    set up, build, run every test (normal build, then ASan+UBSan,
#                allocation-failure injection, a short pass of each fuzzer)
#   make fuzz    run every fuzzer for FUZZ_S seconds (mk/fuzz.mk)
#   make bench   run the benchmarks (never part of `make test`)
#   make soak    mixed load for SOAK_S seconds (600), checked for leaks and
#                drift; report in build/soak/ (make test runs 30 s of it)
#
# Build trees: build/ (release, -O2) and build/asan/ (AddressSanitizer +
# UndefinedBehaviorSanitizer, -fno-sanitize-recover=all). Sources are found by
# wildcard, so a new .c file in a module folder or a new tests/unit/test_*.c
# needs no edit here.

SHELL := /bin/bash
.DEFAULT_GOAL := all
# Build on every core unless the caller chose a -j of its own.
ifeq (,$(filter -j%,$(MAKEFLAGS)))
MAKEFLAGS += -j$(shell nproc 2>/dev/null || echo 2)
endif

CC      ?= gcc
NVCC    ?= nvcc
PREFIX  ?= /usr/local
B       ?= build
SAN     ?= 0
CUDA    ?= auto

# ---- toolchain flags ----------------------------------------------------------
WARN     := -Wall -Wextra -Werror -Wno-error=deprecated-declarations
CSTD     := -std=c11 -D_GNU_SOURCE
INCLUDES := -Idispatcher -Ikernels -Iproto -Iserver
# -fno-trapping-math: lets gcc vectorise branchy float code (exp, sigmoid);
# it keeps IEEE NaN/Inf results, it only assumes no FP traps are enabled.
# -fno-math-errno: sqrtf becomes (v)sqrtps; with errno gcc branches to libm
# on a negative input, which leaves a sqrt loop scalar (nothing reads errno
# after a math call; the exact functions it may inline give the same bits).
BASE_CFLAGS := $(CSTD) $(WARN) $(INCLUDES) -fPIC -pthread -MMD -MP -fno-trapping-math -fno-math-errno
# The sanitizer trees take the release build's -march=x86-64-v2 too, so that
# ASan/UBSan and the fuzzers check the SSE4.1 code users run (proto/fmt.c's
# number scanning and printing), not only its portable fallback.
ifeq ($(SAN),1)
OPT_CFLAGS := -O1 -g -march=x86-64-v2 -fno-omit-frame-pointer -fsanitize=address,undefined,float-cast-overflow -fno-sanitize-recover=all
SAN_LDFLAGS := -fsanitize=address,undefined,float-cast-overflow
else ifeq ($(SAN),fuzz)
# The fuzzers' tree (mk/fuzz.mk, CC=clang-14): ASan+UBSan plus libFuzzer's
# coverage counters; the harnesses link -fsanitize=fuzzer themselves. clang
# ignores gcc's vectoriser pragmas and simd attributes (scalar code, same
# results), and would flag od_math.h's branch-free `mask & mask ? a : b`.
OPT_CFLAGS := -O1 -g -march=x86-64-v2 -fno-omit-frame-pointer -fsanitize=fuzzer-no-link,address,undefined \
              -fno-sanitize-recover=all -Wno-unknown-pragmas -Wno-unknown-attributes \
              -Wno-bitwise-conditional-parentheses
SAN_LDFLAGS := -fsanitize=address,undefined
else
OPT_CFLAGS := -O2 -g -march=x86-64-v2 -mtune=native
SAN_LDFLAGS :=
endif
CFLAGS  += $(BASE_CFLAGS) $(OPT_CFLAGS)
LDLIBS  := -lopenblas -lsleefgnuabi -lm -lpthread
SERVER_LDLIBS := -lmicrohttpd -ljansson

# ---- CUDA detection ---------------------------------------------------------
NVCC_PATH := $(shell command -v $(NVCC) 2>/dev/null || ls /usr/local/cuda/bin/nvcc 2>/dev/null)
ifeq ($(CUDA),auto)
  ifneq ($(NVCC_PATH),)
    CUDA_ON := 1
  else
    CUDA_ON := 0
  endif
else ifeq ($(CUDA),1)
  ifeq ($(NVCC_PATH),)
    $(error CUDA=1 but nvcc was not found; install the CUDA toolkit or use CUDA=0)
  endif
  CUDA_ON := 1
else
  CUDA_ON := 0
endif
CUDA_HOME ?= $(patsubst %/bin/nvcc,%,$(NVCC_PATH))
# Device code. GPU_ARCH=auto (the default): machine code for the GPU this machine
# has (nvidia-smi's compute capability) and PTX for newer ones; with no GPU in
# sight (CI, a build host), compute_80 PTX alone, which the driver compiles for
# any GPU from the A100 on when a kernel is first loaded, and which builds in
# about a third of the time. GPU_ARCH=release: machine code for sm_80 and sm_90
# and compute_90 PTX (docker/Dockerfile.cuda). NVCC_ARCH=... overrides both.
GPU_ARCH ?= auto
GPU_CC := $(shell nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | grep -E '^[0-9]+\.[0-9]+$$' | head -1 | tr -d .)
ifeq ($(GPU_ARCH),release)
  NVCC_ARCH ?= -gencode=arch=compute_80,code=sm_80 -gencode=arch=compute_90,code=sm_90 \
               -gencode=arch=compute_90,code=compute_90
else ifneq ($(GPU_CC),)
  NVCC_ARCH ?= -gencode=arch=compute_$(GPU_CC),code=sm_$(GPU_CC) -gencode=arch=compute_$(GPU_CC),code=compute_$(GPU_CC)
else
  NVCC_ARCH ?= -gencode=arch=compute_80,code=compute_80
endif
NVCCFLAGS := -O3 -std=c++17 $(NVCC_ARCH) $(INCLUDES) -Xcompiler -fPIC,-Wall,-Wextra,-Werror \
             --expt-relaxed-constexpr -Werror all-warnings

# ---- sources ----------------------------------------------------------------
LIB_SRC  := $(wildcard dispatcher/*.c) $(wildcard kernels/*.c) \
            $(foreach d,cpu meta composite autograd batched autocast reference modes,$(wildcard kernels/$(d)/*.c))
CUDA_C   := $(wildcard kernels/cuda/*.c)
CUDA_CU  := $(wildcard kernels/cuda/*.cu)
ifeq ($(CUDA_ON),1)
  LIB_SRC += $(CUDA_C)
  CFLAGS  += -DOD_HAVE_CUDA=1 -I$(CUDA_HOME)/include
  LDLIBS  += -L$(CUDA_HOME)/lib64 -Wl,-rpath,$(CUDA_HOME)/lib64 -lcublas -lcudart
endif
PROTO_SRC  := $(wildcard proto/*.c)
SERVER_SRC := $(filter-out server/main.c,$(wildcard server/*.c))
UNIT_SRC   := $(wildcard tests/unit/test_*.c)
BENCH_SRC  := $(wildcard bench/bench_*.c)

LIB_OBJ    := $(LIB_SRC:%.c=$(B)/obj/%.o)
# nvcc objects carry no sanitizer instrumentation, so the sanitizer tree
# links the release tree's instead of spending minutes compiling them again.
ifeq ($(SAN),1)
CU_B ?= build
else
CU_B ?= $(B)
endif
CU_OBJ     := $(if $(filter 1,$(CUDA_ON)),$(CUDA_CU:%.cu=$(CU_B)/obj/%.cu.o))
PROTO_OBJ  := $(PROTO_SRC:%.c=$(B)/obj/%.o)
SERVER_OBJ := $(SERVER_SRC:%.c=$(B)/obj/%.o)
UNIT_BIN   := $(UNIT_SRC:tests/unit/%.c=$(B)/tests/%)
BENCH_BIN  := $(BENCH_SRC:bench/%.c=$(B)/bench/%)

LIB_A  := $(B)/libopdispatch.a
LIB_SO := $(B)/libopdispatch.so
SERVER := $(if $(wildcard server/main.c),$(B)/opdispatchd)

# ---- top-level targets --------------------------------------------------------
.PHONY: all plugins lib setup test test-unit test-asan test-integration difftest bench bench-baseline run clean check-cuda

PLUGINS := $(patsubst examples/plugins/%.c,$(B)/plugins/lib%.so,$(wildcard examples/plugins/*.c)) \
           $(patsubst tests/plugins/%.c,$(B)/plugins/lib%.so,$(wildcard tests/plugins/*.c))

CLIENT_C := $(B)/opdispatch

all: $(LIB_A) $(LIB_SO) $(SERVER) $(UNIT_BIN) $(PLUGINS) $(CLIENT_C)

# The C client library and the opdispatch command (clients/c/): libcurl for
# control requests, its own epoll engine for load.
$(CLIENT_C): $(wildcard clients/c/*.c) $(wildcard clients/c/*.h) | $(SETUP_STAMP)
	@mkdir -p $(@D)
	$(CC) $(BASE_CFLAGS) $(OPT_CFLAGS) -Iclients/c $(filter %.c,$^) -o $@ $(SAN_LDFLAGS) -lcurl -ljansson -lm -pthread

plugins: $(PLUGINS)

lib: $(LIB_A) $(LIB_SO)

# Debian packages this project needs; installed by `make setup` when missing.
DEB_PKGS := build-essential pkg-config libopenblas-dev libsleef-dev libmicrohttpd-dev libjansson-dev \
            libcriterion-dev libcurl4-openssl-dev python3 python3-venv curl wrk python3-torch nodejs gnuplot-nox libjs-chart.js chromium chromium-driver \
            nginx clang-14 libclang-rt-14-dev llvm-14
SETUP_STAMP := .setup/debs-$(shell echo $(DEB_PKGS) | md5sum | cut -c1-8)

setup: $(SETUP_STAMP)
$(SETUP_STAMP):
	@bash tools/setup-debs.sh $(DEB_PKGS)
	@mkdir -p .setup && touch $@

$(LIB_A): $(LIB_OBJ) $(CU_OBJ)
	@mkdir -p $(@D)
	rm -f $@ && ar rcs $@ $^

$(LIB_SO): $(LIB_OBJ) $(CU_OBJ)
	@mkdir -p $(@D)
	$(CC) -shared -o $@ $^ $(SAN_LDFLAGS) $(LDLIBS) -pthread

$(B)/obj/%.o: %.c | $(SETUP_STAMP)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -c $< -o $@

# Device objects rebuild when the targets they were built for change.
NVCC_ARCH_STAMP := $(CU_B)/obj/kernels/cuda/.arch-$(shell echo '$(NVCC_ARCH)' | md5sum | cut -c1-8)
$(NVCC_ARCH_STAMP):
	@mkdir -p $(@D) && rm -f $(@D)/.arch-* && touch $@

$(CU_B)/obj/%.cu.o: %.cu $(NVCC_ARCH_STAMP)
	@mkdir -p $(@D)
	$(NVCC_PATH) $(NVCCFLAGS) -c $< -o $@

# Unit tests link the whole static library with --whole-archive, like the
# server, so every object od_init() registers from is in the binary.
$(B)/tests/%: tests/unit/%.c $(LIB_A) $(PROTO_OBJ) | $(SETUP_STAMP)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -Itests/unit $< -o $@ -Wl,--whole-archive $(LIB_A) -Wl,--no-whole-archive \
	  $(PROTO_OBJ) $(SAN_LDFLAGS) -lcriterion $(SERVER_LDLIBS) $(LDLIBS)

# -rdynamic: plugins (--plugin) resolve od_def, od_impl, ... against the
# server's own registry, so the server exports its symbols.
# the dashboard's files are served from where they are (or $$OD_WEB_ROOT)
$(B)/obj/server/web_files.o: CFLAGS += -DOD_WEB_ROOT='"$(abspath server/web)"' \
                                      -DOD_JS_CLIENT='"$(abspath clients/js/opdispatch.mjs)"'

$(B)/opdispatchd: server/main.c $(SERVER_OBJ) $(PROTO_OBJ) $(LIB_A)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -rdynamic $< $(SERVER_OBJ) $(PROTO_OBJ) -o $@ -Wl,--whole-archive $(LIB_A) \
	  -Wl,--no-whole-archive $(SAN_LDFLAGS) $(SERVER_LDLIBS) $(LDLIBS) -ldl

# Plugins: the example (examples/plugins/) and the broken ones the tests load.
$(B)/plugins/lib%.so: examples/plugins/%.c dispatcher/od_plugin.h | $(SETUP_STAMP)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -shared $< -o $@ $(SAN_LDFLAGS) -lm
$(B)/plugins/lib%.so: tests/plugins/%.c dispatcher/od_plugin.h | $(SETUP_STAMP)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -shared $< -o $@ $(SAN_LDFLAGS) -lm

$(B)/bench/%: bench/%.c $(LIB_A) $(PROTO_OBJ)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -O3 $< -o $@ -Wl,--whole-archive $(LIB_A) -Wl,--no-whole-archive \
	  $(PROTO_OBJ) $(SAN_LDFLAGS) $(SERVER_LDLIBS) $(LDLIBS)

# ---- tests --------------------------------------------------------------------
# Criterion prints its own summary per binary; we stop at the first failure.
test-unit: $(UNIT_BIN)
	@set -e; for t in $(UNIT_BIN); do echo "== $$t"; OD_CPU_POISON=1 OPENBLAS_NUM_THREADS=1 $$t --jobs 2; done

# The integration suite: first on both cores (pytest-xdist; a module's tests stay
# on one worker, as they share its server; files go out in collection order,
# conftest.py's LONG_FILES first, not xdist's most-tests-first), then the files
# that time the server (conftest.py's SERIAL_FILES) alone. $(1): more pytest
# arguments.
define pytest-integration
.venv/bin/python -m pytest -q --durations=12 -n 2 --dist loadfile --no-loadscope-reorder -m "not serial" tests/integration $(1) && \
	  .venv/bin/python -m pytest -q --durations=6 -m serial tests/integration $(1)
endef

# Loaded into the tests' PyTorch processes only (tools/torch_quiet.c says
# why): plain flags, as those processes have no sanitizer runtime.
TORCH_QUIET := build/tools/libtorch_quiet.so
export OD_TORCH_PRELOAD := $(abspath $(TORCH_QUIET))
$(TORCH_QUIET): tools/torch_quiet.c kernels/cpu/od_blas_core.h
	@mkdir -p $(@D)
	$(CC) -shared -fPIC -O2 -Wall -Wextra -Werror -Ikernels $< -o $@

test-integration: all $(TORCH_QUIET)
	@if [ -d tests/integration ] && ls tests/integration/test_*.py >/dev/null 2>&1; then \
	  $(MAKE) --no-print-directory venv venv-torch && export OD_SERVER=$(abspath $(B)/opdispatchd) && \
	  $(call pytest-integration); \
	else echo "integration: no tests yet"; fi
	OD_SERVER=$(abspath $(B)/opdispatchd) node --test clients/js/test/

test-asan:
	@$(MAKE) --no-print-directory SAN=1 B=build/asan test-unit

# The randomized differential test against PyTorch 1.13 (tests/diff/), as
# long as asked: make difftest DIFF_N=2000 [DIFF_SEED=n] [DIFF_OPS=regex].
# make test runs a bounded sample of it (tests/integration/test_difftest.py).
DIFF_N ?= 500
difftest: all $(TORCH_QUIET)
	@$(MAKE) --no-print-directory venv
	.venv/bin/python tests/diff/difftest.py --n $(DIFF_N) --server $(abspath $(B)/opdispatchd) \
	  $(if $(DIFF_SEED),--seed $(DIFF_SEED)) $(if $(DIFF_OPS),--ops '$(DIFF_OPS)')

# PyTorch's own OpInfo samples replayed against the server (tests/diff/opinfo.py):
# make opinfo [OPINFO_SAMPLES=12] [OPINFO_OPS=regex]. make test runs a bounded
# sample of it (tests/integration/test_opinfo.py).
OPINFO_SAMPLES ?= 12
.PHONY: opinfo venv-torch
opinfo: all $(TORCH_QUIET)
	@$(MAKE) --no-print-directory venv venv-torch
	.venv/bin/python tests/diff/opinfo.py --samples $(OPINFO_SAMPLES) --server $(abspath $(B)/opdispatchd) \
	  $(if $(OPINFO_OPS),--ops '$(OPINFO_OPS)')

# The whole suite twice: a release build, then ASan+UBSan (unit tests and the
# integration suite against the sanitized server, which fails on any report),
# with a short soak of the release server between them (mk/soak.mk); then
# allocation-failure injection (mk/faults.mk) and a short pass of every
# fuzzer with its saved regressions (mk/fuzz.mk).
test: setup
	@$(MAKE) --no-print-directory all
	@$(MAKE) --no-print-directory test-unit
	@$(MAKE) --no-print-directory test-integration
	@$(MAKE) --no-print-directory test-soak
	@$(MAKE) --no-print-directory test-asan
	@$(MAKE) --no-print-directory test-integration-asan
	@$(MAKE) --no-print-directory faults
	@$(MAKE) --no-print-directory test-fuzz
	@bash tools/gpu-tests.sh skip-report
	@echo "make test: all suites passed"

# ---- python virtualenvs for integration tests and benchmarks ------------------
# .venv-torch sees Debian's python3-torch and adds what its OpInfo database imports.
TORCH_VENV_STAMP := .venv-torch/.stamp-$(shell md5sum tools/requirements-torch.txt 2>/dev/null | cut -c1-8)
venv-torch: $(TORCH_VENV_STAMP)
$(TORCH_VENV_STAMP): tools/requirements-torch.txt | $(SETUP_STAMP)
	/usr/bin/python3 -m venv --system-site-packages .venv-torch
	.venv-torch/bin/pip install -q -r tools/requirements-torch.txt
	touch $@

VENV_STAMP := .venv/.stamp-$(shell md5sum tools/requirements.txt 2>/dev/null | cut -c1-8)
.PHONY: venv
venv: $(VENV_STAMP)
$(VENV_STAMP): tools/requirements.txt | $(SETUP_STAMP)
	/usr/bin/python3 -m venv .venv
	.venv/bin/pip install -q -r tools/requirements.txt
	touch $@

# ---- benchmarks ---------------------------------------------------------------
# One benchmark at a time: under this Makefile's -j, make would run the
# parts side by side on the same cores, and each would measure the others.
# A part that fails (a missed target that exits 1) does not stop the rest:
# they are named at the end, and the run exits 1.
bench: setup $(LIB_A) $(BENCH_BIN)
	@failed=; \
	for b in $(BENCH_BIN); do echo "== $$b"; $$b || failed="$$failed $$b"; done; \
	for t in $(BENCH_PARTS); do echo "== make $$t"; $(MAKE) --no-print-directory $$t || failed="$$failed $$t"; done; \
	if [ -n "$$failed" ]; then echo "make bench: failed:$$failed"; exit 1; fi

# Before and after in one run: builds BASE (a commit) in build/baseline-BASE
# and runs its benchmarks beside ours (bench_core twice each, interleaved;
# the HTTP tiny-call and 4M-float scenarios via run.py --baseline).
bench-baseline: setup all $(B)/bench/bench_core
	@test -n "$(BASE)" || { echo "usage: make bench-baseline BASE=<commit>"; exit 2; }
	@set -e; d=build/baseline-$(BASE); \
	  [ -d $$d ] || git worktree add -f --detach $$d $(BASE); \
	  $(MAKE) --no-print-directory -C $$d all build/bench/bench_core; \
	  for i in 1 2; do \
	    echo "== bench_core at $(BASE)"; OPENBLAS_NUM_THREADS=2 $$d/build/bench/bench_core; \
	    echo "== bench_core here"; OPENBLAS_NUM_THREADS=2 $(B)/bench/bench_core; \
	  done; \
	  .venv/bin/python bench/http/run.py --opdispatchd $(B)/opdispatchd \
	    --baseline $$d/build/opdispatchd --duration 4

# on 127.0.0.1 only, with the benchmark and load endpoints the dashboard's
# load panel uses
run: setup all
	@echo "opdispatchd: http://127.0.0.1:8000/  (the dashboard: open it in a browser)"
	$(B)/opdispatchd --host 127.0.0.1 --port 8000 --enable-bench

check-cuda:
	@echo "CUDA_ON=$(CUDA_ON) NVCC=$(NVCC_PATH) CUDA_HOME=$(CUDA_HOME)"

clean:
	rm -rf build

-include $(wildcard mk/*.mk)
-include $(shell find $(B)/obj $(B)/tests $(B)/bench $(B)/plugins -name '*.d' 2>/dev/null)
