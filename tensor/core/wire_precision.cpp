#include "tensor/core/wire_precision.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>

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

} // namespace troupe
