// The tensor wire format refuses what a message cannot hold before it
// allocates: a count above the limit, a count the message's bytes cannot
// cover, a shape that does not match it.
#include <fstream>
#include <limits>
#include <string>

#include <boost/test/unit_test.hpp>
#include <caf/binary_deserializer.hpp>
#include <caf/binary_serializer.hpp>

#include "actors/protocol/protocol.hpp"

using namespace troupe;

namespace {

// The peak resident memory of this process so far (VmHWM), in MiB.
double peak_resident_mib() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);)
    if (line.rfind("VmHWM:", 0) == 0)
      return std::stod(line.substr(6)) / 1024;
  return 0;
}

// A tensor's wire form with any shape and element count, and `floats` floats.
std::vector<char> wire_form(shape_t shape, size_t count, size_t floats) {
  std::vector<char> buf;
  caf::binary_serializer sink{nullptr, buf};
  BOOST_REQUIRE(!sink(shape));
  BOOST_REQUIRE(!sink.begin_sequence(count));
  std::vector<float> data(floats, 1.0f);
  if (floats > 0)
    BOOST_REQUIRE(!sink.apply_raw(floats * sizeof(float), data.data()));
  BOOST_REQUIRE(!sink.end_sequence());
  return buf;
}

caf::error read(const std::vector<char>& buf, tensor& out) {
  caf::binary_deserializer source{nullptr, buf};
  return inspect(source, out);
}

} // namespace

BOOST_AUTO_TEST_SUITE(wire_bounds)

BOOST_AUTO_TEST_CASE(a_claimed_count_without_its_data_allocates_nothing) {
  set_max_wire_elements(size_t{1} << 30);
  auto before = peak_resident_mib();
  tensor t;
  // 2^28 floats (1 GiB) claimed, none sent: refused before any allocation.
  auto err = read(wire_form({int64_t{1} << 28}, size_t{1} << 28, 0), t);
  BOOST_REQUIRE(err);
  BOOST_TEST(caf::to_string(err).find("holds 0 more bytes") != std::string::npos,
             caf::to_string(err));
  BOOST_TEST(peak_resident_mib() - before < 64.0);
  set_max_wire_elements(size_t{1} << 28);
}

BOOST_AUTO_TEST_CASE(counts_above_the_limit_are_refused) {
  set_max_wire_elements(100);
  tensor t;
  auto err = read(wire_form({101}, 101, 101), t);
  BOOST_REQUIRE(err);
  BOOST_TEST(caf::to_string(err).find("exceeds the limit of 100") != std::string::npos);
  BOOST_TEST(!static_cast<bool>(read(wire_form({10, 10}, 100, 100), t)));
  BOOST_TEST(t.size() == 100u);
  set_max_wire_elements(size_t{1} << 28);
}

BOOST_AUTO_TEST_CASE(shapes_must_match_their_count) {
  tensor t;
  BOOST_TEST(static_cast<bool>(read(wire_form({3, 4}, 11, 11), t))); // 12 != 11
  BOOST_TEST(static_cast<bool>(read(wire_form({-1, -4}, 4, 4), t))); // negative
  int64_t huge = std::numeric_limits<int64_t>::max() / 2;
  BOOST_TEST(
    static_cast<bool>(read(wire_form({huge, huge, 4}, 4, 4), t))); // a product that would overflow
  BOOST_TEST(static_cast<bool>(read(wire_form(shape_t(9, 1), 1, 1), t))); // rank 9
  BOOST_TEST(
    static_cast<bool>(read(wire_form({huge, 0}, 0, 0), t)));        // no dimension beyond the limit
  BOOST_TEST(!static_cast<bool>(read(wire_form({7, 0}, 0, 0), t))); // empty is fine
  BOOST_TEST(t.size() == 0u);
  BOOST_TEST(!static_cast<bool>(read(wire_form({}, 1, 1), t))); // a scalar
  BOOST_TEST(t.size() == 1u);
}

