// The worker's side of a lookup: combiners with weights and empty bags, and
// the gradients of combining and of max_norm against finite differences.
#include <cmath>
#include <functional>
#include <vector>

#include <boost/test/unit_test.hpp>

#include "tensor/sparse/lookup_batch.hpp"

using namespace troupe;

namespace {

// The gradient of sum(out * weights_out) with respect to `x`, by central
// differences of f.
std::vector<double> numeric_gradient(std::vector<float> x,
                                     const std::function<double(const std::vector<float>&)>& f) {
  std::vector<double> g(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    float keep = x[i];
    x[i] = keep + 1e-3f;
    double up = f(x);
    x[i] = keep - 1e-3f;
    double down = f(x);
    x[i] = keep;
    g[i] = (up - down) / 2e-3;
  }
  return g;
}

} // namespace

BOOST_AUTO_TEST_SUITE(lookup_batches)

BOOST_AUTO_TEST_CASE(combiners_with_weights_and_an_empty_bag) {
  // Distinct rows: key 0 = (1, 2), key 1 = (3, 4). Bags: {0 w2, 1 w1}, {}, {1 w3}.
  std::vector<float> rows = {1, 2, 3, 4};
  std::vector<uint32_t> inverse = {0, 1, 1};
  bag_layout bags{{0, 2, 2, 3}, {2, 1, 3}};
  std::vector<float> out(6);
  combine_rows(combiner::sum, bags, inverse, rows.data(), 2, out.data());
  BOOST_TEST(out == (std::vector<float>{5, 8, 0, 0, 9, 12}));
  combine_rows(combiner::mean, bags, inverse, rows.data(), 2, out.data());
  BOOST_TEST(out[0] == 5.0f / 3, boost::test_tools::tolerance(1e-6f));
  BOOST_TEST(out[2] == 0.0f);
  BOOST_TEST(out[4] == 3.0f, boost::test_tools::tolerance(1e-6f));
  combine_rows(combiner::sqrtn, bags, inverse, rows.data(), 2, out.data());
  BOOST_TEST(out[1] == 8.0f / std::sqrt(5.0f), boost::test_tools::tolerance(1e-6f));
  BOOST_TEST(out[5] == 4.0f, boost::test_tools::tolerance(1e-6f));
}

// Bags laid side by side in wider rows (a network's input: two fields of
// dim 2, then a dense value): the gaps keep what they held, and the
// backward pass reads each bag's gradient from the same places.
BOOST_AUTO_TEST_CASE(bags_combine_into_and_back_from_wider_rows) {
  std::vector<float> rows = {1, 2, 3, 4};
  std::vector<uint32_t> inverse = {0, 1, 1};
  bag_layout bags{{0, 2, 2, 3, 3}, {}}; // example 0: {0, 1}, {}; example 1: {1}, {}
  combined_layout where{2, 5};
  std::vector<float> out(10, 7.0f);
  combine_rows(combiner::sum, bags, inverse, rows.data(), 2, out.data(), where);
  BOOST_TEST(out == (std::vector<float>{4, 6, 0, 0, 7, 3, 4, 0, 0, 7}));
  std::vector<float> grad = {1, 2, 9, 9, 9, 10, 20, 9, 9, 9};
  std::vector<float> row_grads(4);
  combine_rows_backward(combiner::sum, bags, inverse, grad.data(), 2, 2, row_grads.data(), where);
  BOOST_TEST(row_grads == (std::vector<float>{1, 2, 11, 22}));
}

BOOST_AUTO_TEST_CASE(combine_backward_matches_finite_differences) {
  std::vector<float> rows = {0.5f, -1, 2, 0.25f, 1.5f, 3};
  std::vector<uint32_t> inverse = {0, 1, 2, 0, 0};
  bag_layout bags{{0, 3, 3, 5}, {0.5f, 2, 1, 1, 3}};
  std::vector<float> out_grad = {1, -2, 0.5f, 0.5f, 3, -1};
  for (auto how : {combiner::sum, combiner::mean, combiner::sqrtn}) {
    auto loss = [&](const std::vector<float>& r) {
      std::vector<float> out(6);
      combine_rows(how, bags, inverse, r.data(), 2, out.data());
      double total = 0;
      for (size_t i = 0; i < 6; ++i)
        total += out[i] * out_grad[i];
      return total;
    };
    std::vector<float> got(6);
    combine_rows_backward(how, bags, inverse, out_grad.data(), 2, 3, got.data());
    auto want = numeric_gradient(rows, loss);
    for (size_t i = 0; i < 6; ++i)
      BOOST_TEST(got[i] == want[i], boost::test_tools::tolerance(2e-3));
  }
}

BOOST_AUTO_TEST_CASE(max_norm_clips_looked_up_rows_and_its_gradient_matches) {
  std::vector<float> rows = {3, 4, 0.3f, 0.4f};
  auto clipped = rows;
  std::vector<float> scales;
  clip_rows(clipped.data(), 2, 2, 1.0f, scales);
  BOOST_TEST(clipped[0] == 0.6f, boost::test_tools::tolerance(1e-6f));
  BOOST_TEST(clipped[1] == 0.8f, boost::test_tools::tolerance(1e-6f));
  BOOST_TEST(clipped[2] == 0.3f); // under the norm: untouched
  std::vector<float> upstream = {1, -2, 0.5f, 2};
  auto loss = [&](const std::vector<float>& r) {
    auto c = r;
    std::vector<float> s;
    clip_rows(c.data(), 2, 2, 1.0f, s);
    double total = 0;
    for (size_t i = 0; i < 4; ++i)
      total += c[i] * upstream[i];
    return total;
  };
  auto got = upstream;
  clip_rows_backward(clipped.data(), 2, 2, scales, got.data());
  auto want = numeric_gradient(rows, loss);
  for (size_t i = 0; i < 4; ++i)
    BOOST_TEST(got[i] == want[i], boost::test_tools::tolerance(2e-3));
}

BOOST_AUTO_TEST_CASE(unique_keys_reuse_their_storage_across_batches) {
  unique_keys unique;
  std::vector<int64_t> first = {5, 5, 5, 9};
  unique.assign(first.data(), first.size());
  BOOST_TEST(unique.keys() == (std::vector<int64_t>{5, 9}));
  BOOST_TEST(unique.inverse() == (std::vector<uint32_t>{0, 0, 0, 1}));
  std::vector<int64_t> second = {1LL << 60, 0, 1LL << 60};
  unique.assign(second.data(), second.size());
  BOOST_TEST(unique.keys() == (std::vector<int64_t>{1LL << 60, 0}));
  BOOST_TEST(unique.counts() == (std::vector<uint32_t>{2, 1}));
  unique.assign(nullptr, 0);
  BOOST_TEST(unique.size() == 0u);
}

BOOST_AUTO_TEST_SUITE_END()
