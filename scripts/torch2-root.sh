#!/usr/bin/env bash
# Makes (once) a Debian root with a newer PyTorch than Debian 12's 1.13, for the compat tests
# that run torch 2.x clients, workers and torchrun against ddprun (tests/compat/torch2_test.cc).
#   scripts/torch2-root.sh DIR [SUITE]   SUITE: trixie (default: torch 2.6) or sid (2.14,
#                                        the closest to PyTorch main); needs root
# Prints DIR once it holds a working `python3 -c 'import torch'`; idempotent. It downloads
# from the mirror this machine's apt uses (about 1.5 minutes and 2 GB here).
#
# Debian builds torch without libuv, and torch 2.x's TCPStore asks for it by default (the
# agent store of torchrun's static backend, and workers' agent-store clients): the root's
# torch.distributed then forces use_libuv=False. The bytes a TCPStore client sends do not
# depend on it; standard wheels have libuv.
set -euo pipefail

dir=${1:?usage: scripts/torch2-root.sh DIR [trixie|sid]}
suite=${2:-trixie}

init=$dir/usr/lib/python3/dist-packages/torch/distributed/__init__.py  # Debian's python3-torch
# Packages installed in the root with its apt; proc only for apt, in a mount namespace of its
# own: nothing stays mounted.
install_in_root() {
  unshare --mount sh -c "mount -t proc proc '$dir/proc' && chroot '$dir' sh -c \
    'DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $*'" >&2
}
if grep -qs _ddprun_without_libuv "$init" && chroot "$dir" /usr/bin/python3 -c 'import torch' >/dev/null 2>&1; then
  # python3-venv: the release checks install ddprun's wheel into a venv that sees this torch
  # (tests/release/checks.sh); roots made before they did lack it.
  if ! chroot "$dir" /usr/bin/python3 -c 'import ensurepip' >/dev/null 2>&1; then
    install_in_root python3-venv
  fi
  echo "$dir"
  exit 0
fi
[[ $(id -u) -eq 0 ]] || { echo "torch2-root: needs root (debootstrap, chroot)" >&2; exit 1; }
command -v debootstrap >/dev/null || { echo "torch2-root: no debootstrap (scripts/install-deps.sh installs it)" >&2; exit 1; }

# The mirror apt uses here (deb822 or one-line sources), else Debian's.
mirror=$(sed -n 's/^URIs: *\([^ ]*\).*/\1/p' /etc/apt/sources.list.d/*.sources 2>/dev/null | grep -v security | head -n 1 || true)
[[ -n "$mirror" ]] || mirror=$(awk '$1 == "deb" && $2 !~ /security/ {print $2; exit}' /etc/apt/sources.list 2>/dev/null || true)
mirror=${mirror:-http://deb.debian.org/debian}

rm -rf "$dir"
mkdir -p "$dir"
echo "torch2-root: debootstrap $suite from $mirror into $dir" >&2
debootstrap --variant=minbase "$suite" "$dir" "$mirror" >&2
cp /etc/resolv.conf "$dir/etc/resolv.conf"
printf '127.0.0.1 localhost\n::1 localhost\n' > "$dir/etc/hosts"
install_in_root python3-torch python3-venv

[[ -f "$init" ]] || { echo "torch2-root: no $init" >&2; exit 1; }
cat >> "$init" <<'EOF'


# Added by ddprun's scripts/torch2-root.sh (a test root): this torch has no libuv, and
# TCPStore asks for it by default; the bytes a client sends do not depend on it.
def _ddprun_without_libuv():
    base = globals().get("TCPStore")
    if base is None:
        return

    class TCPStore(base):
        def __init__(self, *args, **kwargs):
            kwargs["use_libuv"] = False
            super().__init__(*args, **kwargs)

    globals()["TCPStore"] = TCPStore
    import sys
    for name, module in list(sys.modules.items()):  # those that imported it already
        if name.startswith("torch.distributed") and getattr(module, "TCPStore", None) is base:
            module.TCPStore = TCPStore


_ddprun_without_libuv()
EOF
chroot "$dir" /usr/bin/python3 -c 'import torch.distributed as d; print("torch2-root: torch", d.torch.__version__, d.TCPStore)' >&2
echo "$dir"
