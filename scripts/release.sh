#!/usr/bin/env bash
# Makes what a user downloads (docs/packaging.md) into dist/ or OUT_DIR, for x86_64 and
# aarch64:
#   ddprun-<version>-linux-<arch>.tar.gz              bin/ddprun, bin/ddprun-master, the man
#                                                     page, the shell completions and the
#                                                     worker SDK's C API (lib/, include/)
#   ddprun-<version>-py3-none-manylinux_2_28_<arch>.whl  the same programs for pip
#   ddprun_<version>_amd64.deb, ddprun-dev_...        Debian 12's packages (scripts/package.sh)
# The programs are portable builds (cmake/portable.cmake): nothing but the C library is
# needed at run time, and no glibc symbol above the floor, 2.28; libddp_worker.so likewise.
# Prints each artifact's size, the libraries its programs need and the highest glibc version
# they use; fails past either.
#
#   scripts/release.sh [--arch=x86_64|aarch64|all] [--no-deb] [--check] [OUT_DIR]
#     --check   then runs tests/release/check-roots.sh: every artifact in Debian roots
# Needs root (apt, debootstrap). The build folders, the Debian source packages and the glibc
# roots are kept in build-release/ and reused.
set -euo pipefail
shopt -s inherit_errexit  # a failure inside $(...) stops the script too
cd "$(dirname "$0")/.."

readonly floor=2.28
arches=(x86_64 aarch64)
deb=1
check=0
out=dist
for arg in "$@"; do
  case "$arg" in
    --arch=all) arches=(x86_64 aarch64) ;;
    --arch=x86_64 | --arch=aarch64) arches=("${arg#--arch=}") ;;
    --no-deb) deb=0 ;;
    --check) check=1 ;;
    -*) echo "release: unknown option $arg (see the top of $0)" >&2; exit 2 ;;
    *) out=$arg ;;
  esac
done
out=$(realpath -m "$out")
[[ $(id -u) -eq 0 ]] || { echo "release: needs root (apt-get, debootstrap)" >&2; exit 1; }
work=$PWD/build-release
mkdir -p "$work" "$out"

cross=()
for arch in "${arches[@]}"; do
  if [[ $arch == aarch64 ]]; then cross=(--arm64); fi
done
scripts/install-deps.sh --release "${cross[@]}" >&2

