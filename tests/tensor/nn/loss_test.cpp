// The models' loss: stable, correct, with its gradient and the accuracy count.
#include <cmath>
#include <random>

#include <boost/test/unit_test.hpp>

#include "tensor/core/error.hpp"
#include "tensor/nn/loss.hpp"

using namespace troupe;

namespace {

tensor random_logits(shape_t shape, uint32_t seed, float scale = 1.0f) {
  tensor t(std::move(shape));
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  for (size_t i = 0; i < t.size(); ++i)
    t[i] = dist(rng);
  return t;
}

} // namespace

BOOST_AUTO_TEST_SUITE(softmax_loss)

BOOST_AUTO_TEST_CASE(softmax_cross_entropy_is_stable_and_correct) {
  // Huge logits would overflow a naive exp; the max-subtracted form does not.
  tensor logits({2, 3}, std::vector<float>{1000, 0, -1000, 1, 2, 3});
  std::vector<int32_t> labels{0, 2};
  tensor grad;
  auto result = softmax_cross_entropy(logits, labels, &grad);
  float loss = static_cast<float>(result.loss);
  BOOST_TEST(std::isfinite(loss));
  double row2 = std::log(std::exp(1.0) + std::exp(2.0) + std::exp(3.0)) - 3.0;
  BOOST_TEST(loss == float((0.0 + row2) / 2), boost::test_tools::tolerance(1e-5f));
  BOOST_TEST(grad.all_finite());
  // Each gradient row sums to zero (softmax minus one-hot).
  for (int r = 0; r < 2; ++r)
    BOOST_TEST(grad[r * 3] + grad[r * 3 + 1] + grad[r * 3 + 2] == 0.0f,
               boost::test_tools::tolerance(1e-6f));
  BOOST_TEST(result.correct == 2u);
  BOOST_CHECK_THROW(softmax_cross_entropy(logits, {0, 3}, &grad), shape_error);
  BOOST_CHECK_THROW(softmax_cross_entropy(logits, {0}, &grad), shape_error);
}

BOOST_AUTO_TEST_CASE(softmax_cross_entropy_gradient_matches_finite_differences) {
  auto logits = random_logits({4, 5}, 7, 2.0f);
  std::vector<int32_t> labels{0, 4, 2, 2};
  tensor grad;
  softmax_cross_entropy(logits, labels, &grad);
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

BOOST_AUTO_TEST_CASE(accuracy_counts_the_first_largest_logit) {
  tensor logits({3, 3}, std::vector<float>{0, 5, 1, 9, 2, 3, 0, 1, 1});
  BOOST_TEST(softmax_cross_entropy(logits, {1, 2, 2}).correct == 1u); // row 2: a tie, first wins
  BOOST_TEST(softmax_cross_entropy(logits, {1, 0, 1}).correct == 3u);
}

// TF's mean_squared_error: the mean of the squared differences, and its
// gradient 2 (y - t) / n.
BOOST_AUTO_TEST_CASE(mean_squared_error_and_its_gradient) {
  tensor outputs({4, 1}, std::vector<float>{1, 2, 3, -1});
  std::vector<float> targets{1, 0, 4, 1};
  tensor grad;
  auto loss = mean_squared_error(outputs, targets, &grad);
  BOOST_TEST(loss.loss == (0.0 + 4.0 + 1.0 + 4.0) / 4.0);
  BOOST_TEST(loss.correct == 0u);
  BOOST_TEST(grad[1] == 1.0f); // 2 * (2 - 0) / 4
  BOOST_TEST(grad[2] == -0.5f);
  BOOST_TEST(grad[3] == -1.0f);
  BOOST_CHECK_THROW(mean_squared_error(tensor({4, 2}), targets), shape_error);
  BOOST_CHECK_THROW(mean_squared_error(outputs, {1.0f}), shape_error);
}

BOOST_AUTO_TEST_SUITE_END()
