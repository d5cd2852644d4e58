// Partitioner rules and placement strategies, as plain functions.
#include <algorithm>
#include <random>

#include <boost/test/unit_test.hpp>

#include "tensor/core/error.hpp"
#include "tensor/plan/partitioner.hpp"
#include "tensor/plan/placement.hpp"

using namespace troupe;

namespace {

variable_spec placed_var(std::string name, shape_t shape) {
  return {std::move(name), std::move(shape), {}};
}

} // namespace

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
  BOOST_TEST(rules[1].split->partitions({1024}) == 4);   // 4 KB / 1 KB, capped at 4
  BOOST_TEST(rules[2].split->partitions({64, 32}) == 2); // 8 KB / 4 KB
  BOOST_TEST(parse_partition_rule("x min_max max_partitions=8").split->partitions({1 << 20}) == 8);
  auto one_char = parse_partition_rules({"conv?/w* fixed_size shards=2"});
  BOOST_TEST(rule_for(one_char, "conv1/weights") == &one_char[0]);
  BOOST_TEST(rule_for(one_char, "conv12/weights") == nullptr); // '?' is one character
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
  has(error_of("fc1/weights fixed_size"), "missing parameter 'shards'");
  has(error_of("fc1/weights fixed_size shards=0"), "num_shards >= 1");
  has(error_of("fc1/weights fixed_size shards=two"), "'two' is not an integer");
  has(error_of("fc1/weights fixed_size shards=2 shard=2"),
      "unknown parameter 'shard' for fixed_size");
  has(error_of("fc1/weights fixed_size shards=2 shards=3"), "shards is given twice");
  has(error_of("fc1/weights fixed_size shards 2"), "'shards' is not key=value");
  has(error_of("x min_max max_partitions=2 min_slice_bytes=0"), "min_slice_bytes >= 1");
  has(error_of("x axis_size max_shard_bytes=0"), "max_shard_bytes >= 1");
  has(error_of("x fixed_size shards=2 axis=-1"), "not a tensor axis");
  std::vector<variable_spec> vars{placed_var("fc1/weights", {3136, 1024}),
                                  placed_var("fc1/biases", {1024})};
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
  std::vector<variable_spec> vars{placed_var("a", {10, 4}), placed_var("b", {6}),
                                  placed_var("c", {100, 4})};
  auto rules = parse_partition_rules({"a fixed_size shards=2"});
  for (auto& [strategy, name] : enum_names<placement_strategy>::table) {
    auto plan = plan_placement(strategy, vars, 2, 0.05, rules);
    std::vector<std::string> names;
    for (auto& p : plan)
      names.push_back(p.slice.name);
    // The rule's slices are kept as they are under every strategy.
    BOOST_TEST(std::count(names.begin(), names.end(), "a/part_0") == 1, name);
    BOOST_TEST(std::count(names.begin(), names.end(), "a/part_1") == 1, name);
    BOOST_TEST(std::count(names.begin(), names.end(), "a") == 0, name);
  }
  auto rr = plan_placement(placement_strategy::round_robin, vars, 2, 0.05, rules); // a/0, a/1, b, c
  BOOST_REQUIRE(rr.size() == 4u);
  BOOST_TEST(rr[1].shard == 1);
  BOOST_TEST(rr[3].slice.name == "c");
  BOOST_TEST(rr[3].shard == 1);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(placements)

BOOST_AUTO_TEST_CASE(round_robin_follows_creation_order) {
  std::vector<variable_spec> vars;
  for (int i = 0; i < 5; ++i)
    vars.push_back({"v" + std::to_string(i), {int64_t(1) << (10 - i)}, {}});
  auto shards = [&](int32_t n) {
    std::vector<int32_t> out;
    for (auto& p : plan_placement(placement_strategy::round_robin, vars, n))
      out.push_back(p.shard);
    return out;
  };
  BOOST_TEST(shards(2) == (std::vector<int32_t>{0, 1, 0, 1, 0}), boost::test_tools::per_element());
  BOOST_TEST(shards(3) == (std::vector<int32_t>{0, 1, 2, 0, 1}), boost::test_tools::per_element());
  BOOST_TEST(shards(1) == (std::vector<int32_t>(5, 0)), boost::test_tools::per_element());
  BOOST_CHECK_THROW(plan_placement(placement_strategy::round_robin, vars, 0), std::exception);
}

BOOST_AUTO_TEST_CASE(round_robin_leaves_the_cnn_lopsided_and_balanced_fixes_it) {
  std::vector<variable_spec> cnn{
    placed_var("conv1/weights", {5, 5, 1, 32}),  placed_var("conv1/biases", {32}),
    placed_var("conv2/weights", {5, 5, 32, 64}), placed_var("conv2/biases", {64}),
    placed_var("fc1/weights", {3136, 1024}),     placed_var("fc1/biases", {1024}),
    placed_var("fc2/weights", {1024, 10}),       placed_var("fc2/biases", {10})};
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
  auto softmax = place_balanced(
    {placed_var("softmax/weights", {784, 10}), placed_var("softmax/biases", {10})}, 2);
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
  for (auto& v : {placed_var("a", {100}), placed_var("b", {10}), placed_var("c", {10}),
                  placed_var("d", {50})})
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
      vars.push_back(placed_var("v" + std::to_string(i), {r, c}));
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
