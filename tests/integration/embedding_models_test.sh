#!/usr/bin/env bash
# The embedding models (issue 28) through real processes: config/examples'
# ctr-fm (2 ps, 2 workers) on make-ctr-data's Criteo-layout data, async and
# sync, reporting test AUC and log loss with the table's rows per shard;
# deepfm and lr in one process; movielens-mf on MovieLens (exit 77, skipped,
# after the CTR checks pass where python3-rdata or r-cran-dslabs is missing);
# settings the tables cannot take refused by name.
#   tests/integration/embedding_models_test.sh TROUPE_NODE SOURCE_ROOT
set -u
. "$(dirname "$0")/lib.sh"
bin=$1
root=$2
enter_scratch_dir
num() { grep -o "\"$2\":[0-9.e+-]*" "$1" | tail -1 | cut -d: -f2; }
above() { awk -v x="$1" -v lo="$2" 'BEGIN { exit !(x != "" && x + 0 > lo) }'; }

"$root/scripts/make-ctr-data" data/ctr --rows 60000 --vocab 10-20000 --seed 5 >ctr.log 2>&1
oracle=$(grep -o '"auc": [0-9.]*' data/ctr/oracle.json | cut -d' ' -f2)

# -- A: ctr-fm as the example is, on fewer rows: async, then sync --
for mode in async sync; do
  example_config ctr-fm $mode.conf mode="\"$mode\"" epochs=2 log-interval=20 eval-interval=40
  start_cluster $mode.conf $mode-
  wait_tasks 240 $mode-chief $mode-ps0 $mode-ps1 $mode-w0 $mode-w1
  expect "ctr-fm $mode: every task exits 0 ($exits)" test $? = 0
  auc=$(num $mode-chief.log test_auc); loss=$(num $mode-chief.log test_logloss)
  echo "ctr-fm $mode: test AUC $auc, log loss $loss (the planted model's AUC: $oracle)"
  expect "ctr-fm $mode: test AUC above 0.6 ($auc)" above "$auc" 0.6
  expect "ctr-fm $mode: log loss below 0.6 ($loss)" awk -v x="$loss" 'BEGIN { exit !(x > 0 && x < 0.6) }'
  expect "ctr-fm $mode: evaluations while training report AUC" \
    grep -q 'evaluation at global_step=40: test_auc=' $mode-chief.log
  expect "ctr-fm $mode: both shards hold rows, counted in the final line" \
    eval "grep -q '\"embedding\":\[{\"shard\":0,\"table\":\"embedding\",\"rows\":[1-9][0-9]*' $mode-chief.log &&
          grep -q '{\"shard\":1,\"table\":\"embedding\",\"rows\":[1-9]' $mode-chief.log"
  expect "ctr-fm $mode: the hottest keys are listed" grep -q '"hottest":\[\[[0-9]*,[0-9]*\]' $mode-chief.log
done
expect "sync: no gradient dropped with two of two workers" test "$(field sync-chief.log dropped_gradients)" = 0

# -- B: deepfm and lr, every task in one process --
for model in deepfm lr; do
  example_config ctr-fm $model.conf model="\"$model\"" epochs=1 log-interval=0 eval-interval=0
  "$bin" --config-file=$model.conf >$model.out 2>&1
  expect "$model: one process trains (exit $?)" grep -q '"event":"final","ok":true' $model.out
  auc=$(num $model.out test_auc)
  echo "$model: test AUC $auc"
  expect "$model: test AUC above 0.6 ($auc)" above "$auc" 0.6
done
expect "deepfm: its MLP is placed on the shards" grep -q 'deep/layer0/weights' deepfm.out

# -- C: what the tables cannot take, refused before anything starts --
example_config ctr-fm bad.conf log-interval=0
printf '[checkpoint]\nlog-dir = "logs/ctr"\n' >>bad.conf
"$bin" --config-file=bad.conf >bad.out 2>&1; rc=$?
expect "checkpoints of a model with a table are refused by name (exit $rc)" \
  eval 'test $rc != 0 && grep -q "checkpoint.log-dir: model fm keeps its embedding table" bad.out'
example_config ctr-fm dim.conf dim=0
"$bin" --config-file=dim.conf >dim.out 2>&1; rc=$?
expect "embedding.dim = 0 is refused (exit $rc)" eval 'test $rc != 0 && grep -q "embedding.dim = 0" dim.out'
example_config ctr-fm mf.conf model='"mf"'
"$bin" --config-file=mf.conf >mf.out 2>&1; rc=$?
expect "mf on 26 fields is refused, naming fm (exit $rc)" eval 'test $rc != 0 && grep -q "use fm" mf.out'

# -- D: movielens-mf, real processes --
if ! "$root/scripts/convert-movielens" data/movielens >ml.log 2>&1; then
  echo "skipped: MovieLens (scripts/convert-movielens failed: python3-rdata or r-cran-dslabs missing?)"
  [ "$fails" = 0 ] && { finish; exit 77; }
  finish
fi
example_config movielens-mf mf-run.conf epochs=4 log-interval=0 eval-interval=0
start_cluster mf-run.conf mf-
wait_tasks 240 mf-chief mf-ps0 mf-w0 mf-w1
expect "movielens-mf: every task exits 0 ($exits)" test $? = 0
rmse=$(num mf-chief.log test_rmse)
echo "movielens-mf, 4 epochs: test RMSE $rmse (predicting the mean: 1.0608)"
expect "movielens-mf: test RMSE below 0.97 ($rmse)" awk -v x="$rmse" 'BEGIN { exit !(x > 0 && x < 0.97) }'
finish
