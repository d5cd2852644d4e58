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

BOOST_AUTO_TEST_SUITE_END()
