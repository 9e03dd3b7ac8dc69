#!/usr/bin/env bash
# Builds here what the GPU checks run and packs it, with every shared library it needs, into
# a folder that runs on a machine with nothing of ours: glibc, an NVIDIA driver, and CUDA's
# runtime and NCCL from elsewhere (NVIDIA's Python wheels beside PyTorch, or /usr/local/cuda).
#
#   scripts/gpu-bundle.sh DIR                         Release build in build/ (needs CUDA and
#                                                     NCCL here, e.g. /usr/local/cuda), then DIR
#   scripts/gpu-bundle.sh --build-dir B DIR           the same in B
#   scripts/gpu-bundle.sh --build-dir B --no-build DIR   only pack what B already holds
#
# Then, on the GPU machine, from this repository's root: tests/gpu/run.sh --bundle DIR
# (DIR inside the repository and ignored by git, e.g. gpu-bundle/, travels as a carried path).
#
# What DIR holds:
#   bin/            ddprun, ddprun-master, test_worker, ddp-allreduce and the gpu test programs
#                   (the list: gpu-bundle-files.txt, written by tests/gpu/CMakeLists.txt)
#   lib/ddprun/     libddprun_network.so, where ddprun looks for it (bin/../lib/ddprun)
#   lib/            every library those need (ldd), but glibc's own and CUDA's: gRPC,
#                   Protobuf, Abseil, spdlog, fmt, c-ares, re2, OpenSSL, zlib, libstdc++,
#                   libgcc_s and libddp_worker
#   MANIFEST        what was built from what, each library's package, the glibc it needs
# Programs carry RPATH $ORIGIN/../lib as DT_RPATH (not RUNPATH), which the loader also uses
# for their libraries' own needs, so nothing is installed and no LD_LIBRARY_PATH points at
# lib/: the workers ddprun starts (PyTorch) never see these libraries.
#
# Not bundled: glibc (any as new as the MANIFEST says), the driver's libcuda.so.1, and
# libcudart.so.13 and libnccl.so.2, which must match the driver and are what PyTorch there
# uses too. tests/gpu/run.sh --bundle finds them (docs/gpu.md): where a PyTorch process
# loaded them from, then NVIDIA's wheels in that Python's site-packages (nvidia/cu13/lib,
# nvidia/nccl/lib, ...), then LD_LIBRARY_PATH, /usr/local/cuda*/lib64 and
# /usr/local/nvidia/lib64, and puts their folders on LD_LIBRARY_PATH.
set -euo pipefail
cd "$(dirname "$0")/.."

build_dir=build
build=1
out=""
while (($#)); do
  case "$1" in
    --build-dir) build_dir=${2:?--build-dir needs a folder}; shift 2 ;;
    --no-build) build=0; shift ;;
    -h|--help) sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "gpu-bundle: unknown option '$1'; see --help" >&2; exit 2 ;;
    *) [[ -z "$out" ]] || { echo "gpu-bundle: one DIR only ('$out', then '$1')" >&2; exit 2; }
       out=$1; shift ;;
  esac
done
[[ -n "$out" ]] || { echo "gpu-bundle: give the folder to write the bundle to; see --help" >&2; exit 2; }

if ((build)); then
  scripts/install-deps.sh --build
  # As scripts/build.sh configures it: the NCCL parts are built whenever CUDA and NCCL are
  # found (DDPRUN_WITH_NCCL=AUTO), which the files list below shows.
  cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build "$build_dir" -j "$(nproc)" --target gpu_bundle_inputs
fi
if [[ ! -f "$build_dir/CMakeCache.txt" ]]; then
  echo "gpu-bundle: $build_dir holds no build; drop --no-build, or give the folder of one with --build-dir" >&2
  exit 1
fi
files_list="$build_dir/gpu-bundle-files.txt"
if [[ ! -f "$files_list" ]]; then
  echo "gpu-bundle: $build_dir has no NCCL parts ($files_list is missing): CUDA and NCCL" \
       "were not found when it was configured, or DDPRUN_WITH_NCCL=OFF. The bundle is for the" \
       "GPU checks: install CUDA with NCCL (under /usr/local/cuda) and run this again" >&2
  exit 1
fi
command -v patchelf >/dev/null || { echo "gpu-bundle: patchelf is missing: scripts/install-deps.sh --build installs it" >&2; exit 1; }

# A folder the script made before is replaced; any other non-empty folder is left alone.
if [[ -e "$out" && -n "$(ls -A "$out" 2>/dev/null)" && ! -f "$out/MANIFEST" ]]; then
  echo "gpu-bundle: '$out' is not empty and holds no MANIFEST of an earlier bundle; give a new folder" >&2
  exit 1
fi
rm -rf "$out"
mkdir -p "$out/bin" "$out/lib/ddprun"
out=$(cd "$out" && pwd)

