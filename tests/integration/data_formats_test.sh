#!/usr/bin/env bash
# Bringing your own data, through real processes:
#   A  Fashion-MNIST as IDX, as CSV and as .npy (scripts/convert-fashion-mnist)
#      trains to the same test accuracy and loss with the same seed.
#   B  scikit-learn's digits as four CSV shards (scripts/convert-sklearn-data),
#      chief, ps and two workers in their own processes: each worker reads its
#      own two files, the CNN learns them, the chief evaluates while training,
#      the data's description lands in the log directory.
#   C  iris, whose labels are names: mapped to classes, printed and reported.
#   D  bad data: a bad row names its file and line (exit 3, bad_data); with
#      data.bad-records = skip it is counted per file in the final line.
#   E  a model that does not fit the data: exit 2 naming both shapes.
#   F  regression (diabetes, a real target in a CSV column): mean squared
#      error, RMSE in the progress lines and the final line, better than
#      predicting the mean.
set -u
. "$(dirname "$0")/lib.sh" # expect, start_cluster, expect_exit, finish, ... (listed there)
bin=$1; root=$2
enter_scratch_dir

# -- A: one data set in three formats, the same training --
"$root/scripts/convert-fashion-mnist" fm 2>/dev/null
whole() { # NAME DATA_SECTION: softmax, 1 ps, 1 worker, in this process
  cluster_config "$1.conf" 1 1 <<CONF
[train]
model = "softmax"
batch-size = 100
learning-rate = 0.1
last-step = 400
seed = 7
log-interval = 0
[data]
$2
CONF
  timeout 120 "$bin" --config-file="$1.conf" >"$1.out" 2>"$1.log"
}
whole idx 'train = ["/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz"]
train-labels = ["/usr/share/datasets/fashion-mnist/train-labels-idx1-ubyte.gz"]
test = ["/usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz"]
test-labels = ["/usr/share/datasets/fashion-mnist/t10k-labels-idx1-ubyte.gz"]'
whole csv 'train = ["fm/train.csv"]
test = ["fm/test.csv"]
normalize = "scale"
scale = 0.00392156862745098'
whole npy 'train = ["fm/train-images.npy"]
train-labels = ["fm/train-labels.npy"]
test = ["fm/test-images.npy"]
test-labels = ["fm/test-labels.npy"]'
acc_idx=$(field idx.out test_accuracy); loss_idx=$(field idx.out test_loss)
echo "IDX accuracy $acc_idx loss $loss_idx; CSV $(field csv.out test_accuracy) $(field csv.out test_loss); npy $(field npy.out test_accuracy) $(field npy.out test_loss)"
expect "IDX trains (ok, accuracy above 0.75)" \
  awk -v a="$acc_idx" 'BEGIN { exit !(a > 0.75) }' 
expect "IDX, CSV and .npy runs end ok" grep -q '"ok":true' idx.out csv.out npy.out
expect "CSV gives IDX's accuracy and loss" \
  test "$(field csv.out test_accuracy) $(field csv.out test_loss)" = "$acc_idx $loss_idx"
expect ".npy gives IDX's accuracy and loss" \
  test "$(field npy.out test_accuracy) $(field npy.out test_loss)" = "$acc_idx $loss_idx"
expect "the final line describes the data" grep -q '"data":{"format":"csv","task":"classification","input_shape":\[784\],"classes":10' csv.out

# -- B: digits, four CSV shards, real processes --
"$root/scripts/convert-sklearn-data" sk --shards 4 2>/dev/null
mkdir -p data && ln -s ../sk data/digits
example_config digits-cnn digits.conf
start_cluster digits.conf
wait_exit "${pid[chief]}" 120
expect "digits: the chief ends ok" test "$rc" = 0
acc=$(field chief.log test_accuracy)
echo "digits test accuracy: $acc"
expect "digits: test accuracy above 0.9 (got $acc)" awk -v a="$acc" 'BEGIN { exit !(a > 0.9) }'
expect "digits: each worker reads its own half (2 of the 4 files, 718 or 719 examples)" \
  bash -c 'grep -q "training on 71[89] of 1437 examples" w0.log && grep -q "training on 71[89] of 1437 examples" w1.log'
expect "digits: the chief evaluated while training" grep -q "evaluation at global_step=200: test_accuracy=" chief.log
expect "digits: the final line lists the evaluations" grep -q '"evaluations":\[{"step":200' chief.log
expect "digits: data.json saved with the run" \
  grep -q '"normalize":{"kind":"scale","scale":0.0625}' logs/digits-cnn/data.json

