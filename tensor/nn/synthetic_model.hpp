#pragma once
// A model for measuring the runtime rather than learning (issue 29's scaling
// benchmark): a step costs a set time, sleeping or busy on the CPU, and its
// one variable, of a set size, is what every pull and push moves. Its
// gradient is constant, so updates are real and counted; nothing is learnt.
#include <memory>

#include "tensor/nn/model.hpp"

namespace troupe {

std::unique_ptr<model> make_synthetic_model(const model_options& options);

} // namespace troupe
