#include "tensor/plan/placement.hpp"

#include <algorithm>
#include <cmath>
#include <map>

#include <fnmatch.h>

#include "tensor/core/error.hpp"
#include "tensor/core/spec_text.hpp"

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
  std::stable_sort(
    slices.begin(), slices.end(),
    [](const variable_slice& a, const variable_slice& b) { return a.bytes() > b.bytes(); });
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

partition_rule parse_partition_rule(const std::string& text) {
  spec_text s("partitioner rule", text, 2,
              "write \"PATTERN fixed_size shards=N [axis=A]\", \"PATTERN min_max "
              "max_partitions=N [axis=A] [min_slice_bytes=B]\" or \"PATTERN axis_size "
              "max_shard_bytes=B [axis=A] [max_shards=N]\"");
  if (s.word_count() < 2)
    s.fail("needs a variable-name pattern and a partitioner");
  auto& kind = s.word(1);
  partition_rule rule{s.word(0), nullptr, text};
  auto axis = [&] {
    auto a = s.integer("axis", 0);
    if (a < 0 || a > 7)
      s.fail("axis = " + std::to_string(a) + " is not a tensor axis");
    return static_cast<int32_t>(a);
  };
  // The partitioners check their own ranges; their errors get the rule's name.
  auto build = [&](auto make) {
    try {
      rule.split = make();
    } catch (const troupe_error& e) {
      s.fail(e.what());
    }
  };
  if (kind == "fixed_size") {
    s.allow_only({"shards", "axis"}, kind);
    auto shards = s.integer("shards");
    build([&] { return make_fixed_size(shards, axis()); });
  } else if (kind == "min_max") {
    s.allow_only({"max_partitions", "axis", "min_slice_bytes"}, kind);
    auto most = s.integer("max_partitions"), min_bytes = s.integer("min_slice_bytes", 256 << 10);
    build([&] { return make_min_max(most, axis(), min_bytes); });
  } else if (kind == "axis_size") {
    s.allow_only({"max_shard_bytes", "axis", "max_shards"}, kind);
    auto max_bytes = s.integer("max_shard_bytes"), max_shards = s.integer("max_shards", 0);
    build([&] { return make_axis_size(max_bytes, axis(), max_shards); });
  } else {
    s.fail("unknown partitioner '" + kind + "' (known: fixed_size, min_max, axis_size)");
  }
  return rule;
}

std::vector<partition_rule> parse_partition_rules(const std::vector<std::string>& texts) {
  std::vector<partition_rule> out;
  for (auto& t : texts)
    out.push_back(parse_partition_rule(t));
  return out;
}

const partition_rule* rule_for(const std::vector<partition_rule>& rules, const std::string& name) {
  for (auto& r : rules)
    if (fnmatch(r.pattern.c_str(), name.c_str(), 0) == 0)
      return &r;
  return nullptr;
}

void check_partition_rules(const std::vector<partition_rule>& rules,
                           const std::vector<variable_spec>& variables) {
  for (auto& r : rules) {
    bool matched = false;
    for (auto& v : variables) {
      if (fnmatch(r.pattern.c_str(), v.name.c_str(), 0) != 0)
        continue;
      matched = true;
      if (rule_for(rules, v.name) == &r && static_cast<size_t>(r.split->axis()) >= v.shape.size())
        throw troupe_error("partitioner rule \"" + r.text + "\": " + v.name + " has shape "
                           + to_string(v.shape) + ", no axis " + std::to_string(r.split->axis()));
    }
    if (!matched) {
      std::string names;
      for (auto& v : variables)
        names += (names.empty() ? "" : ", ") + v.name;
      throw troupe_error("partitioner rule \"" + r.text + "\": the pattern '" + r.pattern
                         + "' matches no variable (the model has " + names + ")");
    }
  }
}

