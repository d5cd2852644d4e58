// The bulk path's framing without a shard: headers and shape lists are
// checked against the limits before anything is allocated, and frames
// written and read over a socket pair arrive bit-exact (NaN payloads too),
// into the storage lent to the reader.
#include <sys/socket.h>

#include <cstring>
#include <limits>

#include <boost/test/unit_test.hpp>

#include "actors/net/socket.hpp"
#include "tests/support/frame_turns.hpp"

using namespace troupe;
using namespace troupe::bulk;
using troupe::testing::interleave;

namespace {

struct socket_pair {
  channel a, b;
  socket_pair() {
    int fds[2];
    BOOST_REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM, 0, fds) == 0);
    a = channel{socket_fd{fds[0]}};
    b = channel{socket_fd{fds[1]}};
    prepare(a.fd());
    prepare(b.fd());
  }
};

deadline soon() {
  return std::chrono::steady_clock::now() + std::chrono::seconds(5);
}

tensor from_bits(std::vector<uint32_t> bits, shape_t shape) {
  std::vector<float> values(bits.size());
  std::memcpy(values.data(), bits.data(), bits.size() * 4);
  return tensor(std::move(shape), std::move(values));
}

// Raw bytes on the socket, then what a reader makes of them.
maybe_failure read_raw(const std::string& bytes, frame_limits limits = {}) {
  socket_pair p;
  BOOST_REQUIRE(::send(p.a.fd(), bytes.data(), bytes.size(), 0)
                == static_cast<ssize_t>(bytes.size()));
  p.a = channel{}; // what is not there will not come
  frame_reader reader{limits};
  return receive_frame(p.b, reader, soon());
}

std::string header_bytes(frame_header head) {
  return std::string(reinterpret_cast<const char*>(&head), sizeof(head));
}

bool mentions(const maybe_failure& f, const std::string& what) {
  return f && f->message.find(what) != std::string::npos;
}

} // namespace

BOOST_AUTO_TEST_SUITE(bulk_frame)

BOOST_AUTO_TEST_CASE(headers_are_checked_before_anything_else) {
  frame_header good;
  good.kind = static_cast<uint16_t>(frame_kind::pull);
  BOOST_TEST(!check_header(good, {}));
  auto bad = good;
  bad.magic = 0x50545448; // "HTTP"
  BOOST_TEST(mentions(check_header(bad, {}), "magic"));
  bad = good;
  bad.version = frame_version + 1;
  BOOST_TEST((check_header(bad, {})->code == errc::protocol_mismatch));
  bad = good;
  bad.kind = 99;
  BOOST_TEST(mentions(check_header(bad, {}), "unknown kind"));
  bad = good;
  bad.reserved = 3; // found by the fuzzer: accepted, then written back as 0
  BOOST_TEST(mentions(check_header(bad, {}), "reserved"));
  bad = good;
  bad.meta_bytes = max_meta_bytes + 1;
  BOOST_TEST(mentions(check_header(bad, {}), "meta section"));
  bad = good;
  bad.data_bytes = 4001;
  BOOST_TEST(mentions(check_header(bad, {1000, 4000}), "exceeds the limit"));
  bad.data_bytes = 3998;
  BOOST_TEST(mentions(check_header(bad, {1000, 4000}), "whole number of floats"));
}

