#include "actors/placement.hpp"

#include <algorithm>
#include <cmath>

#include "tensor/error.hpp"

namespace troupe {

std::vector<size_t> shard_bytes(const std::vector<placed_slice>& placement, int32_t num_shards) {
  std::vector<size_t> out(static_cast<size_t>(std::max(num_shards, 0)), 0);
  for (auto& p : placement)
    out.at(static_cast<size_t>(p.shard)) += p.slice.bytes();
  return out;
}

double imbalance(const std::vector<placed_slice>& placement, int32_t num_shards) {
  auto bytes = shard_bytes(placement, num_shards);
  double total = 0, most = 0;
  for (auto b : bytes) {
    total += static_cast<double>(b);
    most = std::max(most, static_cast<double>(b));
  }
  return total > 0 ? most / (total / num_shards) : 1.0;
}

std::vector<placed_slice> place_round_robin(const std::vector<variable_slice>& slices,
                                            int32_t num_shards) {
  if (num_shards <= 0)
    throw troupe_error("placement needs at least one PS shard");
  std::vector<placed_slice> out;
  for (size_t i = 0; i < slices.size(); ++i)
    out.push_back({slices[i], static_cast<int32_t>(i % static_cast<size_t>(num_shards))});
  return out;
}

namespace {

int32_t least_loaded(const std::vector<size_t>& load) {
  return static_cast<int32_t>(std::min_element(load.begin(), load.end()) - load.begin());
}

std::vector<placed_slice> largest_first(std::vector<variable_slice> slices, int32_t num_shards) {
  // Stable: equal sizes keep creation order, so the result is deterministic.
  std::stable_sort(slices.begin(), slices.end(),
                   [](const variable_slice& a, const variable_slice& b) {
                     return a.bytes() > b.bytes();
                   });
  std::vector<size_t> load(static_cast<size_t>(num_shards), 0);
  std::vector<placed_slice> out;
  for (auto& s : slices) {
    auto shard = least_loaded(load);
    load[static_cast<size_t>(shard)] += s.bytes();
    out.push_back({std::move(s), shard});
  }
  return out;
}

} // namespace

std::vector<placed_slice> place_greedy_bytes(const std::vector<variable_slice>& slices,
                                             int32_t num_shards) {
  if (num_shards <= 0)
    throw troupe_error("placement needs at least one PS shard");
  std::vector<size_t> load(static_cast<size_t>(num_shards), 0);
  std::vector<placed_slice> out;
  for (auto& s : slices) {
    auto shard = least_loaded(load);
    load[static_cast<size_t>(shard)] += s.bytes();
    out.push_back({s, shard});
  }
  return out;
}

std::vector<placed_slice> place_balanced(const std::vector<variable_spec>& variables,
                                         int32_t num_shards, double epsilon) {
  if (num_shards <= 0)
    throw troupe_error("placement needs at least one PS shard");
  if (!(epsilon > 0))
    throw troupe_error("balanced placement needs epsilon > 0");
  std::vector<variable_slice> whole;
  double total = 0;
  for (auto& v : variables) {
    whole.push_back(split_variable(v, 1).front());
    total += static_cast<double>(whole.back().bytes());
  }
  auto placed = largest_first(whole, num_shards);
  if (imbalance(placed, num_shards) <= 1.0 + epsilon || num_shards == 1)
    return placed;
  // Pieces of at most epsilon x mean: adding one to the least-loaded shard
  // keeps every shard within mean + epsilon x mean.
  double piece = epsilon * total / num_shards;
  std::vector<variable_slice> pieces;
  for (auto& v : variables) {
    auto bytes = static_cast<double>(num_elements(v.shape)) * sizeof(float);
    int64_t count = 1;
    if (bytes > piece && !v.shape.empty())
      count = std::min<int64_t>(v.shape[0], static_cast<int64_t>(std::ceil(bytes / piece)));
    for (auto& s : split_variable(v, std::max<int64_t>(1, count)))
      pieces.push_back(std::move(s));
  }
  return largest_first(std::move(pieces), num_shards);
}

const std::vector<std::string>& placement_names() {
  static const std::vector<std::string> names{"round_robin", "greedy_bytes", "balanced"};
  return names;
}

std::vector<placed_slice> plan_placement(const std::string& name,
                                         const std::vector<variable_spec>& variables,
                                         int32_t num_shards, double epsilon) {
  if (name == "balanced")
    return place_balanced(variables, num_shards, epsilon);
  std::vector<variable_slice> whole;
  for (auto& v : variables)
    whole.push_back(split_variable(v, 1).front());
  if (name == "greedy_bytes")
    return place_greedy_bytes(whole, num_shards);
  if (name == "round_robin")
    return place_round_robin(whole, num_shards);
  throw troupe_error("unknown placement '" + name + "' (known: round_robin, greedy_bytes, balanced)");
}


} // namespace troupe