# CUDA's runtime, NCCL and the driver come from the GPU machine; so does glibc (the files of
# Debian's libc6, compared by their real paths).
not_bundled_name='^(libcuda|libcudart|libnccl|libnvidia-[a-z]+)\.so'
declare -A glibc_file=()
while read -r file; do glibc_file[$file]=1; done < <(dpkg-query -L "libc6:$(dpkg --print-architecture)" | grep '\.so' | xargs realpath -e 2>/dev/null)

declare -A origin=()    # bundled library -> where it came from
declare -A external=()  # what the GPU machine must have, beside glibc
elfs=()
while read -r folder file; do
  [[ -f "$file" ]] || { echo "gpu-bundle: $file is missing; build it (drop --no-build)" >&2; exit 1; }
  cp "$file" "$out/$folder/"
  elfs+=("$out/$folder/$(basename "$file")")
done < "$files_list"

# Every library any bundled file needs, as ldd resolves it here (ldd follows the whole tree).
for elf in "${elfs[@]}"; do
  while read -r name arrow path _; do
    [[ "$arrow" == "=>" ]] || continue
    if [[ "$path" == "not" ]]; then
      echo "gpu-bundle: $elf needs $name, which is not found here" >&2
      exit 1
    fi
    if [[ "$name" =~ $not_bundled_name ]]; then
      external[$name]=1
      continue
    fi
    [[ -n "${origin[$name]:-}" || -n "${glibc_file[$(realpath -e "$path")]:-}" ]] && continue
    origin[$name]=$path
    cp -L "$path" "$out/lib/$name"
  done < <(ldd "$elf")
done

for elf in "$out"/bin/*; do patchelf --force-rpath --set-rpath '$ORIGIN/../lib' "$elf"; done
for elf in "$out"/lib/ddprun/*; do patchelf --force-rpath --set-rpath '$ORIGIN/..' "$elf"; done
for elf in "$out"/lib/*.so*; do
  chmod u+w "$elf"
  patchelf --force-rpath --set-rpath '$ORIGIN' "$elf"
done

# The check: from the bundle, every library resolves inside it, to glibc, or to CUDA's.
for elf in "$out"/bin/* "$out"/lib/ddprun/* "$out"/lib/*.so*; do
  while read -r name arrow path _; do
    [[ "$arrow" == "=>" && "$path" != "$out/"* && ! "$name" =~ $not_bundled_name ]] || continue
    if [[ -z "${glibc_file[$(realpath -e "$path")]:-}" ]]; then
      echo "gpu-bundle: from the bundle, $(basename "$elf") still loads $name from $path" >&2
      exit 1
    fi
  done < <(env -u LD_LIBRARY_PATH ldd "$elf")
done

# The newest glibc symbol version anything in the bundle asks for.
glibc=$(objdump -T "$out"/bin/* "$out"/lib/ddprun/* "$out"/lib/*.so* 2>/dev/null |
          grep -o 'GLIBC_[0-9][0-9.]*' | sort -u -V | tail -n 1)
glibc=${glibc/GLIBC_/glibc }
external_list=$(printf '%s\n' "${!external[@]}" | sort | paste -sd ' ')
bytes=$(du -sb "$out" | cut -f1)
{
  echo "ddprun GPU bundle: made $(date -u '+%Y-%m-%d %H:%M UTC') on $(hostname) ($(. /etc/os-release; echo "$PRETTY_NAME"))"
  echo "source: $(git describe --always --dirty 2>/dev/null || echo unknown)"
  echo "build: $build_dir ($(grep -E '^CMAKE_BUILD_TYPE:' "$build_dir/CMakeCache.txt" | cut -d= -f2))"
  echo "needs: $glibc or newer; the driver's libcuda.so.1; $external_list"
  echo "size: $bytes bytes"
  echo "programs:"
  (cd "$out" && ls bin/* lib/ddprun/*) | sed 's/^/  /'
  echo "libraries:"
  # The Debian package of each, in one query ("package:arch: path"), under /usr or not.
  declare -A package=()
  while read -r owner path; do
    package[${path#/usr}]=${owner%%:*}
  done < <(for path in "${origin[@]}"; do echo "${path#/usr}"; echo "/usr${path#/usr}"; done |
             xargs dpkg-query -S 2>/dev/null | sed 's/: / /')
  declare -A version=()
  while read -r name v; do version[$name]=$v; done < <(dpkg-query -W -f='${Package} ${Version}\n' "${package[@]}")
  for name in $(printf '%s\n' "${!origin[@]}" | sort); do
    path=${origin[$name]}
    owner=${package[${path#/usr}]:-}
    echo "  lib/$name <- $path${owner:+ ($owner ${version[$owner]})}"
  done
} > "$out/MANIFEST"

echo "gpu-bundle: $out: $(ls "$out"/bin | wc -l) programs, ${#origin[@]} libraries," \
     "$(awk -v b="$bytes" 'BEGIN { printf "%.1f MiB", b / 1048576 }'); the GPU machine needs" \
     "$glibc or newer, the driver, and $external_list"
