#pragma once
// Networks written as text, so that a user defines a model in the config file
// without recompiling. One string per layer: "<kind> key=value ...", e.g.
//   "conv2d filters=32 kernel=5 padding=same init=truncated_normal stddev=0.1 bias=0.1"
//   "max_pool size=2", "relu", "dropout rate=0.5", "flatten", "dense units=10"
#include <memory>
#include <string>
#include <vector>

#include "tensor/nn/layers.hpp"

namespace troupe {

/// Builds the layers; throws troupe_error naming the layer (by position and
/// text) and the problem: unknown kind, unknown or missing parameter, bad value.
std::vector<std::unique_ptr<layer>> parse_layers(const std::vector<std::string>& specs,
                                                 uint64_t seed);

} // namespace troupe
