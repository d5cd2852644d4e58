#include "gpu/parity.hpp"

#include "gpu/backend.hpp"
#include "gpu/cuda_backend.hpp"

namespace troupe::gpu {

namespace {

// A parity check takes half of the device's memory at most.
void require_cuda_device(const device_spec& device) {
  if (device.type != device_spec::kind::cuda)
    throw troupe_error("this check runs on a CUDA device, not on " + device.to_string());
  check_device(device, {0.5});
}

} // namespace

layer_run run_layer_on_device(const layer_desc& desc, const tensor& x,
                              const std::vector<tensor>& params, const tensor& dy, bool training,
                              const device_spec& device) {
  require_cuda_device(device);
  return cuda::run_layer(desc, x, params, dy, training, device.index);
}

double softmax_cross_entropy_on_device(const tensor& logits, const std::vector<int32_t>& labels,
                                       tensor& grad, size_t& correct, const device_spec& device) {
  require_cuda_device(device);
  return cuda::softmax_cross_entropy(logits, labels, grad, correct, device.index);
}

} // namespace troupe::gpu
