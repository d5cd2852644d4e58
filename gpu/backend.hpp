#pragma once
// Where a worker computes. One interface, troupe::model (train_step and
// evaluate on host tensors), with two implementations: the CPU layers of
// tensor/nn (Eigen, always built) and gpu/cuda (cuBLAS and own kernels, built
// whenever nvcc is found). The CUDA model is built from the CPU model's own
// description of its layers, so both compute exactly the same network.
//
// The functions here are written once (gpu/backend.cpp) over the entry
// points of gpu/cuda_backend.hpp, which an executable gets from exactly one
// library: troupe_gpu (CUDA where nvcc was found, else a stub that refuses
// every device) or, in tests, troupe_gpu_emulated.
#include <memory>
#include <string>

#include "gpu/device_spec.hpp"
#include "tensor/nn/model.hpp"

namespace troupe::gpu {

struct device_options {
  /// The share of the device's memory one worker may hold (TF's
  /// per_process_gpu_memory_fraction); more than is free is an error.
  double memory_fraction = 0.9;
};

/// True when this build contains the CUDA backend.
bool built_with_cuda() noexcept;

/// Number of usable CUDA devices (0 without a driver or in a CPU-only build).
int cuda_device_count() noexcept;

/// For logs: "cpu", or "cuda:0 (NVIDIA H100 80GB HBM3, sm_90, 81559 MB)".
/// Throws troupe_error for a CUDA device that is not there.
std::string describe_device(const device_spec& device);

/// Throws troupe_error, naming the device and what to do, when a worker
/// cannot compute on `device` here: no CUDA in this build, no such device, or
/// memory_fraction of it is more than is free.
void check_device(const device_spec& device, const device_options& options = {});

/// The network of `cpu_model` computing on `device`: the CPU model itself for
/// cpu, a CUDA implementation of the same layers and variables for cuda:N.
std::unique_ptr<model> make_device_model(std::unique_ptr<model> cpu_model,
                                         const device_spec& device,
                                         const device_options& options = {});

} // namespace troupe::gpu
