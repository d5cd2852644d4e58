#pragma once
// Models as the worker sees them: a list of named variables (placed on PS
// shards) and a training step that turns their values and a batch into a
// loss and one gradient per variable. Models hold scratch buffers only, no
// parameters, so a worker can reuse one across steps without allocating.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "tensor/core/enum_names.hpp"
#include "tensor/core/tensor.hpp"
#include "tensor/data/dataset.hpp"
#include "tensor/data/evaluation_set.hpp"
#include "tensor/data/key_layout.hpp"
#include "tensor/nn/loss.hpp"
#include "tensor/sparse/keys.hpp"
#include "tensor/sparse/lookup_batch.hpp"

namespace troupe {

/// How a variable gets its first value (TF's initializer names).
struct initializer {
  enum class kind { zeros, constant, random_normal, truncated_normal, glorot_uniform };
  kind type = kind::zeros;
  float value = 0.0f; // constant value, or stddev for the normal kinds
};

struct variable_spec {
  std::string name; // TF-style, e.g. "softmax/weights"
  shape_t shape;
  initializer init;
};

/// The first value of a variable. Deterministic in (seed, name): the same on
/// every node and independent of which shard holds it.
tensor initial_value(const variable_spec& spec, uint64_t seed);

/// Loss and accuracy counts of one batch.
struct batch_stats {
  double loss = 0; // mean over the batch
  size_t correct = 0;
  size_t examples = 0;
  /// The gradients' global L2 norm where the model computed it on its own
  /// device (the GPU model does, with a reduction), else -1. Finite exactly
  /// when every gradient value is.
  double gradient_norm = -1;
};

enum class padding { same, valid };

/// What one configured layer of a sequential model computes, so that another
/// backend (gpu/) can build its own implementation of the same network.
struct layer_desc {
  enum class kind { dense, conv2d, max_pool, relu, dropout, flatten, embedding };
  kind type = kind::dense;
  std::string name;
  shape_t input, output;              ///< per example
  int64_t units = 0;                  ///< dense; embedding: floats per row
  combiner combine = combiner::mean;  ///< embedding: how a field's rows combine
  int64_t filters = 0;                ///< conv2d
  int64_t kernel_h = 0, kernel_w = 0; ///< conv2d; max_pool: the window (square)
  int64_t stride = 1;                 ///< conv2d, max_pool
  padding pad = padding::same;        ///< conv2d, max_pool
  float rate = 0;                     ///< dropout
  uint64_t seed = 0;                  ///< dropout
  /// Moves no data: a view (flatten), or a ReLU the next layer applies.
  bool skipped = false;
  /// max_pool: applies the ReLU before it (relu(max(x)) = max(relu(x))).
  bool applies_input_relu = false;
  size_t first_variable = 0, num_variables = 0; ///< into model::variables()
};

/// Host buffers a model reads parameters from and writes gradients to (a GPU
/// model: its page-locked staging), one per variable of num_elements(shape)
/// floats. A caller that writes parameters there and reads gradients there
/// saves the model a host copy of each per step. train_step and evaluate
/// with tensors stage through the same buffers, overwriting them.
struct host_staging {
  std::vector<float*> params;
  std::vector<float*> grads; ///< written by train_step_staged; valid until the next step
  std::vector<size_t> sizes; ///< floats per variable
};

/// An embedding table a model looks up; the PS shards hold its rows
/// (tensor/sparse/embedding_table.hpp).
struct table_spec {
  std::string name;
  uint32_t dim = 0; ///< floats per row
};

/// The rows one batch looks up in a model's table: the batch's distinct keys
/// (each pulled once), their values, and, after train_step_rows, the
/// gradient of each distinct row (the sum over its occurrences).
struct batch_rows {
  unique_keys keys;
  std::vector<float> values; ///< keys.size() × dim
  std::vector<float> grads;  ///< keys.size() × dim
};

struct model_declaration;

class model {
public:
  virtual ~model() = default;

  virtual const std::string& name() const = 0;

  /// The variables, in creation order (the order placement sees).
  virtual const std::vector<variable_spec>& variables() const = 0;

