// What a worker checks before it pushes, without CAF.
#include <cmath>

#include <boost/test/unit_test.hpp>

#include "actors/worker/gradient_guard.hpp"

using namespace troupe;

BOOST_AUTO_TEST_SUITE(gradient_guard_tests)

BOOST_AUTO_TEST_CASE(a_non_finite_gradient_is_named_and_nothing_is_clipped) {
  gradient_guard guard(1.0);
  std::vector<tensor> grads{tensor({2}, 3.0f), tensor({2}, 4.0f)};
  grads[1][1] = std::nanf("");
  auto bad = guard.check_and_clip(grads, -1);
  BOOST_REQUIRE(bad);
  BOOST_TEST(*bad == 1u);
  BOOST_TEST(grads[0][0] == 3.0f); // untouched
  grads[1][1] = INFINITY;
  BOOST_TEST(guard.check_and_clip(grads, -1).has_value());
  // A non-finite norm from the device does not prove anything: the scan runs.
  BOOST_TEST(guard.check_and_clip(grads, NAN).has_value());
}

BOOST_AUTO_TEST_CASE(finite_gradients_are_clipped_by_their_global_norm) {
  gradient_guard guard(1.0);
  std::vector<tensor> grads{tensor({1}, 3.0f), tensor({1}, 4.0f)};
  BOOST_TEST(!guard.check_and_clip(grads, -1));
  BOOST_TEST(grads[0][0] == 0.6f, boost::test_tools::tolerance(1e-6f));
  BOOST_TEST(grads[1][0] == 0.8f, boost::test_tools::tolerance(1e-6f));
  gradient_guard off(0);
  std::vector<tensor> big{tensor({1}, 30.0f)};
  BOOST_TEST(!off.check_and_clip(big, -1));
  BOOST_TEST(big[0][0] == 30.0f);
}

BOOST_AUTO_TEST_CASE(staging_buffers_get_the_same_checks) {
  gradient_guard guard(1.0);
  std::vector<float> a{3.0f}, b{4.0f, NAN};
  host_staging staging{{nullptr, nullptr}, {a.data(), b.data()}, {1, 2}};
  auto bad = guard.check_and_clip(staging, -1);
  BOOST_REQUIRE(bad);
  BOOST_TEST(*bad == 1u);
  b[1] = 0.0f;
  // A finite device norm is trusted: no scan, the clip uses it.
  BOOST_TEST(!guard.check_and_clip(staging, 10.0));
  BOOST_TEST(a[0] == 0.3f, boost::test_tools::tolerance(1e-6f));
}

BOOST_AUTO_TEST_SUITE_END()