BOOST_AUTO_TEST_CASE(shape_lists_that_lie_are_refused) {
  frame_limits limits{100, 1 << 20};
  auto shapes_of = [&](const std::string& meta, uint64_t data_bytes) {
    std::vector<shape_t> out;
    return meta_reader{meta}.shapes(out, data_bytes, limits);
  };
  auto shape_meta = [](uint32_t count, std::vector<std::vector<int64_t>> shapes) {
    std::string out(reinterpret_cast<const char*>(&count), 4);
    for (auto& s : shapes) {
      auto rank = static_cast<uint32_t>(s.size());
      out.append(reinterpret_cast<const char*>(&rank), 4);
      out.append(reinterpret_cast<const char*>(s.data()), s.size() * 8);
    }
    return out;
  };
  BOOST_TEST(!shapes_of(shape_meta(2, {{10, 10}, {}}), 404));
  BOOST_TEST(mentions(shapes_of(shape_meta(2, {{10, 10}, {}}), 400), "announces"));
  BOOST_TEST(mentions(shapes_of(shape_meta(1, {{11, 10}}), 440), "exceeds the limit of 100"));
  BOOST_TEST(mentions(shapes_of(shape_meta(1, {{-1, 4}}), 0), "negative"));
  BOOST_TEST(mentions(shapes_of(shape_meta(1, {{1, 1, 1, 1, 1, 1, 1, 1, 1}}), 4), "rank"));
  // A product that would overflow 64 bits is refused, not wrapped.
  BOOST_TEST(mentions(shapes_of(shape_meta(1, {{int64_t{1} << 62, 8}}), 0), "exceeds"));
  // Found by the fuzzer: a zero dimension made the rest unchecked, and the
  // reader's shape count threw on them (a stranger's hello could end a ps).
  BOOST_TEST(mentions(shapes_of(shape_meta(1, {{0, int64_t{1} << 62, 8}}), 0), "exceeds"));
  BOOST_TEST(!shapes_of(shape_meta(1, {{0, 100}}), 0));
  // More tensors than the bytes could describe, and a shape cut short.
  BOOST_TEST(mentions(shapes_of(shape_meta(1'000'000, {}), 0), "more than it can hold"));
  auto cut = shape_meta(1, {{10, 10}});
  cut.resize(cut.size() - 3);
  BOOST_TEST(mentions(shapes_of(cut, 400), "cut short"));
}

BOOST_AUTO_TEST_CASE(meta_fields_past_the_end_read_as_malformed) {
  meta_writer w;
  w.u64(7).names({"a", "bc"});
  meta_reader r{w.bytes()};
  std::vector<shape_t> shapes;
  BOOST_TEST(!r.shapes(shapes, 0, {}));
  BOOST_TEST(r.u64() == 7u);
  BOOST_TEST((r.names() == std::vector<std::string>{"a", "bc"}));
  BOOST_TEST(r.at_end());
  BOOST_TEST(r.i64() == 0);
  BOOST_TEST(!r.ok());
  // A name count beyond what the bytes hold is refused before reserving.
  std::string lie(4, '\0');
  uint32_t huge = 0xffffffffu;
  lie += std::string(reinterpret_cast<const char*>(&huge), 4);
  meta_reader liar{lie};
  liar.shapes(shapes, 0, {});
  BOOST_TEST(liar.names().empty());
  BOOST_TEST(!liar.ok());
}

BOOST_AUTO_TEST_CASE(frames_round_trip_bit_exact_into_lent_storage) {
  std::vector<tensor> sent{
    from_bits({0x7fc00000u, 0x7fa12345u, 0xffc00001u}, {3}), // NaNs with payloads
    tensor({2}, std::vector<float>{std::numeric_limits<float>::infinity(),
                                   -std::numeric_limits<float>::infinity()}),
    tensor({3}, std::vector<float>{1e-40f, std::numeric_limits<float>::denorm_min(), -0.0f}),
    tensor({0, 5}),
    tensor(shape_t{}, std::vector<float>{3.5f}),
    tensor({300, 1000}, 0.25f), // beyond a socket buffer: sent and read in turns
  };
  socket_pair p;
  meta_writer meta{&sent};
  meta.u64(42).i32(-3).text("worker:1");
  frame_reader reader{{}};
  std::vector<tensor> storage(sent.size());
  storage[5] = tensor({400, 1000});
  const float* lent = storage[5].data();
  reader.lend(std::move(storage));
  for (int round = 0; round < 2; ++round) {
    frame_writer writer{frame_kind::push, 9u + static_cast<uint64_t>(round), meta, &sent};
    maybe_failure error;
    bool received = interleave(writer, reader, p.a, p.b, error, soon());
    BOOST_REQUIRE_MESSAGE(received, (error ? error->message : "no frame"));
    BOOST_TEST(reader.header().request == 9u + static_cast<uint64_t>(round));
    auto fields = reader.fields();
    BOOST_TEST(fields.u64() == 42u);
    BOOST_TEST(fields.i32() == -3);
    BOOST_TEST(fields.text() == "worker:1");
    BOOST_TEST(fields.at_end());
    auto& got = reader.tensors();
    BOOST_REQUIRE_EQUAL(got.size(), sent.size());
    for (size_t i = 0; i < sent.size(); ++i)
      BOOST_TEST(got[i].bit_equal(sent[i]), "tensor " << i);
    // The large tensor landed in the storage lent to the reader.
    BOOST_TEST(got[5].data() == lent);
    reader.next();
  }
}