  /// Forward and backward pass. `params` and `grads` follow variables();
  /// grads are resized as needed.
  virtual batch_stats train_step(const std::vector<tensor>& params, const batch& b,
                                 std::vector<tensor>& grads) = 0;

  /// Forward pass only.
  virtual batch_stats evaluate(const std::vector<tensor>& params, const batch& b) = 0;

  /// The network's outputs for `inputs` [examples, features] into `outputs`
  /// [examples, classes] (logits; the predicted value for regression), no
  /// dropout. Throws troupe_error where a backend cannot (the GPU models).
  virtual void predict(const std::vector<tensor>& params, const tensor& inputs, tensor& outputs);

  /// The model's staging buffers, or null when it has none (CPU models).
  virtual host_staging* staging() noexcept { return nullptr; }

  /// train_step on the parameters in staging()->params, with the gradients
  /// left in staging()->grads. Throws troupe_error where staging() is null.
  virtual batch_stats train_step_staged(const batch& b);

  /// Continues the model's random streams (dropout masks) as if it had
  /// taken `steps` training steps of `batch` examples: a worker restored
  /// from a checkpoint draws the masks it would have drawn.
  virtual void skip_training_steps(uint64_t steps, int64_t batch) = 0;

  /// One line per layer and variable (name, shape, size), for --dump-config.
  virtual std::string describe() const = 0;

  /// The network layer by layer, with per-example shapes.
  virtual std::vector<layer_desc> layers() const = 0;

  /// The input shape of one example.
  virtual shape_t input_shape() const = 0;

  // -- models with an embedding table (tensor/nn/sparse_model.hpp) --------

  /// The tables it looks up (none: a dense model, which uses none of what
  /// follows).
  virtual const std::vector<table_spec>& tables() const;
  /// The keys a batch looks up, occurrence by occurrence, into `ids`
  /// (batch_rows::keys is their distinct set).
  virtual void batch_keys(const batch& b, std::vector<int64_t>& ids) const;
  /// train_step with the batch's rows (rows.keys assigned from batch_keys,
  /// rows.values pulled); writes rows.grads.
  virtual batch_stats train_step_rows(const std::vector<tensor>& params, const batch& b,
                                      batch_rows& rows, std::vector<tensor>& grads);
  /// The outputs (logits; the predicted value for regression), one per
  /// example, into `outputs` [examples, 1].
  virtual void predict_rows(const std::vector<tensor>& params, const batch& b,
                            const batch_rows& rows, tensor& outputs);
  /// train_step with the rows of every table (one per tables(), in order);
  /// by default train_step_rows with the one table a built-in model has.
  virtual batch_stats train_step_tables(const std::vector<tensor>& params, const batch& b,
                                        const std::vector<batch_rows*>& rows,
                                        std::vector<tensor>& grads);

  // -- a model declared by its worker's program (declared_model.hpp) ------

