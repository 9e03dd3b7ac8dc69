#!/usr/bin/env bash
# Configures and builds ddprun.
#   scripts/build.sh              Release build in build/
#   scripts/build.sh --sanitize   ASan+UBSan build in build-sanitize/
set -euo pipefail
cd "$(dirname "$0")/.."

build_dir=build
flags=(-DCMAKE_BUILD_TYPE=Release)  # -O2: CMakeLists.txt says why
if [[ "${1:-}" == "--sanitize" ]]; then
  build_dir=build-sanitize
  flags=(-DCMAKE_BUILD_TYPE=RelWithDebInfo -DDDPRUN_SANITIZE=ON)
fi
cmake -S . -B "$build_dir" -G Ninja "${flags[@]}" >/dev/null
cmake --build "$build_dir" -j "$(nproc)"
echo "$build_dir"
