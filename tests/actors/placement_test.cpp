// Partitioners and placement strategies, without an actor system.
#include <algorithm>
#include <random>

#include <boost/test/unit_test.hpp>

#include "actors/partitioner.hpp"
#include "actors/placement.hpp"
#include "tensor/error.hpp"

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
  BOOST_TEST(rows(slices) == (std::vector<int64_t>{3, 3, 3, 2, 2}), boost::test_tools::per_element());
  BOOST_TEST(slices[3].name == "emb/part_3");
  BOOST_TEST(slices[3].offset == 9);
  BOOST_TEST(slices[4].offset == 11);
  BOOST_TEST(slices[4].full_shape == (shape_t{13, 4}), boost::test_tools::per_element());
  // TF issue 6551's real case: 793,470 rows over 8 shards.
  auto big = split_variable(var("e", {793470, 1}), 8);
  BOOST_TEST(rows(big) == (std::vector<int64_t>{99184, 99184, 99184, 99184, 99184, 99184, 99183,
                                                99183}),
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
  auto second = extract_slice(columns[1], full);  // column 2 of each of the 10 rows
  BOOST_TEST(second.shape() == (shape_t{2, 5, 1}), boost::test_tools::per_element());
  for (size_t r = 0; r < 10; ++r)
    BOOST_TEST(second[r] == static_cast<float>(r * 3 + 2));
  auto middle = split_variable(var("w", {2, 5, 3}), 2, 1);
  auto part1 = extract_slice(middle[1], full);  // rows 3, 4 of both outer blocks
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

BOOST_AUTO_TEST_SUITE(partition_rules)

BOOST_AUTO_TEST_CASE(rules_parse_and_the_first_match_wins) {
  auto rules = parse_partition_rules({"fc1/weights fixed_size shards=3 axis=1",
                                      "fc* min_max max_partitions=4 min_slice_bytes=1024",
                                      "* axis_size max_shard_bytes=4096 max_shards=2"});
  BOOST_REQUIRE(rules.size() == 3u);
  BOOST_TEST(rule_for(rules, "fc1/weights") == &rules[0]);
  BOOST_TEST(rule_for(rules, "fc1/biases") == &rules[1]);
  BOOST_TEST(rule_for(rules, "conv1/weights") == &rules[2]);
  BOOST_TEST(rules[0].split->axis() == 1);
  BOOST_TEST(rules[0].split->partitions({100, 7}) == 3);
  BOOST_TEST(rules[1].split->partitions({1024}) == 4);         // 4 KB / 1 KB, capped at 4
  BOOST_TEST(rules[2].split->partitions({64, 32}) == 2);       // 8 KB / 4 KB
  BOOST_TEST(parse_partition_rule("x min_max max_partitions=8").split->partitions({1 << 20}) == 8);
  auto one_char = parse_partition_rules({"conv?/w* fixed_size shards=2"});
  BOOST_TEST(rule_for(one_char, "conv1/weights") == &one_char[0]);
  BOOST_TEST(rule_for(one_char, "conv12/weights") == nullptr);  // '?' is one character
}

BOOST_AUTO_TEST_CASE(bad_rules_name_the_rule_and_the_problem) {
  auto error_of = [](const std::string& text) {
    try {
      parse_partition_rule(text);
    } catch (const troupe_error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  auto has = [](const std::string& text, const std::string& part) {
    BOOST_TEST(text.find(part) != std::string::npos, text << " should mention " << part);
  };
  has(error_of("fc1/weights"), "needs a variable-name pattern and a partitioner");
  has(error_of("fc1/weights fixed_sized shards=2"), "unknown partitioner 'fixed_sized'");
  has(error_of("fc1/weights fixed_size"), "needs shards=");
  has(error_of("fc1/weights fixed_size shards=0"), "num_shards >= 1");
  has(error_of("fc1/weights fixed_size shards=two"), "'two' is not an integer");
  has(error_of("fc1/weights fixed_size shards=2 shard=2"), "no parameter 'shard'");
  has(error_of("fc1/weights fixed_size shards 2"), "'shards' is not key=value");
  has(error_of("x min_max max_partitions=2 min_slice_bytes=0"), "min_slice_bytes >= 1");
  has(error_of("x axis_size max_shard_bytes=0"), "max_shard_bytes >= 1");
  has(error_of("x fixed_size shards=2 axis=-1"), "not a tensor axis");
  std::vector<variable_spec> vars{var("fc1/weights", {3136, 1024}), var("fc1/biases", {1024})};
  auto check_error = [&](const std::string& text) {
    try {
      check_partition_rules(parse_partition_rules({text}), vars);
    } catch (const troupe_error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  has(check_error("fc2/* fixed_size shards=2"), "matches no variable");
  has(check_error("fc1/* fixed_size shards=2 axis=1"), "fc1/biases has shape [1024], no axis 1");
  BOOST_TEST(check_error("fc1/* fixed_size shards=2") == "no error");
}

BOOST_AUTO_TEST_CASE(rules_apply_under_every_strategy) {
  std::vector<variable_spec> vars{var("a", {10, 4}), var("b", {6}), var("c", {100, 4})};
  auto rules = parse_partition_rules({"a fixed_size shards=2"});
  for (auto& name : placement_names()) {
    auto plan = plan_placement(name, vars, 2, 0.05, rules);
    std::vector<std::string> names;
    for (auto& p : plan)
      names.push_back(p.slice.name);
    // The rule's slices are kept as they are under every strategy.
    BOOST_TEST(std::count(names.begin(), names.end(), "a/part_0") == 1, name);
    BOOST_TEST(std::count(names.begin(), names.end(), "a/part_1") == 1, name);
    BOOST_TEST(std::count(names.begin(), names.end(), "a") == 0, name);
  }
  auto rr = plan_placement("round_robin", vars, 2, 0.05, rules);  // a/0, a/1, b, c
  BOOST_REQUIRE(rr.size() == 4u);
  BOOST_TEST(rr[1].shard == 1);
  BOOST_TEST(rr[3].slice.name == "c");
  BOOST_TEST(rr[3].shard == 1);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(placements)

BOOST_AUTO_TEST_CASE(round_robin_leaves_the_cnn_lopsided_and_balanced_fixes_it) {
  std::vector<variable_spec> cnn{var("conv1/weights", {5, 5, 1, 32}), var("conv1/biases", {32}),
                                 var("conv2/weights", {5, 5, 32, 64}), var("conv2/biases", {64}),
                                 var("fc1/weights", {3136, 1024}), var("fc1/biases", {1024}),
                                 var("fc2/weights", {1024, 10}), var("fc2/biases", {10})};
  std::vector<variable_slice> whole;
  for (auto& v : cnn)
    whole.push_back(split_variable(v, 1)[0]);
  auto rr = place_round_robin(whole, 2);
  BOOST_TEST(rr[4].shard == 0); // fc1/weights, the 12.8 MB one
  BOOST_TEST(imbalance(rr, 2) > 1.9);
  auto balanced = place_balanced(cnn, 2);
  BOOST_TEST(imbalance(balanced, 2) <= 1.05);
  // As few slices as will do: fc1/weights in two halves, the rest whole
  // (every slice costs a message entry and a gather on every step).
  BOOST_TEST(balanced.size() == cnn.size() + 1);
  for (auto& p : balanced)
    if (p.slice.variable == "fc1/weights")
      BOOST_TEST(p.slice.shape[0] == 1568);
  auto softmax = place_balanced({var("softmax/weights", {784, 10}), var("softmax/biases", {10})}, 2);
  BOOST_TEST(softmax.size() == 3u);
  BOOST_TEST(imbalance(softmax, 2) <= 1.05);
  // Deterministic.
  auto again = place_balanced(cnn, 2);
  BOOST_REQUIRE(again.size() == balanced.size());
  for (size_t i = 0; i < again.size(); ++i) {
    BOOST_TEST(again[i].slice.name == balanced[i].slice.name);
    BOOST_TEST(again[i].shard == balanced[i].shard);
  }
}

BOOST_AUTO_TEST_CASE(greedy_bytes_goes_to_the_least_loaded_shard) {
  std::vector<variable_slice> s;
  for (auto& v : {var("a", {100}), var("b", {10}), var("c", {10}), var("d", {50})})
    s.push_back(split_variable(v, 1)[0]);
  auto p = place_greedy_bytes(s, 2);
  BOOST_TEST(p[0].shard == 0);
  BOOST_TEST(p[1].shard == 1);
  BOOST_TEST(p[2].shard == 1); // tie-free: shard 1 holds 40 B, shard 0 400 B
  BOOST_TEST(p[3].shard == 1);
}

// Property: over many random variable sets, balanced placement keeps the most
// loaded shard within (1 + epsilon) x the mean whenever single rows allow it.
BOOST_AUTO_TEST_CASE(balanced_bound_holds_on_random_variable_sets) {
  std::mt19937 rng(2024);
  int checked = 0;
  for (int trial = 0; trial < 300; ++trial) {
    int32_t shards = 2 + static_cast<int32_t>(rng() % 4);
    double eps = trial % 2 ? 0.05 : 0.2;
    std::vector<variable_spec> vars;
    int count = 1 + static_cast<int>(rng() % 12);
    for (int i = 0; i < count; ++i) {
      int64_t r = 1 + static_cast<int64_t>(rng() % 3000), c = 1 + static_cast<int64_t>(rng() % 64);
      vars.push_back(var("v" + std::to_string(i), {r, c}));
    }
    double total = 0, widest_row = 0;
    for (auto& v : vars) {
      total += static_cast<double>(num_elements(v.shape)) * 4;
      widest_row = std::max(widest_row, static_cast<double>(v.shape[1]) * 4);
    }
    if (widest_row > eps * total / shards)
      continue; // a single row is too big to balance this finely
    ++checked;
    auto p = place_balanced(vars, shards, eps);
    BOOST_TEST(imbalance(p, shards) <= 1.0 + eps + 1e-9,
               "trial " << trial << ": " << imbalance(p, shards));
    size_t placed = 0;
    for (auto& s : p)
      placed += s.slice.bytes();
    BOOST_TEST(static_cast<double>(placed) == total); // nothing lost or doubled
  }
  BOOST_TEST(checked > 200);
}

BOOST_AUTO_TEST_SUITE_END()
