#!/usr/bin/env bash
# Every GPU check in one call, for a machine with an NVIDIA GPU. Prints the verdicts and the
# figures, and writes them to RESULTS/gpu-results.md (after each program, and whatever stops
# the run) with the whole log in RESULTS/gpu-tests.log (RESULTS: --out, else $OUT when set,
# else gpu-results/ in the bundle or build folder):
#   - gpu_tests: --nproc-per-node=gpu counts the GPUs and honours CUDA_VISIBLE_DEVICES; the
#     agent links no CUDA;
#   - gpu_nccl_tests: the worker SDK on one rank: InitNccl and an all-reduce checked element
#     by element, with the InitNccl time; three named communicators; ncclCommInitRankScalable
#     forced on; split and abort; the watchdog aborting a held collective on SIGTERM; a peer
#     that never comes ending InitNccl at its deadline; ddp-allreduce under ddprun from 8 B to
#     1 GiB, every element checked, with nccl-tests' bandwidth table; node health: the
#     built-in check (NVML found, every GPU usable) and examples/health-checks/ pass;
#   - gpu_torch_tests: PyTorch DDP with NCCL and device_ids=[LOCAL_RANK] under
#     `ddprun --standalone --nproc-per-node=gpu`, then again with a worker crashing once and
#     restarted on the GPU: identical parameters on every rank, and the uncrashed run's.
#     PYTHON_EXEC names the Python that holds PyTorch; unset, the first of python3 and
#     /opt/*/.venv/bin/python3 that imports torch.
#
#   tests/gpu/run.sh                 builds build-gpu here first (Release, NCCL on): for a
#                                    machine with the build packages, CUDA and NCCL
#   tests/gpu/run.sh --bundle DIR    runs what scripts/gpu-bundle.sh DIR packed, building
#                                    nothing: for a machine with only glibc, the driver, and
#                                    CUDA's runtime and NCCL (see scripts/gpu-bundle.sh)
#   --out RESULTS                    where the results go
# RUN_BUDGET_S (default 540) bounds the tests' time in all. Exit status: 0 when every check
# passed.
set -uo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)

bundle=""
results=""
while (($#)); do
  case "$1" in
    --bundle) bundle=${2:?--bundle needs the folder scripts/gpu-bundle.sh wrote}; shift 2 ;;
    --out) results=${2:?--out needs a folder}; shift 2 ;;
    -h|--help) sed -n '2,27p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "run.sh: unknown argument '$1'; see --help" >&2; exit 2 ;;
  esac
done
if [[ -n "$bundle" ]]; then
  bundle=$(cd "$bundle" 2>/dev/null && pwd) || { echo "run.sh: --bundle: no folder '$bundle'" >&2; exit 1; }
  results=${results:-${OUT:-$bundle/gpu-results}}
else
  results=${results:-${OUT:-$repo/build-gpu/gpu-results}}
fi
mkdir -p "$results"
log=$results/gpu-tests.log
: > "$log"
budget=${RUN_BUDGET_S:-540}
start=$(date +%s)
programs=()
declare -A verdict=()
made_by=""
python=""
torch_version=""
stopped=""  # why the run stopped before the tests, if it did

