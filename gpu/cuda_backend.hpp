#pragma once
// The CUDA backend's entry points, in plain C++. gpu/backend.cpp and
// gpu/parity.cpp are written once over them. Exactly one library defines
// them in an executable:
//   - gpu/cuda/*.cu, compiled by nvcc (library troupe_gpu where nvcc was found);
//   - the same files compiled by the C++ compiler against the emulated CUDA
//     runtime of tests/gpu/emulated (troupe_gpu_emulated);
//   - gpu/stub/cuda_stub.cpp, which has no device (troupe_gpu without nvcc).
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "gpu/parity.hpp"
#include "tensor/nn/model.hpp"

namespace troupe::gpu::cuda {

/// False only in the stub: this build has no CUDA backend.
bool available() noexcept;

/// Usable CUDA devices; 0 without a driver (CI, development machines).
int device_count() noexcept;

/// "NVIDIA H100 80GB HBM3, sm_90, 81559 MB" for a device that is there.
std::string device_description(int index);

/// Throws troupe_error when `memory_fraction` of the (visible) device's
/// memory is more than is free.
void check_memory_share(int index, double memory_fraction);

/// A model computing on one CUDA device: the network a CPU model describes
/// (its layers() and variables()), with cuBLAS GEMMs and the kernels of
/// kernels.cuh, on one stream for compute and one for copies. Parameters go
/// up and gradients come down through pinned buffers with asynchronous
/// copies: a layer waits only for its own parameters, and a layer's
/// gradients start down while the layers before it are still computing theirs.
std::unique_ptr<model> make_cuda_model(std::unique_ptr<model> reference, int device,
                                       double memory_fraction);

/// One layer on the device, for parity tests: forward on x (training or
/// not), then backward with dy; host tensors in and out.
layer_run run_layer(const layer_desc& desc, const tensor& x, const std::vector<tensor>& params,
                    const tensor& dy, bool training, int device);

/// Mean softmax cross-entropy, correct count and d(loss)/d(logits) on the device.
double softmax_cross_entropy(const tensor& logits, const std::vector<int32_t>& labels, tensor& grad,
                             size_t& correct, int device);

} // namespace troupe::gpu::cuda
