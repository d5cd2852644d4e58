// The figure a run reports for its task (tensor/nn/metric.hpp).
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <string>

#include "tensor/nn/metric.hpp"

using namespace troupe;

BOOST_AUTO_TEST_SUITE(metric_tests)

BOOST_AUTO_TEST_CASE(regression_reports_the_root_of_the_mean_squared_error) {
  auto m = metric_of(objective::regression, 0.25, 0, 100);
  BOOST_TEST(std::string(m.name) == "rmse");
  BOOST_TEST(m.value == 0.5);
  // A mean that rounding left below zero is 0, not NaN (troupe-eval printed nan).
  BOOST_TEST(rmse_of(-1e-12) == 0.0);
  BOOST_TEST(!std::isnan(metric_of(objective::regression, -1e-12, 0, 1).value));
}

BOOST_AUTO_TEST_CASE(classification_reports_accuracy) {
  auto m = metric_of(objective::classification, 0.7, 83, 100);
  BOOST_TEST(std::string(m.name) == "accuracy");
  BOOST_TEST(m.value == 0.83);
  BOOST_TEST(metric_of(objective::classification, 0.7, 0, 0).value == 0.0); // no examples: no NaN
}

namespace {
float logit(double p) {
  return static_cast<float>(std::log(p / (1 - p)));
}
} // namespace

BOOST_AUTO_TEST_CASE(binary_auc_is_the_mann_whitney_statistic) {
  // sklearn's roc_auc_score([0, 0, 1, 1], [0.1, 0.4, 0.35, 0.8]) = 0.75.
  binary_scores s;
  s.add_logit(logit(0.1), false);
  s.add_logit(logit(0.4), false);
  s.add_logit(logit(0.35), true);
  s.add_logit(logit(0.8), true);
  BOOST_TEST(s.auc() == 0.75);
  // A tie between a positive and a negative counts one half.
  binary_scores tied;
  tied.add_logit(0.0f, true);
  tied.add_logit(0.0f, false);
  tied.add_logit(logit(0.9), true);
  BOOST_TEST(tied.auc() == 0.75);
  // Logits that a float sigmoid rounds to the same 1.0f stay apart.
  binary_scores saturated;
  saturated.add_logit(18.0f, false);
  saturated.add_logit(19.0f, true);
  BOOST_TEST(saturated.auc() == 1.0);
  // One class only: 0.5, not NaN.
  binary_scores one_class;
  one_class.add_logit(-1.4f, true);
  BOOST_TEST(one_class.auc() == 0.5);
}

BOOST_AUTO_TEST_CASE(binary_logloss_clips_certain_mistakes) {
  binary_scores s;
  s.add_logit(logit(0.8), true);
  s.add_logit(logit(0.3), false);
  BOOST_TEST(s.logloss() == -(std::log(0.8) + std::log(0.7)) / 2,
             boost::test_tools::tolerance(1e-6));
  binary_scores wrong;
  wrong.add_logit(-100.0f, true);
  BOOST_TEST(wrong.logloss() == -std::log(1e-7), boost::test_tools::tolerance(1e-6));
  BOOST_TEST(binary_scores{}.logloss() == 0.0);
  // A confident miss below the clip: p = sigmoid(15) in double, 1 - p =
  // 3.06e-7, where a float probability would read 1 - 2^-24 = 5.96e-8 and
  // then the clip's 1e-7.
  binary_scores confident;
  confident.add_logit(15.0f, false);
  BOOST_TEST(confident.logloss() == 15.0 + std::log1p(std::exp(-15.0)),
             boost::test_tools::tolerance(1e-9));
}

BOOST_AUTO_TEST_CASE(example_loss_is_softplus_in_double) {
  BOOST_TEST(binary_scores::example_loss(0.0f, true) == std::log(2.0));
  BOOST_TEST(binary_scores::example_loss(40.0f, false) == 40.0 + std::log1p(std::exp(-40.0)));
  BOOST_TEST(binary_scores::example_loss(40.0f, true) == std::log1p(std::exp(-40.0)));
}

BOOST_AUTO_TEST_SUITE_END()