namespace {

// Each variable split by its rule, or whole (unsplit: one slice, the name
// unchanged); `ruled` tells which had a rule.
std::vector<variable_slice> apply_rules(const std::vector<variable_spec>& variables,
                                        const std::vector<partition_rule>& rules,
                                        std::vector<bool>* ruled = nullptr) {
  std::vector<variable_slice> out;
  for (auto& v : variables) {
    auto* rule = rule_for(rules, v.name);
    if (ruled)
      ruled->push_back(rule != nullptr);
    for (auto& s : rule ? partition(v, *rule->split) : split_variable(v, 1))
      out.push_back(std::move(s));
  }
  return out;
}

int64_t rows_of(const variable_spec& v) {
  return v.shape.empty() ? int64_t{1} : v.shape[0];
}

// Variable i in counts[i] slices of rows, or as its rule splits it.
std::vector<variable_slice> slices_by_count(const std::vector<variable_spec>& variables,
                                            const std::vector<partition_rule>& rules,
                                            const std::vector<bool>& ruled,
                                            const std::vector<int64_t>& counts) {
  std::vector<variable_slice> out;
  for (size_t i = 0; i < variables.size(); ++i) {
    auto& v = variables[i];
    auto parts = ruled[i] ? partition(v, *rule_for(rules, v.name)->split)
                          : split_variable(v, counts[i]);
    for (auto& s : parts)
      out.push_back(std::move(s));
  }
  return out;
}

// Slice counts that cut every unruled variable into pieces of at most
// `piece` bytes, as far as its rows allow.
std::vector<int64_t> counts_for_pieces(const std::vector<variable_spec>& variables,
                                       const std::vector<bool>& ruled, double piece) {
  std::vector<int64_t> counts(variables.size(), 1);
  for (size_t i = 0; i < variables.size(); ++i) {
    if (ruled[i])
      continue;
    auto bytes = static_cast<double>(num_elements(variables[i].shape)) * sizeof(float);
    if (bytes > piece && !variables[i].shape.empty())
      counts[i] = std::max<int64_t>(
        1,
        std::min<int64_t>(rows_of(variables[i]), static_cast<int64_t>(std::ceil(bytes / piece))));
  }
  return counts;
}

} // namespace

std::vector<placed_slice> place_balanced(const std::vector<variable_spec>& variables,
                                         int32_t num_shards, double epsilon,
                                         const std::vector<partition_rule>& rules) {
  if (num_shards <= 0)
    throw troupe_error("placement needs at least one PS shard");
  if (!(epsilon > 0))
    throw troupe_error("balanced placement needs epsilon > 0");
  std::vector<bool> ruled;
  auto whole = apply_rules(variables, rules, &ruled);
  auto placed = largest_first(whole, num_shards);
  if (imbalance(placed, num_shards) <= 1.0 + epsilon || num_shards == 1)
    return placed;
  // As few slices as will do: split the variable of the largest piece into
  // the next multiple of the shard count (every slice a message entry and a
  // gather on every step), and place again. The CNN needs only fc1/weights
  // in two.
  std::vector<int64_t> counts(variables.size(), 1);
  for (int round = 0; round < 8; ++round) {
    auto largest = std::max_element(placed.begin(), placed.end(),
                                    [](const placed_slice& a, const placed_slice& b) {
                                      return a.slice.bytes() < b.slice.bytes();
                                    });
    auto var = static_cast<size_t>(
      std::find_if(variables.begin(), variables.end(),
                   [&](const variable_spec& v) { return v.name == largest->slice.variable; })
      - variables.begin());
    if (ruled[var] || counts[var] >= rows_of(variables[var]))
      break; // the largest piece cannot be split further here
    auto next = counts[var] == 1 ? int64_t{num_shards} : counts[var] + num_shards;
    counts[var] = std::min(rows_of(variables[var]), next);
    placed = largest_first(slices_by_count(variables, rules, ruled, counts), num_shards);
    if (imbalance(placed, num_shards) <= 1.0 + epsilon)
      return placed;
  }
  // Otherwise pieces of at most epsilon x mean: adding one to the
  // least-loaded shard keeps every shard within mean + epsilon x mean, which
  // bounds the result whenever single rows are small enough.
  double total = 0;
  for (auto& s : whole)
    total += static_cast<double>(s.bytes());
  double piece = epsilon * total / num_shards;
  return largest_first(
    slices_by_count(variables, rules, ruled, counts_for_pieces(variables, ruled, piece)),
    num_shards);
}

std::vector<placed_slice> plan_placement(placement_strategy strategy,
                                         const std::vector<variable_spec>& variables,
                                         int32_t num_shards, double epsilon,
                                         const std::vector<partition_rule>& rules) {
  switch (strategy) {
    case placement_strategy::balanced:
      return place_balanced(variables, num_shards, epsilon, rules);
    case placement_strategy::greedy_bytes:
      return place_greedy_bytes(apply_rules(variables, rules), num_shards);
    case placement_strategy::round_robin:
      break;
  }
  return place_round_robin(apply_rules(variables, rules), num_shards);
}

} // namespace troupe
