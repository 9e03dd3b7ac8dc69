#!/usr/bin/env bash
# Installs what the tests need, builds, and runs the whole test suite with ctest.
#   scripts/test.sh              every label that can run here: unit, integration, compat
#                                (with torch 2.x too, in a Debian sid root it makes, when
#                                root), netns (when root), gpu (when a GPU is visible); then
#                                the libFuzzer targets for 15 s each (scripts/fuzz.sh)
#   scripts/test.sh --sanitize   the same under AddressSanitizer + UndefinedBehaviorSanitizer
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install-deps.sh
build_dir=$(scripts/build.sh "$@" | tail -n 1)

exclude=()
if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
  echo "test: no GPU visible; skipping the 'gpu' label"
  exclude+=(gpu)
fi
if [[ $(id -u) -ne 0 ]]; then
  echo "test: not root; skipping the 'netns' label (network namespaces need root)"
  exclude+=(netns)
else
  # torch 2.x for the compat tests of its clients, workers and torchrun: Debian sid's 2.14,
  # the closest to PyTorch main, whose torchrun has main's options (--numa-binding, ...).
  DDPRUN_TORCH2_ROOT=$(scripts/torch2-root.sh "$PWD/$build_dir/torch-main-root" sid | tail -n 1)
  export DDPRUN_TORCH2_ROOT
fi
args=(--test-dir "$build_dir" --output-on-failure -j 2 --timeout 600)
if ((${#exclude[@]})); then
  args+=(-LE "^($(IFS='|'; echo "${exclude[*]}"))$")
fi
ctest "${args[@]}"

if [[ "${1:-}" != "--sanitize" ]]; then
  scripts/fuzz.sh --seconds 15
fi
