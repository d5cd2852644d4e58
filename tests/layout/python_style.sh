#!/usr/bin/env bash
# Every Python file (the package, its tests, the benches' and the tests'
# scripts) follows PEP 8 as pycodestyle checks it, with lines of up to 100
# characters (Debian's python3-pycodestyle; scripts/test installs it).
# Skipped where pycodestyle is missing.
#   tests/layout/python_style.sh [SOURCE_DIR]
set -uo pipefail
root=${1:-$(cd "$(dirname "$0")/../.." && pwd)}
cd "$root" || exit 2
/usr/bin/python3 -m pycodestyle --version >/dev/null 2>&1 \
  || { echo "python_style: python3-pycodestyle not installed; skipped"; exit 77; }
# Python files without the .py suffix: by their #! line.
mapfile -t files < <( { git ls-files '*.py'
  git ls-files bench scripts | while read -r f; do
    [[ "$f" != *.* ]] && head -c 40 "$f" | grep -q '^#!.*python3' && echo "$f"; done; } | sort -u)
if ! /usr/bin/python3 -m pycodestyle --max-line-length=100 "${files[@]}"; then
  echo "python_style: the lines above do not follow PEP 8 (pycodestyle --max-line-length=100)"
  exit 1
fi
echo "python_style: ${#files[@]} Python files follow PEP 8"
