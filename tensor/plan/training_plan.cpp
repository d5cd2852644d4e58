#include "tensor/plan/training_plan.hpp"

#include <algorithm>

#include "tensor/core/error.hpp"

namespace troupe {

std::vector<planned_slice> build_plan(const std::vector<placed_slice>& placement,
                                      const std::vector<variable_spec>& variables) {
  std::vector<planned_slice> out;
  for (auto& p : placement) {
    auto var = std::find_if(variables.begin(), variables.end(),
                            [&](const variable_spec& v) { return v.name == p.slice.variable; });
    if (var == variables.end())
      throw troupe_error("placement slice " + p.slice.name + " names no variable of the model");
    auto& s = p.slice;
    out.push_back({s.name, p.shard, static_cast<int32_t>(var - variables.begin()), s.axis, s.offset,
                   s.shape.empty() ? 1 : s.shape[static_cast<size_t>(s.axis)]});
  }
  return out;
}

namespace {

// Plan slice `p` as a variable_slice of its variable, checked to fit.
variable_slice slice_of(const planned_slice& p, const std::vector<variable_spec>& variables) {
  if (p.variable < 0 || static_cast<size_t>(p.variable) >= variables.size())
    throw troupe_error("plan slice " + p.name + " names variable " + std::to_string(p.variable)
                       + " of a model with " + std::to_string(variables.size()));
  auto& spec = variables[static_cast<size_t>(p.variable)];
  variable_slice s;
  s.name = p.name;
  s.variable = spec.name;
  s.axis = p.axis;
  s.offset = p.offset;
  s.full_shape = s.shape = spec.shape;
  if (s.axis < 0 || (s.axis > 0 && static_cast<size_t>(s.axis) >= spec.shape.size()))
    throw troupe_error("plan slice " + s.name + " is split along axis " + std::to_string(s.axis)
                       + ", beyond the rank of " + spec.name + " " + to_string(spec.shape));
  auto dim = spec.shape.empty() ? 1 : spec.shape[static_cast<size_t>(s.axis)];
  if (s.offset < 0 || p.extent < 1 || s.offset + p.extent > dim)
    throw troupe_error("plan slice " + s.name + " (" + std::to_string(s.offset) + " + "
                       + std::to_string(p.extent) + " along axis " + std::to_string(s.axis)
                       + ") does not fit " + spec.name + " " + to_string(spec.shape));
  if (!s.shape.empty())
    s.shape[static_cast<size_t>(s.axis)] = p.extent;
  return s;
}

// Each variable's slices as (offset, extent) must tile it exactly, along one axis.
void check_tiling(const std::vector<planned_slice>& plan,
                  const std::vector<variable_spec>& variables) {
  std::vector<std::vector<std::pair<int64_t, int64_t>>> pieces(variables.size());
  std::vector<int32_t> axis_of(variables.size(), -1);
  for (auto& p : plan) {
    auto v = static_cast<size_t>(p.variable);
    if (axis_of[v] >= 0 && axis_of[v] != p.axis)
      throw troupe_error(variables[v].name + " is split along two axes");
    axis_of[v] = p.axis;
    pieces[v].emplace_back(p.offset, p.extent);
  }
  for (size_t v = 0; v < variables.size(); ++v) {
    auto& shape = variables[v].shape;
    auto dim = shape.empty() ? 1 : shape[static_cast<size_t>(std::max(axis_of[v], 0))];
    std::sort(pieces[v].begin(), pieces[v].end());
    int64_t next = 0; // the first index not yet covered; -1 once a piece overlaps or skips
    for (auto [offset, extent] : pieces[v])
      next = offset == next ? next + extent : -1;
    if (next != dim)
      throw troupe_error("the plan's slices do not cover " + variables[v].name + " exactly once");
  }
}

void check_count(const slice_router::shard_part& part, size_t values) {
  if (values != part.slices.size())
    throw troupe_error("ps:" + std::to_string(part.shard) + " answered with "
                       + std::to_string(values) + " values for "
                       + std::to_string(part.slices.size()) + " slices");
}

} // namespace

slice_router::slice_router(std::vector<planned_slice> plan,
                           const std::vector<variable_spec>& variables, int32_t num_shards)
  : plan_(std::move(plan)) {
  std::vector<shard_part> by_shard(static_cast<size_t>(std::max(num_shards, 0)));
  for (size_t i = 0; i < plan_.size(); ++i) {
    auto& p = plan_[i];
    slices_.push_back(slice_of(p, variables));
    if (p.shard < 0 || p.shard >= num_shards)
      throw troupe_error(
        "slice " + p.name + " is on ps:" + std::to_string(p.shard) + ", but there "
        + (num_shards == 1 ? "is 1 shard" : "are " + std::to_string(num_shards) + " shards"));
    auto& part = by_shard[static_cast<size_t>(p.shard)];
    part.shard = p.shard;
    part.names.push_back(p.name);
    part.slices.push_back(i);
  }
  check_tiling(plan_, variables);
  for (auto& part : by_shard)
    if (!part.names.empty())
      parts_.push_back(std::move(part));
}

void slice_router::gather(const shard_part& part, std::vector<tensor>&& values,
                          std::vector<tensor>& variables) const {
  check_count(part, values.size());
  for (size_t k = 0; k < values.size(); ++k) {
    auto i = part.slices[k];
    gather_slice(slices_[i], std::move(values[k]), variables.at(variable_of(i)));
  }
}

void slice_router::gather(const shard_part& part, const std::vector<tensor>& values,
                          const std::vector<float*>& variables) const {
  check_count(part, values.size());
  for (size_t k = 0; k < values.size(); ++k) {
    auto i = part.slices[k];
    insert_slice(slices_[i], values[k], variables.at(variable_of(i)));
  }
}

std::vector<tensor> slice_router::cut(const shard_part& part,
                                      std::vector<tensor>& variables) const {
  std::vector<tensor> out;
  out.reserve(part.slices.size());
  for (auto i : part.slices) {
    auto& slice = slices_[i];
    auto& full = variables.at(variable_of(i));
    out.push_back(slice.shape == slice.full_shape ? std::move(full) : extract_slice(slice, full));
  }
  return out;
}

std::vector<tensor> slice_router::cut(const shard_part& part,
                                      const std::vector<float*>& variables) const {
  std::vector<tensor> out;
  out.reserve(part.slices.size());
  for (auto i : part.slices)
    out.push_back(extract_slice(slices_[i], variables.at(variable_of(i))));
  return out;
}

} // namespace troupe
