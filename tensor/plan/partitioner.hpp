#pragma once
// TF's variable partitioners, as plain classes: how many slices a variable is
// split into along one axis, and the slices themselves with TF's remainder
// rule (the first dim % n slices get one extra row) and naming
// (<variable>/part_<i>). TF calls a variable's slices shards; here a shard is
// always a ps shard, and only the parameters keep TF's names (num_shards,
// max_shard_bytes, max_shards). Each slice keeps its offset in the full variable, so
// a checkpoint can store the logical variable and restore it into another
// partitioning.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tensor/nn/model.hpp"

namespace troupe {

/// One slice of a partitioned variable.
struct variable_slice {
  std::string name;     ///< "<variable>/part_<i>", or the variable's name if unsplit
  std::string variable; ///< the full (logical) variable
  int32_t index = 0;    ///< i
  int32_t axis = 0;
  int64_t offset = 0; ///< first row along axis within the full variable
  shape_t shape;      ///< the slice's own shape
  shape_t full_shape;
  size_t bytes() const { return static_cast<size_t>(num_elements(shape)) * sizeof(float); }
};

class partitioner {
public:
  virtual ~partitioner() = default;
  virtual std::string describe() const = 0;
  virtual int32_t axis() const = 0;
  /// Number of slices for a variable of this shape (>= 1, <= dim[axis]).
  virtual int64_t partitions(const shape_t& shape) const = 0;
};

/// fixed_size_partitioner(num_shards, axis): min(num_shards, dim[axis]).
std::unique_ptr<partitioner> make_fixed_size(int64_t num_shards, int32_t axis = 0);

/// min_max_variable_partitioner(max_partitions, axis, min_slice_bytes):
/// max(1, min(dim[axis], max_partitions, ceil(bytes / min_slice_bytes))).
std::unique_ptr<partitioner> make_min_max(int64_t max_partitions, int32_t axis = 0,
                                          int64_t min_slice_bytes = 256 << 10);

/// variable_axis_size_partitioner(max_shard_bytes, axis, max_shards): slices
/// of at most max_shard_bytes (whole rows), at most max_shards (0: no cap).
std::unique_ptr<partitioner> make_axis_size(int64_t max_shard_bytes, int32_t axis = 0,
                                            int64_t max_shards = 0);

/// Splits `spec` into `count` slices along `axis` (TF's _iter_slices rule).
/// Throws troupe_error on an axis beyond the rank or a count outside
/// 1..dim[axis].
std::vector<variable_slice> split_variable(const variable_spec& spec, int64_t count,
                                           int32_t axis = 0);

/// The part of `full` that `slice` covers, as a tensor of the slice's shape
/// (any axis: along axis 0 one contiguous copy, else one per outer index).
tensor extract_slice(const variable_slice& slice, const tensor& full);

/// The same from a variable's values at `full` (a model's staging buffer).
tensor extract_slice(const variable_slice& slice, const float* full);

/// Writes a slice's value into its part of `full`.
void insert_slice(const variable_slice& slice, const tensor& value, tensor& full);

/// The same into a variable's values at `full` (a model's staging buffer).
void insert_slice(const variable_slice& slice, const tensor& value, float* full);

/// Puts a pulled slice value into its variable: moved when the slice is the
/// whole variable (no copy), its rows copied otherwise.
void gather_slice(const variable_slice& slice, tensor&& value, tensor& full);

/// The slices `p` makes of `spec` (a single unsplit slice when it makes one).
std::vector<variable_slice> partition(const variable_spec& spec, const partitioner& p);

} // namespace troupe