# -- C: labels that are names --
cluster_config iris.conf 1 2 <<CONF
$(train_section learning-rate=0.01 batch-size=10 epochs=60 log-interval=0)
$(sklearn_data iris)
CONF
timeout 120 "$bin" --config-file=iris.conf >iris.out 2>iris.log
acc=$(field iris.out test_accuracy)
echo "iris test accuracy: $acc"
expect "iris: names become sorted classes, printed" grep -q "classes: 0=setosa 1=versicolor 2=virginica" iris.log
expect "iris: reported in the final line" grep -q '"label_names":\["setosa","versicolor","virginica"\]' iris.out
expect "iris: test accuracy above 0.85 (got $acc)" awk -v a="$acc" 'BEGIN { exit !(a > 0.85) }'

# -- D: bad data --
cp sk/iris-train.csv bad-train.csv
sed -i '7s/^[^,]*,/oops,/' bad-train.csv
echo "1.0,2.0,3.0" >>bad-train.csv
sed -e 's|sk/iris-train.csv|bad-train.csv|' iris.conf >bad.conf
timeout 60 "$bin" --config-file=bad.conf >bad.out 2>bad.err; rc=$?
expect "a bad row: exit 3 (bad_data)" test "$rc" = 3
expect "a bad row is named by file, line and column" \
  grep -q "bad-train.csv line 7, column 'sepal_length' (0): 'oops' is not a number" bad.err
printf 'bad-records = "skip"\n' >>bad.conf
sed -i 's/epochs = 60/epochs = 2/' bad.conf
timeout 60 "$bin" --config-file=bad.conf >skip.out 2>skip.log; rc=$?
expect "skip: the run ends ok" test "$rc" = 0
expect "skip: the log names the file and the count" grep -q "bad-train.csv: 2 of 121 records skipped" skip.log
expect "skip: the final line counts them per file" \
  grep -q '"train":{"records":119,"bad_records":2,"files":\[{"path":"bad-train.csv","records":121,"bad_records":2}\]}' skip.out
sed -e 's|sk/iris-train.csv|nothing-*.csv|' iris.conf >glob.conf
timeout 60 "$bin" --config-file=glob.conf >/dev/null 2>glob.err; rc=$?
expect "a glob that matches nothing: exit 3 (bad_data), named" \
  bash -c "test $rc = 3 && grep -q \"data.train: 'nothing-\\*.csv' matches no file\" glob.err"

# -- E: a model that does not fit --
sed -e 's/model = "mlp"/model = "cnn"/' iris.conf >cnn.conf
timeout 60 "$bin" --config-file=cnn.conf >/dev/null 2>cnn.err; rc=$?
expect "cnn on flat rows: exit 2 naming the data's shape" \
  bash -c "test $rc = 2 && grep -q 'model cnn takes examples of shape \[height, width, channels\]; the data.s are \[4\]' cnn.err"
printf '[model]\ninput = [28, 28, 1]\n' >>iris.conf
timeout 60 "$bin" --config-file=iris.conf >/dev/null 2>input.err; rc=$?
expect "model.input against the data: exit 2 naming both shapes" \
  bash -c "test $rc = 2 && grep -q 'model.input = \[28, 28, 1\] holds 784 values per example, but the data.s examples have shape \[4\]' input.err"

# -- F: regression --
cluster_config reg.conf 1 2 <<CONF
[train]
; "softmax" with one output and mean squared error: linear regression
model = "softmax"
optimizer = "sgd"
learning-rate = 0.003
batch-size = 16
epochs = 100
log-interval = 500
$(sklearn_data diabetes)
CONF
timeout 120 "$bin" --config-file=reg.conf >reg.out 2>reg.log; rc=$?
rmse=$(field reg.out test_rmse)
# The test set's own standard deviation: what predicting the mean scores.
spread=$(awk -F, 'NR > 1 { n++; s += $11; q += $11 * $11 } END { printf "%.2f", sqrt(q / n - (s / n) ^ 2) }' sk/diabetes-test.csv)
echo "diabetes regression: test RMSE $rmse; predicting the mean: $spread"
expect "regression: the run ends ok" test "$rc" = 0
expect "regression: the final line reports RMSE, no accuracy" \
  grep -q '"task":"regression","test_accuracy":null,"test_loss":[0-9.]*,"test_rmse":' reg.out
expect "regression: progress lines show rmse" grep -q "loss=[0-9.]* rmse=[0-9.]* examples/s" reg.log
expect "regression: RMSE $rmse well below the spread $spread" \
  awk -v r="${rmse:-999}" -v s="$spread" 'BEGIN { exit !(r < 0.85 * s) }'

finish
