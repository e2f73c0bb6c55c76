#!/usr/bin/env bash
# GPU test entry. `skip-report`: say why GPU tests are skipped (no device).
set -u
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
  echo "gpu: a CUDA device is present; run 'make test-gpu' for the GPU suite"
else
  echo "gpu: SKIPPED GPU tests: no CUDA device or driver on this machine (nvidia-smi finds none)"
fi
