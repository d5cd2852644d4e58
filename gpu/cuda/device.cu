#include "gpu/cuda/check.cuh"
#include "gpu/cuda/device_memory.cuh"
#include "gpu/cuda_backend.hpp"

namespace troupe::gpu::cuda {

bool available() noexcept {
  return true;
}

// No driver (CI, development machines) is a normal answer: zero devices.
int device_count() noexcept {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError(); // clear the sticky error so later calls start clean
    return 0;
  }
  return count;
}

std::string device_description(int index) {
  cudaDeviceProp props{};
  TROUPE_CUDA_CHECK(cudaGetDeviceProperties(&props, index));
  return std::string(props.name) + ", sm_" + std::to_string(props.major)
         + std::to_string(props.minor) + ", " + megabytes(props.totalGlobalMem);
}

} // namespace troupe::gpu::cuda
