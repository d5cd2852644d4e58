#pragma once
// Where a worker computes. One interface, troupe::model (train_step and
// evaluate on host tensors), with two implementations: the CPU layers of
// tensor/ (Eigen, always built) and gpu/cuda (cuBLAS and own kernels, built
// whenever nvcc is found). The CUDA model is built from the CPU model's own
// description of its layers, so both compute exactly the same network.
#include <memory>
#include <string>
#include <vector>

#include "tensor/model.hpp"
#include "tensor/tensor.hpp"

namespace troupe::gpu {

/// Where a worker computes: "cpu" or "cuda:N".
struct device_spec {
  enum class kind { cpu, cuda };
  kind type = kind::cpu;
  int index = 0;
  std::string to_string() const;
};

/// Parses "cpu" or "cuda:N"; throws troupe_error on anything else.
device_spec parse_device(const std::string& text);

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

/// One layer on a CUDA device, for parity tests: forward on x, then backward
/// with dy (host tensors in and out).
struct layer_run {
  tensor y, dx;
  std::vector<tensor> grads;
};
layer_run run_layer_on_device(const layer_desc& desc, const tensor& x,
                              const std::vector<tensor>& params, const tensor& dy, bool training,
                              const device_spec& device);

/// Softmax cross-entropy on a CUDA device: mean loss; writes the gradient
/// and the number of correct predictions.
double softmax_cross_entropy_on_device(const tensor& logits, const std::vector<int32_t>& labels,
                                       tensor& grad, size_t& correct, const device_spec& device);

} // namespace troupe::gpu
