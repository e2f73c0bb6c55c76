# mk/cuda.mk — CUDA backend targets (included by the main Makefile).
#
#   make test-gpu    build and run tests/gpu (CPU vs CUDA through the dispatcher,
#                    allocator, OOM path), then once more under compute-sanitizer
#                    memcheck; prints a skip line and succeeds without a GPU
#   make bench-gpu   build and run bench/gpu/bench_cuda (skip line without a GPU)
#   make cuda-host-check
#                    what `make test` runs for CUDA on any machine: builds the GPU
#                    test and bench binaries (compile + link check) and runs the
#                    host-only checks of the CUDA backend (tests/gpu/test_cuda_host)
#
# The binaries live in $(B)/gpu/. Without the CUDA backend (CUDA=0 or no
# nvcc) every target says so and succeeds.

.PHONY: test-gpu bench-gpu cuda-host-check cuda-bins

GPU_DIR        := $(B)/gpu
GPU_TEST_BINS  := $(patsubst tests/gpu/%.c,$(GPU_DIR)/%,$(wildcard tests/gpu/test_*.c))
GPU_PROBE      := $(GPU_DIR)/cuda_probe
GPU_BENCH      := $(GPU_DIR)/bench_cuda
GPU_CFLAGS      = $(CFLAGS) -Ikernels/cuda -Itests/gpu
GPU_LINK        = -Wl,--whole-archive $(LIB_A) -Wl,--no-whole-archive $(PROTO_OBJ) $(SAN_LDFLAGS)

ifeq ($(CUDA_ON),1)

# scan.cu sorts with CUB, whose headers bring in thrust's system_error (a
# try/catch in its what()): exceptions stay on for that object alone. No
# CUB call made there throws; errors come back as cudaError_t.
NVCCFLAGS_EXC := $(NVCCFLAGS) -MMD -MP
$(CU_B)/obj/kernels/cuda/scan.cu.o: NVCCFLAGS = $(NVCCFLAGS_EXC)
# nvcc's host code is C++: no exceptions cross it (so no unwinder tables), and
# the kernel launch stubs' function-local statics need libstdc++'s guards,
# since the library and programs are linked by gcc.
NVCCFLAGS += -Xcompiler -fno-exceptions
LDLIBS    += -lstdc++
# Header dependencies of the .cu objects ($(B)/obj/**/*.cu.d, included by the Makefile).
NVCCFLAGS += -MMD -MP

$(GPU_DIR)/test_%: tests/gpu/test_%.c $(wildcard tests/gpu/*.h) $(LIB_A) $(PROTO_OBJ) | $(SETUP_STAMP)
	@mkdir -p $(@D)
	$(CC) $(GPU_CFLAGS) $< -o $@ $(GPU_LINK) -lcriterion $(SERVER_LDLIBS) $(LDLIBS)

$(GPU_PROBE): tests/gpu/cuda_probe.c $(LIB_A) $(PROTO_OBJ) | $(SETUP_STAMP)
	@mkdir -p $(@D)
	$(CC) $(GPU_CFLAGS) $< -o $@ $(GPU_LINK) $(SERVER_LDLIBS) $(LDLIBS)

$(GPU_BENCH): bench/gpu/bench_cuda.c $(LIB_A) $(PROTO_OBJ) | $(SETUP_STAMP)
	@mkdir -p $(@D)
	$(CC) $(GPU_CFLAGS) -O3 $< -o $@ $(GPU_LINK) $(SERVER_LDLIBS) $(LDLIBS)

cuda-bins: $(GPU_TEST_BINS) $(GPU_PROBE) $(GPU_BENCH)

cuda-host-check: cuda-bins
	@bash tools/gpu-tests.sh host $(GPU_DIR) $(if $(GPU_HOST_QUIET),quiet)

test-gpu: setup venv cuda-bins $(B)/opdispatchd
	@bash tools/gpu-tests.sh run $(GPU_DIR)

bench-gpu: setup venv $(GPU_BENCH) $(B)/opdispatchd
	@$(GPU_BENCH)
	@OPENBLAS_NUM_THREADS=1 .venv/bin/python tests/gpu/server_cuda.py --server $(B)/opdispatchd --no-diff --bench

else

# Without the backend the library still exports od_cuda.h, answering "no device".
NOCUDA_OBJ := $(B)/obj/kernels/cuda/nocuda.o
$(LIB_A) $(LIB_SO): $(NOCUDA_OBJ)

cuda-bins cuda-host-check test-gpu bench-gpu:
	@echo "gpu: SKIPPED: the CUDA backend is not built (CUDA=$(CUDA); nvcc $(if $(NVCC_PATH),at $(NVCC_PATH),not found))"

endif

-include $(wildcard $(GPU_DIR)/*.d)
