#!/usr/bin/env bash
# Every C++ file of the tree is formatted as .clang-format says (clang-format-14, Debian's).
#   tests/format/check_format.sh SOURCE_DIR
# Fix: clang-format-14 -i FILE... (or every file: git ls-files '*.cc' '*.h' | xargs clang-format-14 -i)
set -euo pipefail
cd "$1"
if ! command -v clang-format-14 >/dev/null; then
  echo "clang-format-14 is not installed: scripts/install-deps.sh installs it" >&2
  exit 1
fi
mapfile -t files < <(git ls-files '*.cc' '*.h' 2>/dev/null || find . -name build -prune -o \( -name '*.cc' -o -name '*.h' \) -print)
bad=()
for f in "${files[@]}"; do
  if ! clang-format-14 --dry-run --Werror "$f" >/dev/null 2>&1; then bad+=("$f"); fi
done
if ((${#bad[@]})); then
  echo "not formatted as .clang-format says (fix: clang-format-14 -i FILE):" >&2
  printf '  %s\n' "${bad[@]}" >&2
  exit 1
fi
echo "${#files[@]} files formatted"
