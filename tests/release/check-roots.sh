#!/usr/bin/env bash
# Runs tests/release/checks.sh on the tarball and the wheel of each architecture in Debian
# roots that hold the base system and python3 only (made with debootstrap --variant=minbase,
# kept in build-release/roots/ and reused): Debian 11, 12, 13 and sid on x86_64; Debian 12
# on arm64 under qemu-user-static (binfmt_misc mounted and qemu registered when it is not).
# The 2.x torch root of scripts/torch2-root.sh, when DDPRUN_TORCH2_ROOT names one, adds a
# gloo DDP job with its torch. The SDK's check runs a C worker built here against the
# unpacked tarball (find_package(ddprun)), linked against scripts/release.sh's Debian 11
# glibc root. Prints a table (root x check); exits 1 if any check failed.
#   tests/release/check-roots.sh DIST_DIR [x86_64] [aarch64]
#   tests/release/check-roots.sh --make-roots-only     the x86_64 roots alone (scripts/test.sh
#                                                      makes them while it builds)
set -euo pipefail
shopt -s inherit_errexit
cd "$(dirname "$0")/../.."
[[ $(id -u) -eq 0 ]] || { echo "check-roots: needs root (debootstrap, chroot)" >&2; exit 1; }
x86_64_suites=(bullseye bookworm trixie sid)
make_only=0
if [[ "${1:-}" == "--make-roots-only" ]]; then
  make_only=1
else
  dist=$(realpath "$1")
  shift
