#include <cmath>
#include <limits>

#include <boost/test/unit_test.hpp>

#include "tensor/core/error.hpp"
#include "tensor/core/ops.hpp"

using namespace troupe;

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

BOOST_AUTO_TEST_CASE(the_first_non_finite_element_is_found_in_any_block) {
  // The search goes block by block (256 floats): first, last and inner
  // elements of blocks, infinities and NaNs with payloads, a short tail.
  const size_t n = 1000;
  for (size_t at : {size_t{0}, size_t{255}, size_t{256}, size_t{700}, n - 1}) {
    for (float bad : {std::nanf("7"), -std::nanf(""), INFINITY, -INFINITY}) {
      tensor t({static_cast<int64_t>(n)}, 3.0f);
      t[at] = bad;
      if (at + 10 < n)
        t[at + 10] = std::nanf(""); // a later one does not hide the first
      BOOST_TEST(t.first_non_finite() == at);
    }
  }
  tensor fine({static_cast<int64_t>(n)}, std::numeric_limits<float>::max());
  fine[3] = std::numeric_limits<float>::denorm_min();
  BOOST_TEST(fine.first_non_finite() == n);
  BOOST_TEST(tensor({0}).first_non_finite() == 0u);
}

BOOST_AUTO_TEST_CASE(axpy_and_scale) {
  tensor sums({3}, std::vector<float>{25, 47, 69});
  tensor y({3}, 1.0f);
  ops::axpy(2.0f, sums, y);
  BOOST_TEST(y.values() == (std::vector<float>{51, 95, 139}), boost::test_tools::per_element());
  ops::scale(y, 0.5f);
  BOOST_TEST(y[0] == 25.5f);
  BOOST_CHECK_THROW(ops::axpy(1.0f, tensor({2}), y), shape_error);
}

BOOST_AUTO_TEST_SUITE_END()
