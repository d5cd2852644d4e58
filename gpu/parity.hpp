#pragma once
// Single layers and the loss on a CUDA device, for the parity tests that
// check every kernel against the CPU layers (tests/gpu/backend_test.cpp).
// Not used by training.
#include <cstdint>
#include <vector>

#include "gpu/device_spec.hpp"
#include "tensor/nn/model.hpp"

namespace troupe::gpu {

/// One layer's results: forward output, then the backward pass with dy.
struct layer_run {
  tensor y, dx;
  std::vector<tensor> grads;
};

/// One layer on a CUDA device: forward on x, then backward with dy (host
/// tensors in and out). Throws troupe_error where there is no such device.
layer_run run_layer_on_device(const layer_desc& desc, const tensor& x,
                              const std::vector<tensor>& params, const tensor& dy, bool training,
                              const device_spec& device);

/// Softmax cross-entropy on a CUDA device: mean loss; writes the gradient
/// and the number of correct predictions.
double softmax_cross_entropy_on_device(const tensor& logits, const std::vector<int32_t>& labels,
                                       tensor& grad, size_t& correct, const device_spec& device);

} // namespace troupe::gpu