// Found by the tensor_wire fuzz target: an empty tensor whose other
// dimensions overflow 64 bits when multiplied (num_elements was undefined
// behaviour, and a throw inside CAF's deserialiser ends the process).
BOOST_AUTO_TEST_CASE(an_empty_shape_with_huge_dimensions_is_refused) {
  tensor t;
  auto err = read(wire_form({int64_t{1} << 40, int64_t{1} << 40, 0}, 0, 0), t);
  BOOST_REQUIRE(err);
  BOOST_TEST(caf::to_string(err).find("exceeds the limit") != std::string::npos,
             caf::to_string(err));
  BOOST_TEST(!read(wire_form({0, 5}, 0, 0), t)); // an ordinary empty tensor
  BOOST_TEST(t.shape() == (shape_t{0, 5}));
  BOOST_CHECK_THROW(num_elements({int64_t{1} << 40, int64_t{1} << 40}), shape_error);
}

// A hostile peer's request for 10^9 keys: its claimed count is refused
// before anything is allocated, and so is one above the wire's limit.
BOOST_AUTO_TEST_CASE(a_claim_of_a_billion_keys_allocates_nothing) {
  auto before = peak_resident_mib();
  std::vector<char> buf;
  caf::binary_serializer sink{nullptr, buf};
  size_t billion = 1000000000;
  int32_t table = 0;
  BOOST_REQUIRE(!sink(table));
  BOOST_REQUIRE(!sink.begin_sequence(billion));
  table_keys keys;
  caf::binary_deserializer source{nullptr, buf};
  auto err = inspect(source, keys);
  BOOST_REQUIRE(err);
  BOOST_TEST(caf::to_string(err).find("exceeds the limit") != std::string::npos,
             caf::to_string(err));
  BOOST_TEST(peak_resident_mib() - before < 64.0);
  buf.clear();
  caf::binary_serializer small{nullptr, buf};
  size_t thousand = 1000;
  BOOST_REQUIRE(!small(table));
  BOOST_REQUIRE(!small.begin_sequence(thousand));
  caf::binary_deserializer short_source{nullptr, buf};
  err = inspect(short_source, keys);
  BOOST_REQUIRE(err);
  BOOST_TEST(caf::to_string(err).find("holds 0 more bytes") != std::string::npos);
  // A well-formed push's rows round-trip exactly.
  step_rows sent{2, {1, -2, int64_t{1} << 60}, {3, 1, 7}, tensor({3, 1}, 0.5f)};
  buf.clear();
  caf::binary_serializer out{nullptr, buf};
  BOOST_REQUIRE(!inspect(out, sent));
  caf::binary_deserializer in{nullptr, buf};
  step_rows got;
  BOOST_REQUIRE(!inspect(in, got));
  BOOST_TEST(got.table == 2);
  BOOST_TEST(got.keys == sent.keys);
  BOOST_TEST(got.counts == sent.counts);
  BOOST_TEST(got.grads.bit_equal(sent.grads));
}

// A request naming 10^9 tables is refused before any is allocated.
BOOST_AUTO_TEST_CASE(a_claim_of_a_billion_tables_allocates_nothing) {
  std::vector<char> buf;
  caf::binary_serializer sink{nullptr, buf};
  uint64_t run = 1;
  std::vector<std::string> names;
  int32_t precision = 0;
  size_t billion = 1000000000;
  BOOST_REQUIRE(!sink(run, names, precision));
  BOOST_REQUIRE(!sink.begin_sequence(billion));
  pull_request request;
  caf::binary_deserializer source{nullptr, buf};
  auto err = inspect(source, request);
  BOOST_REQUIRE(err);
  BOOST_TEST(caf::to_string(err).find("tables exceeds the limit") != std::string::npos,
             caf::to_string(err));
}

BOOST_AUTO_TEST_SUITE_END()