# The mirror apt uses here, as scripts/torch2-root.sh finds it.
mirror=$(sed -n 's/^URIs: *\([^ ]*\).*/\1/p' /etc/apt/sources.list.d/*.sources 2>/dev/null |
  grep -v security | head -n 1 || true)
mirror=${mirror:-http://deb.debian.org/debian}

# Source packages: civetweb and prometheus-cpp, which Debian ships no static archive of; and
# abseil, protobuf and re2 of the installed versions, six files of which libddp_worker.so
# needs compiled again (cmake/portable.cmake).
source_packages() {
  local package dev
  echo civetweb prometheus-cpp
  for package in abseil:libabsl-dev protobuf:libprotobuf-dev re2:libre2-dev; do
    dev=${package#*:}
    echo "${package%%:*}=$(dpkg-query -W -f='${source:Version}' "$dev:$(dpkg --print-architecture)")"
  done
}
third_party() {
  local dir=$work/third-party packages
  packages=$(source_packages | tr '\n' ' ')
  if [[ -f $dir/packages && $(cat "$dir/packages") == "$packages" ]]; then
    echo "$dir"; return
  fi
  rm -rf "$dir" && mkdir -p "$dir"
  # shellcheck disable=SC2086 # one word per package
  if ! (cd "$dir" && apt-get source -qq --download-only $packages) >&2 2>&1; then
    # No deb-src line: one for the suite this machine's packages come from.
    local suite
    suite=$(. /etc/os-release && echo "$VERSION_CODENAME")
    printf 'Types: deb-src\nURIs: %s\nSuites: %s\nComponents: main\nSigned-By: %s\n' \
      "$mirror" "$suite" /usr/share/keyrings/debian-archive-keyring.gpg \
      >/etc/apt/sources.list.d/ddprun-src.sources
    apt-get update -qq >&2
    # shellcheck disable=SC2086
    (cd "$dir" && apt-get source -qq --download-only $packages) >&2
  fi
  local name
  for name in civetweb prometheus-cpp abseil protobuf re2; do
    (cd "$dir" && dpkg-source -x "$(echo "${name}"_*.dsc)" "$name") >/dev/null
  done
  echo "$packages" >"$dir/packages"
  echo "$dir"
}

# Debian 11's C library (glibc 2.31) with its development files, to link against. Its
# absolute library links are made relative: the linker follows them on this machine.
glibc_root() {
  local arch=$1 dir=$work/glibc-root-$1
  local debarch=amd64
  [[ $arch == aarch64 ]] && debarch=arm64
  if [[ ! -f $dir/usr/lib/$arch-linux-gnu/libc_nonshared.a ]]; then
    rm -rf "$dir"
    # --foreign: nothing of it runs here, whatever the architecture. It unpacks the
    # essential packages and downloads the rest: libc6-dev is unpacked here.
    debootstrap --foreign --arch="$debarch" --variant=minbase --include=libc6-dev bullseye \
      "$dir" "$mirror" >&2
    dpkg-deb -x "$(echo "$dir"/var/cache/apt/archives/libc6-dev_*.deb)" "$dir"
  fi
  local link target
  while IFS= read -r link; do
    target=$(readlink "$link")
    ln -sfn "$(realpath -m --relative-to="$(dirname "$link")" "$dir$target")" "$link"
  done < <(cd "$dir" && find "$dir/usr/lib" "$dir/usr/lib64" -maxdepth 2 -type l -lname '/*' \
             2>/dev/null)
  echo "$dir"
}

build_portable() {
  local arch=$1 sources=$2 root=$3 dir=$work/build-$1
  local flags=(-DCMAKE_BUILD_TYPE=Release -DDDPRUN_PORTABLE=ON -DDDPRUN_BUILD_TESTS=OFF
               -DDDPRUN_WITH_NCCL=OFF -DDDPRUN_THIRD_PARTY_SOURCES="$sources"
               -DDDPRUN_GLIBC_ROOT="$root")
  if [[ $arch == aarch64 ]]; then
    flags+=(-DCMAKE_TOOLCHAIN_FILE="$PWD/cmake/aarch64-linux-gnu.cmake")
  fi
  cmake -S . -B "$dir" -G Ninja "${flags[@]}" >&2
  # The man page and completions come from ddprun-docgen, which the build runs (under qemu
  # for aarch64: cmake/aarch64-linux-gnu.cmake).
  cmake --build "$dir" --target ddprun ddprun-master ddprun-docs ddp_worker >&2
  echo "$dir"
}

stage() {
  local arch=$1 build=$2 version=$3 docs=$2/launcher
  local dir=$work/stage/ddprun-$version-linux-$arch
  rm -rf "$dir" && mkdir -p "$dir/bin" "$dir/share/man/man1" \
    "$dir/share/bash-completion/completions" "$dir/share/zsh/site-functions"
  install -m 755 "$build/launcher/ddprun" "$build/master/ddprun-master" "$dir/bin/"
  install -m 644 "$docs/ddprun.1" "$dir/share/man/man1/"
  install -m 644 "$docs/ddprun.bash-completion" "$dir/share/bash-completion/completions/ddprun"
  install -m 644 "$docs/_ddprun" "$dir/share/zsh/site-functions/"
  # The worker SDK's C API as `cmake --install` lays it out: headers, CMake and pkg-config
  # files (the dev component), and the library itself.
  cmake --install "$build" --prefix "$dir" --component dev >&2
  cp -P "$build"/worker_sdk/libddp_worker.so.* "$dir/lib/"
  echo "$dir"
}

# The highest GLIBC_ version a program's symbols need (readelf reads any architecture).
glibc_needed() {
  readelf -W -V "$1" | grep -o 'Name: GLIBC_[0-9.]*' | sed 's/Name: GLIBC_//' | sort -V | tail -n 1
}

# Fails unless each program and the SDK's library need only the C library's own libraries
# and glibc <= the floor.
report_programs() {
  local dir=$1 failed=0 program needed max
  for program in "$dir"/bin/* "$(realpath "$dir/lib/libddp_worker.so")"; do
    needed=$(readelf -d "$program" | sed -n 's/.*Shared library: \[\(.*\)\]/\1/p' | tr '\n' ' ')
    max=$(glibc_needed "$program")
    printf '    %-22s %6s KiB  needs: %s glibc %s\n' "$(basename "$program")" \
      "$(($(stat -c %s "$program") / 1024))" "$needed" "$max"
    for lib in $needed; do
      case "$lib" in
        libc.so.6 | libm.so.6 | libpthread.so.0 | libdl.so.2 | librt.so.1 | ld-linux-*.so.*) ;;
        *) echo "release: $program needs $lib, which is not the C library's" >&2; failed=1 ;;
      esac
    done
    if [[ $(printf '%s\n%s\n' "$max" "$floor" | sort -V | tail -n 1) != "$floor" ]]; then
      echo "release: $program needs glibc $max, above the floor $floor" >&2
      failed=1
    fi
  done
  # What the SDK's library exports is its C API alone: a gRPC or Abseil symbol there would
  # meet the one a user's program has.
  local exported
  exported=$(readelf --dyn-syms -W "$dir/lib/libddp_worker.so" |
    awk '$7 != "UND" && ($5 == "GLOBAL" || $5 == "WEAK") {print $8}' | grep -v '^ddp_worker_' || true)
  if [[ -n $exported ]]; then
    echo "release: libddp_worker.so exports more than the C API: $(echo "$exported" | head -n 5 | tr '\n' ' ')" >&2
    failed=1
  fi
  return $failed
}

version=$(sed -n 's/^project(ddprun VERSION \([0-9.]*\).*/\1/p' CMakeLists.txt)
sources=$(third_party)
artifacts=()
for arch in "${arches[@]}"; do
  root=$(glibc_root "$arch")
  build=$(build_portable "$arch" "$sources" "$root")
  staged=$(stage "$arch" "$build" "$version")
  echo "release: $arch:"
  report_programs "$staged"
  tarball=$out/$(basename "$staged").tar.gz
  tar -C "$(dirname "$staged")" --owner=0 --group=0 -czf "$tarball" "$(basename "$staged")"
  wheel=$(python3 scripts/make_wheel.py --version "$version" --arch "$arch" --glibc "$floor" \
    "$staged" "$out")
  artifacts+=("$tarball" "$wheel")
done
if ((deb)); then
  scripts/package.sh "$out" >&2
  artifacts+=("$out"/ddprun_"$version"_*.deb "$out"/ddprun-dev_"$version"_*.deb)
fi
echo "release: in $out:"
for artifact in "${artifacts[@]}"; do
  printf '  %-60s %8s KiB\n' "$(basename "$artifact")" "$(($(stat -c %s "$artifact") / 1024))"
done
if ((check)); then
  tests/release/check-roots.sh "$out" "${arches[@]}"
fi
