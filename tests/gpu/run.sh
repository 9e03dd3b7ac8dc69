#!/usr/bin/env bash
# Every GPU check in one call, for a machine with an NVIDIA GPU (and CUDA under
# /usr/local/cuda): builds what is needed and runs the ctest label `gpu`.
#   tests/gpu/run.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
nvidia-smi -L
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build-gpu -j "$(nproc)" --target gpu_tests ddprun test_worker
ctest --test-dir build-gpu -L gpu --output-on-failure