  /// What the program declared (null: a model of Troupe's own).
  virtual const model_declaration* declaration() const { return nullptr; }
  /// The program brings each step's batch: the worker reads no data and,
  /// before the step's pull, asks next_batch_keys for the keys it looks up.
  virtual bool brings_batches() const { return false; }
  /// The keys the step's batch looks up, into each table's rows
  /// (rows[t]->keys for tables()[t], their distinct set). Throws where the
  /// program cannot give them (the worker then fails with the message).
  virtual void next_batch_keys(const std::vector<batch_rows*>& rows);
  /// Metrics the program reported since the last call (names and values;
  /// false: none), for the chief's final line.
  virtual bool take_reported(std::vector<std::string>& names, std::vector<double>& values) {
    (void)names;
    (void)values;
    return false;
  }
};

/// Replaces the model a worker computes with (the one the settings name,
/// on its device) by another with the same variables: the Python package's,
/// whose steps compute in PyTorch.
using model_wrapper = std::function<std::shared_ptr<model>(std::shared_ptr<model>)>;

class layer;

/// A stack of layers ending in a dense layer with one unit per class, trained
/// with softmax cross-entropy, or (regression) with one unit, trained with
/// mean squared error. input: the shape of one example.
std::unique_ptr<model> make_sequential(std::string name, shape_t input, int64_t classes,
                                       std::vector<std::unique_ptr<layer>> layers,
                                       objective task = objective::classification);

/// Model "synthetic" (synthetic_model.hpp): what a step costs and moves.
struct synthetic_step {
  double step_ms = 50; ///< the compute a step stands for
  bool busy = false;   ///< spend it on the CPU (true) or asleep
  int64_t floats = 100'000;
};

/// Knobs of the built-in models, and the layer list of model "custom".
struct model_options {
  uint64_t seed = 42;                         // dropout masks
  double vgg_width = 0.25;                    // multiplies VGG's channel and fc widths
  std::vector<std::string> layers;            // custom: see tensor/layer_spec.hpp
  shape_t input{28, 28, 1};                   // one example's shape (troupe-node: the data's)
  int64_t classes = 10;                       // logits of the last layer (troupe-node: the data's)
  objective task = objective::classification; // regression: one output, classes = 1
  key_layout keys;                            // lr, fm, mf, deepfm: where the keys lie
  int64_t embedding_dim = 8;                  // fm, mf, deepfm: factors per key
  std::vector<int64_t> deep_layers{64, 32};   // deepfm: the hidden layers' widths
  std::vector<int64_t> vocabulary;            // a fixed-size table's rows per field (else empty)
  id_mapping ids = id_mapping::identity;      // and how a field's values become rows
  synthetic_step synthetic;                   // synthetic: a step's cost and size
};

/// Softmax regression: logits = x W + b, W [features, classes] (with
/// objective::regression and one class: linear regression).
std::unique_ptr<model> make_softmax_model(int64_t features = 784, int64_t classes = 10,
                                          objective task = objective::classification);

/// The models make_model builds (train.model): the built-in ones, and
/// "custom", built from model_options::layers.
/// lr, fm, mf, deepfm: models of categorical data with an embedding table
/// (sparse_model.hpp); so is custom where its layers start with an
/// embedding layer (embedding_network.hpp).
/// synthetic: a step of a set cost moving a set size (synthetic_model.hpp).
/// declared: variables and tables a worker's program declares (the Python
/// package's PyTorch modules; declared_model.hpp): make_model refuses it.
enum class model_kind {
  softmax,
  mlp,
  cnn,
  vgg11,
  vgg16,
  vgg19,
  custom,
  lr,
  fm,
  mf,
  deepfm,
  synthetic,
  declared
};

TROUPE_ENUM_NAMES(model_kind, {model_kind::softmax, "softmax"}, {model_kind::mlp, "mlp"},
                  {model_kind::cnn, "cnn"}, {model_kind::vgg11, "vgg11"},
                  {model_kind::vgg16, "vgg16"}, {model_kind::vgg19, "vgg19"},
                  {model_kind::custom, "custom"}, {model_kind::lr, "lr"}, {model_kind::fm, "fm"},
                  {model_kind::mf, "mf"}, {model_kind::deepfm, "deepfm"},
                  {model_kind::synthetic, "synthetic"}, {model_kind::declared, "declared"});

/// Whether built-in model `kind` looks up an embedding table.
inline bool uses_embeddings(model_kind kind) {
  return kind == model_kind::lr || kind == model_kind::fm || kind == model_kind::mf
         || kind == model_kind::deepfm;
}

/// Whether a model of `kind` with `layers` looks up an embedding table: a
/// built-in one that does, or custom starting with an embedding layer.
bool uses_embeddings(model_kind kind, const std::vector<std::string>& layers);

/// A built-in model (softmax, mlp, cnn, vgg11, vgg16, vgg19), or custom
/// built from options.layers, for examples of options.input and
/// options.classes classes (softmax and mlp take any input; cnn and vgg an
/// [H, W, C] their layers fit); throws troupe_error naming the problem.
std::unique_ptr<model> make_model(model_kind kind, const model_options& options = {});

/// initial_value of each of the model's variables, in order.
std::vector<tensor> initial_values(const model& m, uint64_t seed);

/// Loss and accuracy of a model over a whole evaluation set, in batches.
batch_stats evaluate_dataset(model& m, const std::vector<tensor>& params,
                             const evaluation_set& data, size_t batch_size = 1000);

} // namespace troupe
