// Packing tensors at a reduced wire precision and widening them back.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include <Eigen/Core>

#include <boost/test/unit_test.hpp>

#include "tensor/core/wire_precision.hpp"

using namespace troupe;

namespace {

std::vector<float> round_trip(const std::vector<float>& values, wire_precision p) {
  tensor packed;
  pack(values.data(), values.size(), p, packed);
  BOOST_REQUIRE(packed.size() == packed_floats(values.size(), p));
  std::vector<float> out(values.size(), -7.0f);
  BOOST_REQUIRE(!unpack(packed, p, out.data(), out.size()));
  return out;
}

uint32_t bits(float x) {
  uint32_t b;
  std::memcpy(&b, &x, sizeof b);
  return b;
}

} // namespace

BOOST_AUTO_TEST_SUITE(wire_precision_codec)

BOOST_AUTO_TEST_CASE(names_and_codes) {
  BOOST_TEST(name_list<wire_precision>() == "fp32, bf16, fp16");
  BOOST_TEST((enum_from_name<wire_precision>("bf16") == wire_precision::bf16));
  BOOST_TEST((wire_precision_of(2) == wire_precision::fp16));
  BOOST_TEST(!wire_precision_of(3));
  BOOST_TEST(!wire_precision_of(-1));
}

BOOST_AUTO_TEST_CASE(sixteen_bit_formats_take_half_the_floats) {
  BOOST_TEST(packed_floats(0, wire_precision::bf16) == 0u);
  BOOST_TEST(packed_floats(1, wire_precision::bf16) == 1u);
  BOOST_TEST(packed_floats(7840, wire_precision::fp16) == 3920u);
  BOOST_TEST(packed_floats(7841, wire_precision::fp16) == 3921u);
  BOOST_TEST(packed_floats(7841, wire_precision::fp32) == 7841u);
}

BOOST_AUTO_TEST_CASE(fp32_is_bit_exact) {
  std::vector<float> v{1.0f / 3, -0.0f, std::numeric_limits<float>::denorm_min(), 1e30f};
  auto out = round_trip(v, wire_precision::fp32);
  for (size_t i = 0; i < v.size(); ++i)
    BOOST_TEST(bits(out[i]) == bits(v[i]));
}

// Values a 16-bit format holds come back exactly, odd counts included.
BOOST_AUTO_TEST_CASE(representable_values_come_back_exactly) {
  std::vector<float> v{0.0f, 1.0f, -2.5f, 0.15625f, 3.0f};
  for (auto p : {wire_precision::bf16, wire_precision::fp16}) {
    auto out = round_trip(v, p);
    for (size_t i = 0; i < v.size(); ++i)
      BOOST_TEST(out[i] == v[i]);
  }
}

// Round to nearest, ties to even, hand-computed: 1 + 2^-8 lies halfway
// between bf16's 1 and 1 + 2^-7 (ties to 1, whose last mantissa bit is
// even); 1 + 3 * 2^-8 lies halfway between 1 + 2^-7 and 1 + 2^-6 (ties up
// to the even one); just above halfway rounds up. fp16 keeps 10 mantissa
// bits: 1 + 2^-11 ties to 1, 1 + 2^-10 stays.
BOOST_AUTO_TEST_CASE(rounding_is_to_nearest_even) {
  auto bf = round_trip({1.0f + 0x1p-8f, 1.0f + 3 * 0x1p-8f, 1.0f + 0x1p-8f + 0x1p-12f, 1.0f / 3},
                       wire_precision::bf16);
  BOOST_TEST(bf[0] == 1.0f);
  BOOST_TEST(bf[1] == 1.0f + 0x1p-6f);
  BOOST_TEST(bf[2] == 1.0f + 0x1p-7f);
  BOOST_TEST(std::fabs(bf[3] - 1.0f / 3) <= 0x1p-9f);
  auto h = round_trip({1.0f + 0x1p-11f, 1.0f + 0x1p-10f, 1.0f / 3}, wire_precision::fp16);
  BOOST_TEST(h[0] == 1.0f);
  BOOST_TEST(h[1] == 1.0f + 0x1p-10f);
  BOOST_TEST(std::fabs(h[2] - 1.0f / 3) <= 0x1p-12f);
}

