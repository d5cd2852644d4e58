#pragma once
// Wire format of troupe::tensor: the shape, then the floats as one raw block.
// CAF 0.17's default float serialisation corrupts NaN, infinities and
// denormals and runs at ~0.1 GB/s; apply_raw is bit-exact and a memcpy.
// The raw block is host-endian: every node of a cluster must share it (x86-64).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <caf/binary_deserializer.hpp>
#include <caf/deserializer.hpp>
#include <caf/error.hpp>
#include <caf/meta/type_name.hpp>
#include <caf/sec.hpp>
#include <caf/serializer.hpp>

#include "actors/net/wire_limits.hpp"
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
  if (n > max_wire_elements())
    return caf::make_error(caf::sec::invalid_argument, "tensor of " + std::to_string(n)
                                                         + " elements exceeds the limit of "
                                                         + std::to_string(max_wire_elements())
                                                         + " (the model's largest variable)");
  // A binary message's bytes are all in memory: a count the rest of the
  // message cannot hold is refused before it becomes an allocation.
  if (auto* bytes = dynamic_cast<caf::binary_deserializer*>(&f))
    if (bytes->remaining() / sizeof(float) < n)
      return caf::make_error(caf::sec::invalid_argument,
                             "tensor claims " + std::to_string(n) + " floats but its message holds "
                               + std::to_string(bytes->remaining()) + " more bytes");
  if (shape.size() > 8)
    return caf::make_error(caf::sec::invalid_argument, "tensor of rank above 8");
  // The product of the non-zero dimensions, bounded like the count so that
  // no later arithmetic on the shape can overflow.
  bool empty = false;
  uint64_t product = 1;
  for (auto d : shape) {
    if (d < 0)
      return caf::make_error(caf::sec::invalid_argument, "tensor shape has a negative dimension");
    if (d == 0) {
      empty = true;
      continue;
    }
    if (product > max_wire_elements() / static_cast<uint64_t>(d))
      return caf::make_error(caf::sec::invalid_argument, "tensor shape exceeds the limit of "
                                                           + std::to_string(max_wire_elements())
                                                           + " elements");
    product *= static_cast<uint64_t>(d);
  }
  if ((empty ? 0 : product) != n)
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

/// The keys of a pull or push of embedding rows, and a push's occurrences
/// per key: raw blocks like a tensor's, so that 10^6 keys cost a memcpy,
/// each count checked against max_wire_keys and against the bytes the
/// message holds before anything is allocated (a claim of 10^9 keys is
/// refused, not allocated).
struct row_keys {
  std::vector<int64_t> keys;
  std::vector<uint32_t> counts; ///< a push's; empty in a pull
};

/// The most keys one row_keys may carry (the shards' own limit,
/// embedding.max-keys-per-request, is lower and named in their refusal).
constexpr size_t max_wire_keys = size_t{1} << 24;

namespace wire_detail {

template <class T>
caf::error save_block(caf::serializer& f, std::vector<T>& v) {
  size_t n = v.size();
  if (auto err = f.begin_sequence(n))
    return err;
  if (n > 0)
    if (auto err = f.apply_raw(n * sizeof(T), v.data()))
      return err;
  return f.end_sequence();
}

template <class T>
caf::error load_block(caf::deserializer& f, std::vector<T>& v) {
  size_t n = 0;
  if (auto err = f.begin_sequence(n))
    return err;
  if (n > max_wire_keys)
    return caf::make_error(caf::sec::invalid_argument, "a request of " + std::to_string(n)
                                                         + " keys exceeds the limit of "
                                                         + std::to_string(max_wire_keys));
  if (auto* bytes = dynamic_cast<caf::binary_deserializer*>(&f))
    if (bytes->remaining() / sizeof(T) < n)
      return caf::make_error(caf::sec::invalid_argument, "a key block claims " + std::to_string(n)
                                                           + " entries but its message holds "
                                                           + std::to_string(bytes->remaining())
                                                           + " more bytes");
  v.resize(n);
  if (n > 0)
    if (auto err = f.apply_raw(n * sizeof(T), v.data()))
      return err;
  return f.end_sequence();
}

} // namespace wire_detail

inline caf::error inspect(caf::serializer& f, row_keys& x) {
  if (auto err = wire_detail::save_block(f, x.keys))
    return err;
  return wire_detail::save_block(f, x.counts);
}

inline caf::error inspect(caf::deserializer& f, row_keys& x) {
  if (auto err = wire_detail::load_block(f, x.keys))
    return err;
  return wire_detail::load_block(f, x.counts);
}

template <class Inspector>
std::enable_if_t<!std::is_base_of<caf::serializer, Inspector>::value
                   && !std::is_base_of<caf::deserializer, Inspector>::value,
                 typename Inspector::result_type>
inspect(Inspector& f, row_keys& x) {
  auto n = x.keys.size();
  return f(caf::meta::type_name("row_keys"), n);
}

/// Rows of an embedding table restored from a checkpoint (the chief sends
/// each shard the rows whose buckets it owns): keys, their counters, and
/// payloads [keys, value + optimizer slots], blocks checked like row_keys.
struct restored_rows {
  int32_t table = 0;
  std::vector<int64_t> keys;
  std::vector<uint32_t> frequencies;
  std::vector<uint32_t> last_updates;
  tensor payloads;
};

/// Every other inspector (to_string, deep_to_string) prints the shape only.
template <class Inspector>
std::enable_if_t<!std::is_base_of<caf::serializer, Inspector>::value
                   && !std::is_base_of<caf::deserializer, Inspector>::value,
                 typename Inspector::result_type>
inspect(Inspector& f, tensor& x) {
  auto shape = to_string(x.shape());
  return f(caf::meta::type_name("tensor"), shape);
}

inline caf::error inspect(caf::serializer& f, restored_rows& x) {
  if (auto err = f(x.table))
    return err;
  if (auto err = wire_detail::save_block(f, x.keys))
    return err;
  if (auto err = wire_detail::save_block(f, x.frequencies))
    return err;
  if (auto err = wire_detail::save_block(f, x.last_updates))
    return err;
  return inspect(f, x.payloads);
}

inline caf::error inspect(caf::deserializer& f, restored_rows& x) {
  if (auto err = f(x.table))
    return err;
  if (auto err = wire_detail::load_block(f, x.keys))
    return err;
  if (auto err = wire_detail::load_block(f, x.frequencies))
    return err;
  if (auto err = wire_detail::load_block(f, x.last_updates))
    return err;
  return inspect(f, x.payloads);
}

template <class Inspector>
std::enable_if_t<!std::is_base_of<caf::serializer, Inspector>::value
                   && !std::is_base_of<caf::deserializer, Inspector>::value,
                 typename Inspector::result_type>
inspect(Inspector& f, restored_rows& x) {
  auto n = x.keys.size();
  return f(caf::meta::type_name("restored_rows"), x.table, n);
}

} // namespace troupe
