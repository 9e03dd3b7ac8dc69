#!/usr/bin/env bash
# Builds the libFuzzer targets (fuzz/) with clang in build-fuzz/ and runs each for a bounded
# time. A crash stops the script with the fuzzer's report and the input that caused it
# (build-fuzz/<target>-crash-*); make that input a regression test, then fix the bug.
#   scripts/fuzz.sh                 15 s per target, one per core at a time, as CI runs it
#   scripts/fuzz.sh --seconds 600   longer, on demand
#   scripts/fuzz.sh --build-only    builds the targets, runs none (scripts/test.sh builds
#                                   them while the tests run)
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=15
build_only=false
if [[ "${1:-}" == "--seconds" ]]; then seconds=$2; fi
if [[ "${1:-}" == "--build-only" ]]; then build_only=true; fi
targets=(fuzz_cli fuzz_rdzv_conf fuzz_rounds fuzz_kv_store fuzz_tcp_store fuzz_store_service
  fuzz_file_timers)

# -O1 as libFuzzer's tutorial builds, and line tables only (reports keep file:line): a sixth
# less CPU to build than RelWithDebInfo's -O2 -g (560 s against 665 s on 2 cores here).
flags="-O1 -gline-tables-only -DNDEBUG"
CXX=clang++-14 CC=clang-14 cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="$flags" -DCMAKE_C_FLAGS_RELWITHDEBINFO="$flags" \
  -DDDPRUN_FUZZ=ON -DDDPRUN_BUILD_TESTS=OFF -DDDPRUN_WITH_NCCL=OFF >/dev/null
cmake --build build-fuzz -j "$(nproc)" --target "${targets[@]}"
if $build_only; then exit 0; fi
# One target per core at a time; each one's lines are printed when it ends.
fuzz_one() {
  local target=$1 corpus=build-fuzz/corpus/$1
  mkdir -p "$corpus"
  (cd build-fuzz && "./fuzz/$target" -max_total_time="$seconds" -print_final_stats=1 \
     -max_len=4096 -artifact_prefix="$target-" "corpus/$target" 2>&1 |
     grep -E "^(#[0-9]+ +DONE|stat::number_of_executed_units|==[0-9]+==ERROR|SUMMARY|INFO: Running)" |
     sed "s/^/fuzz: $target: /" || true)
}
running=0
for target in "${targets[@]}"; do
  if ((running >= $(nproc))); then wait -n; running=$((running - 1)); fi
  echo "fuzz: $target for ${seconds}s"
  fuzz_one "$target" &
  running=$((running + 1))
done
wait
# libFuzzer exits non-zero and leaves <target>-crash-* behind when it finds a bug.
if compgen -G "build-fuzz/*-crash-*" >/dev/null || compgen -G "build-fuzz/*-leak-*" >/dev/null; then
  echo "fuzz: a target found a bug; the input is in $(ls build-fuzz/*-crash-* build-fuzz/*-leak-* 2>/dev/null | head -1)"
  exit 1
fi
echo "fuzz: every target ran ${seconds}s without a crash"
