#!/usr/bin/env bash
# Installs every Debian package that ddprun's build and test suite need.
# Idempotent: installs only what is missing, and runs `apt-get update` once,
# only when something is missing. Needs root (or sudo) when it has work to do.
#
#   scripts/install-deps.sh            build + test packages (incl. PyTorch for compat tests)
#   scripts/install-deps.sh --build    build packages only
#   scripts/install-deps.sh --bench    build + test packages and gnuplot (bench/plot.py)
#   scripts/install-deps.sh --release [--arm64]
#                                      build packages and what scripts/release.sh needs (with
#                                      --arm64: the cross compiler, qemu and the :arm64
#                                      development packages)
set -euo pipefail

build_pkgs=(
  build-essential cmake ninja-build pkg-config git
  prometheus-cpp-dev libcivetweb-dev  # metrics and the status page (docs/observability.md)
  libhwloc-dev  # --numa-binding: the machine's topology (docs/numa.md)
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libabsl-dev libspdlog-dev libfmt-dev libcli11-dev libgtest-dev libgmock-dev
  golang-etcd-server-dev  # etcd's v3 protos: the etcd-v3 backend's client (net/etcd_client)
  patchelf  # scripts/gpu-bundle.sh
)
test_pkgs=(
  python3 python3-torch procps iproute2 openssl clang-14 libclang-rt-14-dev clang-format-14
  slurm-wlm slurmctld slurmd slurm-client munge python3-yaml groff-base debootstrap
  dpkg-dev  # scripts/release.sh: the source packages it builds from (dpkg-source)
  zsh tcsh  # the shell completions' tests (ddprun --print-completion)
  etcd-server etcd-client  # the etcd-v3 backend's tests start their own etcd (docs/etcd.md)
  elfutils  # eu-stack: native workers' stacks in the hang report (docs/hangs.md)
  prometheus chromium chromium-driver python3-selenium  # observability tests (docs/observability.md)
)

bench_pkgs=(gnuplot-nox)
release_pkgs=(debootstrap dpkg-dev)  # Debian 11's glibc to link against; source packages
release_pkgs+=(libstdc++-12-pic)  # libstdc++ for libddp_worker.so (cmake/portable.cmake)
# The same libraries for arm64 (Debian's multiarch), the cross compiler and qemu to run it.
arm64_pkgs=(
  g++-aarch64-linux-gnu qemu-user-static libstdc++-12-pic-arm64-cross
  libgrpc++-dev:arm64 libabsl-dev:arm64 libprotobuf-dev:arm64 libssl-dev:arm64
  libc-ares-dev:arm64 libre2-dev:arm64 zlib1g-dev:arm64 libhwloc-dev:arm64
)

pkgs=("${build_pkgs[@]}")
if [[ "${1:-}" == "--release" ]]; then
  pkgs+=("${release_pkgs[@]}")
  if [[ "${2:-}" == "--arm64" ]]; then
    pkgs+=("${arm64_pkgs[@]}")
    if ! dpkg --print-foreign-architectures | grep -qx arm64; then
      [[ $(id -u) -eq 0 ]] || { echo "install-deps: need root to add the arm64 architecture" >&2; exit 1; }
      dpkg --add-architecture arm64
    fi
  fi
elif [[ "${1:-}" != "--build" ]]; then
  pkgs+=("${test_pkgs[@]}")
fi
if [[ "${1:-}" == "--bench" ]]; then
  pkgs+=("${bench_pkgs[@]}")
fi

missing=()
for p in "${pkgs[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
  [[ "$status" == "install ok installed" ]] || missing+=("$p")
done

if ((${#missing[@]} == 0)); then
  echo "install-deps: all ${#pkgs[@]} packages present"
  exit 0
fi

sudo=()
if [[ $(id -u) -ne 0 ]]; then
  command -v sudo >/dev/null || { echo "install-deps: need root to install: ${missing[*]}" >&2; exit 1; }
  sudo=(sudo)
fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update -q
"${sudo[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"
