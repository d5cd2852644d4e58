#pragma once
// A float32 tensor: a shape plus contiguous row-major storage. A value type:
// copying copies the data, moving is O(1). Within one process CAF passes
// messages copy-on-write, so a tensor moved into a message and read through a
// const reference by the receiver is never copied. The wire format lives in
// actors/wire.hpp so that this folder stays free of CAF.
#include <cstdint>
#include <string>
#include <vector>

namespace troupe {

using shape_t = std::vector<int64_t>;

/// Number of elements of a shape (1 for a scalar, 0 if any dimension is 0).
int64_t num_elements(const shape_t& shape);

/// "[784, 10]".
std::string to_string(const shape_t& shape);

/// Index of the first NaN or infinite value among `count`, or count.
size_t first_non_finite(const float* values, size_t count) noexcept;

class tensor {
public:
  tensor() = default;

  /// A tensor of the given shape, every element `fill`.
  explicit tensor(shape_t shape, float fill = 0.0f);

  /// Takes `values` as storage; throws shape_error if their count does not fit.
  tensor(shape_t shape, std::vector<float> values);

  const shape_t& shape() const noexcept { return shape_; }
  size_t rank() const noexcept { return shape_.size(); }
  int64_t dim(size_t axis) const { return shape_.at(axis); }
  size_t size() const noexcept { return data_.size(); }
  size_t bytes() const noexcept { return data_.size() * sizeof(float); }
  bool empty() const noexcept { return data_.empty(); }

  float* data() noexcept { return data_.data(); }
  const float* data() const noexcept { return data_.data(); }
  float& operator[](size_t i) noexcept { return data_[i]; }
  float operator[](size_t i) const noexcept { return data_[i]; }
  std::vector<float>& values() noexcept { return data_; }
  const std::vector<float>& values() const noexcept { return data_; }

  /// Reuses the storage if it is large enough; contents are unspecified.
  void resize(shape_t shape);

  /// Sets every element to `value`.
  void fill(float value);

  /// True when no element is NaN or infinite.
  bool all_finite() const noexcept;

  /// Index of the first non-finite element, or size() if there is none.
  size_t first_non_finite() const noexcept;

  /// Bitwise equality of shape and data (NaN payloads included).
  bool bit_equal(const tensor& other) const noexcept;

  /// Re-points the storage after deserialisation; checks the element count.
  void assign(shape_t shape, std::vector<float> values);

private:
  shape_t shape_;
  std::vector<float> data_;
};

} // namespace troupe
