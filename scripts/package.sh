#!/usr/bin/env bash
# Builds the Debian packages ddprun and ddprun-dev (cmake/packaging.cmake) from a Release
# build into dist/ (or the folder given), and lists what each holds.
#   scripts/package.sh [OUT_DIR]      then: sudo apt install ./dist/ddprun_*.deb
set -euo pipefail
cd "$(dirname "$0")/.."
out=$(realpath -m "${1:-dist}")
scripts/install-deps.sh --build
build_dir=$(scripts/build.sh | tail -n 1)
mkdir -p "$out"
cpack -G DEB -B "$out" --config "$build_dir/CPackConfig.cmake" >/dev/null
rm -rf "$out/_CPack_Packages"
for deb in "$out"/*.deb; do
  echo "$deb:"
  dpkg-deb -f "$deb" Package Version Depends | sed 's/^/  /'
done
