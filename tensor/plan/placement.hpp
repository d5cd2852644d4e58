#pragma once
// Which PS shard holds which variable (or slice of one): TF's round robin,
// TF's greedy by bytes, and Troupe's balanced strategy, as plain functions.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tensor/core/enum_names.hpp"
#include "tensor/nn/model.hpp"
#include "tensor/plan/partitioner.hpp"

namespace troupe {

/// How variables are spread over the ps shards (train.placement).
enum class placement_strategy {
  round_robin,  ///< TF's default: slice i to shard i % n, whatever its size
  greedy_bytes, ///< TF's GreedyLoadBalancingStrategy: each to the least-loaded shard
  balanced,     ///< largest first, splitting variables until within (1 + epsilon) x the mean
};

TROUPE_ENUM_NAMES(placement_strategy, {placement_strategy::round_robin, "round_robin"},
                  {placement_strategy::greedy_bytes, "greedy_bytes"},
                  {placement_strategy::balanced, "balanced"});

/// A slice and the shard it goes to.
struct placed_slice {
  variable_slice slice;
  int32_t shard = 0;
};

/// Bytes each shard holds under a placement.
std::vector<size_t> shard_bytes(const std::vector<placed_slice>& placement, int32_t num_shards);

/// max / mean of shard_bytes (1 is perfect balance).
double imbalance(const std::vector<placed_slice>& placement, int32_t num_shards);

/// Slices to shards in order: slice i to shard i % n (TF's default, counting
/// slices rather than bytes).
std::vector<placed_slice> place_round_robin(const std::vector<variable_slice>& slices,
                                            int32_t num_shards);

/// Each slice, in order, to the shard holding the fewest bytes so far, ties
/// to the lowest index (TF's GreedyLoadBalancingStrategy with byte_size_load_fn).
std::vector<placed_slice> place_greedy_bytes(const std::vector<variable_slice>& slices,
                                             int32_t num_shards);

/// A partitioner for the variables whose names match a glob pattern ('*'
/// and '?', '*' also crossing '/'), like TF's per-variable partitioner
/// argument.
struct partition_rule {
  std::string pattern;
  std::shared_ptr<const partitioner> split;
  std::string text; ///< the rule as written, for messages
};

/// Parses "PATTERN KIND key=value ...", KIND one of
///   fixed_size shards=N [axis=A]
///   min_max max_partitions=N [axis=A] [min_slice_bytes=B (262144)]
///   axis_size max_shard_bytes=B [axis=A] [max_shards=N (0: no cap)]
/// Throws troupe_error naming the rule and the problem.
partition_rule parse_partition_rule(const std::string& text);
std::vector<partition_rule> parse_partition_rules(const std::vector<std::string>& texts);

/// The first rule whose pattern matches `name`, or null.
const partition_rule* rule_for(const std::vector<partition_rule>& rules, const std::string& name);

/// Checks rules against a model's variables: every pattern matches some
/// variable and every matched variable has the rule's axis. Throws
/// troupe_error naming the rule.
void check_partition_rules(const std::vector<partition_rule>& rules,
                           const std::vector<variable_spec>& variables);

/// Troupe's default: slices largest first onto the least-loaded shard. When
/// that leaves the most loaded shard above (1 + epsilon) x the mean, the
/// variable of the largest piece is split into the next multiple of the
/// shard count and everything placed again, a few rounds, so that few slices
/// are made (the CNN: fc1/weights in two). If that does not reach the bound,
/// every variable larger than epsilon x the mean is cut into pieces of at
/// most that size, which bounds the maximum by (1 + epsilon) x the mean
/// whenever single rows are small enough. Variables a rule partitions keep
/// the rule's slices. Deterministic.
std::vector<placed_slice> place_balanced(const std::vector<variable_spec>& variables,
                                         int32_t num_shards, double epsilon = 0.05,
                                         const std::vector<partition_rule>& rules = {});

/// The slices and shards for `variables` under `strategy`: variables a rule
/// matches are split by it; round_robin and greedy_bytes place the other
/// variables whole, balanced may split them.
std::vector<placed_slice> plan_placement(placement_strategy strategy,
                                         const std::vector<variable_spec>& variables,
                                         int32_t num_shards, double epsilon = 0.05,
                                         const std::vector<partition_rule>& rules = {});

} // namespace troupe
