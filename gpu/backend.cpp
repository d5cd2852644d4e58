#include "gpu/backend.hpp"

#include <cstdlib>

#include "gpu/config.hpp"
#include "tensor/error.hpp"

#if TROUPE_HAS_CUDA
#include "gpu/cuda/cuda_model.hpp"
#endif

namespace troupe::gpu {

std::string device_spec::to_string() const {
  return type == kind::cpu ? "cpu" : "cuda:" + std::to_string(index);
}

device_spec parse_device(const std::string& text) {
  if (text == "cpu")
    return {};
  if (text.rfind("cuda:", 0) == 0 && text.size() > 5) {
    char* end = nullptr;
    long index = std::strtol(text.c_str() + 5, &end, 10);
    if (*end == '\0' && index >= 0 && index < 1024)
      return {device_spec::kind::cuda, static_cast<int>(index)};
  }
  throw troupe_error("invalid device '" + text + "': use cpu or cuda:N (e.g. cuda:0)");
}

bool built_with_cuda() noexcept {
  return TROUPE_HAS_CUDA != 0;
}

int cuda_device_count() noexcept {
#if TROUPE_HAS_CUDA
  return cuda::device_count();
#else
  return 0;
#endif
}

namespace {

[[maybe_unused]] [[noreturn]] void no_cuda_backend(const device_spec& device) {
  throw troupe_error("device " + device.to_string()
                     + " requested, but this build has no CUDA backend (nvcc was not found "
                       "when it was configured; install the CUDA toolkit under "
                       "/usr/local/cuda and rebuild, or use device = cpu)");
}

void require_cuda_device(const device_spec& device) {
  if (device.type != device_spec::kind::cuda)
    throw troupe_error("this check runs on a CUDA device, not on " + device.to_string());
}

[[maybe_unused]] void require_visible(const device_spec& device) {
  int count = cuda_device_count();
  if (device.index >= count)
    throw troupe_error("device " + device.to_string() + " requested, but "
                       + std::to_string(count)
                       + " CUDA device(s) are visible here; use device = cpu, or a valid index");
}

} // namespace

void check_device(const device_spec& device, const device_options& options) {
  if (!(options.memory_fraction > 0 && options.memory_fraction <= 1))
    throw troupe_error("gpu-memory-fraction must be in (0, 1]");
  if (device.type == device_spec::kind::cpu)
    return;
#if TROUPE_HAS_CUDA
  require_visible(device);
  cuda::check_memory_share(device.index, options.memory_fraction);
#else
  no_cuda_backend(device);
#endif
}

std::string describe_device(const device_spec& device) {
  if (device.type == device_spec::kind::cpu)
    return device.to_string();
#if TROUPE_HAS_CUDA
  require_visible(device);
  return device.to_string() + " (" + cuda::device_description(device.index) + ")";
#else
  no_cuda_backend(device);
#endif
}

std::unique_ptr<model> make_device_model(std::unique_ptr<model> cpu_model,
                                         const device_spec& device,
                                         const device_options& options) {
  if (device.type == device_spec::kind::cpu)
    return cpu_model;
  check_device(device, options);
#if TROUPE_HAS_CUDA
  return cuda::make_cuda_model(std::move(cpu_model), device.index, options.memory_fraction);
#else
  no_cuda_backend(device);
#endif
}

// Without CUDA these only refuse, hence [[maybe_unused]].
layer_run run_layer_on_device([[maybe_unused]] const layer_desc& desc,
                              [[maybe_unused]] const tensor& x,
                              [[maybe_unused]] const std::vector<tensor>& params,
                              [[maybe_unused]] const tensor& dy, [[maybe_unused]] bool training,
                              const device_spec& device) {
  require_cuda_device(device);
  check_device(device, {0.5});
#if TROUPE_HAS_CUDA
  return cuda::run_layer(desc, x, params, dy, training, device.index);
#else
  no_cuda_backend(device);
#endif
}

double softmax_cross_entropy_on_device([[maybe_unused]] const tensor& logits,
                                       [[maybe_unused]] const std::vector<int32_t>& labels,
                                       [[maybe_unused]] tensor& grad,
                                       [[maybe_unused]] size_t& correct,
                                       const device_spec& device) {
  require_cuda_device(device);
  check_device(device, {0.5});
#if TROUPE_HAS_CUDA
  return cuda::softmax_cross_entropy(logits, labels, grad, correct, device.index);
#else
  no_cuda_backend(device);
#endif
}

} // namespace troupe::gpu
