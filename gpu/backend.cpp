#include "gpu/backend.hpp"

#include <cstdlib>

#include "gpu/config.hpp"
#include "gpu/cpu/cpu_backend.hpp"
#include "tensor/error.hpp"

namespace troupe::gpu {

#if TROUPE_HAS_CUDA
int cuda_runtime_device_count() noexcept; // gpu/cuda/device.cu
#endif

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
  return cuda_runtime_device_count();
#else
  return 0;
#endif
}

std::unique_ptr<compute_backend> make_backend(const device_spec& device) {
  if (device.type == device_spec::kind::cpu)
    return std::make_unique<cpu_backend>();
  if (!built_with_cuda())
    throw troupe_error("device " + device.to_string()
                       + " requested, but this build has no CUDA backend "
                         "(configure with -DTROUPE_CUDA=ON on a machine with nvcc)");
  int count = cuda_device_count();
  if (device.index >= count)
    throw troupe_error("device " + device.to_string() + " requested, but "
                       + std::to_string(count) + " CUDA device(s) are visible; "
                         "use device = cpu or a valid index");
  throw troupe_error("device " + device.to_string()
                     + ": CUDA training kernels are not part of this release yet; "
                       "use device = cpu");
}

} // namespace troupe::gpu
