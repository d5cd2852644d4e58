#!/usr/bin/env bash
# Dependencies point one way:
#   tensor <- {gpu, plan} <- checkpoint <- export; {gpu, plan} <- settings;
#   {settings, checkpoint} <- {actors, config/node} <- apps; export <- apps
# and inside actors/:
#   net <- protocol <- {exchange, ps, token_queue} <- worker <- chief <- actors/
#   (the library API: cluster.hpp); common (fan_in, progress) below all but net.
# Each folder may include only from the folders below it (and itself);
# tensor/, gpu/, tensor/plan and config/settings stay free of CAF. CMake's
# targets follow the same graph; this check keeps the #includes honest, so a
# header pulled in across the line fails the test suite.
#   tests/layout/dependency_directions.sh [SOURCE_DIR]
set -uo pipefail
root=${1:-$(cd "$(dirname "$0")/../.." && pwd)}
cd "$root" || exit 2

tensor_base="tensor/core tensor/data tensor/nn tensor/optim tensor/sparse"
# folder, then the folders below it that it may include from (it may always
# include from itself)
declare -A allowed=()
while read -r folder below; do
  allowed[$folder]="$below${below:+ }$folder"
done <<TABLE
tensor/core
tensor/data          tensor/core tensor/sparse
tensor/nn            tensor/core tensor/data tensor/sparse
tensor/optim         tensor/core
tensor/sparse        tensor/core
tensor/plan          $tensor_base
tensor/checkpoint    $tensor_base tensor/plan
tensor/export        $tensor_base tensor/plan tensor/checkpoint
tensor/summary       tensor/core
gpu                  $tensor_base
config/settings      $tensor_base tensor/plan gpu
actors/metrics
actors/net           tensor/core actors/metrics
actors/protocol      $tensor_base tensor/plan actors/net
actors/common        $tensor_base
actors/ps            $tensor_base tensor/checkpoint actors/metrics actors/net actors/protocol actors/common
actors/token_queue   $tensor_base actors/protocol actors/common
actors/exchange      $tensor_base actors/net actors/protocol actors/common
actors/worker        $tensor_base tensor/plan actors/metrics actors/net actors/protocol actors/common \
                     actors/exchange
actors/chief         $tensor_base tensor/plan tensor/checkpoint tensor/summary config/settings \
                     actors/metrics actors/net actors/protocol actors/common actors/exchange \
                     actors/token_queue
actors               $tensor_base tensor/plan tensor/checkpoint tensor/summary gpu config/settings
config/node          $tensor_base tensor/plan tensor/checkpoint gpu config/settings
TABLE
caf_free="tensor gpu config/settings actors/metrics actors/net"

# The files of FOLDER that no deeper folder of the table owns (actors/ itself
# holds the library API; its subfolders have rows of their own).
in_own_folder() {
  local folder=$1 file other deeper
  while IFS= read -r file; do
    deeper=0
    for other in "${!allowed[@]}"; do
      [[ "$other" != "$folder" && "$other" == "$folder/"* && "$file" == "$other/"* ]] && deeper=1
    done
    [ $deeper -eq 0 ] && echo "$file"
  done
}

failures=0
for folder in "${!allowed[@]}"; do
  while IFS= read -r file; do
    while IFS= read -r included; do
      ok=0
      for prefix in ${allowed[$folder]}; do
        [[ "$included" == "$prefix/"* ]] && ok=1
      done
      if [ $ok -eq 0 ]; then
        echo "$file includes \"$included\": $folder may include only from: ${allowed[$folder]}"
        failures=$((failures + 1))
      fi
    done < <(grep -hoE '^#include "[^"]+"' "$file" | sed -E 's/#include "([^"]+)"/\1/' \
               | grep -E '^(tensor|gpu|config|actors|apps)/')
  done < <(git ls-files "$folder" | grep -E '\.(hpp|cpp|cu|cuh|h)$' | in_own_folder "$folder")
done
for folder in $caf_free; do
  while IFS= read -r hit; do
    echo "$hit: $folder stays free of CAF"
    failures=$((failures + 1))
  done < <(git ls-files "$folder" | grep -E '\.(hpp|cpp|cu|cuh|h)$' | xargs -r grep -lE '#include <caf/')
done
if [ $failures -gt 0 ]; then
  echo "dependency_directions: $failures include(s) point the wrong way (see docs/architecture.md)"
  exit 1
fi
echo "dependency_directions: every include points down the graph"
