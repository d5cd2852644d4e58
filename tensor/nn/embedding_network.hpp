#pragma once
// A custom model over categorical data whose model.layers start with an
// embedding layer, TF's input_layer over embedding_columns:
//   "embedding dim=16 combiner=mean", "dense units=64", "relu", "dense units=2"
// Each categorical field's keys are looked up in the model's one table (rows
// of dim floats, on the PS shards) and combined per field (sum, mean or
// sqrtn, with the keys' weights; a field without keys gives zeros). The
// fields' vectors, then the example's dense values, feed the layers that
// follow: [field 0 | ... | field F-1 | dense], F·dim + dense values.
// Binary classification ends in a dense layer of 2 units (softmax
// cross-entropy, as every custom model; its score is the log-odds z1 - z0),
// regression in one unit (mean squared error).
#include <memory>

#include "tensor/nn/model.hpp"

namespace troupe {

/// The network of options.layers over options.keys; throws troupe_error
/// naming the problem (no categorical data, a layer that does not fit, a
/// last layer of the wrong width).
std::unique_ptr<model> make_embedding_network(const model_options& options);

} // namespace troupe
