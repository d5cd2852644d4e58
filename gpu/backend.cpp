#include "gpu/backend.hpp"

#include "gpu/cuda_backend.hpp"

namespace troupe::gpu {

namespace {

void require_backend(const device_spec& device) {
  if (!cuda::available())
    throw troupe_error("device " + device.to_string()
                       + " requested, but this build has no CUDA backend (nvcc was not found "
                         "when it was configured; install the CUDA toolkit under "
                         "/usr/local/cuda and rebuild, or use device = cpu)");
  int count = cuda::device_count();
  if (device.index >= count)
    throw troupe_error("device " + device.to_string() + " requested, but " + std::to_string(count)
                       + " CUDA device(s) are visible here; use device = cpu, or a valid index");
}

} // namespace

bool built_with_cuda() noexcept {
  return cuda::available();
}

int cuda_device_count() noexcept {
  return cuda::available() ? cuda::device_count() : 0;
}

void check_device(const device_spec& device, const device_options& options) {
  if (!(options.memory_fraction > 0 && options.memory_fraction <= 1))
    throw troupe_error("gpu-memory-fraction must be in (0, 1]");
  if (device.type == device_spec::kind::cpu)
    return;
  require_backend(device);
  cuda::check_memory_share(device.index, options.memory_fraction);
}

std::string describe_device(const device_spec& device) {
  if (device.type == device_spec::kind::cpu)
    return device.to_string();
  require_backend(device);
  return device.to_string() + " (" + cuda::device_description(device.index) + ")";
}

std::unique_ptr<model> make_device_model(std::unique_ptr<model> cpu_model,
                                         const device_spec& device, const device_options& options) {
  if (device.type == device_spec::kind::cpu)
    return cpu_model;
  check_device(device, options);
  return cuda::make_cuda_model(std::move(cpu_model), device.index, options.memory_fraction);
}

} // namespace troupe::gpu
