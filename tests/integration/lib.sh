# Shared by the integration tests: source it, then use
#   expect WHAT COMMAND...   counts and prints "ok: WHAT" or "FAIL: WHAT"
#   wait_for_line FILE PATTERN SECONDS   true once PATTERN is in FILE
#   wait_exit PID SECONDS    sets rc to PID's exit code, or "hung"
fails=0; passes=0
expect() { local what=$1; shift
  if "$@"; then echo "ok: $what"; passes=$((passes + 1)); else echo "FAIL: $what"; fails=$((fails + 1)); fi; }
wait_for_line() { local end=$((SECONDS + $3))
  while [ $SECONDS -lt $end ]; do grep -q -- "$2" "$1" 2>/dev/null && return 0; sleep 0.1; done; return 1; }
wait_exit() { local end=$((SECONDS + $2)); rc=hung
  while kill -0 "$1" 2>/dev/null; do [ $SECONDS -ge $end ] && return; sleep 0.2; done
  wait "$1"; rc=$?; }
#   field FILE KEY           the last value of "KEY": in FILE (a JSON line's number or literal)
field() { grep -o "\"$2\":[^,}]*" "$1" | tail -1 | cut -d: -f2; }
