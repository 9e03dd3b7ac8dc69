#!/usr/bin/env bash
# Every GPU check in one call, for a machine with an NVIDIA GPU and CUDA/NCCL under
# /usr/local/cuda: builds what is needed and runs the ctest label `gpu`:
#   - --nproc-per-node=gpu counts the GPUs (and CUDA_VISIBLE_DEVICES);
#   - the worker SDK: InitNccl + ncclAllReduce verified on a 1-rank communicator, several
#     named communicators, ncclCommInitRankScalable forced on, split and abort;
#   - ddp-allreduce under ddprun, 8 B to 256 MiB, every element checked, with its bus
#     bandwidth table and the InitNccl time in the output.
#   tests/gpu/run.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
nvidia-smi -L
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DDDPRUN_WITH_NCCL=ON >/dev/null
cmake --build build-gpu -j "$(nproc)" --target gpu_tests gpu_nccl_tests ddprun test_worker ddp-allreduce
status=0
ctest --test-dir build-gpu -L gpu --output-on-failure -V > build-gpu/gpu-tests.log 2>&1 || status=$?
# The figures (InitNccl time, the bandwidth table) and the verdicts; the whole log stays in
# build-gpu/gpu-tests.log.
grep -E "measure|busbw|^[0-9]+: +[0-9]+ +[0-9]+ |verified|Passed|Failed|tests passed" build-gpu/gpu-tests.log || true
exit "$status"
