#!/usr/bin/env bash
# Every C++ file is formatted by the project's .clang-format (Debian 12's
# clang-format 14). Skipped where clang-format is missing. To fix a failure:
#   git ls-files '*.cpp' '*.hpp' '*.cu' '*.cuh' '*.h' | xargs clang-format -i
set -uo pipefail
root=${1:-$(cd "$(dirname "$0")/../.." && pwd)}
cd "$root" || exit 2
command -v clang-format >/dev/null || { echo "formatting: clang-format not installed; skipped"; exit 77; }
bad=$(git ls-files '*.cpp' '*.hpp' '*.cu' '*.cuh' '*.h' | while read -r f; do
  clang-format --dry-run --Werror "$f" >/dev/null 2>&1 || echo "$f"; done)
if [ -n "$bad" ]; then
  echo "formatting: not formatted by .clang-format:"; echo "$bad"
  echo "run: git ls-files '*.cpp' '*.hpp' '*.cu' '*.cuh' '*.h' | xargs clang-format -i"
  exit 1
fi
echo "formatting: every C++ file follows .clang-format"
