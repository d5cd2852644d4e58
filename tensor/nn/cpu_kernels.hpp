#pragma once
// What the CPU layers (dense_layer.cpp, conv2d_layer.cpp, pooling_layer.cpp,
// elementwise_layers.cpp) share: Eigen views of tensors, the batch check,
// and eight-lane vectors for the hand-written kernels. Included by those
// files only; nothing here is part of the layer interface (layers.hpp).
#include <cstdint>
#include <cstring>
#include <string>

#include <Eigen/Core>

#include "tensor/core/error.hpp"
#include "tensor/core/tensor.hpp"

namespace troupe::cpu_kernels {

using row_matrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using matrix_map = Eigen::Map<row_matrix>;
using const_matrix_map = Eigen::Map<const row_matrix>;

inline Eigen::Map<Eigen::ArrayXf> array_map(tensor& t) {
  return {t.data(), static_cast<Eigen::Index>(t.size())};
}

inline Eigen::Map<const Eigen::ArrayXf> const_array_map(const tensor& t) {
  return {t.data(), static_cast<Eigen::Index>(t.size())};
}

// out = the sum of the rows of `rows`, added row by row: Eigen's colwise()
// sum picks its summation order by the destination's alignment, so the same
// gradient came out a few ulps apart in a reused buffer and a fresh one.
inline void sum_rows_into(const_matrix_map rows, float* out) {
  Eigen::Map<Eigen::RowVectorXf> sum(out, rows.cols());
  sum.setZero();
  for (Eigen::Index r = 0; r < rows.rows(); ++r)
    sum += rows.row(r);
}

inline int64_t batch_of(const tensor& x, int64_t per_example) {
  if (per_example <= 0 || x.size() % static_cast<size_t>(per_example) != 0)
    throw shape_error("a batch of " + std::to_string(x.size())
                      + " values does not divide into "
                        "examples of "
                      + std::to_string(per_example));
  return static_cast<int64_t>(x.size()) / per_example;
}

inline std::string shape_text(const shape_t& s) {
  return to_string(s);
}

// Eight floats (and eight ints), as the compiler's vector extension: AVX
// registers where the target has them, pairs of SSE registers otherwise.
typedef float lanes8 __attribute__((vector_size(32)));
typedef int32_t ints8 __attribute__((vector_size(32)));
typedef int8_t bytes8 __attribute__((vector_size(8)));
constexpr int64_t lane_width = 8;

inline lanes8 load(const float* p) {
  lanes8 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

inline void store(float* p, lanes8 v) {
  std::memcpy(p, &v, sizeof v);
}

} // namespace troupe::cpu_kernels
