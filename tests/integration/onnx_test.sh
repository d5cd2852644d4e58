#!/usr/bin/env bash
# model.onnx, verified outside Troupe: for a custom CNN (digits), the
# built-in CNN with dropout and VGG-11 (Fashion-MNIST, scaled by 1/255), an
# MLP on standardised features with named classes (iris), and linear
# regression (diabetes), onnx.checker accepts the file and OpenCV's dnn
# module computes the probabilities (or values) troupe-predict does, within
# 1e-5, on the whole test set from the raw inputs.
set -u
. "$(dirname "$0")/lib.sh" # expect, cluster_config, sklearn_data, finish, ... (listed there)
bin=$1; predict=$2; root=$3
here=$(cd "$(dirname "$0")" && pwd)
enter_scratch_dir
if ! /usr/bin/python3 -c "import onnx, cv2" 2>/dev/null; then
  echo "onnx_test: SKIPPED (needs python3-onnx and python3-opencv)"
  exit 77
fi
"$root/scripts/convert-sklearn-data" sk 2>/dev/null
fm=/usr/share/datasets/fashion-mnist
train() { # NAME MODEL STEPS DATA_SECTION [MODEL_SECTION]
  cluster_config "$1.conf" 1 1 <<CONF
$(train_section model="\"$2\"" learning-rate=0.003 batch-size=32 last-step="$3" log-interval=0)
[checkpoint]
log-dir = "logs/$1"
${5:-}
$4
CONF
  timeout 300 "$bin" --config-file="$1.conf" >"$1.out" 2>"$1.log"
}
check() { # NAME INPUT [LABEL_COLUMN]
  "$predict" "logs/$1/export" "$2" --output="$1-pred.csv" 2>/dev/null
  /usr/bin/python3 "$here/onnx/check_onnx.py" "logs/$1/export/model.onnx" "$2" "$1-pred.csv" ${3:-} \
    >"$1-check.txt" 2>&1
}
digits="$(sklearn_data digits)
input-shape = [8, 8, 1]"
train digits custom 200 "$digits" '[model]
layers = ["conv2d name=conv1 filters=8 kernel=3", "relu", "max_pool size=2", "conv2d name=conv2 filters=8 kernel=3 stride=2 padding=valid", "relu", "flatten", "dense name=fc units=10"]'
check digits sk/digits-test.csv digit; rc=$?
expect "custom CNN (digits): $(cat digits-check.txt | tail -1)" test "$rc" = 0
fashion="[data]
train = [\"$fm/train-images-idx3-ubyte.gz\"]
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
train iris mlp 200 "$(sklearn_data iris)"
check iris sk/iris-test.csv species; rc=$?
expect "MLP, standardised, named classes (iris): $(tail -1 iris-check.txt)" test "$rc" = 0
train reg softmax 300 "$(sklearn_data diabetes)"
check reg sk/diabetes-test.csv progression; rc=$?
expect "linear regression (diabetes): $(tail -1 reg-check.txt)" test "$rc" = 0
finish
