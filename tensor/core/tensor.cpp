#include "tensor/core/tensor.hpp"

#include <algorithm>

#include <cmath>
#include <cstring>

#include "tensor/core/error.hpp"

namespace troupe {

int64_t num_elements(const shape_t& shape) {
  int64_t n = 1;
  bool empty = false;
  for (auto d : shape) {
    if (d < 0)
      throw shape_error("negative dimension in shape " + to_string(shape));
    if (d == 0)
      empty = true;
    else if (__builtin_mul_overflow(n, d, &n))
      throw shape_error("shape " + to_string(shape) + " has more elements than 64 bits count");
  }
  return empty ? 0 : n;
}

std::string to_string(const shape_t& shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i > 0)
      out += ", ";
    out += std::to_string(shape[i]);
  }
  return out + "]";
}

tensor::tensor(shape_t shape, float fill)
  : shape_(std::move(shape)), data_(static_cast<size_t>(num_elements(shape_)), fill) {
}

tensor::tensor(shape_t shape, std::vector<float> values) {
  assign(std::move(shape), std::move(values));
}

void tensor::assign(shape_t shape, std::vector<float> values) {
  auto n = num_elements(shape);
  if (static_cast<size_t>(n) != values.size())
    throw shape_error("shape " + to_string(shape) + " needs " + std::to_string(n)
                      + " elements, got " + std::to_string(values.size()));
  shape_ = std::move(shape);
  data_ = std::move(values);
}

void tensor::resize(shape_t shape) {
  data_.resize(static_cast<size_t>(num_elements(shape)));
  shape_ = std::move(shape);
}

void tensor::fill(float value) {
  std::fill(data_.begin(), data_.end(), value);
}

bool tensor::all_finite() const noexcept {
  return first_non_finite() == data_.size();
}

size_t tensor::first_non_finite() const noexcept {
  return troupe::first_non_finite(data_.data(), data_.size());
}

size_t first_non_finite(const float* values, size_t count) noexcept {
  // Block by block without an early exit, so that the compiler vectorises
  // the test (an all-ones exponent: NaN or infinity); the element is looked
  // for only in a block that has one. Every pushed gradient passes here.
  constexpr size_t block = 256;
  constexpr uint32_t exponent = 0x7f800000u;
  for (size_t start = 0; start < count; start += block) {
    size_t end = std::min(count, start + block);
    uint32_t any = 0;
    for (size_t i = start; i < end; ++i) {
      uint32_t bits;
      std::memcpy(&bits, values + i, sizeof(bits));
      any |= static_cast<uint32_t>((bits & exponent) == exponent);
    }
    if (any)
      for (size_t i = start; i < end; ++i)
        if (!std::isfinite(values[i]))
          return i;
  }
  return count;
}

bool tensor::bit_equal(const tensor& other) const noexcept {
  return shape_ == other.shape_ && data_.size() == other.data_.size()
         && (data_.empty() || std::memcmp(data_.data(), other.data_.data(), bytes()) == 0);
}

} // namespace troupe
