#pragma once
// Vector arithmetic on whole tensors (Eigen inside): what the sync
// accumulator sums and scales gradients with.
#include "tensor/core/tensor.hpp"

namespace troupe::ops {

/// y += alpha * x (same number of elements).
void axpy(float alpha, const tensor& x, tensor& y);

/// x *= alpha.
void scale(tensor& x, float alpha);

} // namespace troupe::ops
