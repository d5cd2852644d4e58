#!/usr/bin/env bash
# Taking the model away (troupe-export, troupe-predict, troupe-eval):
#   A  a run with a log directory leaves <log-dir>/export; troupe-eval on it
#      scores the test set as the run's final line did; troupe-export from
#      the last checkpoint gives the same model; troupe-predict's classes
#      agree with the labels as often as the accuracy says.
#   B  troupe-predict writes one row per example (CSV and JSON lines) with
#      the training's label names, with or without the label column.
#   C  regression: predicted values, and troupe-eval's RMSE is the run's.
#   D  a model and data that do not fit: exit 2 naming both; a label the
#      model does not know: exit 2 naming its line.
set -u
. "$(dirname "$0")/lib.sh" # expect, cluster_config, sklearn_data, finish, ... (listed there)
bin=$1; export_bin=$2; predict=$3; eval_bin=$4; root=$5
enter_scratch_dir
"$root/scripts/convert-sklearn-data" sk 2>/dev/null

# train NAME SET [CHECKPOINT_KEY...] <TRAIN_KEYS: scikit-learn's SET, converted into sk/, trained
# in this process on the [train] keys of standard input; checkpoints and export in logs/NAME
train() { local name=$1 set=$2 keys; shift 2; keys=$(cat)
  cluster_config "$name.conf" 1 1 <<CONF
[train]
log-interval = 0
$keys
$(sklearn_data "$set")
[checkpoint]
log-dir = "logs/$name"
$(printf '%s\n' "$@")
CONF
  timeout 120 "$bin" --config-file="$name.conf" >"$name.out" 2>"$name.log"
}

# -- A: digits, one process: the export scores what the run scored --
train digits digits "save-steps = 30" <<CONF
model = "mlp"
optimizer = "adam"
learning-rate = 0.001
batch-size = 32
epochs = 2
CONF
acc=$(field digits.out test_accuracy); loss=$(field digits.out test_loss)
expect "A: the run ends ok and leaves logs/digits/export" \
  bash -c 'grep -q "\"ok\":true" digits.out && test -f logs/digits/export/model.safetensors && test -f logs/digits/export/model.json'
"$eval_bin" logs/digits/export sk/digits-test.csv >eval.out 2>eval.err; rc=$?
echo "run: accuracy $acc loss $loss; troupe-eval: $(cat eval.out)"
expect "A: troupe-eval exits 0" test "$rc" = 0
expect "A: troupe-eval scores the run's test accuracy" test "$(field eval.out accuracy)" = "$acc"
expect "A: and its loss (within 1e-4)" \
  awk -v a="$(field eval.out loss)" -v b="$loss" 'BEGIN { d = a - b; exit !(d < 1e-4 && d > -1e-4) }'
last=$(sed -n 's/^model_checkpoint_path: "\(.*\)"$/\1/p' logs/digits/checkpoint)
"$export_bin" "logs/digits/$last" from-ckpt >export.out 2>export.err; rc=$?
expect "A: troupe-export from $last exits 0" test "$rc" = 0
"$eval_bin" from-ckpt sk/digits-test.csv >eval2.out 2>/dev/null
expect "A: the exported checkpoint scores the same" test "$(field eval2.out accuracy)" = "$acc"
"$eval_bin" "logs/digits/$last" sk/digits-test.csv >eval3.out 2>/dev/null
expect "A: troupe-eval reads the checkpoint itself too" test "$(field eval3.out accuracy)" = "$acc"
"$predict" logs/digits/export sk/digits-test.csv --output=digits-pred.csv 2>/dev/null
agree=$(paste -d, <(tail -n +2 sk/digits-test.csv | cut -d, -f65) <(tail -n +2 digits-pred.csv | cut -d, -f2) \
  | awk -F, '$1 == $2 { n++ } END { print n + 0 }')
expect "A: troupe-predict's classes agree with the labels as the accuracy says ($agree of 360, accuracy $acc)" \
  awk -v n="$agree" -v a="$acc" 'BEGIN { d = n / 360 - a; exit !(d < 2e-4 && d > -2e-4) }'

