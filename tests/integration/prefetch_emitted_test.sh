#!/usr/bin/env bash
# The embedding table's lookups and pushes hide their cache misses behind
# prefetches (tensor/sparse/embedding_table.cpp). GCC once compiled the row
# prefetch of lookup's second pass to nothing, and only a profile showed it:
# this counts the prefetch instructions the library holds for each.
#   prefetch_emitted_test.sh LIBTROUPE_TENSOR.a
set -euo pipefail
lib=$1
command -v objdump >/dev/null || { echo "SKIP: no objdump"; exit 77; }
case "$(uname -m)" in x86_64|i?86) ;; *) echo "SKIP: counts x86 prefetch instructions"; exit 77 ;; esac
count() { # FUNCTION: prefetch instructions in the function whose demangled name starts so
  objdump -d --no-show-raw-insn -C "$lib" | awk -v f="$1" '
    /^[0-9a-f]+ <.*>:$/ { inside = index($0, "<" f) > 0 }
    inside && /prefetch/ { n++ }
    END { print n + 0 }'
}
status=0
# lookup: the map slots (pass 1) and the rows' lines (pass 2).
n=$(count "troupe::embedding_table::lookup(")
echo "embedding_table::lookup: $n prefetch instruction(s)"
[ "$n" -ge 2 ] || { echo "FAIL: lookup needs its slot and row prefetches" >&2; status=1; }
n=$(count "troupe::embedding_table::apply_checked(")
echo "embedding_table::apply_checked: $n prefetch instruction(s)"
[ "$n" -ge 2 ] || { echo "FAIL: apply needs its slot and row prefetches" >&2; status=1; }
exit $status
