#include "tensor/core/wire_precision.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include <Eigen/Core>
#if defined(__AVX2__) && defined(__F16C__)
#include <immintrin.h>
#endif

namespace troupe {

namespace {

// fp16 saturates finite values rather than let a large gradient turn into
// an infinity the shard would refuse.
constexpr float largest_half = 65504.0f;

// bf16 by its bits: round to nearest even, NaN kept a (quiet) NaN.
uint16_t bf16_of(float value) noexcept {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  if ((bits & 0x7fffffffu) > 0x7f800000u)
    return static_cast<uint16_t>((bits >> 16) | 0x40u);
  return static_cast<uint16_t>((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16);
}

uint16_t fp16_of(float value) noexcept {
  if (std::isfinite(value))
    value = std::clamp(value, -largest_half, largest_half);
  return Eigen::numext::bit_cast<uint16_t>(Eigen::half(value));
}

float of_bf16(uint16_t half) noexcept {
  uint32_t bits = uint32_t{half} << 16;
  float value;
  std::memcpy(&value, &bits, sizeof value);
  return value;
}

float of_fp16(uint16_t half) noexcept {
  return static_cast<float>(Eigen::numext::bit_cast<Eigen::half>(half));
}

// The halves, in order, at `out` (two bytes each, host-endian): the packed
// tensor's bytes, written through memcpy and intrinsics (no uint16_t
// pointer into float storage: strict aliasing). Eight at a time where the
// target has AVX2 and F16C (TROUPE_CPU_ARCH, x86-64-v3 by default), the
// same arithmetic as the scalar functions above.
void narrow(const float* in, size_t count, wire_precision precision, unsigned char* out) noexcept {
  size_t i = 0;
#if defined(__AVX2__) && defined(__F16C__)
  if (precision == wire_precision::bf16) {
    const __m256i one = _mm256_set1_epi32(1), bias = _mm256_set1_epi32(0x7fff);
    const __m256i magnitude = _mm256_set1_epi32(0x7fffffff),
                  infinity = _mm256_set1_epi32(0x7f800000);
    const __m256i quiet = _mm256_set1_epi32(0x40);
    for (; i + 8 <= count; i += 8) {
      __m256i bits = _mm256_castps_si256(_mm256_loadu_ps(in + i));
      __m256i high = _mm256_srli_epi32(bits, 16);
      __m256i rounded = _mm256_srli_epi32(
        _mm256_add_epi32(bits, _mm256_add_epi32(bias, _mm256_and_si256(high, one))), 16);
      __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(bits, magnitude), infinity);
      __m256i halves = _mm256_blendv_epi8(rounded, _mm256_or_si256(high, quiet), nan);
      // 8 x 32 -> 8 x 16: packus works per 128-bit lane; the permute joins them.
      __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(halves, halves), 0x08);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(out + 2 * i), _mm256_castsi256_si128(packed));
    }
  } else {
    const __m256 high = _mm256_set1_ps(largest_half), low = _mm256_set1_ps(-largest_half);
    const __m256 sign = _mm256_set1_ps(-0.0f);
    const __m256 infinity = _mm256_set1_ps(std::numeric_limits<float>::infinity());
    for (; i + 8 <= count; i += 8) {
      __m256 x = _mm256_loadu_ps(in + i);
      // min/max return their second operand for a NaN: NaN stays NaN;
      // infinities are kept as they are, finite values saturate.
      __m256 clamped = _mm256_max_ps(low, _mm256_min_ps(high, x));
      __m256 infinite = _mm256_cmp_ps(_mm256_andnot_ps(sign, x), infinity, _CMP_EQ_OQ);
      __m128i halves = _mm256_cvtps_ph(_mm256_blendv_ps(clamped, x, infinite),
                                       _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(out + 2 * i), halves);
    }
  }
#endif
  for (; i < count; ++i) {
    uint16_t half = precision == wire_precision::bf16 ? bf16_of(in[i]) : fp16_of(in[i]);
    std::memcpy(out + 2 * i, &half, sizeof half);
  }
}

void widen(const unsigned char* in, size_t count, wire_precision precision, float* out) noexcept {
  size_t i = 0;
#if defined(__AVX2__) && defined(__F16C__)
  for (; i + 8 <= count; i += 8) {
    __m128i halves = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + 2 * i));
    __m256 values = precision == wire_precision::bf16
                      ? _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(halves), 16))
                      : _mm256_cvtph_ps(halves);
    _mm256_storeu_ps(out + i, values);
  }
#endif
  for (; i < count; ++i) {
    uint16_t half;
    std::memcpy(&half, in + 2 * i, sizeof half);
    out[i] = precision == wire_precision::bf16 ? of_bf16(half) : of_fp16(half);
  }
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
  // Two halves per float, the first in the low bits (host-endian x86-64:
  // the halves in order); an odd count's last float keeps its high half zero.
  auto* bytes = reinterpret_cast<unsigned char*>(out.data());
  narrow(values, count, precision, bytes);
  if (count % 2 == 1)
    std::memset(bytes + 2 * count, 0, 2);
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
  widen(reinterpret_cast<const unsigned char*>(packed.data()), count, precision, out);
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
