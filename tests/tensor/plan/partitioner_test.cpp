// TF's variable partitioners and slicing, as plain functions.
#include <algorithm>
#include <random>

#include <boost/test/unit_test.hpp>

#include "tensor/core/error.hpp"
#include "tensor/plan/partitioner.hpp"
#include "tensor/plan/placement.hpp"

using namespace troupe;

namespace {

std::vector<int64_t> rows(const std::vector<variable_slice>& slices) {
  std::vector<int64_t> out;
  for (auto& s : slices)
    out.push_back(s.shape[s.axis]);
  return out;
}

variable_spec var(std::string name, shape_t shape) {
  return {std::move(name), std::move(shape), {}};
}

} // namespace

BOOST_AUTO_TEST_SUITE(partitioners)

BOOST_AUTO_TEST_CASE(tf_remainder_rule_names_and_offsets) {
  auto slices = split_variable(var("emb", {13, 4}), 5);
  BOOST_TEST(rows(slices) == (std::vector<int64_t>{3, 3, 3, 2, 2}),
             boost::test_tools::per_element());
  BOOST_TEST(slices[3].name == "emb/part_3");
  BOOST_TEST(slices[3].offset == 9);
  BOOST_TEST(slices[4].offset == 11);
  BOOST_TEST(slices[4].full_shape == (shape_t{13, 4}), boost::test_tools::per_element());
  // TF issue 6551's real case: 793,470 rows over 8 shards.
  auto big = split_variable(var("e", {793470, 1}), 8);
  BOOST_TEST(rows(big)
               == (std::vector<int64_t>{99184, 99184, 99184, 99184, 99184, 99184, 99183, 99183}),
             boost::test_tools::per_element());
  // Along axis 1.
  auto cols = split_variable(var("w", {2, 7}), 3, 1);
  BOOST_TEST(rows(cols) == (std::vector<int64_t>{3, 2, 2}), boost::test_tools::per_element());
  BOOST_TEST(cols[1].shape == (shape_t{2, 2}), boost::test_tools::per_element());
  // One slice keeps the variable's own name.
  BOOST_TEST(split_variable(var("b", {10}), 1)[0].name == "b");
}

BOOST_AUTO_TEST_CASE(each_partitioner_follows_tf) {
  auto fixed = make_fixed_size(4);
  BOOST_TEST(fixed->partitions({3136, 1024}) == 4);
  BOOST_TEST(fixed->partitions({3, 1024}) == 3); // min(num_shards, dim)
  // min_max's docstring: 1024x1024 float32 with 256 KiB slices gives 16.
  BOOST_TEST(make_min_max(32)->partitions({1024, 1024}) == 16);
  BOOST_TEST(make_min_max(8)->partitions({1024, 1024}) == 8);
  BOOST_TEST(make_min_max(32)->partitions({10}) == 1);
  // axis_size: rows of 4 KiB, at most 10 KiB per shard -> 2 rows a shard.
  BOOST_TEST(make_axis_size(10 << 10)->partitions({9, 1024}) == 5);
  BOOST_TEST(make_axis_size(10 << 10, 0, 3)->partitions({9, 1024}) == 3);
  BOOST_TEST(make_axis_size(1)->partitions({4, 1024}) == 4); // one row even if too big
  auto parts = partition(var("fc1/weights", {3136, 1024}), *make_fixed_size(2));
  BOOST_TEST(parts.size() == 2u);
  BOOST_TEST(parts[1].name == "fc1/weights/part_1");
}

BOOST_AUTO_TEST_CASE(gather_and_scatter_round_trip) {
  tensor full({5, 3});
  for (size_t i = 0; i < full.size(); ++i)
    full[i] = static_cast<float>(i);
  auto slices = split_variable(var("w", {5, 3}), 2); // rows 3 + 2
  auto second = extract_slice(slices[1], full);
  BOOST_TEST(second.shape() == (shape_t{2, 3}), boost::test_tools::per_element());
  BOOST_TEST(second[0] == 9.0f); // row 3, column 0
  tensor rebuilt({5, 3}, -1.0f);
  for (auto& s : slices)
    insert_slice(s, extract_slice(s, full), rebuilt);
  BOOST_TEST(rebuilt.bit_equal(full));
  BOOST_CHECK_THROW(insert_slice(slices[0], tensor({2, 3}), rebuilt), shape_error);
}

BOOST_AUTO_TEST_CASE(slices_along_inner_axes_round_trip) {
  // [2, 5, 3] split along axis 1 (rows 3 + 2 of every outer block) and
  // along axis 2 (columns 2 + 1): each slice holds exactly its elements.
  tensor full({2, 5, 3});
  for (size_t i = 0; i < full.size(); ++i)
    full[i] = static_cast<float>(i);
  for (int32_t axis : {1, 2}) {
    auto slices = split_variable(var("w", {2, 5, 3}), 2, axis);
    tensor rebuilt({2, 5, 3}, -1.0f);
    for (auto& s : slices)
      insert_slice(s, extract_slice(s, full), rebuilt);
    BOOST_TEST(rebuilt.bit_equal(full), "axis " << axis);
  }
  auto columns = split_variable(var("w", {2, 5, 3}), 2, 2);
  auto second = extract_slice(columns[1], full); // column 2 of each of the 10 rows
  BOOST_TEST(second.shape() == (shape_t{2, 5, 1}), boost::test_tools::per_element());
  for (size_t r = 0; r < 10; ++r)
    BOOST_TEST(second[r] == static_cast<float>(r * 3 + 2));
  auto middle = split_variable(var("w", {2, 5, 3}), 2, 1);
  auto part1 = extract_slice(middle[1], full); // rows 3, 4 of both outer blocks
  BOOST_TEST(part1.values() == (std::vector<float>{9, 10, 11, 12, 13, 14, 24, 25, 26, 27, 28, 29}),
             boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(invalid_requests_are_clear_errors) {
  BOOST_CHECK_THROW(make_fixed_size(0), troupe_error);
  BOOST_CHECK_THROW(make_min_max(4, 0, 0), troupe_error);
  BOOST_CHECK_THROW(make_axis_size(0), troupe_error);
  try {
    make_fixed_size(2, 2)->partitions({10, 10});
    BOOST_FAIL("expected an error");
  } catch (const troupe_error& e) {
    BOOST_TEST(std::string(e.what()).find("axis 2") != std::string::npos);
  }
  BOOST_CHECK_THROW(split_variable(var("x", {3}), 4), troupe_error);
  BOOST_CHECK_THROW(split_variable(var("x", {3}), 0), troupe_error);
}

BOOST_AUTO_TEST_SUITE_END()
