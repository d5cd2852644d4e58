#pragma once
// One compute interface, two implementations: CPU (Eigen, always built) and
// CUDA (built whenever nvcc is found). Today's models compute through
// tensor/ops directly and the CUDA side only reports devices; the GPU worker
// will run its models through this interface, checked against the CPU one.
#include <memory>
#include <string>
#include <vector>

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

class compute_backend {
public:
  virtual ~compute_backend() = default;
  virtual device_spec device() const = 0;
  /// out = op(a) op(b)
  virtual void matmul(const tensor& a, const tensor& b, tensor& out, bool transpose_a,
                      bool transpose_b) = 0;
  virtual void add_bias(tensor& x, const tensor& bias) = 0;
  /// Mean loss; writes d(loss)/d(logits).
  virtual double softmax_cross_entropy(const tensor& logits,
                                      const std::vector<int32_t>& labels,
                                      tensor& grad_logits) = 0;
  virtual void axpy(float alpha, const tensor& x, tensor& y) = 0;
};

/// True when this build contains the CUDA backend.
bool built_with_cuda() noexcept;

/// Number of usable CUDA devices (0 without a driver or in a CPU-only build).
int cuda_device_count() noexcept;

/// A backend for the device; throws troupe_error with a clear message when
/// the device does not exist or this build cannot drive it.
std::unique_ptr<compute_backend> make_backend(const device_spec& device);

} // namespace troupe::gpu
