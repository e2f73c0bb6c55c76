#!/usr/bin/env bash
# GPU test entry (owned by the CUDA backend; see mk/cuda.mk).
#
#   gpu-tests.sh skip-report      called by `make test`: builds the CUDA test and
#                                 bench binaries when the backend is built, runs the
#                                 host-only checks, and says why GPU tests are skipped
#   gpu-tests.sh host DIR         run DIR/test_cuda_host (no GPU needed)
#   gpu-tests.sh run DIR          `make test-gpu`: the device suite, the server on
#                                 cuda against cpu (tests/gpu/server_cuda.py), the
#                                 suite under compute-sanitizer memcheck and the
#                                 reductions under racecheck; without a device
#                                 prints a skip line and exits 0
set -u
mode=${1:-skip-report}
dir=${2:-build/gpu}

probe_reason() {
  # The library's own answer (cudaGetDeviceCount), so the reason is exact.
  if [ -x "$dir/cuda_probe" ]; then
    "$dir/cuda_probe"
  else
    echo "unavailable: the CUDA probe was not built"
    return 1
  fi
}

case "$mode" in
skip-report)
  # The host-only part needs the CUDA backend; the Makefile fragment says so itself otherwise.
  make --no-print-directory cuda-host-check || exit 1
  # Once more under ASan + UBSan when `make test` has built that tree.
  if [ -f build/asan/libopdispatch.a ]; then
    make --no-print-directory SAN=1 B=build/asan GPU_HOST_QUIET=1 cuda-host-check || exit 1
  fi
  ;;
host)
  echo "== $dir/test_cuda_host"
  # Under ASan the CUDA runtime needs the shadow gap unprotected, and its own
  # allocations at exit are not ours to report.
  supp=$(mktemp)
  printf 'leak:libcuda.so\nleak:libcudart.so\nleak:libcublas\n' > "$supp"
  ASAN_OPTIONS=${ASAN_OPTIONS:-protect_shadow_gap=0} LSAN_OPTIONS="suppressions=$supp:print_suppressions=0" \
    OPENBLAS_NUM_THREADS=1 "$dir/test_cuda_host" --jobs 2
  rc=$?
  rm -f "$supp"
  [ $rc -eq 0 ] || exit 1
  [ "${3:-}" = quiet ] && exit 0
  if reason=$(probe_reason); then
    echo "gpu: a CUDA device is present ($reason); run 'make test-gpu' for the GPU suite"
  else
    echo "gpu: SKIPPED GPU tests: ${reason#unavailable: }"
  fi
  ;;
run)
  if ! reason=$(probe_reason); then
    echo "gpu: SKIPPED GPU tests: ${reason#unavailable: }"
    exit 0
  fi
  echo "gpu: $reason"
  echo "== $dir/test_cuda_host"
  OPENBLAS_NUM_THREADS=1 "$dir/test_cuda_host" --jobs 1 || exit 1
  echo "== $dir/test_cuda"
  OD_CUDA_POISON=1 OPENBLAS_NUM_THREADS=1 "$dir/test_cuda" --jobs 1 || exit 1
  # The real server on device cuda against device cpu: every overload with
  # the differential tester's inputs, JSON and binary, stored tensors, autograd.
  server=${OD_SERVER:-$(dirname "$dir")/opdispatchd}
  py=$( [ -x .venv/bin/python ] && echo .venv/bin/python || echo python3 )
  echo "== tests/gpu/server_cuda.py ($server)"
  OPENBLAS_NUM_THREADS=1 "$py" tests/gpu/server_cuda.py --server "$server" || exit 1
  sanitizer=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null || true)
  if [ -z "$sanitizer" ]; then
    echo "gpu: compute-sanitizer not found; memcheck run SKIPPED"
    exit 0
  fi
  echo "== compute-sanitizer --tool memcheck $dir/test_cuda"
  # OD_TEST_QUICK thins out the largest cases (memcheck is slow) but keeps
  # every kernel and path. The allocation-failure test is excluded: the
  # sanitizer reports the failed cudaMalloc it provokes on purpose.
  OD_TEST_QUICK=1 OD_CUDA_POISON=1 OPENBLAS_NUM_THREADS=1 "$sanitizer" --tool memcheck --error-exitcode 1 \
    --leak-check no "$dir/test_cuda" --jobs 1 --filter '!(alloc/oom*)' || exit 1
  # Shared-memory races in the block reductions: sum ... var, softmax, layer_norm.
  echo "== compute-sanitizer --tool racecheck $dir/test_cuda --filter 'red/*'"
  OD_TEST_QUICK=1 OPENBLAS_NUM_THREADS=1 "$sanitizer" --tool racecheck --error-exitcode 1 \
    "$dir/test_cuda" --jobs 1 --filter 'red/*' || exit 1
  ;;
*)
  echo "usage: $0 skip-report | host DIR | run DIR" >&2
  exit 2
  ;;
esac
