#include "tensor/plan/partitioner.hpp"

#include <algorithm>
#include <cmath>
#include <functional>

#include "tensor/core/error.hpp"

namespace troupe {

namespace {

void check_axis(const shape_t& shape, int32_t axis, const std::string& who) {
  if (axis < 0 || static_cast<size_t>(axis) >= shape.size())
    throw troupe_error(who + ": axis " + std::to_string(axis) + " is beyond the rank of shape "
                       + to_string(shape));
}

int64_t bytes_of(const shape_t& shape) {
  return num_elements(shape) * static_cast<int64_t>(sizeof(float));
}

void require(bool ok, const std::string& what) {
  if (!ok)
    throw troupe_error(what);
}

// TF's partitioners differ only in how many slices a variable with `rows`
// along their axis is cut into.
using slice_count = std::function<int64_t(const shape_t& shape, int64_t rows)>;

class axis_partitioner final : public partitioner {
public:
  axis_partitioner(int32_t axis, std::string description, slice_count count)
    : axis_(axis), description_(std::move(description)), count_(std::move(count)) {}
  std::string describe() const override { return description_; }
  int32_t axis() const override { return axis_; }
  int64_t partitions(const shape_t& shape) const override {
    check_axis(shape, axis_, description_);
    return count_(shape, shape[axis_]);
  }

private:
  int32_t axis_;
  std::string description_;
  slice_count count_;
};

// TF's partitioner KIND along `axis`, described (and named in errors) as
// "KIND(FIRST, axis AXIS, MORE...)": its arguments in TF's order.
std::unique_ptr<partitioner> along(int32_t axis, const std::string& kind, const std::string& first,
                                   const std::vector<std::string>& more, slice_count count) {
  auto description = kind + "(" + first + ", axis " + std::to_string(axis);
  for (auto& argument : more)
    description += ", " + argument;
  return std::make_unique<axis_partitioner>(axis, description + ")", std::move(count));
}

} // namespace

std::unique_ptr<partitioner> make_fixed_size(int64_t num_shards, int32_t axis) {
  require(num_shards >= 1,
          "fixed_size partitioner needs num_shards >= 1 (got " + std::to_string(num_shards) + ")");
  return along(axis, "fixed_size", std::to_string(num_shards), {},
               [num_shards](const shape_t&, int64_t rows) {
                 return std::max<int64_t>(1, std::min(num_shards, rows));
               });
}

std::unique_ptr<partitioner> make_min_max(int64_t max_partitions, int32_t axis,
                                          int64_t min_slice_bytes) {
  require(max_partitions >= 1, "min_max partitioner needs max_partitions >= 1");
  require(min_slice_bytes >= 1, "min_max partitioner needs min_slice_bytes >= 1");
  return along(axis, "min_max", std::to_string(max_partitions),
               {std::to_string(min_slice_bytes) + " bytes"},
               [=](const shape_t& shape, int64_t rows) {
                 auto by_bytes = (bytes_of(shape) + min_slice_bytes - 1) / min_slice_bytes;
                 return std::max<int64_t>(1, std::min({rows, max_partitions, by_bytes}));
               });
}

std::unique_ptr<partitioner> make_axis_size(int64_t max_shard_bytes, int32_t axis,
                                            int64_t max_shards) {
  require(max_shard_bytes >= 1, "axis_size partitioner needs max_shard_bytes >= 1");
  require(max_shards >= 0, "axis_size partitioner needs max_shards >= 0 (0: no cap)");
  std::vector<std::string> more;
  if (max_shards > 0)
    more.push_back("at most " + std::to_string(max_shards));
  return along(axis, "axis_size", std::to_string(max_shard_bytes) + " bytes", more,
               [=](const shape_t& shape, int64_t rows) {
                 if (rows == 0)
                   return int64_t{1};
                 auto bytes_per_row = bytes_of(shape) / rows;
                 auto rows_per_slice = std::max<int64_t>(
                   1, bytes_per_row ? max_shard_bytes / bytes_per_row : 1);
                 auto slices = (rows + rows_per_slice - 1) / rows_per_slice;
                 if (max_shards > 0)
                   slices = std::min(slices, max_shards);
                 return std::max<int64_t>(1, slices);
               });
}

std::vector<variable_slice> split_variable(const variable_spec& spec, int64_t count, int32_t axis) {
  if (spec.shape.empty() && count == 1) // a scalar stays whole
    return {variable_slice{spec.name, spec.name, 0, 0, 0, spec.shape, spec.shape}};
  check_axis(spec.shape, axis, "split of " + spec.name);
  auto dim = spec.shape[axis];
  if (count < 1 || count > std::max<int64_t>(1, dim))
    throw troupe_error("cannot create " + std::to_string(count) + " slices of " + spec.name
                       + " along axis " + std::to_string(axis) + " of size " + std::to_string(dim));
  std::vector<variable_slice> out;
  auto base = dim / count;
  auto extra = dim % count;
  int64_t offset = 0;
  for (int64_t i = 0; i < count; ++i) {
    variable_slice s;
    s.variable = spec.name;
    s.name = count == 1 ? spec.name : spec.name + "/part_" + std::to_string(i);
    s.index = static_cast<int32_t>(i);
    s.axis = axis;
    s.offset = offset;
    s.full_shape = spec.shape;
    s.shape = spec.shape;
    s.shape[axis] = base + (i < extra ? 1 : 0); // TF: the first dim % n get one more
    offset += s.shape[axis];
    out.push_back(std::move(s));
  }
  return out;
}

namespace {

// A slice along axis a of shape [d0 .. dn] is `outer` = d0 * .. * d(a-1)
// blocks, each of (its extent along a) x `inner` = d(a+1) * .. * dn
// contiguous floats; along axis 0 that is one block.
struct slice_layout {
  size_t outer = 1, inner = 1, full_rows = 1, rows = 1;
};

slice_layout layout_of(const variable_slice& s) {
  slice_layout l;
  if (s.full_shape.empty())
    return l;
  auto axis = static_cast<size_t>(s.axis);
  if (axis >= s.full_shape.size() || s.shape.size() != s.full_shape.size())
    throw troupe_error(s.name + ": axis " + std::to_string(s.axis) + " does not fit shape "
                       + to_string(s.full_shape));
  for (size_t d = 0; d < axis; ++d)
    l.outer *= static_cast<size_t>(s.full_shape[d]);
  for (size_t d = axis + 1; d < s.full_shape.size(); ++d)
    l.inner *= static_cast<size_t>(s.full_shape[d]);
  l.full_rows = static_cast<size_t>(s.full_shape[axis]);
  l.rows = static_cast<size_t>(s.shape[axis]);
  return l;
}

} // namespace

tensor extract_slice(const variable_slice& slice, const tensor& full) {
  return extract_slice(slice, full.data());
}

tensor extract_slice(const variable_slice& slice, const float* full) {
  auto l = layout_of(slice);
  tensor out(slice.shape);
  auto block = l.rows * l.inner;
  for (size_t o = 0; o < l.outer; ++o)
    std::copy_n(full + (o * l.full_rows + static_cast<size_t>(slice.offset)) * l.inner, block,
                out.data() + o * block);
  return out;
}

void insert_slice(const variable_slice& slice, const tensor& value, tensor& full) {
  insert_slice(slice, value, full.data());
}

void insert_slice(const variable_slice& slice, const tensor& value, float* full) {
  if (value.shape() != slice.shape)
    throw shape_error(slice.name + ": value of shape " + to_string(value.shape())
                      + " for a slice of shape " + to_string(slice.shape));
  auto l = layout_of(slice);
  auto block = l.rows * l.inner;
  for (size_t o = 0; o < l.outer; ++o)
    std::copy_n(value.data() + o * block, block,
                full + (o * l.full_rows + static_cast<size_t>(slice.offset)) * l.inner);
}

void gather_slice(const variable_slice& slice, tensor&& value, tensor& full) {
  if (slice.shape == slice.full_shape && value.shape() == slice.shape) {
    full = std::move(value);
    return;
  }
  full.resize(slice.full_shape);
  insert_slice(slice, value, full);
}

std::vector<variable_slice> partition(const variable_spec& spec, const partitioner& p) {
  return split_variable(spec, p.partitions(spec.shape), p.axis());
}

} // namespace troupe
