#pragma once
// What the tests of models with an embedding table share: batches of
// categorical examples, a model with its parameters and looked-up rows, and
// every gradient (per row and per variable) against central differences.
#include <cmath>
#include <memory>
#include <random>
#include <string>

#include <boost/test/unit_test.hpp>

#include "tensor/nn/model.hpp"
#include "tensor/sparse/keys.hpp"

namespace troupe::testing {

/// n examples of `layout`: dense values in [-1, 1], keys 0..6 with weights
/// in [0.5, 1.5]; slot s of example e is empty where (e + s) % 5 == 0, so
/// some fields have fewer keys or none.
inline batch categorical_batch(size_t n, objective task, key_layout layout, std::mt19937& rng) {
  batch b;
  b.images = tensor({static_cast<int64_t>(n), layout.width()});
  std::uniform_int_distribution<int64_t> key(0, 6);
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
  for (size_t e = 0; e < n; ++e) {
    float* row = b.images.data() + e * static_cast<size_t>(layout.width());
    for (int64_t j = 0; j < layout.dense; ++j)
      row[j] = unit(rng);
    for (int64_t s = 0; s < layout.slots(); ++s) {
      bool empty = (e + static_cast<size_t>(s)) % 5 == 0;
      pack_key(empty ? key_layout::no_key : key(rng), 0.5f + 0.5f * (unit(rng) + 1.0f),
               row + layout.dense + s * key_layout::floats_per_key);
    }
    b.labels.push_back(task == objective::regression ? 0 : static_cast<int32_t>(e % 2));
    if (task == objective::regression)
      b.targets.push_back(unit(rng) * 2);
  }
  return b;
}

struct table_fixture {
  std::unique_ptr<model> net;
  std::vector<tensor> params;
  batch b;
  batch_rows rows;

  /// The rows of b's keys, each value drawn by `draw`.
  template <class Draw>
  void look_up(Draw&& draw) {
    std::vector<int64_t> ids;
    net->batch_keys(b, ids);
    rows.keys.assign(ids.data(), ids.size());
    rows.values.resize(rows.keys.size() * net->tables()[0].dim);
    for (auto& v : rows.values)
      v = draw();
  }

  double loss() {
    std::vector<tensor> grads;
    batch_rows copy = rows;
    return net->train_step_rows(params, b, copy, grads).loss;
  }
};

/// Every row value's and every variable's gradient from train_step_rows
/// against central differences of the loss; `what` names the case.
inline void check_table_gradients(table_fixture& f, const std::string& what) {
  std::vector<tensor> grads;
  f.net->train_step_rows(f.params, f.b, f.rows, grads);
  auto row_grads = f.rows.grads;
  BOOST_REQUIRE(row_grads.size() == f.rows.values.size());
  BOOST_REQUIRE(grads.size() == f.params.size());
  const float eps = 1e-2f;
  auto close = [](double numeric, double analytic) {
    return std::fabs(numeric - analytic) <= 2e-3 + 2e-2 * std::fabs(analytic);
  };
  auto numeric = [&](float& x) {
    float keep = x;
    x = keep + eps;
    double up = f.loss();
    x = keep - eps;
    double down = f.loss();
    x = keep;
    return (up - down) / (2 * eps);
  };
  for (size_t i = 0; i < f.rows.values.size(); ++i) {
    double n = numeric(f.rows.values[i]);
    BOOST_TEST(close(n, row_grads[i]),
               what << " row value " << i << ": numeric " << n << ", analytic " << row_grads[i]);
  }
  for (size_t v = 0; v < f.params.size(); ++v)
    for (size_t i = 0; i < f.params[v].size(); ++i) {
      double n = numeric(f.params[v].data()[i]);
      BOOST_TEST(close(n, grads[v].data()[i]), what << " " << f.net->variables()[v].name << "[" << i
                                                    << "]: numeric " << n << ", analytic "
                                                    << grads[v].data()[i]);
    }
}

} // namespace troupe::testing
