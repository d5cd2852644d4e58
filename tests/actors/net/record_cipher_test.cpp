// The records a bulk connection uses after its TLS handshake: what one end
// seals, the other opens bit-exact, in place or straight into a tensor; a
// record altered anywhere, replayed, reordered or reflected back to its
// sender is refused; keys change at the same record on both ends.
#include <numeric>
#include <string>
#include <vector>

#include <boost/test/unit_test.hpp>

#include "actors/net/record_cipher.hpp"

using namespace troupe;
using namespace troupe::bulk;

namespace {

// Deterministic stand-ins for the exporter: one key and IV per direction
// and generation, and a log of the generations asked for.
struct fake_exporter {
  std::vector<uint64_t> asked;
  record_cipher::key_source direction(int which) {
    return [this, which](uint64_t generation, unsigned char* key_and_iv) {
      asked.push_back(generation);
      for (size_t i = 0; i < record_cipher::key_bytes + record_cipher::iv_bytes; ++i)
        key_and_iv[i] = static_cast<unsigned char>(generation * 31 + i + which * 101);
      return true;
    };
  }
};

std::vector<char> bytes(size_t n, int seed) {
  std::vector<char> out(n);
  for (size_t i = 0; i < n; ++i)
    out[i] = static_cast<char>((i * 131 + seed) & 0xff);
  return out;
}

// One record holding `chunks` (sealed into the end of `wire`); its offset.
size_t seal(record_cipher& sealer, const std::vector<std::vector<char>>& chunks,
            wire_buffer& wire) {
  std::vector<iovec> io;
  size_t payload = 0;
  for (auto& c : chunks) {
    io.push_back({const_cast<char*>(c.data()), c.size()});
    payload += c.size();
  }
  size_t at = wire.size();
  maybe_failure error;
  BOOST_REQUIRE_MESSAGE(sealer.seal(io.data(), io.size(), payload, wire, error),
                        (error ? error->message : ""));
  BOOST_REQUIRE_EQUAL(wire.size() - at,
                      record_cipher::header_bytes + payload + record_cipher::tag_bytes);
  return at;
}

size_t payload_at(const wire_buffer& wire, size_t at) {
  maybe_failure error;
  auto n = record_cipher::payload_length(wire.data() + at, error);
  BOOST_REQUIRE(n);
  return *n;
}

} // namespace

BOOST_AUTO_TEST_SUITE(record_cipher_suite)

BOOST_AUTO_TEST_CASE(chunks_sealed_as_one_record_open_bit_exact_in_place_and_into_a_destination) {
  fake_exporter keys;
  record_cipher sealer{true, keys.direction(0)}, opener{false, keys.direction(0)};
  std::vector<std::vector<char>> chunks{bytes(40, 1), bytes(7850 * 4, 2), bytes(3, 3)};
  wire_buffer wire;
  size_t first = seal(sealer, chunks, wire);
  size_t second = seal(sealer, {bytes(100000, 4)}, wire);
  std::vector<char> joined;
  for (auto& c : chunks)
    joined.insert(joined.end(), c.begin(), c.end());
  BOOST_TEST(std::string(wire.data() + first + 4, 40) != std::string(joined.data(), 40),
             "the payload travels encrypted");
  maybe_failure error;
  size_t n = payload_at(wire, first);
  BOOST_REQUIRE_EQUAL(n, joined.size());
  BOOST_REQUIRE(opener.open(wire.data() + first, n, nullptr, error));
  BOOST_TEST(std::string(wire.data() + first + 4, n) == std::string(joined.begin(), joined.end()));
  std::vector<char> into(payload_at(wire, second));
  BOOST_REQUIRE(opener.open(wire.data() + second, into.size(), into.data(), error));
  BOOST_TEST((into == bytes(100000, 4)));
  BOOST_TEST((keys.asked == std::vector<uint64_t>{0, 0}), "one key each end, taken once");
}