// As a shard reads a push in its turn: it stops after the header and meta
// section, with nothing allocated for the data, and reads the data into the
// storage lent only then.
BOOST_AUTO_TEST_CASE(a_reader_pausing_before_the_data_allocates_nothing_until_told) {
  std::vector<tensor> sent{tensor({300, 1000}, 0.5f), tensor({2}, -1.0f)};
  socket_pair p;
  meta_writer meta{&sent};
  meta.u64(7);
  frame_writer writer{frame_kind::push, 3, meta, &sent};
  frame_reader reader{{}};
  reader.pause_before_data(true);
  maybe_failure error;
  auto until = soon();
  bool headed = interleave(writer, reader, p.a, p.b, error, until);
  BOOST_REQUIRE_MESSAGE(headed, (error ? error->message : "no header"));
  BOOST_TEST(reader.paused());
  BOOST_TEST(reader.tensors().empty());
  BOOST_TEST(reader.fields().u64() == 7u);
  BOOST_TEST(reader.receive_some(p.b, error)); // paused: at once, reading nothing
  BOOST_TEST(reader.paused());
  std::vector<tensor> storage{tensor({300, 1000}), tensor({2})};
  const float* lent = storage[0].data();
  reader.lend(std::move(storage));
  reader.read_data();
  bool received = interleave(writer, reader, p.a, p.b, error, until);
  BOOST_REQUIRE_MESSAGE(received, (error ? error->message : "no data"));
  BOOST_TEST(!reader.paused());
  BOOST_TEST(reader.tensors()[0].bit_equal(sent[0]));
  BOOST_TEST(reader.tensors()[1].bit_equal(sent[1]));
  BOOST_TEST(reader.tensors()[0].data() == lent);
}

BOOST_AUTO_TEST_CASE(bad_frames_on_a_socket_are_refused_before_allocating) {
  frame_header head;
  head.kind = static_cast<uint16_t>(frame_kind::push);
  head.data_bytes = uint64_t{1} << 40; // a terabyte announced
  BOOST_TEST(mentions(read_raw(header_bytes(head)), "exceeds the limit"));
  BOOST_TEST(mentions(read_raw("GET / HTTP/1.1\r\nHost: example\r\n\r\n    "), "magic"));
  // Shapes announcing more than the header: refused once the meta is in.
  head.data_bytes = 8;
  meta_writer meta{nullptr};
  head.meta_bytes = static_cast<uint32_t>(meta.bytes().size());
  BOOST_TEST(mentions(read_raw(header_bytes(head) + meta.bytes()), "announces"));
  // A frame cut short: the closed connection, not a hang.
  head.data_bytes = 0;
  head.meta_bytes = 100;
  auto cut = read_raw(header_bytes(head) + "abc");
  BOOST_TEST(mentions(cut, "closed by the peer"));
}

BOOST_AUTO_TEST_SUITE_END()
