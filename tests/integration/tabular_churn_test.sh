#!/usr/bin/env bash
# Real tabular data as its owner has it (issue 52): the IBM telco churn set
# from r-cran-modeldata (scripts/convert-churn: 10 categorical columns,
# numeric ones from 0/1 flags to money, 11 empty cells), trained from
# config/examples/churn-lr.conf, which names only the label, the categorical
# columns and the model.
#   A  the run ends ok; its test AUC is within 0.01 of scikit-learn's
#      logistic regression on one-hot categories (churn.json's baseline);
#      the log says what the empty cells became
#   B  the exported model scores test.csv (with its empty cell) as the run
#      did (troupe-eval), and troupe-predict writes a row per customer
#   C  where a setting is truly needed the first run stops at once (exit 3, bad_data: the data meets the setting)
#      naming it: data.missing-values = "refuse" meets an empty cell; a
#      column of categories left numeric names data.categorical-columns
#   tests/integration/tabular_churn_test.sh TROUPE_NODE TROUPE_PREDICT TROUPE_EVAL SOURCE_ROOT
set -u
. "$(dirname "$0")/lib.sh" # expect, enter_scratch_dir, example_config, start_cluster, wait_tasks, field, finish
bin=$1 predict=$2 eval_bin=$3 root=$4
enter_scratch_dir
num() { grep -o "\"$2\":[0-9.e+-]*" "$1" | tail -1 | cut -d: -f2; }
within() { awk -v a="$1" -v b="$2" -v d="$3" 'BEGIN { x = a - b; exit !(a != "" && b != "" && x <= d && -x <= d) }'; }

"$root/scripts/convert-churn" data/churn >convert.log 2>&1; rc=$?
expect "scripts/convert-churn converts wa_churn (exit $rc)" grep -q '7043 customers: 5634 train, 1409 test' convert.log
baseline=$(grep -o '"baseline_test_auc": [0-9.]*' data/churn/churn.json | cut -d' ' -f2)

# -- A: the first config trains as well as a one-hot logistic regression --
example_config churn-lr churn.conf
printf '[checkpoint]\nlog-dir = "logs/churn"\n' >>churn.conf
start_cluster churn.conf churn-
wait_tasks 240 churn-chief churn-ps0 churn-w0 churn-w1
expect "A: every task exits 0 ($exits)" test $? = 0
auc=$(num churn-chief.log test_auc)
echo "churn-lr: test AUC $auc; scikit-learn's one-hot logistic regression: $baseline"
expect "A: test AUC within 0.01 of the baseline ($auc, $baseline)" within "$auc" "$baseline" 0.01
expect "A: the final line says ok" grep -q '"event":"final","ok":true' churn-chief.log
expect "A: the log says total_charges' empty cells read its mean, with an indicator" \
  grep -q 'empty cells of column total_charges read 2[0-9][0-9][0-9]\.[0-9]* (data.missing-values), with an indicator' churn-chief.log
expect "A: data.json lists every numeric column's fill" \
  grep -q '"missing":\[{"column":"female","fill":' logs/churn/data.json
expect "A: and the numbers were standardized (data.normalize = auto)" \
  grep -q '"normalize":{"kind":"standardize"' logs/churn/data.json

# -- B: the exported model fills the cells as training did --
"$eval_bin" logs/churn/export data/churn/test.csv >eval.out 2>eval.err; rc=$?
expect "B: troupe-eval exits 0 ($(tail -1 eval.err))" test "$rc" = 0
expect "B: troupe-eval's AUC is the run's ($(field eval.out auc), $auc)" \
  within "$(field eval.out auc)" "$auc" 0.0001
"$predict" logs/churn/export data/churn/test.csv --output=pred.csv 2>pred.err; rc=$?
expect "B: troupe-predict exits 0 ($(tail -1 pred.err))" test "$rc" = 0
expect "B: one row per customer (1409)" test "$(($(wc -l <pred.csv) - 1))" = 1409

# -- C: what a first run cannot guess stops it at once, naming the setting --
example_config churn-lr refuse.conf
printf 'missing-values = "refuse"\n' >>refuse.conf
"$bin" --config-file=refuse.conf --job_name=chief --task_index=0 >refuse.out 2>&1; rc=$?
expect "C: refuse meets total_charges' empty cell: exit 3 ($rc)" test "$rc" = 3
expect "C: ... naming the line, the column and data.missing-fill" \
  grep -q 'column .total_charges. (19) is empty, and data.missing-values = "refuse"' refuse.out
example_config churn-lr numeric.conf
sed -i 's/"contract", //' numeric.conf
"$bin" --config-file=numeric.conf --job_name=chief --task_index=0 >numeric.out 2>&1; rc=$?
expect "C: contract left numeric: exit 3 ($rc)" test "$rc" = 3
expect "C: ... naming data.categorical-columns" \
  grep -q "column 'contract' (15): '[A-Za-z -]*' is not a number (a column of categories belongs in data.categorical-columns" numeric.out
finish
