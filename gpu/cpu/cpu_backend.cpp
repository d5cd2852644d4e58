#include "gpu/cpu/cpu_backend.hpp"

#include "tensor/ops.hpp"

namespace troupe::gpu {

device_spec cpu_backend::device() const {
  return {};
}

void cpu_backend::matmul(const tensor& a, const tensor& b, tensor& out, bool transpose_a,
                         bool transpose_b) {
  ops::matmul(a, b, out, transpose_a, transpose_b);
}

void cpu_backend::add_bias(tensor& x, const tensor& bias) {
  ops::add_bias(x, bias);
}

double cpu_backend::softmax_cross_entropy(const tensor& logits,
                                         const std::vector<int32_t>& labels,
                                         tensor& grad_logits) {
  return ops::softmax_cross_entropy(logits, labels, grad_logits);
}

void cpu_backend::axpy(float alpha, const tensor& x, tensor& y) {
  ops::axpy(alpha, x, y);
}

} // namespace troupe::gpu
