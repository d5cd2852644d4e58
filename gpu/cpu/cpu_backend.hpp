#pragma once
#include "gpu/backend.hpp"

namespace troupe::gpu {

/// The reference backend: forwards to tensor/ops.
class cpu_backend final : public compute_backend {
public:
  device_spec device() const override;
  void matmul(const tensor& a, const tensor& b, tensor& out, bool transpose_a,
              bool transpose_b) override;
  void add_bias(tensor& x, const tensor& bias) override;
  double softmax_cross_entropy(const tensor& logits, const std::vector<int32_t>& labels,
                              tensor& grad_logits) override;
  void axpy(float alpha, const tensor& x, tensor& y) override;
};

} // namespace troupe::gpu