# The results, in the form docs/gpu.md takes them; written again after each program.
write_results() {
  {
    echo "## $(date -u '+%Y-%m-%d %H:%M UTC'): $(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null | head -n 1)"
    echo
    echo "- Machine: $(uname -sr), $(nproc) CPUs, $(ldd --version 2>/dev/null | head -n 1); CUDA $(nvidia-smi 2>/dev/null | grep -oE 'CUDA Version: [0-9.]+' | cut -d' ' -f3) (driver)"
    echo "- PyTorch: ${python:-none} $torch_version"
    echo "- ddprun: $made_by"
    echo "- LD_LIBRARY_PATH: ${LD_LIBRARY_PATH:-(unset)}"
    echo "- Run: \`tests/gpu/run.sh${bundle:+ --bundle DIR}\`, $(( $(date +%s) - start )) s so far"
    [[ -n "$stopped" ]] && echo "- **Stopped before the tests**: $stopped"
    echo
    echo "| program | verdict | tests |"
    echo "|---|---|---|"
    local program name tests
    for program in "${programs[@]}"; do
      name=$(basename "$program")
      tests=$(awk -v p="=== $name" '$0 == p { on = 1; next } /^=== / { on = 0 } on && /^\[ +(OK|FAILED|SKIPPED) +\] [A-Za-z]/ { sub(/ \([0-9]+ ms\)$/, ""); print }' "$log" |
                sed -E 's/^\[ +(OK|FAILED|SKIPPED) +\] (.*)$/\2 \1/' | sort -u | paste -sd ',' | sed 's/,/, /g')
      echo "| \`$name\` | ${verdict[$name]:-not run} | $tests |"
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
}
trap write_results EXIT

fail() {
  stopped="$*"
  echo "run.sh: $*" | tee -a "$log" >&2
  exit 1
}

nvidia-smi -L 2>&1 | tee -a "$log" || fail "nvidia-smi sees no GPU: these checks need an NVIDIA GPU and its driver"

# The Python that holds PyTorch, for the PyTorch test and for finding NVIDIA's libraries.
for candidate in ${PYTHON_EXEC:-} python3 /opt/*/.venv/bin/python3 /opt/*/bin/python3; do
  if [[ -x "$(command -v "$candidate" 2>/dev/null)" ]] && "$candidate" -c 'import torch' 2>/dev/null; then
    python=$(command -v "$candidate")
    break
  fi
done
if [[ -n "$python" ]]; then
  export PYTHON_EXEC=$python
  torch_version=$("$python" -c 'import torch
try: nccl = ".".join(map(str, torch.cuda.nccl.version()))
except Exception: nccl = "none"
print(torch.__version__, "CUDA", torch.version.cuda, "NCCL", nccl)' 2>&1 | tail -n 1)
  echo "run.sh: PyTorch from $python: $torch_version" | tee -a "$log"
else
  echo "run.sh: no Python here imports torch (set PYTHON_EXEC): gpu_torch_tests will fail" | tee -a "$log"
fi

if [[ -n "$bundle" ]]; then
  [[ -f "$bundle/MANIFEST" ]] || fail "--bundle: $bundle holds no MANIFEST; make it with scripts/gpu-bundle.sh"
  bin=$bundle/bin
  made_by=$(head -n 2 "$bundle/MANIFEST" | paste -sd ';' | sed 's/;/; /')
  programs=("$bin"/gpu_tests "$bin"/gpu_nccl_tests "$bin"/gpu_torch_tests)
  # The glibc the bundle was built against, or a newer one.
  needed=$(grep -oE '^needs: glibc [0-9.]+' "$bundle/MANIFEST" | grep -oE '[0-9.]+$')
  have=$(ldd --version 2>/dev/null | head -n 1 | grep -oE '[0-9]+\.[0-9]+$')
  if [[ -n "$needed" && -n "$have" && "$(printf '%s\n%s\n' "$needed" "$have" | sort -V | head -n 1)" != "$needed" ]]; then
    fail "the bundle needs glibc $needed or newer and this machine has $have: make the bundle on an older Debian"
  fi
  # CUDA's runtime and NCCL (and the driver's libcuda, which the runtime opens): first the
  # folders a PyTorch process loaded them from, then NVIDIA's wheels beside it, then the
  # folders already on LD_LIBRARY_PATH, then /usr/local and the system's.
  search=()
  if [[ -n "$python" ]]; then
    while read -r dir; do [[ -n "$dir" ]] && search+=("$dir"); done < <("$python" - 2>/dev/null <<'PY'
import os
import torch
try:
    torch.cuda.init()
except Exception:
    pass
seen = []
for line in open("/proc/self/maps"):
    fields = line.split()
    path = fields[-1] if len(fields) >= 6 else ""
    if os.path.basename(path).startswith(("libcudart.so", "libnccl.so", "libcuda.so")):
        if os.path.dirname(path) not in seen:
            seen.append(os.path.dirname(path))
print("\n".join(seen))
PY
)
    while read -r site; do
      for dir in "$site"/nvidia/*/lib; do [[ -d "$dir" ]] && search+=("$dir"); done
    done < <("$python" -c 'import site, sys; print("\n".join(site.getsitepackages() + [site.getusersitepackages()] + sys.path))' 2>/dev/null)
  fi
  IFS=: read -r -a on_path <<< "${LD_LIBRARY_PATH:-}"
  for dir in "${on_path[@]}" /usr/local/cuda*/lib64 /usr/local/cuda*/lib /usr/local/cuda*/targets/x86_64-linux/lib \
             /usr/local/nvidia/lib64 /usr/local/nvidia/lib /usr/lib/x86_64-linux-gnu /usr/lib64; do
    [[ -n "$dir" && -d "$dir" ]] && search+=("$dir")
  done
  found_in() {  # the first folder of $search that holds $1
    local dir
    for dir in "${search[@]}"; do
      if [[ -e "$dir/$1" ]]; then echo "$dir"; return 0; fi
    done
    return 1
  }
  add_to_library_path() {
    case ":${LD_LIBRARY_PATH:-}:" in
      *":$1:"*) ;;
      *) export LD_LIBRARY_PATH="$1${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" ;;
    esac
  }
  needs=$(for f in "$bin"/* "$bundle"/lib/*.so*; do ldd "$f" 2>/dev/null; done |
            awk '$2 == "=>" && $3 == "not" { print $1 }' | sort -u)
  for lib in $needs; do
    dir=$(found_in "$lib") || fail "$lib is needed and was not found (looked in: ${search[*]}); install CUDA's runtime and NCCL (pip: nvidia-cuda-runtime, nvidia-nccl-cu13) or set LD_LIBRARY_PATH"
    echo "run.sh: $lib from $dir" | tee -a "$log"
    add_to_library_path "$dir"
  done
  # libcuda.so.1 is opened by the runtime, not linked: the loader must find it by itself.
  if ! ldconfig -p 2>/dev/null | grep 'libcuda\.so\.1 ' >/dev/null; then
    if dir=$(found_in libcuda.so.1); then
      echo "run.sh: libcuda.so.1 from $dir" | tee -a "$log"
      add_to_library_path "$dir"
    else
      echo "run.sh: libcuda.so.1 (the driver's) is not in ldconfig's cache nor in: ${search[*]}; the CUDA tests may find no device" | tee -a "$log"
    fi
  fi
  still=$(for f in "$bin"/*; do ldd "$f" 2>/dev/null; done | awk '$3 == "not" { print $1 }' | sort -u | paste -sd ' ')
  [[ -z "$still" ]] || fail "with LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}, still not found: $still"
  export DDPRUN_TEST_BIN_DIR=$bin DDPRUN_TEST_SOURCE_DIR=$repo
else
  build=$repo/build-gpu
  made_by="built in place: $(git -C "$repo" describe --always --dirty 2>/dev/null)"
  cmake -S "$repo" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DDDPRUN_WITH_NCCL=ON >> "$log" 2>&1 || fail "cmake failed (see $log)"
  cmake --build "$build" -j "$(nproc)" --target gpu_bundle_inputs 2>&1 | tee -a "$log" | tail -n 3
  ((PIPESTATUS[0] == 0)) || fail "the build failed (see $log)"
  while read -r folder file; do
    [[ "$(basename "$file")" == gpu_* ]] && programs+=("$file")
  done < "$build/gpu-bundle-files.txt"
fi

status=0
for program in "${programs[@]}"; do
  name=$(basename "$program")
  # Each its share of the budget, so that a hang still leaves the results behind.
  case "$name" in gpu_tests) limit=60 ;; gpu_nccl_tests) limit=270 ;; *) limit=210 ;; esac
  left=$(( budget - ($(date +%s) - start) - 15 ))
  ((limit > left)) && limit=$left
  if ((limit < 30)); then
    verdict[$name]="not run: RUN_BUDGET_S=$budget spent"
    status=1
    continue
  fi
  echo "=== $name" | tee -a "$log"
  timeout -k 15 "$limit" "$program" --gtest_color=no 2>&1 | tee -a "$log" |
    grep -E '^\[ +(measure|OK|FAILED|SKIPPED) +\]|busbw|^  +[0-9]+ +[0-9]+ +float|^# (Avg|Out of)|verified on every'
  code=${PIPESTATUS[0]}
  if ((code == 0)); then
    verdict[$name]=passed
  elif ((code == 124 || code == 137)); then
    verdict[$name]="FAILED (stopped after its $limit s)"
  else
    verdict[$name]="FAILED (exit $code)"
  fi
  ((code == 0)) || status=1
  write_results
done

write_results
echo
cat "$results/gpu-results.md"
echo "run.sh: results in $results/gpu-results.md, the whole log in $log"
exit "$status"
