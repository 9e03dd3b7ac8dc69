#!/usr/bin/env bash
# Installs what the tests need, builds, and runs the whole test suite with ctest.
#   scripts/test.sh              every label that can run here: unit, integration, compat
#                                (with torch 2.x too, in a Debian sid root it makes, when
#                                root), netns (when root), gpu (when a GPU is visible); then
#                                the libFuzzer targets for 15 s each (scripts/fuzz.sh), built
#                                while the tests run; when root, the x86_64 release
#                                (scripts/release.sh), built while the tests run, checked in
#                                Debian 11, 12, 13 and sid roots (tests/release/check-roots.sh)
#   scripts/test.sh --sanitize   the same under AddressSanitizer + UndefinedBehaviorSanitizer
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install-deps.sh
build_dir=build
if [[ "${1:-}" == "--sanitize" ]]; then build_dir=build-sanitize; fi  # as scripts/build.sh
logs=$(mktemp -d)
background=()  # process groups started here, ended with this script whatever happens
trap 'for g in "${background[@]}"; do kill -- "-$g" 2>/dev/null || true; done; rm -rf "$logs"' EXIT

# What takes long and does not need the build runs beside it (CI's time is what a fresh clone
# takes): the torch 2.x root downloads while ddprun compiles, and the fuzz targets compile,
# at the lowest priority, while the tests run (they mostly wait on events).
torch2_pid=
if [[ $(id -u) -eq 0 ]]; then
  # torch 2.x for the compat tests of its clients, workers and torchrun: Debian sid's 2.14,
  # the closest to PyTorch main, whose torchrun has main's options (--numa-binding, ...).
  setsid scripts/torch2-root.sh "$PWD/$build_dir/torch-main-root" sid >"$logs/torch2.out" \
    2>"$logs/torch2.err" &
  torch2_pid=$!
  background+=("$torch2_pid")
fi
release_roots_pid=
if [[ $(id -u) -eq 0 && "${1:-}" != "--sanitize" ]]; then
  # The Debian roots the release is checked in download while ddprun compiles.
  setsid tests/release/check-roots.sh --make-roots-only >"$logs/roots.log" 2>&1 &
  release_roots_pid=$!
  background+=("$release_roots_pid")
fi
scripts/build.sh "$@"

exclude=()
if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
  echo "test: no GPU visible; skipping the 'gpu' label"
  exclude+=(gpu)
fi
if [[ -z "$torch2_pid" ]]; then
  echo "test: not root; skipping the 'netns' label (network namespaces need root)"
  exclude+=(netns)
else
  if ! wait "$torch2_pid"; then
    cat "$logs/torch2.err" >&2
    echo "test: scripts/torch2-root.sh failed (above)" >&2
    exit 1
  fi
  DDPRUN_TORCH2_ROOT=$(tail -n 1 "$logs/torch2.out")
  export DDPRUN_TORCH2_ROOT
fi
fuzz_pid=
if [[ "${1:-}" != "--sanitize" ]]; then
  setsid nice -n 19 scripts/fuzz.sh --build-only >"$logs/fuzz-build.log" 2>&1 &
  fuzz_pid=$!
  background+=("$fuzz_pid")
fi
release_pid=
if [[ -n "$release_roots_pid" ]]; then
  setsid nice -n 19 scripts/release.sh --arch=x86_64 --no-deb "$build_dir/release-dist" \
    >"$logs/release.log" 2>&1 &
  release_pid=$!
  background+=("$release_pid")
fi
args=(--test-dir "$build_dir" --output-on-failure -j 2 --timeout 600)
if ((${#exclude[@]})); then
  args+=(-LE "^($(IFS='|'; echo "${exclude[*]}"))$")
fi
ctest "${args[@]}"

if [[ -n "$fuzz_pid" ]]; then
  if ! wait "$fuzz_pid"; then
    cat "$logs/fuzz-build.log" >&2
    echo "test: building the fuzz targets failed (above)" >&2
    exit 1
  fi
  scripts/fuzz.sh --seconds 15
fi

if [[ -n "$release_pid" ]]; then
  if ! wait "$release_pid"; then
    cat "$logs/release.log" >&2
    echo "test: scripts/release.sh failed (above)" >&2
    exit 1
  fi
  sed -n '/^release: /,$p' "$logs/release.log"
  if ! wait "$release_roots_pid"; then
    cat "$logs/roots.log" >&2
    echo "test: making the release's Debian roots failed (above)" >&2
    exit 1
  fi
  tests/release/check-roots.sh "$build_dir/release-dist" x86_64
fi
