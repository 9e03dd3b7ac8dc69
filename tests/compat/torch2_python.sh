#!/bin/sh
# python3 of the torch 2.x root in $DDPRUN_TORCH2_ROOT (scripts/torch2-root.sh), for the
# compat tests: PYTHON_EXEC for ddprun's workers, or torchrun itself (-m torch.distributed.run).
# In a mount namespace of its own (nothing outside sees its mounts), the root gets this
# machine's /proc, /tmp (the tests' folders), /etc/hosts (names resolve as here) and this
# source tree at the same paths; the network, the environment and the process group are
# this process's. Needs root. Python starts in the root's "/" (chroot's), or, with
# DDPRUN_TORCH2_KEEP_CWD=1, in this process's folder when the root has it (under /tmp or
# the source tree): where `python -c` looks for modules first.
set -e
root=${DDPRUN_TORCH2_ROOT:?DDPRUN_TORCH2_ROOT: the root made by scripts/torch2-root.sh}
src=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$root$src" "$root/tmp"
exec unshare --mount sh -c '
  root=$1 src=$2 cwd=$3; shift 3
  mount -t proc proc "$root/proc"
  mount --rbind /tmp "$root/tmp"
  mount --bind /etc/hosts "$root/etc/hosts"
  mount --bind "$src" "$root$src"
  if [ "${DDPRUN_TORCH2_KEEP_CWD:-}" = 1 ]; then
    exec chroot "$root" /bin/sh -c "cd \"\$0\" 2>/dev/null || cd /; exec /usr/bin/python3 \"\$@\"" \
      "$cwd" "$@"
  fi
  exec chroot "$root" /usr/bin/python3 "$@"' sh "$root" "$src" "$PWD" "$@"
