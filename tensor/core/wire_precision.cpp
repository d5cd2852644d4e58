#include "tensor/core/wire_precision.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include <Eigen/Core>

namespace troupe {

namespace {

uint16_t narrow(float value, wire_precision precision) noexcept {
  if (precision == wire_precision::bf16)
    return Eigen::numext::bit_cast<uint16_t>(Eigen::bfloat16(value));
  // fp16: saturate finite values rather than let a large gradient turn
  // into an infinity the shard would refuse.
  constexpr float largest = 65504.0f;
  if (std::isfinite(value))
    value = std::clamp(value, -largest, largest);
  return Eigen::numext::bit_cast<uint16_t>(Eigen::half(value));
}

float widen(uint16_t bits, wire_precision precision) noexcept {
  if (precision == wire_precision::bf16)
    return static_cast<float>(Eigen::numext::bit_cast<Eigen::bfloat16>(bits));
  return static_cast<float>(Eigen::numext::bit_cast<Eigen::half>(bits));
}

} // namespace

std::optional<wire_precision> wire_precision_of(int32_t code) noexcept {
  for (auto& [value, name] : enum_names<wire_precision>::table)
    if (static_cast<int32_t>(value) == code)
      return value;
  return std::nullopt;
}

size_t packed_floats(size_t count, wire_precision precision) noexcept {
  return precision == wire_precision::fp32 ? count : (count + 1) / 2;
}

void pack(const float* values, size_t count, wire_precision precision, tensor& out) {
  out.resize({static_cast<int64_t>(packed_floats(count, precision))});
  if (precision == wire_precision::fp32) {
    std::copy(values, values + count, out.data());
    return;
  }
  // Two halves per float, the first in the low bits; memcpy, not a
  // uint16_t pointer into float storage (strict aliasing).
  float* slots = out.data();
  for (size_t i = 0; i < count; i += 2) {
    uint32_t pair = narrow(values[i], precision);
    if (i + 1 < count) // an odd count's last float keeps its high half zero
      pair |= uint32_t{narrow(values[i + 1], precision)} << 16;
    std::memcpy(slots + i / 2, &pair, sizeof pair);
  }
}

maybe_failure unpack(const tensor& packed, wire_precision precision, float* out, size_t count) {
  if (packed.size() != packed_floats(count, precision))
    return failure{errc::shape_mismatch, "a " + std::string(name_of(precision)) + " tensor of "
                                           + std::to_string(packed.size()) + " floats cannot hold "
                                           + std::to_string(count) + " values (it takes "
                                           + std::to_string(packed_floats(count, precision)) + ")"};
  if (precision == wire_precision::fp32) {
    std::copy(packed.data(), packed.data() + count, out);
    return std::nullopt;
  }
  const float* slots = packed.data();
  for (size_t i = 0; i < count; i += 2) {
    uint32_t pair;
    std::memcpy(&pair, slots + i / 2, sizeof pair);
    out[i] = widen(static_cast<uint16_t>(pair & 0xffffu), precision);
    if (i + 1 < count)
      out[i + 1] = widen(static_cast<uint16_t>(pair >> 16), precision);
  }
  return std::nullopt;
}

size_t topk_count(size_t count, double fraction) noexcept {
  if (count == 0)
    return 0;
  auto k = static_cast<size_t>(std::ceil(fraction * static_cast<double>(count)));
  return std::clamp<size_t>(k, 1, count);
}

void pack_topk(const float* values, size_t count, double fraction, std::vector<float>& residual,
               tensor& out) {
  if (residual.size() != count)
    residual.assign(count, 0.0f);
  for (size_t i = 0; i < count; ++i)
    residual[i] += values[i];
  auto k = topk_count(count, fraction);
  // The k largest magnitudes (nth_element: linear), then in index order.
  thread_local std::vector<uint32_t> order;
  order.resize(count);
  for (size_t i = 0; i < count; ++i)
    order[i] = static_cast<uint32_t>(i);
  auto larger = [&](uint32_t a, uint32_t b) {
    auto x = std::fabs(residual[a]), y = std::fabs(residual[b]);
    return x > y || (x == y && a < b); // ties by index: the same input picks the same pairs
  };
  if (k < count)
    std::nth_element(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(k), order.end(),
                     larger);
  std::sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(k));
  out.resize({static_cast<int64_t>(2 * k)});
  float* pairs = out.data();
  for (size_t j = 0; j < k; ++j) {
    auto i = order[j];
    std::memcpy(pairs + 2 * j, &i, sizeof i);
    pairs[2 * j + 1] = residual[i];
    residual[i] = 0.0f; // sent: nothing of it is carried over
  }
}

maybe_failure unpack_topk(const tensor& packed, float* out, size_t count) {
  auto refuse = [&](const std::string& why) {
    return failure{errc::shape_mismatch, "a top-k tensor of " + std::to_string(packed.size())
                                           + " floats for " + std::to_string(count)
                                           + " values: " + why};
  };
  if (packed.size() % 2 != 0)
    return refuse("an odd size is no list of (index, value) pairs");
  auto pairs = packed.size() / 2;
  if (pairs > count)
    return refuse("more pairs than values");
  const float* data = packed.data();
  int64_t previous = -1;
  for (size_t j = 0; j < pairs; ++j) {
    uint32_t i;
    std::memcpy(&i, data + 2 * j, sizeof i);
    if (static_cast<int64_t>(i) <= previous || i >= count)
      return refuse("index " + std::to_string(i) + " of pair " + std::to_string(j)
                    + " is not increasing below the count");
    previous = i;
  }
  std::fill(out, out + count, 0.0f);
  for (size_t j = 0; j < pairs; ++j) {
    uint32_t i;
    std::memcpy(&i, data + 2 * j, sizeof i);
    out[i] = data[2 * j + 1];
  }
  return std::nullopt;
}

maybe_failure unpack_wire(const tensor& packed, int32_t code, float* out, size_t count) {
  if (code == topk_wire_code)
    return unpack_topk(packed, out, count);
  auto precision = wire_precision_of(code);
  if (!precision)
    return failure{errc::invalid_request, "wire format " + std::to_string(code)
                                            + " is unknown (it knows " + name_list<wire_precision>()
                                            + " and top-k pairs)"};
  return unpack(packed, *precision, out, count);
}

} // namespace troupe
