#pragma once
// CPU reference math on tensors (Eigen inside, row-major). These are the
// definitions every other backend is checked against. Outputs are resized
// as needed, so callers can keep buffers across steps without reallocating.
#include <cstdint>
#include <vector>

#include "tensor/core/tensor.hpp"

namespace troupe::ops {

/// out = op(a) * op(b), op = transpose when the flag is set. 2-D only.
void matmul(const tensor& a, const tensor& b, tensor& out,
            bool transpose_a = false, bool transpose_b = false);

/// x[r, :] += bias for every row r of a 2-D x.
void add_bias(tensor& x, const tensor& bias);

/// out[c] = sum_r x[r, c].
void sum_rows(const tensor& x, tensor& out);

/// y += alpha * x (same number of elements).
void axpy(float alpha, const tensor& x, tensor& y);

/// x *= alpha.
void scale(tensor& x, float alpha);

/// Mean softmax cross-entropy of logits [batch, classes] against integer
/// labels, computed stably (log-sum-exp with the row maximum subtracted).
/// Writes d(mean loss)/d(logits) into grad_logits. Throws on a label out of range.
double softmax_cross_entropy(const tensor& logits, const std::vector<int32_t>& labels,
                             tensor& grad_logits);

/// The same loss without the gradient (evaluation).
double softmax_cross_entropy(const tensor& logits, const std::vector<int32_t>& labels);

/// Index of the largest element of each row.
std::vector<int32_t> argmax_rows(const tensor& x);

/// Number of rows whose argmax equals the label.
size_t count_correct(const tensor& logits, const std::vector<int32_t>& labels);

} // namespace troupe::ops