BOOST_AUTO_TEST_CASE(an_altered_replayed_reordered_or_reflected_record_is_refused) {
  auto opens = [](wire_buffer wire, size_t skip_records, record_cipher::key_source key) {
    record_cipher opener{false, std::move(key)};
    size_t at = 0;
    maybe_failure error;
    for (size_t i = 0; i <= skip_records; ++i) {
      size_t n = payload_at(wire, at);
      if (!opener.open(wire.data() + at, n, nullptr, error)) {
        BOOST_TEST(error->message.find("integrity") != std::string::npos, error->message);
        return false;
      }
      at += record_cipher::header_bytes + n + record_cipher::tag_bytes;
    }
    return true;
  };
  fake_exporter keys;
  record_cipher sealer{true, keys.direction(0)};
  wire_buffer wire;
  seal(sealer, {bytes(5000, 1)}, wire);
  size_t record = wire.size();
  seal(sealer, {bytes(5000, 2)}, wire);
  BOOST_TEST(opens(wire, 1, keys.direction(0)), "both records, in order");
  for (size_t at : {size_t{3}, size_t{4}, size_t{2000}, record - 1}) { // length, body, tag
    auto altered = wire;
    altered[at] ^= 1;
    BOOST_TEST(!opens(altered, 1, keys.direction(0)), "a bit flipped at " << at);
  }
  wire_buffer replayed{wire.begin(), wire.begin() + record};
  replayed.insert(replayed.end(), wire.begin(), wire.begin() + record);
  BOOST_TEST(!opens(replayed, 1, keys.direction(0)), "the first record again");
  wire_buffer swapped{wire.begin() + record, wire.end()};
  swapped.insert(swapped.end(), wire.begin(), wire.begin() + record);
  BOOST_TEST(!opens(swapped, 0, keys.direction(0)), "the second record first");
  BOOST_TEST(!opens(wire, 0, keys.direction(1)), "sent back to its sender (the other key)");
}

BOOST_AUTO_TEST_CASE(keys_change_at_the_same_record_on_both_ends) {
  // Limits this small make a new generation every few records; ends whose
  // limits differ part at the first change.
  record_limits small{3, 20000};
  fake_exporter sending, receiving, strict;
  record_cipher sealer{true, sending.direction(0), small};
  record_cipher opener{false, receiving.direction(0), small};
  record_cipher other{false, strict.direction(0), record_limits{4, 1000000}};
  maybe_failure error;
  bool other_failed = false;
  for (int i = 0; i < 12; ++i) {
    wire_buffer wire;
    auto sent = bytes(1000 + 3000 * (i % 4), i);
    seal(sealer, {sent}, wire);
    auto copy = wire;
    BOOST_REQUIRE_MESSAGE(opener.open(wire.data(), sent.size(), nullptr, error), "record " << i);
    BOOST_TEST(std::string(wire.data() + 4, sent.size()) == std::string(sent.begin(), sent.end()));
    if (!other_failed)
      other_failed = !other.open(copy.data(), sent.size(), nullptr, error);
  }
  BOOST_TEST(sending.asked.size() > 3, "generations taken: " << sending.asked.size());
  BOOST_TEST((sending.asked == receiving.asked));
  std::vector<uint64_t> in_order(sending.asked.size());
  std::iota(in_order.begin(), in_order.end(), 0);
  BOOST_TEST((sending.asked == in_order));
  BOOST_TEST(other_failed, "an end that changes keys elsewhere cannot follow");
}

BOOST_AUTO_TEST_CASE(a_header_out_of_range_or_a_tls_record_is_named) {
  maybe_failure error;
  auto header = [](std::initializer_list<unsigned char> b) {
    return std::string(reinterpret_cast<const char*>(std::data(b)), b.size());
  };
  BOOST_TEST(!record_cipher::payload_length(header({0, 0, 0, 0}).data(), error));
  BOOST_TEST(error->message.find("announces 0 bytes") != std::string::npos, error->message);
  BOOST_TEST(!record_cipher::payload_length(header({0, 4, 0, 1}).data(), error));
  BOOST_TEST(error->message.find("announces 262145 bytes") != std::string::npos);
  BOOST_TEST(!record_cipher::payload_length(header({0x17, 3, 3, 0}).data(), error));
  BOOST_TEST(error->message.find("TLS record") != std::string::npos, error->message);
  BOOST_TEST(*record_cipher::payload_length(header({0, 4, 0, 0}).data(), error)
             == record_cipher::max_payload);
  record_cipher no_keys{true, [](uint64_t, unsigned char*) { return false; }};
  wire_buffer wire;
  auto one = bytes(10, 0);
  iovec io{one.data(), one.size()};
  BOOST_TEST(!no_keys.seal(&io, 1, 10, wire, error));
  BOOST_TEST(error->message.find("no record key") != std::string::npos, error->message);
  BOOST_TEST(wire.empty());
  fake_exporter keys;
  record_cipher sealer{true, keys.direction(0)};
  BOOST_TEST(!sealer.seal(&io, 1, 0, wire, error), "an empty record");
  BOOST_TEST(wire.empty());
}

BOOST_AUTO_TEST_SUITE_END()
