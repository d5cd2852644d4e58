#include "tensor/sparse/sparse_optimizer.hpp"

#include <cmath>

namespace troupe {

maybe_failure sparse_optimizer_config::check() const {
  auto bad = [](std::string what) { return failure{errc::invalid_setting, "embedding." + what}; };
  if (!(learning_rate > 0) || !std::isfinite(learning_rate))
    return bad("learning-rate must be a positive number");
  if (kind == sparse_optimizer_kind::adagrad || kind == sparse_optimizer_kind::ftrl)
    if (!(initial_accumulator > 0))
      return bad("initial-accumulator must be > 0 (TF's default is 0.1)");
  if (kind == sparse_optimizer_kind::ftrl && (l1 < 0 || l2 < 0 || !(lr_power <= 0)))
    return bad("l1 and embedding.l2 must be >= 0 and embedding.lr-power <= 0 (TF's default -0.5)");
  if (kind == sparse_optimizer_kind::lazy_adam
      && (!(beta1 >= 0 && beta1 < 1) || !(beta2 >= 0 && beta2 < 1) || !(epsilon > 0)))
    return bad("beta1 and embedding.beta2 must be in [0, 1) and embedding.epsilon > 0");
  return std::nullopt;
}

std::vector<std::string> sparse_slot_names(sparse_optimizer_kind kind) {
  switch (kind) {
    case sparse_optimizer_kind::sgd:
      return {};
    case sparse_optimizer_kind::adagrad:
      return {"Adagrad"};
    case sparse_optimizer_kind::ftrl:
      return {"Ftrl", "Ftrl_1"};
    case sparse_optimizer_kind::lazy_adam:
      return {"Adam", "Adam_1"};
  }
  return {};
}

uint32_t slot_count(sparse_optimizer_kind kind) {
  return static_cast<uint32_t>(sparse_slot_names(kind).size());
}

float slot_initial_value(const sparse_optimizer_config& config, uint32_t slot) {
  bool accumulator = config.kind == sparse_optimizer_kind::adagrad
                     || (config.kind == sparse_optimizer_kind::ftrl && slot == 0);
  return accumulator ? static_cast<float>(config.initial_accumulator) : 0.0f;
}

namespace {

void adagrad(double lr, float* w, float* acc, const float* g, uint32_t dim) {
  for (uint32_t j = 0; j < dim; ++j) {
    acc[j] += g[j] * g[j];
    w[j] -= static_cast<float>(lr * g[j] / std::sqrt(static_cast<double>(acc[j])));
  }
}

// SparseApplyFtrl (training_ops.cc, FtrlCompute with l2_shrinkage 0).
void ftrl(const sparse_optimizer_config& c, float* w, float* acc, float* lin, const float* g,
          uint32_t dim) {
  auto power = [&](double x) {
    return c.lr_power == -0.5 ? std::sqrt(x) : std::pow(x, -c.lr_power);
  };
  for (uint32_t j = 0; j < dim; ++j) {
    double new_acc = acc[j] + static_cast<double>(g[j]) * g[j];
    double l = lin[j] + g[j] - (power(new_acc) - power(acc[j])) / c.learning_rate * w[j];
    double quadratic = power(new_acc) / c.learning_rate + 2 * c.l2;
    double value = std::abs(l) > c.l1 ? ((l > 0 ? c.l1 : -c.l1) - l) / quadratic : 0.0;
    lin[j] = static_cast<float>(l);
    acc[j] = static_cast<float>(new_acc);
    w[j] = static_cast<float>(value);
  }
}

// LazyAdamOptimizer: the moments of the touched rows only, the global
// beta powers (t = step + 1).
void lazy_adam(const sparse_optimizer_config& c, float* w, float* m, float* v, const float* g,
               uint32_t dim, int64_t step) {
  double t = static_cast<double>(step + 1);
  double lr = c.learning_rate * std::sqrt(1 - std::pow(c.beta2, t)) / (1 - std::pow(c.beta1, t));
  for (uint32_t j = 0; j < dim; ++j) {
    m[j] = static_cast<float>(c.beta1 * m[j] + (1 - c.beta1) * g[j]);
    v[j] = static_cast<float>(c.beta2 * v[j] + (1 - c.beta2) * g[j] * g[j]);
    w[j] -= static_cast<float>(lr * m[j] / (std::sqrt(static_cast<double>(v[j])) + c.epsilon));
  }
}

} // namespace

void apply_sparse_row(const sparse_optimizer_config& config, float* value, float* slots,
                      const float* grad, uint32_t dim, int64_t step) {
  switch (config.kind) {
    case sparse_optimizer_kind::sgd:
      for (uint32_t j = 0; j < dim; ++j)
        value[j] -= static_cast<float>(config.learning_rate * grad[j]);
      return;
    case sparse_optimizer_kind::adagrad:
      return adagrad(config.learning_rate, value, slots, grad, dim);
    case sparse_optimizer_kind::ftrl:
      return ftrl(config, value, slots, slots + dim, grad, dim);
    case sparse_optimizer_kind::lazy_adam:
      return lazy_adam(config, value, slots, slots + dim, grad, dim, step);
  }
}

} // namespace troupe