fi
arches=("$@")
((${#arches[@]})) || arches=(x86_64)
roots_dir=$PWD/build-release/roots
results=$(mktemp)
scratch=$(mktemp -d)
mounted=()
trap 'for m in "${mounted[@]}"; do umount -l "$m" 2>/dev/null || true; done
      rm -rf "$results" "$scratch"' EXIT

mirror=$(sed -n 's/^URIs: *\([^ ]*\).*/\1/p' /etc/apt/sources.list.d/*.sources 2>/dev/null |
  grep -v security | head -n 1 || true)
mirror=${mirror:-http://deb.debian.org/debian}

# arm64 programs run through qemu: binfmt_misc with Debian's qemu-aarch64 entry (F: the
# interpreter is opened now, so that it runs inside a root that lacks it).
enable_qemu() {
  local misc=/proc/sys/fs/binfmt_misc
  mountpoint -q "$misc" || mount -t binfmt_misc binfmt_misc "$misc"
  [[ -e $misc/qemu-aarch64 ]] || cat /usr/lib/binfmt.d/qemu-aarch64.conf >"$misc/register"
}

make_root() {
  local suite=$1 debarch=$2 dir=$roots_dir/$1-$2
  if [[ ! -e $dir/.ddprun-root ]]; then
    rm -rf "$dir"
    mkdir -p "$roots_dir"
    echo "check-roots: debootstrap $suite ($debarch) into $dir" >&2
    debootstrap --arch="$debarch" --variant=minbase --include=python3,python3-venv \
      "$suite" "$dir" "$mirror" >"$roots_dir/$suite-$debarch.log" 2>&1 ||
      { tail -n 20 "$roots_dir/$suite-$debarch.log" >&2; return 1; }
    touch "$dir/.ddprun-root"
  fi
  echo "$dir"
}

# The C example of the worker SDK (worker_sdk/tests/sdk_c_worker.c), built as a user would
# against the unpacked tarball; its path, or nothing (and why, on stderr) if it did not build.
build_sdk_worker() {
  local arch=$1 tarball build glibc libs flags
  tarball=$(echo "$dist"/ddprun-*-linux-"$arch".tar.gz)
  build=$scratch/sdk-build-$arch
  mkdir -p "$scratch/sdk-$arch" && tar -C "$scratch/sdk-$arch" -xzf "$tarball"
  glibc=$PWD/build-release/glibc-root-$arch
  libs=$glibc/usr/lib/$arch-linux-gnu
  if [[ ! -e $libs/libc_nonshared.a ]]; then
    echo "check-roots: no glibc root in $glibc (scripts/release.sh makes it)" >&2
    return 0
  fi
  flags=(-DCMAKE_PREFIX_PATH="$(echo "$scratch/sdk-$arch"/ddprun-*)"
         -DCMAKE_EXE_LINKER_FLAGS="-B$libs/ -L$libs -Wl,--sysroot=$glibc")
  [[ $arch == aarch64 ]] && flags+=(-DCMAKE_TOOLCHAIN_FILE="$PWD/cmake/aarch64-linux-gnu.cmake")
  if ! { cmake -S worker_sdk/tests/c_consumer -B "$build" "${flags[@]}" &&
         cmake --build "$build"; } >"$build.log" 2>&1; then
    cat "$build.log" >&2
    echo "check-roots: the SDK's C example did not build against the $arch tarball (above)" >&2
    return 0
  fi
  echo "$build/sdk_c_worker"
}

# Runs checks.sh in a root on one architecture's tarball and wheel; records its lines.
run_in_root() {
  local name=$1 dir=$2 arch=$3 sdk_worker=$4
  local tarball wheel
  tarball=$(echo "$dist"/ddprun-*-linux-"$arch".tar.gz)
  wheel=$(echo "$dist"/ddprun-*-manylinux_*_"$arch".whl)
  mkdir -p "$dir/tmp/ddprun-release"
  cp "$tarball" "$wheel" tests/release/checks.sh "$dir/tmp/ddprun-release/"
  # An installed system or a container has an /etc/hosts naming localhost (the installer or
  # the runtime writes it); debootstrap writes none. A one-node job's MASTER_ADDR is
  # localhost, which the SDK's worker (as torch's TCPStore) must resolve.
  [[ -s $dir/etc/hosts ]] ||
    printf '127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n' >"$dir/etc/hosts"
  [[ -n $sdk_worker ]] && cp "$sdk_worker" "$dir/tmp/ddprun-release/"
  for m in proc dev; do
    mountpoint -q "$dir/$m" || {
      if [[ $m == proc ]]; then mount -t proc proc "$dir/proc"; else mount --bind /dev "$dir/dev"; fi
      mounted+=("$dir/$m")
    }
  done
  echo "check-roots: $name" >&2
  local log=$roots_dir/$name.checks.log
  chroot "$dir" /bin/bash /tmp/ddprun-release/checks.sh \
    "/tmp/ddprun-release/$(basename "$tarball")" "/tmp/ddprun-release/$(basename "$wheel")" \
    "${sdk_worker:+/tmp/ddprun-release/$(basename "$sdk_worker")}" >"$log" 2>&1 || true
  cat "$log" >&2
  sed -n "s/^\(PASS\|FAIL\|SKIP\) \([^:]*\).*/$name \1 \2/p" "$log" >>"$results"
  umount "$dir/proc" "$dir/dev"
  rm -rf "$dir/tmp/ddprun-release"
}

if ((make_only)); then
  for suite in "${x86_64_suites[@]}"; do make_root "$suite" amd64; done
  exit 0
fi

for arch in "${arches[@]}"; do
  sdk_worker=$(build_sdk_worker "$arch")
  case "$arch" in
    x86_64)
      for suite in "${x86_64_suites[@]}"; do
        run_in_root "$suite-amd64" "$(make_root "$suite" amd64)" x86_64 "$sdk_worker"
      done
      if [[ -n "${DDPRUN_TORCH2_ROOT:-}" && -x "$DDPRUN_TORCH2_ROOT/usr/bin/python3" ]]; then
        run_in_root "torch2-sid-amd64" "$DDPRUN_TORCH2_ROOT" x86_64 "$sdk_worker"
      fi
      ;;
    aarch64)
      enable_qemu
      run_in_root bookworm-arm64 "$(make_root bookworm arm64)" aarch64 "$sdk_worker"
      ;;
    *) echo "check-roots: no roots for $arch" >&2; exit 2 ;;
  esac
done

# The table: one row per check, one column per root.
python3 - "$results" <<'EOF'
import sys
rows, roots = {}, []
for line in open(sys.argv[1]):
    root, verdict, check = line.split()
    if root not in roots:
        roots.append(root)
    rows.setdefault(check, {})[root] = verdict
print("| check | " + " | ".join(roots) + " |")
print("|---" * (len(roots) + 1) + "|")
for check, verdicts in rows.items():
    print(f"| {check} | " + " | ".join(verdicts.get(r, "-") for r in roots) + " |")
EOF
if grep -q ' FAIL ' "$results"; then
  echo "check-roots: some checks failed (above)" >&2
  exit 1
fi
