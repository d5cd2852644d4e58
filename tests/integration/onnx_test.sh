#!/usr/bin/env bash
# model.onnx, verified outside Troupe: for a custom CNN (digits), the
# built-in CNN with dropout and VGG-11 (Fashion-MNIST, scaled by 1/255), an
# MLP on standardised features with named classes (iris), and linear
# regression (diabetes), onnx.checker accepts the file and OpenCV's dnn
# module computes the probabilities (or values) troupe-predict does, within
# 1e-5, on the whole test set from the raw inputs.
set -u
. "$(dirname "$0")/lib.sh" # expect, wait_for_line, wait_exit
node=$1; predict=$2; root=$3
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
cd "$tmp" || exit 1
trap '[ -n "${TROUPE_KEEP_LOGS:-}" ] && echo "logs in $tmp" || rm -rf "$tmp"' EXIT
if ! /usr/bin/python3 -c "import onnx, cv2" 2>/dev/null; then
  echo "onnx_test: SKIPPED (needs python3-onnx and python3-opencv)"
  exit 77
fi
"$root/scripts/convert-sklearn-data" sk 2>/dev/null
fm=/usr/share/datasets/fashion-mnist
train() { # NAME MODEL STEPS DATA_SECTION [MODEL_SECTION]
  cat >"$1.conf" <<CONF
[cluster]
chief = ["127.0.0.1:7790"]
ps = ["127.0.0.1:7791"]
worker = ["127.0.0.1:7792"]
[train]
model = "$2"
optimizer = "adam"
learning-rate = 0.003
batch-size = 32
last-step = $3
log-interval = 0
[checkpoint]
log-dir = "logs/$1"
${5:-}
[data]
$4
CONF
  timeout 300 "$node" --config-file="$1.conf" >"$1.out" 2>"$1.log"
}
check() { # NAME INPUT [LABEL_COLUMN]
  "$predict" "logs/$1/export" "$2" --output="$1-pred.csv" 2>/dev/null
  /usr/bin/python3 "$here/onnx/check_onnx.py" "logs/$1/export/model.onnx" "$2" "$1-pred.csv" ${3:-} \
    >"$1-check.txt" 2>&1
}
digits='train = ["sk/digits-train.csv"]
test = ["sk/digits-test.csv"]
label-column = "digit"
input-shape = [8, 8, 1]
normalize = "scale"
scale = 0.0625'
train digits custom 200 "$digits" '[model]
layers = ["conv2d name=conv1 filters=8 kernel=3", "relu", "max_pool size=2", "conv2d name=conv2 filters=8 kernel=3 stride=2 padding=valid", "relu", "flatten", "dense name=fc units=10"]'
check digits sk/digits-test.csv digit; rc=$?
expect "custom CNN (digits): $(cat digits-check.txt | tail -1)" test "$rc" = 0
fashion="train = [\"$fm/train-images-idx3-ubyte.gz\"]
train-labels = [\"$fm/train-labels-idx1-ubyte.gz\"]
test = [\"$fm/t10k-images-idx3-ubyte.gz\"]
test-labels = [\"$fm/t10k-labels-idx1-ubyte.gz\"]"
train cnn cnn 30 "$fashion"
check cnn "$fm/t10k-images-idx3-ubyte.gz"; rc=$?
expect "built-in CNN with dropout (Fashion-MNIST): $(tail -1 cnn-check.txt)" test "$rc" = 0
train vgg vgg11 10 "$fashion" '[model]
vgg-width = 0.125'
check vgg "$fm/t10k-images-idx3-ubyte.gz"; rc=$?
expect "VGG-11 (Fashion-MNIST): $(tail -1 vgg-check.txt)" test "$rc" = 0
train iris mlp 200 'train = ["sk/iris-train.csv"]
test = ["sk/iris-test.csv"]
label-column = "species"
normalize = "standardize"'
check iris sk/iris-test.csv species; rc=$?
expect "MLP, standardised, named classes (iris): $(tail -1 iris-check.txt)" test "$rc" = 0
train reg softmax 300 'train = ["sk/diabetes-train.csv"]
test = ["sk/diabetes-test.csv"]
label-column = "progression"
task = "regression"
normalize = "standardize"'
check reg sk/diabetes-test.csv progression; rc=$?
expect "linear regression (diabetes): $(tail -1 reg-check.txt)" test "$rc" = 0
echo "onnx_test: $passes passed, $fails failed"
[ "$fails" -eq 0 ]
