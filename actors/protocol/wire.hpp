#pragma once
// Wire format of troupe::tensor: the shape, then the floats as one raw block.
// CAF 0.17's default float serialisation corrupts NaN, infinities and
// denormals and runs at ~0.1 GB/s; apply_raw is bit-exact and a memcpy.
// The raw block is host-endian: every node of a cluster must share it (x86-64).
#include <caf/deserializer.hpp>
#include <caf/error.hpp>
#include <caf/meta/type_name.hpp>
#include <caf/sec.hpp>
#include <caf/serializer.hpp>

#include "tensor/core/tensor.hpp"

namespace troupe {

inline caf::error inspect(caf::serializer& f, tensor& x) {
  shape_t shape = x.shape();
  size_t n = x.size();
  if (auto err = f(shape))
    return err;
  if (auto err = f.begin_sequence(n))
    return err;
  if (n > 0)
    if (auto err = f.apply_raw(n * sizeof(float), x.data()))
      return err;
  return f.end_sequence();
}

inline caf::error inspect(caf::deserializer& f, tensor& x) {
  shape_t shape;
  size_t n = 0;
  if (auto err = f(shape))
    return err;
  if (auto err = f.begin_sequence(n))
    return err;
  // BASP frames hold at most 4 GiB; refuse counts no real message can carry
  // before allocating for them.
  if (n > (size_t{1} << 30))
    return caf::make_error(caf::sec::invalid_argument, "tensor too large for one message");
  int64_t expected = 1;
  for (auto d : shape) {
    if (d < 0)
      return caf::make_error(caf::sec::invalid_argument, "tensor with a negative dimension");
    expected *= d;
  }
  if (static_cast<size_t>(expected) != n)
    return caf::make_error(caf::sec::invalid_argument,
                           "tensor shape does not match its element count");
  std::vector<float> values(n);
  if (n > 0)
    if (auto err = f.apply_raw(n * sizeof(float), values.data()))
      return err;
  if (auto err = f.end_sequence())
    return err;
  x.assign(std::move(shape), std::move(values));
  return caf::none;
}

/// Every other inspector (to_string, deep_to_string) prints the shape only.
template <class Inspector>
std::enable_if_t<!std::is_base_of<caf::serializer, Inspector>::value
                   && !std::is_base_of<caf::deserializer, Inspector>::value,
                 typename Inspector::result_type>
inspect(Inspector& f, tensor& x) {
  auto shape = to_string(x.shape());
  return f(caf::meta::type_name("tensor"), shape);
}

} // namespace troupe
