#pragma once
// A trained model taken away from the run that made it: a directory with
//   model.safetensors  every logical variable whole, under its TF name
//                      (slices joined, optimizer slots left out)
//   model.json         the model card: the network as layer specs (the
//                      custom-model syntax, layer_spec.hpp), one example's
//                      shape, the classes and their names or the regression
//                      target, the normalisation, the step
// enough to rebuild the network and run it (troupe-predict, troupe-eval)
// without the config that trained it. Written at the end of a run into
// <log-dir>/export, and from any checkpoint by troupe-export.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tensor/checkpoint/checkpoint.hpp"
#include "tensor/checkpoint/json.hpp"
#include "tensor/data/catalog.hpp"
#include "tensor/export/table_export.hpp"
#include "tensor/nn/model.hpp"
#include "tensor/sparse/embedding_table.hpp"

namespace troupe {

/// model.json.
struct model_card {
  static constexpr int format_version = 1;
  std::string model;               ///< the name it was trained as (softmax, cnn, custom, ...)
  std::vector<std::string> layers; ///< the network, layer by layer, in layer_spec syntax
  shape_t input;                   ///< one example
  int64_t classes = 0;             ///< outputs (1 for regression)
  objective task = objective::classification;
  std::vector<std::string> label_names; ///< class i's name, where labels were names
  std::string label_column;             ///< CSV: the column that held the labels
  normalizer norm;                      ///< applied to every example before the network
  missing_fills missing;                ///< CSV: what empty numeric cells become
  int64_t step = 0;                     ///< global steps trained
  // Models with an embedding table (lr, fm, mf, deepfm; keys.fields > 0):
  key_layout keys;                       ///< where an example's keys lie
  int64_t embedding_dim = 0;             ///< factors per key; custom: its embedding layer's dim
  std::vector<int64_t> deep_layers;      ///< deepfm's hidden widths
  std::vector<int64_t> vocabulary;       ///< a fixed-size table's rows per field
  id_mapping ids = id_mapping::identity; ///< and how values become its rows
  row_init table_init;                   ///< the rows of keys the table lacks
  std::vector<std::string> categorical_columns; ///< CSV: the columns that hold keys
  std::vector<std::string> ignore_columns;      ///< CSV: the columns training left out

  json::value to_json() const;
  /// Throws checkpoint_error naming `path` and the field that is wrong.
  static model_card from_json(const json::value& v, const std::string& path);
  /// The options that rebuild the network (as model "custom", or the
  /// embedding model it was trained as).
  model_options options() const;
  /// Whether the model looks up an embedding table.
  bool has_table() const { return keys.sparse(); }
  /// Floats per row of the table: [w | v] for lr, fm, mf and deepfm (1 +
  /// embedding_dim), the embedding layer's dim for a custom network.
  uint32_t table_dim() const {
    return static_cast<uint32_t>(layers.empty() ? 1 + embedding_dim : embedding_dim);
  }
};

/// The card of `net` trained on `train` (its shape, classes, names and
/// normalisation; null: none known, e.g. an in-memory set).
model_card describe_model(model_kind kind, const model& net, const data_split* train, int64_t step);

/// The network `card` describes; throws checkpoint_error naming `where`
/// (the card's file) where it builds none.
std::unique_ptr<model> network_of(const model_card& card, const std::string& where);

/// The layers of `net` in layer_spec syntax ("dense name=fc1 units=10", ...).
std::vector<std::string> layer_specs(const model& net);

/// Writes model.safetensors, model.onnx and model.json into `dir` (created),
/// each atomically. `values` follow net's variables; their shapes are
/// checked. A model with an embedding table also writes `table`'s rows
/// ("embedding/keys" I64 [n], "embedding/values" F32 [n, dim]), and
/// model.onnx only where onnx_table_model can express it (a fixed-size
/// table). Returns what it wrote, e.g. "model.safetensors, model.json; no
/// model.onnx: <why>".
std::string write_model_export(const std::string& dir, const model_card& card,
                               const std::vector<variable_spec>& variables,
                               const std::vector<tensor>& values,
                               const table_rows* table = nullptr);

/// A model read back: the card, the network rebuilt from it, and its values
/// in the network's variable order.
struct exported_model {
  model_card card;
  std::unique_ptr<model> net;
  std::vector<tensor> params;
  /// The embedding table's rows (models with one; an unseen key reads
  /// card.table_init's value, as in training).
  std::shared_ptr<embedding_table> table;
};

/// The outputs of `model` for batch `b` into `outputs` [n, card.classes]:
/// logits, or the predicted value (regression). A model with a table looks
/// its rows up in model.table; its one logit y becomes the two logits
/// (0, y), whose softmax is (1 - sigmoid(y), sigmoid(y)).
void predict_batch(exported_model& model, const batch& b, tensor& outputs);
/// The same through `net`, a network built from model.card (one per thread
/// where threads predict at once: a network keeps its work space), which
/// leaves `model` as it is.
void predict_batch(model& net, const exported_model& model, const batch& b, tensor& outputs);

/// Reads an export directory; throws checkpoint_error naming the file and
/// what does not fit (a variable missing, a shape the network does not have).
exported_model read_model_export(const std::string& dir);

/// A model from an export directory (model.json + model.safetensors), or
/// from a checkpoint directory (ckpt-<step>) whose log directory holds the
/// run's model.json (`card`, where given, instead). Throws checkpoint_error
/// naming what is missing.
exported_model load_model(const std::string& path, const std::string& card = "");

/// A model to write out again (troupe-export): load_model's, but a
/// checkpoint's table is not loaded; its rows stay in the files and come
/// from `rows` (rows_of_checkpoint: a hash table's streamed), which needs
/// `checkpoint` alive.
struct model_to_export {
  exported_model model;
  std::unique_ptr<checkpoint_reader> checkpoint; ///< null for an export directory
  std::unique_ptr<table_rows> rows;              ///< null for a model without a table
};
model_to_export load_model_to_export(const std::string& path, const std::string& card = "");

/// How to read `files` for `card`: its shape, classes, label names,
/// normalisation; `labelled` false for inputs without labels. The files'
/// examples must hold the card's number of features (data_error naming
/// both otherwise).
std::shared_ptr<data_split> split_for_model(const model_card& card, data_format format,
                                            const std::vector<std::string>& files,
                                            const std::vector<std::string>& label_files,
                                            const csv_layout& csv, bool labelled);

} // namespace troupe
