#include "tensor/core/ops.hpp"

#include <Eigen/Core>

#include "tensor/core/error.hpp"

namespace troupe::ops {

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

} // namespace troupe::ops
