#include <cmath>
#include <random>

#include <boost/test/unit_test.hpp>

#include "tensor/core/error.hpp"
#include "tensor/core/ops.hpp"

using namespace troupe;

namespace {

tensor random_tensor(shape_t shape, uint32_t seed, float scale = 1.0f) {
  tensor t(std::move(shape));
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  for (size_t i = 0; i < t.size(); ++i)
    t[i] = dist(rng);
  return t;
}

// Naive reference: C = A B with explicit transposes.
tensor reference_matmul(const tensor& a, const tensor& b, bool ta, bool tb) {
  int64_t m = ta ? a.dim(1) : a.dim(0), k = ta ? a.dim(0) : a.dim(1);
  int64_t n = tb ? b.dim(0) : b.dim(1);
  tensor c({m, n});
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double s = 0;
      for (int64_t p = 0; p < k; ++p) {
        float av = ta ? a[p * a.dim(1) + i] : a[i * a.dim(1) + p];
        float bv = tb ? b[j * b.dim(1) + p] : b[p * b.dim(1) + j];
        s += double(av) * bv;
      }
      c[i * n + j] = float(s);
    }
  return c;
}

} // namespace

BOOST_AUTO_TEST_SUITE(tensor_ops)

BOOST_AUTO_TEST_CASE(tensor_basics) {
  tensor t({2, 3}, 1.5f);
  BOOST_TEST(t.size() == 6u);
  BOOST_TEST(t.bytes() == 24u);
  BOOST_TEST(t.all_finite());
  t[4] = std::nanf("");
  BOOST_TEST(!t.all_finite());
  BOOST_TEST(t.first_non_finite() == 4u);
  BOOST_CHECK_THROW(tensor({2, 2}, std::vector<float>(3)), shape_error);
  tensor scalar(shape_t{});
  BOOST_TEST(scalar.size() == 1u);
  tensor empty({0, 5});
  BOOST_TEST(empty.size() == 0u);
  auto* storage = t.data();
  tensor moved = std::move(t);
  BOOST_TEST(moved.data() == storage); // moving never copies the data
}

BOOST_AUTO_TEST_CASE(matmul_all_transposes) {
  auto a = random_tensor({5, 7}, 1);
  auto b = random_tensor({7, 3}, 2);
  auto at = random_tensor({7, 5}, 3);
  auto bt = random_tensor({3, 7}, 4);
  tensor c;
  for (int mode = 0; mode < 4; ++mode) {
    bool ta = mode & 1, tb = mode & 2;
    auto& lhs = ta ? at : a;
    auto& rhs = tb ? bt : b;
    ops::matmul(lhs, rhs, c, ta, tb);
    auto ref = reference_matmul(lhs, rhs, ta, tb);
    BOOST_REQUIRE(c.shape() == ref.shape());
    for (size_t i = 0; i < c.size(); ++i)
      BOOST_TEST(c[i] == ref[i], boost::test_tools::tolerance(1e-4f));
  }
  BOOST_CHECK_THROW(ops::matmul(a, a, c), shape_error);
}

BOOST_AUTO_TEST_CASE(bias_sum_axpy_scale) {
  tensor x({2, 3}, std::vector<float>{1, 2, 3, 4, 5, 6});
  tensor bias({3}, std::vector<float>{10, 20, 30});
  ops::add_bias(x, bias);
  BOOST_TEST(x.values() == (std::vector<float>{11, 22, 33, 14, 25, 36}),
             boost::test_tools::per_element());
  tensor sums;
  ops::sum_rows(x, sums);
  BOOST_TEST(sums.values() == (std::vector<float>{25, 47, 69}), boost::test_tools::per_element());
  tensor y({3}, 1.0f);
  ops::axpy(2.0f, sums, y);
  BOOST_TEST(y.values() == (std::vector<float>{51, 95, 139}), boost::test_tools::per_element());
  ops::scale(y, 0.5f);
  BOOST_TEST(y[0] == 25.5f);
  BOOST_CHECK_THROW(ops::add_bias(x, tensor({2})), shape_error);
  BOOST_CHECK_THROW(ops::axpy(1.0f, tensor({2}), y), shape_error);
}

BOOST_AUTO_TEST_CASE(softmax_cross_entropy_is_stable_and_correct) {
  // Huge logits would overflow a naive exp; the max-subtracted form does not.
  tensor logits({2, 3}, std::vector<float>{1000, 0, -1000, 1, 2, 3});
  std::vector<int32_t> labels{0, 2};
  tensor grad;
  float loss = ops::softmax_cross_entropy(logits, labels, grad);
  BOOST_TEST(std::isfinite(loss));
  double row2 = std::log(std::exp(1.0) + std::exp(2.0) + std::exp(3.0)) - 3.0;
  BOOST_TEST(loss == float((0.0 + row2) / 2), boost::test_tools::tolerance(1e-5f));
  BOOST_TEST(grad.all_finite());
  // Each gradient row sums to zero (softmax minus one-hot).
  for (int r = 0; r < 2; ++r)
    BOOST_TEST(grad[r * 3] + grad[r * 3 + 1] + grad[r * 3 + 2] == 0.0f,
               boost::test_tools::tolerance(1e-6f));
  BOOST_CHECK_THROW(ops::softmax_cross_entropy(logits, {0, 3}, grad), shape_error);
  BOOST_CHECK_THROW(ops::softmax_cross_entropy(logits, {0}, grad), shape_error);
}

BOOST_AUTO_TEST_CASE(softmax_cross_entropy_gradient_matches_finite_differences) {
  auto logits = random_tensor({4, 5}, 7, 2.0f);
  std::vector<int32_t> labels{0, 4, 2, 2};
  tensor grad;
  ops::softmax_cross_entropy(logits, labels, grad);
  // Central differences on a double-precision copy of the loss.
  auto loss_at = [&](const tensor& z) {
    double total = 0;
    for (int64_t r = 0; r < z.dim(0); ++r) {
      double mx = -1e300, s = 0;
      for (int64_t c = 0; c < z.dim(1); ++c)
        mx = std::max(mx, double(z[r * 5 + c]));
      for (int64_t c = 0; c < z.dim(1); ++c)
        s += std::exp(double(z[r * 5 + c]) - mx);
      total += std::log(s) + mx - double(z[r * 5 + labels[r]]);
    }
    return total / double(z.dim(0));
  };
  for (size_t i = 0; i < logits.size(); ++i) {
    const float h = 1e-2f;
    auto plus = logits, minus = logits;
    plus[i] += h;
    minus[i] -= h;
    double numeric = (loss_at(plus) - loss_at(minus)) / (2.0 * h);
    double denom = std::max(1e-3, std::fabs(numeric) + std::fabs(double(grad[i])));
    BOOST_TEST(std::fabs(numeric - grad[i]) / denom < 1e-3);
  }
}

BOOST_AUTO_TEST_CASE(argmax_and_accuracy) {
  tensor logits({3, 3}, std::vector<float>{0, 5, 1, 9, 2, 3, 0, 0, 1});
  BOOST_TEST(ops::argmax_rows(logits) == (std::vector<int32_t>{1, 0, 2}),
             boost::test_tools::per_element());
  BOOST_TEST(ops::count_correct(logits, {1, 2, 2}) == 2u);
}

BOOST_AUTO_TEST_SUITE_END()
