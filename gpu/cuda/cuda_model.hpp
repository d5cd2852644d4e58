#pragma once
// A model computing on one CUDA device: the network a CPU model describes
// (its layers() and variables()), with cuBLAS GEMMs and the kernels of
// kernels.cuh, on one stream for compute and one for copies. Parameters go
// up and gradients come down through pinned buffers with asynchronous copies:
// a layer waits only for its own parameters, and a layer's gradients start
// down while the layers before it are still computing theirs.
#include <memory>
#include <string>
#include <vector>

#include "gpu/backend.hpp"
#include "tensor/model.hpp"

// A plain C++ header: gpu/backend.cpp (compiled by the C++ compiler) calls
// into the CUDA side through it.
namespace troupe::gpu::cuda {

/// Usable CUDA devices; 0 without a driver (CI, development machines).
int device_count() noexcept;

/// "NVIDIA H100 80GB HBM3, sm_90, 81559 MB" for a device that is there.
std::string device_description(int index);

/// Throws troupe_error when `memory_fraction` of the (visible) device's
/// memory is more than is free.
void check_memory_share(int index, double memory_fraction);

/// The model on the device (which check_device has accepted).
std::unique_ptr<model> make_cuda_model(std::unique_ptr<model> reference, int device,
                                       double memory_fraction);

/// One layer on the device, for parity tests: forward on x (training or
/// not), then backward with dy; host tensors in and out.
layer_run run_layer(const layer_desc& desc, const tensor& x, const std::vector<tensor>& params,
                    const tensor& dy, bool training, int device);

/// Mean softmax cross-entropy, correct count and d(loss)/d(logits) on the device.
double softmax_cross_entropy(const tensor& logits, const std::vector<int32_t>& labels,
                             tensor& grad, size_t& correct, int device);

} // namespace troupe::gpu::cuda
