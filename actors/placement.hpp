#pragma once
// Which PS shard holds which variable (or slice of one): TF's round robin,
// TF's greedy by bytes, and Troupe's balanced strategy, as plain functions.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "actors/partitioner.hpp"
#include "tensor/model.hpp"

namespace troupe {

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

/// Troupe's default: slices largest first onto the least-loaded shard; when
/// that leaves the most loaded shard above (1 + epsilon) x the mean, every
/// variable larger than epsilon x the mean is split into slices of at most
/// that size first, which bounds the maximum by (1 + epsilon) x the mean
/// whenever single rows are small enough. Deterministic.
std::vector<placed_slice> place_balanced(const std::vector<variable_spec>& variables,
                                         int32_t num_shards, double epsilon = 0.05);

/// The slices and shards for `variables` under strategy `name`: round_robin
/// and greedy_bytes place whole variables, balanced may split them.
std::vector<placed_slice> plan_placement(const std::string& name,
                                         const std::vector<variable_spec>& variables,
                                         int32_t num_shards, double epsilon = 0.05);

/// The names plan_placement accepts.
const std::vector<std::string>& placement_names();

} // namespace troupe
