#!/usr/bin/env bash
# A root file system that holds glibc and nothing else (the files of Debian's libc6 package),
# as bare as a machine a GPU bundle is made for, and a way to run a program in it.
#
#   libc_root.sh make ROOT          fills ROOT: libc6's files, /tmp, /proc, /dev and an
#                                   /etc/hosts naming localhost and this host, as Debian's
#   libc_root.sh run ROOT PROG...   runs PROG chrooted in ROOT, in mount and PID namespaces
#                                   of its own (a /proc of its own, /dev bound from here; both
#                                   go when it ends), on this host's network. Needs root.
set -euo pipefail

case "${1:-}" in
  make)
    root=${2:?libc_root.sh make ROOT}
    mkdir -p "$root"/{tmp,proc,dev,etc}
    chmod 1777 "$root/tmp"
    dpkg-query -L "libc6:$(dpkg --print-architecture)" | grep -v '^/usr/share/' | while read -r path; do
      # Folders are made as needed, as real ones (not /usr-merge's links).
      if [[ ! -d "$path" ]]; then
        mkdir -p "$root$(dirname "$path")"
        cp -a "$path" "$root$path"
      fi
    done
    printf '127.0.0.1 localhost\n127.0.1.1 %s\n' "$(hostname)" > "$root/etc/hosts"
    ;;
  run)
    root=${2:?libc_root.sh run ROOT PROG...}
    shift 2
    exec unshare --mount --pid --fork --mount-proc="$root/proc" \
      /bin/sh -c 'mount --rbind /dev "$0/dev" && exec chroot "$0" "$@"' "$root" "$@"
    ;;
  *)
    echo "usage: libc_root.sh make ROOT | libc_root.sh run ROOT PROG..." >&2
    exit 2
    ;;
esac
