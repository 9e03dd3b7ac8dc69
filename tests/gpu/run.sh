#!/usr/bin/env bash
# Every GPU check in one call, for a machine with an NVIDIA GPU. Prints the verdicts and the
# figures, and writes them to RESULTS/gpu-results.md with the whole log in RESULTS/gpu-tests.log
# (RESULTS: --out, else $OUT when set, else gpu-results/ in the bundle or build folder):
#   - gpu_tests: --nproc-per-node=gpu counts the GPUs and honours CUDA_VISIBLE_DEVICES; the
#     agent links no CUDA;
#   - gpu_nccl_tests: the worker SDK on one rank: InitNccl and an all-reduce checked element
#     by element, with the InitNccl time; three named communicators; ncclCommInitRankScalable
#     forced on; split and abort; the watchdog aborting a hung collective on SIGTERM; a peer
#     that never comes ending InitNccl at its deadline; ddp-allreduce under ddprun from 8 B to
#     1 GiB, every element checked, with nccl-tests' bandwidth table;
#   - gpu_torch_tests: PyTorch DDP with NCCL and device_ids=[LOCAL_RANK] under
#     `ddprun --standalone --nproc-per-node=gpu`, then again with a worker crashing once and
#     restarted on the GPU: identical parameters on every rank, and the uncrashed run's.
#     PYTHON_EXEC names the Python that holds PyTorch (python3 from PATH when unset).
#
#   tests/gpu/run.sh                 builds build-gpu here first (Release, NCCL on): for a
#                                    machine with the build packages, CUDA and NCCL
#   tests/gpu/run.sh --bundle DIR    runs what scripts/gpu-bundle.sh DIR packed, building
#                                    nothing: for a machine with only glibc, the driver, and
#                                    CUDA's runtime and NCCL (see scripts/gpu-bundle.sh)
#   --out RESULTS                    where the results go
# Exit status: 0 when every check passed.
set -uo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)

bundle=""
results=""
while (($#)); do
  case "$1" in
    --bundle) bundle=${2:?--bundle needs the folder scripts/gpu-bundle.sh wrote}; shift 2 ;;
    --out) results=${2:?--out needs a folder}; shift 2 ;;
    -h|--help) sed -n '2,25p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "run.sh: unknown argument '$1'; see --help" >&2; exit 2 ;;
  esac
done

fail() { echo "run.sh: $*" >&2; exit 1; }

if ! nvidia-smi -L; then
  fail "nvidia-smi sees no GPU: these checks need an NVIDIA GPU and its driver"
fi
python=${PYTHON_EXEC:-python3}

