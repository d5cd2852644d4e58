#include "gpu/cuda/check.cuh"
#include "gpu/cuda/cuda_model.hpp"

namespace troupe::gpu::cuda {

// No driver (CI, development machines) is a normal answer: zero devices.
int device_count() noexcept {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError(); // clear the sticky error so later calls start clean
    return 0;
  }
  return count;
}

} // namespace troupe::gpu::cuda
