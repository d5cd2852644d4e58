// Sync mode's row sums (tensor/sparse/row_accumulator.hpp): TF's per-row
// average, where a row one of R workers touched gets a full step, and the
// divide-by-R variant.
#include <vector>

#include <boost/test/unit_test.hpp>

#include "tensor/sparse/row_accumulator.hpp"

using namespace troupe;

namespace {

// Two workers, dim 2: worker 0 pushes keys 5 and 9, worker 1 pushes 9 and 4.
row_accumulator two_pushes() {
  row_accumulator acc(2);
  std::vector<int64_t> first = {5, 9}, second = {9, 4};
  std::vector<uint32_t> first_counts = {1, 3}, second_counts = {2, 1};
  std::vector<float> first_grads = {1, 2, 4, 8}, second_grads = {2, 0, 10, 20};
  acc.add(first.data(), first_counts.data(), first_grads.data(), 2);
  acc.add(second.data(), second_counts.data(), second_grads.data(), 2);
  return acc;
}

} // namespace

BOOST_AUTO_TEST_SUITE(row_accumulators)

BOOST_AUTO_TEST_CASE(per_row_averages_over_the_pushes_that_touched_the_row) {
  auto acc = two_pushes();
  BOOST_TEST(acc.rows() == 3u);
  auto out = acc.take(sync_reduction::per_row, 2);
  BOOST_TEST(out.keys == (std::vector<int64_t>{5, 9, 4}));
  BOOST_TEST(out.counts == (std::vector<uint32_t>{1, 5, 1}));
  // 5: worker 0 alone, a full step; 9: (4 + 2) / 2, (8 + 0) / 2; 4: worker 1 alone.
  BOOST_TEST(out.grads == (std::vector<float>{1, 2, 3, 4, 10, 20}));
  BOOST_TEST(acc.rows() == 0u);
}

BOOST_AUTO_TEST_CASE(replicas_divides_every_row_by_r) {
  auto out = two_pushes().take(sync_reduction::replicas, 2);
  BOOST_TEST(out.grads == (std::vector<float>{0.5f, 1, 3, 4, 5, 10}));
}

BOOST_AUTO_TEST_CASE(a_taken_step_leaves_nothing_behind) {
  auto acc = two_pushes();
  acc.take(sync_reduction::per_row, 2);
  std::vector<int64_t> keys = {9};
  std::vector<uint32_t> counts = {1};
  std::vector<float> grads = {7, 7};
  acc.add(keys.data(), counts.data(), grads.data(), 1);
  auto out = acc.take(sync_reduction::per_row, 2);
  BOOST_TEST(out.keys == (std::vector<int64_t>{9}));
  BOOST_TEST(out.counts == (std::vector<uint32_t>{1}));
  BOOST_TEST(out.grads == (std::vector<float>{7, 7}));
}

BOOST_AUTO_TEST_SUITE_END()
