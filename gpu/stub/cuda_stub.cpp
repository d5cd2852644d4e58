// The CUDA backend's entry points in a build without nvcc: no device.
// gpu/backend.cpp checks available() before anything else, so the others
// are reached only by a caller that skipped that check.
#include "gpu/cuda_backend.hpp"

namespace troupe::gpu::cuda {

namespace {

[[noreturn]] void no_backend() {
  throw troupe_error("this build has no CUDA backend");
}

} // namespace

bool available() noexcept {
  return false;
}

int device_count() noexcept {
  return 0;
}

std::string device_description(int) {
  no_backend();
}

void check_memory_share(int, double) {
  no_backend();
}

std::unique_ptr<model> make_cuda_model(std::unique_ptr<model>, int, double) {
  no_backend();
}

layer_run run_layer(const layer_desc&, const tensor&, const std::vector<tensor>&, const tensor&,
                    bool, int) {
  no_backend();
}

double softmax_cross_entropy(const tensor&, const std::vector<int32_t>&, tensor&, size_t&, int) {
  no_backend();
}

} // namespace troupe::gpu::cuda
