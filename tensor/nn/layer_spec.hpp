#pragma once
// Networks written as text, so that a user defines a model in the config file
// without recompiling. One string per layer: "<kind> key=value ...", e.g.
//   "conv2d filters=32 kernel=5 padding=same init=truncated_normal stddev=0.1 bias=0.1"
//   "max_pool size=2", "relu", "dropout rate=0.5", "flatten", "dense units=10"
// A model over categorical data may start with "embedding dim=16
// combiner=mean" (tensor/nn/embedding_network.hpp).
#include <memory>
#include <string>
#include <vector>

#include "tensor/nn/layers.hpp"
#include "tensor/sparse/lookup_batch.hpp"

namespace troupe {

/// Builds the layers specs[first ..] (named and reported by their position in
/// specs); throws troupe_error naming the layer (by position and text) and
/// the problem: unknown kind, unknown or missing parameter, bad value, an
/// embedding layer anywhere but first.
std::vector<std::unique_ptr<layer>> parse_layers(const std::vector<std::string>& specs,
                                                 uint64_t seed, size_t first = 0);

/// An embedding layer: each categorical field's keys looked up in the
/// model's table (rows of `dim` floats) and combined per field.
struct embedding_layer_spec {
  std::string name;
  int64_t dim = 0;
  combiner how = combiner::mean; ///< TF's embedding_column default
};

/// Whether the first of `specs` is an embedding layer.
bool starts_with_embedding(const std::vector<std::string>& specs);

/// specs[0] as an embedding layer ("embedding dim=16 combiner=sqrtn");
/// throws troupe_error naming the problem.
embedding_layer_spec parse_embedding_layer(const std::vector<std::string>& specs);

} // namespace troupe