# -- B: iris, named labels --
train iris iris <<CONF
model = "mlp"
optimizer = "adam"
learning-rate = 0.01
batch-size = 10
epochs = 40
CONF
acc=$(field iris.out test_accuracy)
expect "B: the iris run ends ok and leaves logs/iris/export" test -f logs/iris/export/model.json

"$predict" logs/iris/export sk/iris-test.csv --output=pred.csv 2>pred.err; rc=$?
expect "B: troupe-predict exits 0" test "$rc" = 0
expect "B: a header with the class names" \
  grep -qx "row,class,label,p_setosa,p_versicolor,p_virginica" pred.csv
expect "B: one row per example (30)" test "$(($(wc -l <pred.csv) - 1))" = 30
agree=$(paste -d, <(tail -n +2 sk/iris-test.csv | cut -d, -f5) <(tail -n +2 pred.csv | cut -d, -f3) \
  | awk -F, '$1 == $2 { n++ } END { print n + 0 }')
expect "B: predicted labels agree with the test labels as the accuracy says ($agree of 30, accuracy $acc)" \
  awk -v n="$agree" -v a="$acc" 'BEGIN { d = n / 30 - a; exit !(d < 1e-3 && d > -1e-3) }'
cut -d, -f1-4 sk/iris-test.csv >unlabelled.csv
"$predict" logs/iris/export unlabelled.csv --jsonl >pred.jsonl 2>/dev/null; rc=$?
expect "B: inputs without labels, as JSON lines" \
  bash -c "test $rc = 0 && grep -q '^{\"row\":0,\"class\":[0-2],\"label\":\"[a-z]*\",\"probabilities\":\[' pred.jsonl && test \$(wc -l <pred.jsonl) = 30"
expect "B: the same predictions either way" \
  test "$(tail -n +2 pred.csv | cut -d, -f2 | tr '\n' ' ')" = "$(grep -o '"class":[0-9]*' pred.jsonl | cut -d: -f2 | tr '\n' ' ')"

# -- C: regression --
train reg diabetes <<CONF
model = "softmax"
learning-rate = 0.003
batch-size = 16
epochs = 60
CONF
"$eval_bin" logs/reg/export sk/diabetes-test.csv >reg-eval.out 2>/dev/null
echo "regression: run rmse $(field reg.out test_rmse); troupe-eval $(field reg-eval.out rmse)"
expect "C: troupe-eval's RMSE is the run's" test "$(field reg-eval.out rmse)" = "$(field reg.out test_rmse)"
"$predict" logs/reg/export sk/diabetes-test.csv >reg-pred.csv 2>/dev/null
expect "C: predicted values, one per example" \
  bash -c 'head -1 reg-pred.csv | grep -qx "row,value" && test $(($(wc -l <reg-pred.csv) - 1)) = 89'

# -- D: what does not fit --
"$eval_bin" logs/iris/export sk/digits-test.csv --label-column=digit >/dev/null 2>mismatch.err; rc=$?
expect "D: another data set's features: exit 2 naming both counts" \
  bash -c "test $rc = 2 && grep -q 'examples of 64 values (shape \[64\]), but the model takes 4 (shape \[4\])' mismatch.err"
sed '3s/,[a-z]*$/,daisy/' sk/iris-test.csv >daisy.csv
"$eval_bin" logs/iris/export daisy.csv >/dev/null 2>daisy.err; rc=$?
expect "D: a label the model does not know: exit 2 naming its line" \
  bash -c "test $rc = 2 && grep -q \"daisy.csv line 3: label 'daisy' is not one of the 3 classes\" daisy.err"
"$predict" logs/nothing sk/iris-test.csv >/dev/null 2>none.err; rc=$?
expect "D: no model there: exit 2 saying so" \
  bash -c "test $rc = 2 && grep -q 'neither an exported model' none.err"

finish