// bf16 keeps fp32's range; fp16 saturates finite values at its largest
// instead of turning them into infinities; NaN and infinities pass as such.
BOOST_AUTO_TEST_CASE(range_saturation_and_non_finite_values) {
  auto inf = std::numeric_limits<float>::infinity();
  auto nan = std::numeric_limits<float>::quiet_NaN();
  auto bf = round_trip({1e30f, -1e-30f, inf, nan}, wire_precision::bf16);
  BOOST_TEST(std::fabs(bf[0] / 1e30f - 1) < 0.01);
  BOOST_TEST(std::fabs(bf[1] / -1e-30f - 1) < 0.01);
  BOOST_TEST(bf[2] == inf);
  BOOST_TEST(std::isnan(bf[3]));
  auto h = round_trip({1e6f, -1e6f, 65504.0f, inf, nan, 1e-9f}, wire_precision::fp16);
  BOOST_TEST(h[0] == 65504.0f);
  BOOST_TEST(h[1] == -65504.0f);
  BOOST_TEST(h[2] == 65504.0f);
  BOOST_TEST(h[3] == inf);
  BOOST_TEST(std::isnan(h[4]));
  BOOST_TEST(h[5] == 0.0f); // below fp16's smallest subnormal
}

// The eight-at-a-time path (AVX2 + F16C) and the scalar tail against
// Eigen's own conversions, value by value, over magnitudes from subnormal
// to beyond fp16's range, ties, infinities and NaN; 1003 values, so the
// tail runs too.
BOOST_AUTO_TEST_CASE(every_value_converts_as_eigen_does) {
  std::mt19937 rng(29);
  std::uniform_real_distribution<float> mantissa(1.0f, 2.0f);
  std::uniform_int_distribution<int> exponent(-30, 20);
  std::vector<float> v(1003);
  for (auto& x : v)
    x = std::ldexp(mantissa(rng), exponent(rng)) * (rng() % 2 ? 1.0f : -1.0f);
  auto inf = std::numeric_limits<float>::infinity();
  float special[] = {0.0f,
                     -0.0f,
                     inf,
                     -inf,
                     std::nanf(""),
                     1e6f,
                     -1e6f,
                     65504.0f,
                     65520.0f,
                     1.0f + 0x1p-8f,
                     1.0f + 3 * 0x1p-8f,
                     1.0f + 0x1p-11f,
                     6e-8f,
                     1e-40f,
                     std::numeric_limits<float>::max()};
  for (size_t i = 0; i < std::size(special); ++i)
    v[i * 7] = special[i];
  for (auto p : {wire_precision::bf16, wire_precision::fp16}) {
    auto out = round_trip(v, p);
    for (size_t i = 0; i < v.size(); ++i) {
      float expected;
      if (p == wire_precision::bf16) {
        expected = static_cast<float>(Eigen::bfloat16(v[i]));
      } else {
        float x = std::isfinite(v[i]) ? std::clamp(v[i], -65504.0f, 65504.0f) : v[i];
        expected = static_cast<float>(Eigen::half(x));
      }
      if (std::isnan(expected))
        BOOST_TEST(std::isnan(out[i]));
      else
        BOOST_TEST(bits(out[i]) == bits(expected), name_of(p) << " value " << i << ": " << v[i]);
    }
  }
}

// An odd count leaves the last float's high half zero: the bytes on the
// wire depend on the values only, never on what the storage held before.
BOOST_AUTO_TEST_CASE(packing_reuses_storage_and_zeroes_the_spare_half) {
  tensor packed({5}, std::nanf("1"));
  std::vector<float> v{1.0f, 2.0f, 3.0f};
  pack(v.data(), v.size(), wire_precision::bf16, packed);
  BOOST_TEST(packed.size() == 2u);
  BOOST_TEST((packed.shape() == shape_t{2}));
  BOOST_TEST((bits(packed[1]) >> 16) == 0u);
}