if [[ -n "$bundle" ]]; then
  bundle=$(cd "$bundle" 2>/dev/null && pwd) || fail "--bundle: no folder '$bundle'"
  [[ -f "$bundle/MANIFEST" ]] || fail "--bundle: $bundle holds no MANIFEST; make it with scripts/gpu-bundle.sh"
  bin=$bundle/bin
  results=${results:-${OUT:-$bundle/gpu-results}}
  # The glibc the bundle was built against, or a newer one.
  needed=$(grep -oE '^needs: glibc [0-9.]+' "$bundle/MANIFEST" | grep -oE '[0-9.]+$')
  have=$(ldd --version 2>/dev/null | head -n 1 | grep -oE '[0-9]+\.[0-9]+$')
  if [[ -n "$needed" && -n "$have" && "$(printf '%s\n%s\n' "$needed" "$have" | sort -V | head -n 1)" != "$needed" ]]; then
    fail "the bundle needs glibc $needed or newer and this machine has $have: make the bundle on an older Debian"
  fi
  # CUDA's runtime and NCCL (and the driver's libcuda, which the runtime opens): where the
  # loader finds them, else beside PyTorch (NVIDIA's wheels), else under /usr/local.
  search=()
  while read -r site; do
    [[ -d "$site/nvidia" ]] && search+=("$site"/nvidia/*/lib)
  done < <("$python" -c 'import site, sys; print("\n".join(site.getsitepackages() + [site.getusersitepackages()] + sys.path))' 2>/dev/null)
  search+=(/usr/local/cuda*/lib64 /usr/local/cuda*/lib /usr/local/cuda*/targets/x86_64-linux/lib
           /usr/local/nvidia/lib64 /usr/local/nvidia/lib /usr/lib/x86_64-linux-gnu /usr/lib64)
  found_in() {  # the first folder of $search that holds $1
    local dir
    for dir in "${search[@]}"; do
      [[ -e "$dir/$1" ]] && { echo "$dir"; return 0; }
    done
    return 1
  }
  needs=$(for f in "$bin"/* "$bundle"/lib/*.so*; do ldd "$f" 2>/dev/null; done | awk '$2 == "=>" && $3 == "not" { print $1 }' | sort -u)
  ldconfig -p 2>/dev/null | grep -q 'libcuda\.so\.1 ' || needs+=$'\nlibcuda.so.1'
  for lib in $needs; do
    dir=$(found_in "$lib") || fail "$lib is needed and was not found (looked in: ${search[*]}); install CUDA's runtime and NCCL (pip: nvidia-cuda-runtime, nvidia-nccl-cu13) or set LD_LIBRARY_PATH"
    echo "run.sh: $lib from $dir"
    case ":${LD_LIBRARY_PATH:-}:" in *":$dir:"*) ;; *) export LD_LIBRARY_PATH="$dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" ;; esac
  done
  still=$(for f in "$bin"/*; do ldd "$f" 2>/dev/null; done | awk '$3 == "not" { print $1 }' | sort -u | paste -sd ' ')
  [[ -z "$still" ]] || fail "after LD_LIBRARY_PATH=$LD_LIBRARY_PATH, still not found: $still"
  export DDPRUN_TEST_BIN_DIR=$bin DDPRUN_TEST_SOURCE_DIR=$repo
  programs=("$bin"/gpu_tests "$bin"/gpu_nccl_tests "$bin"/gpu_torch_tests)
  made_by=$(head -n 2 "$bundle/MANIFEST" | paste -sd ';' | sed 's/;/; /')
else
  build=$repo/build-gpu
  cmake -S "$repo" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DDDPRUN_WITH_NCCL=ON >/dev/null || fail "cmake failed"
  cmake --build "$build" -j "$(nproc)" --target gpu_bundle_inputs || fail "the build failed"
  results=${results:-${OUT:-$build/gpu-results}}
  programs=()
  while read -r folder file; do
    [[ "$(basename "$file")" == gpu_* ]] && programs+=("$file")
  done < "$build/gpu-bundle-files.txt"
  made_by="built in place: $(git -C "$repo" describe --always --dirty 2>/dev/null)"
fi

mkdir -p "$results"
log=$results/gpu-tests.log
: > "$log"
status=0
declare -A verdict=()
start=$(date +%s)
for program in "${programs[@]}"; do
  name=$(basename "$program")
  echo "=== $name" | tee -a "$log"
  # Each its share of well under 10 minutes, so that a hang still leaves the results.
  case "$name" in gpu_tests) limit=90 ;; gpu_nccl_tests) limit=240 ;; *) limit=210 ;; esac
  timeout "$limit" "$program" --gtest_color=no 2>&1 | tee -a "$log" | grep -E '^\[ (measure|       OK|  FAILED  |  SKIPPED) \]|busbw|^  +[0-9]+ +[0-9]+ +float|^# (Avg|Out of)|verified on every|GPU [0-9]'
  code=${PIPESTATUS[0]}
  verdict[$name]=$( ((code == 0)) && echo passed || { ((code == 124)) && echo "FAILED (killed after $limit s)" || echo "FAILED (exit $code)"; })
  ((code == 0)) || status=1
done
seconds=$(( $(date +%s) - start ))

# The results, in the form docs/gpu.md takes them.
{
  echo "## $(date -u '+%Y-%m-%d %H:%M UTC'): $(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | head -n 1)"
  echo
  echo "- Machine: $(uname -sr), $(nproc) CPUs, $(ldd --version | head -n 1); CUDA $(nvidia-smi | grep -oE 'CUDA Version: [0-9.]+' | cut -d' ' -f3) (driver)"
  echo "- PyTorch: $("$python" -c 'import torch
try: nccl = ".".join(map(str, torch.cuda.nccl.version()))
except Exception: nccl = "none"
print(torch.__version__, "CUDA", torch.version.cuda, "NCCL", nccl)' 2>/dev/null || echo "not importable by $python")"
  echo "- ddprun: $made_by"
  [[ -n "${LD_LIBRARY_PATH:-}" ]] && echo "- LD_LIBRARY_PATH: $LD_LIBRARY_PATH"
  echo "- Run: \`tests/gpu/run.sh${bundle:+ --bundle DIR}\`, $seconds s in all"
  echo
  echo "| program | verdict | tests |"
  echo "|---|---|---|"
  for program in "${programs[@]}"; do
    name=$(basename "$program")
    tests=$(awk -v p="=== $name" '$0 == p { on = 1; next } /^=== / { on = 0 } on && /^\[ +(OK|FAILED|SKIPPED) +\] [A-Za-z]/ { sub(/ \([0-9]+ ms\)$/, ""); print }' "$log" |
              sed -E 's/^\[ +(OK|FAILED|SKIPPED) +\] (.*)$/\2 \1/' | sort -u | paste -sd ',' | sed 's/,/, /g')
    echo "| \`$name\` | ${verdict[$name]} | $tests |"
  done
  echo
  echo "Figures:"
  echo
  grep -E '^\[ measure \]' "$log" | sed 's/^\[ measure \] /- /'
  echo
  echo "ddp-allreduce under ddprun (nccl-tests' all_reduce_perf layout):"
  echo
  echo '```'
  grep -E '^(# ddp-allreduce|#  Rank|#  +out-of-place|#  +size|#  +\(B\)|  +[0-9]+ +[0-9]+ +float|# Out of|# Avg)' "$log"
  echo '```'
} > "$results/gpu-results.md"
echo
cat "$results/gpu-results.md"
echo "run.sh: results in $results/gpu-results.md, the whole log in $log"
exit "$status"
