#include "tensor/core/ops.hpp"

#include <cmath>
#include <string>

#include <Eigen/Core>

#include "tensor/core/error.hpp"

namespace troupe::ops {

namespace {

using row_matrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using matrix_map = Eigen::Map<row_matrix>;
using const_matrix_map = Eigen::Map<const row_matrix>;

void require_rank2(const tensor& x, const char* what) {
  if (x.rank() != 2)
    throw shape_error(std::string(what) + ": expected a 2-D tensor, got shape "
                      + to_string(x.shape()));
}

const_matrix_map view(const tensor& x) {
  return const_matrix_map(x.data(), x.dim(0), x.dim(1));
}

void check_labels(const tensor& logits, const std::vector<int32_t>& labels) {
  require_rank2(logits, "softmax_cross_entropy");
  if (static_cast<int64_t>(labels.size()) != logits.dim(0))
    throw shape_error("softmax_cross_entropy: " + std::to_string(labels.size())
                      + " labels for " + std::to_string(logits.dim(0)) + " rows");
  for (auto label : labels)
    if (label < 0 || label >= logits.dim(1))
      throw shape_error("softmax_cross_entropy: label " + std::to_string(label)
                        + " outside [0, " + std::to_string(logits.dim(1)) + ")");
}

// Shared by the loss with and without gradient: returns the summed loss and,
// if grad is non-null, writes softmax - onehot scaled by 1/batch.
double xent_rows(const tensor& logits, const std::vector<int32_t>& labels, tensor* grad) {
  check_labels(logits, labels);
  auto rows = logits.dim(0);
  auto cols = logits.dim(1);
  if (grad)
    grad->resize(logits.shape());
  double total = 0.0;
  float inv_batch = rows > 0 ? 1.0f / static_cast<float>(rows) : 0.0f;
  for (int64_t r = 0; r < rows; ++r) {
    const float* z = logits.data() + r * cols;
    float max_z = z[0];
    for (int64_t c = 1; c < cols; ++c)
      max_z = std::max(max_z, z[c]);
    double sum = 0.0;
    for (int64_t c = 0; c < cols; ++c)
      sum += std::exp(static_cast<double>(z[c] - max_z));
    double log_sum = std::log(sum);
    total += log_sum - static_cast<double>(z[labels[r]] - max_z);
    if (grad) {
      float* g = grad->data() + r * cols;
      for (int64_t c = 0; c < cols; ++c)
        g[c] = static_cast<float>(std::exp(static_cast<double>(z[c] - max_z) - log_sum))
               * inv_batch;
      g[labels[r]] -= inv_batch;
    }
  }
  return total;
}

} // namespace

void matmul(const tensor& a, const tensor& b, tensor& out, bool transpose_a,
            bool transpose_b) {
  require_rank2(a, "matmul");
  require_rank2(b, "matmul");
  auto m = transpose_a ? a.dim(1) : a.dim(0);
  auto k = transpose_a ? a.dim(0) : a.dim(1);
  auto kb = transpose_b ? b.dim(1) : b.dim(0);
  auto n = transpose_b ? b.dim(0) : b.dim(1);
  if (k != kb)
    throw shape_error("matmul: inner dimensions differ: " + to_string(a.shape())
                      + (transpose_a ? "^T" : "") + " x " + to_string(b.shape())
                      + (transpose_b ? "^T" : ""));
  out.resize({m, n});
  matrix_map c(out.data(), m, n);
  auto av = view(a);
  auto bv = view(b);
  if (!transpose_a && !transpose_b)
    c.noalias() = av * bv;
  else if (transpose_a && !transpose_b)
    c.noalias() = av.transpose() * bv;
  else if (!transpose_a && transpose_b)
    c.noalias() = av * bv.transpose();
  else
    c.noalias() = av.transpose() * bv.transpose();
}

void add_bias(tensor& x, const tensor& bias) {
  require_rank2(x, "add_bias");
  if (bias.rank() != 1 || bias.dim(0) != x.dim(1))
    throw shape_error("add_bias: bias of shape " + to_string(bias.shape())
                      + " does not fit " + to_string(x.shape()));
  matrix_map xv(x.data(), x.dim(0), x.dim(1));
  Eigen::Map<const Eigen::RowVectorXf> bv(bias.data(), bias.dim(0));
  xv.rowwise() += bv;
}

void sum_rows(const tensor& x, tensor& out) {
  require_rank2(x, "sum_rows");
  out.resize({x.dim(1)});
  Eigen::Map<Eigen::RowVectorXf> ov(out.data(), x.dim(1));
  ov.noalias() = view(x).colwise().sum();
}

void axpy(float alpha, const tensor& x, tensor& y) {
  if (x.size() != y.size())
    throw shape_error("axpy: " + to_string(x.shape()) + " vs " + to_string(y.shape()));
  Eigen::Map<Eigen::VectorXf> yv(y.data(), static_cast<Eigen::Index>(y.size()));
  Eigen::Map<const Eigen::VectorXf> xv(x.data(), static_cast<Eigen::Index>(x.size()));
  yv += alpha * xv;
}

void scale(tensor& x, float alpha) {
  Eigen::Map<Eigen::VectorXf> xv(x.data(), static_cast<Eigen::Index>(x.size()));
  xv *= alpha;
}

double softmax_cross_entropy(const tensor& logits, const std::vector<int32_t>& labels,
                             tensor& grad_logits) {
  auto total = xent_rows(logits, labels, &grad_logits);
  return logits.dim(0) > 0 ? total / static_cast<double>(logits.dim(0)) : 0.0;
}

double softmax_cross_entropy(const tensor& logits, const std::vector<int32_t>& labels) {
  auto total = xent_rows(logits, labels, nullptr);
  return logits.dim(0) > 0 ? total / static_cast<double>(logits.dim(0)) : 0.0;
}

std::vector<int32_t> argmax_rows(const tensor& x) {
  require_rank2(x, "argmax_rows");
  std::vector<int32_t> out(static_cast<size_t>(x.dim(0)));
  auto cols = x.dim(1);
  for (int64_t r = 0; r < x.dim(0); ++r) {
    const float* row = x.data() + r * cols;
    int32_t best = 0;
    for (int64_t c = 1; c < cols; ++c)
      if (row[c] > row[best])
        best = static_cast<int32_t>(c);
    out[r] = best;
  }
  return out;
}

size_t count_correct(const tensor& logits, const std::vector<int32_t>& labels) {
  auto predicted = argmax_rows(logits);
  if (predicted.size() != labels.size())
    throw shape_error("count_correct: " + std::to_string(labels.size()) + " labels for "
                      + std::to_string(predicted.size()) + " rows");
  size_t n = 0;
  for (size_t i = 0; i < labels.size(); ++i)
    n += predicted[i] == labels[i];
  return n;
}

} // namespace troupe::ops