BOOST_AUTO_TEST_CASE(a_packed_size_that_does_not_fit_is_refused) {
  std::vector<float> v(10, 1.0f);
  tensor packed;
  pack(v.data(), v.size(), wire_precision::bf16, packed);
  std::vector<float> out(12, -1.0f);
  auto err = unpack(packed, wire_precision::bf16, out.data(), 12);
  BOOST_REQUIRE(err);
  BOOST_TEST((err->code == errc::shape_mismatch));
  BOOST_TEST(err->message.find("5 floats cannot hold 12 values") != std::string::npos,
             err->message);
  BOOST_TEST(out[0] == -1.0f);                                      // nothing written
  BOOST_TEST(!unpack(packed, wire_precision::bf16, out.data(), 9)); // 9 values take 5 floats too
}

// Top-k with error feedback, by hand: k = ceil(0.4 * 5) = 2 of
// [0.1, -3, 0.2, 2, -0.5] are indices 1 and 3; the rest waits in the
// residual. The next push of [0.1, 0, 0.2, 0, -0.1] adds it: 0.2, 0.4 and
// -0.6 at 0, 2 and 4 (the two largest: 4 and 2, sent in index order).
BOOST_AUTO_TEST_CASE(topk_sends_the_largest_and_carries_the_rest) {
  BOOST_TEST(topk_count(5, 0.4) == 2u);
  BOOST_TEST(topk_count(5, 0.01) == 1u);
  BOOST_TEST(topk_count(5, 1.0) == 5u);
  BOOST_TEST(topk_count(0, 0.5) == 0u);
  std::vector<float> residual;
  tensor packed;
  std::vector<float> first{0.1f, -3.0f, 0.2f, 2.0f, -0.5f};
  pack_topk(first.data(), 5, 0.4, residual, packed);
  BOOST_REQUIRE(packed.size() == 4u);
  std::vector<float> out(5, 9.0f);
  BOOST_REQUIRE(!unpack_topk(packed, out.data(), 5));
  BOOST_TEST(out == (std::vector<float>{0, -3.0f, 0, 2.0f, 0}), boost::test_tools::per_element());
  BOOST_TEST(residual == (std::vector<float>{0.1f, 0, 0.2f, 0, -0.5f}),
             boost::test_tools::per_element());
  std::vector<float> second{0.1f, 0.0f, 0.2f, 0.0f, -0.1f};
  pack_topk(second.data(), 5, 0.4, residual, packed);
  BOOST_REQUIRE(!unpack_wire(packed, topk_wire_code, out.data(), 5));
  BOOST_TEST(out == (std::vector<float>{0, 0, 0.4f, 0, -0.6f}), boost::test_tools::per_element());
  BOOST_TEST(residual == (std::vector<float>{0.2f, 0, 0, 0, 0}), boost::test_tools::per_element());
}

// A peer's top-k tensor is checked before anything is written.
BOOST_AUTO_TEST_CASE(hostile_topk_pairs_are_refused) {
  auto pairs = [](std::vector<uint32_t> indices) {
    tensor t({static_cast<int64_t>(2 * indices.size())});
    for (size_t j = 0; j < indices.size(); ++j) {
      std::memcpy(t.data() + 2 * j, &indices[j], sizeof(uint32_t));
      t[2 * j + 1] = 1.0f;
    }
    return t;
  };
  std::vector<float> out(4, 7.0f);
  BOOST_TEST(!unpack_topk(pairs({0, 3}), out.data(), 4));
  out.assign(4, 7.0f);
  for (auto& bad :
       {pairs({1, 1}), pairs({2, 1}), pairs({4}), pairs({0, 1, 2, 3, 3}), tensor({3})}) {
    auto err = unpack_topk(bad, out.data(), 4);
    BOOST_REQUIRE(err);
    BOOST_TEST((err->code == errc::shape_mismatch));
    BOOST_TEST(out[0] == 7.0f); // nothing written
  }
  auto unknown = unpack_wire(pairs({0}), 4, out.data(), 4);
  BOOST_REQUIRE(unknown);
  BOOST_TEST((unknown->code == errc::invalid_request));
}

BOOST_AUTO_TEST_SUITE_END()
