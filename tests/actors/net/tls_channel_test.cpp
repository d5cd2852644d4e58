// The bulk path under mutual TLS without a shard: two channels over a socket
// pair, handshake done, moved (as a connection is handed to its owner), and
// frames from one byte to beyond a socket buffer arrive bit-exact, in both
// directions, frame after frame.
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <thread>

#include <boost/test/unit_test.hpp>

#include "actors/net/record_cipher.hpp"
#include "actors/net/socket.hpp"
#include "tests/support/frame_turns.hpp"
#include "tests/support/identity_files.hpp"

using namespace troupe;
using namespace troupe::bulk;
using troupe::testing::identity_files;

namespace {

deadline tls_deadline() {
  return std::chrono::steady_clock::now() + std::chrono::seconds(10);
}

// Two TLS channels over a socket pair with small buffers, so that a large
// frame waits in the channel's output and goes out over many turns.
struct channel_pair {
  channel a, b;
  explicit channel_pair(const tls_context& tls) {
    int fds[2];
    BOOST_REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM, 0, fds) == 0);
    for (int fd : fds) {
      prepare(fd);
      int small = 16 << 10;
      ::setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &small, sizeof(small));
    }
    maybe_failure server_error, client_error;
    channel server;
    std::thread accepting{
      [&] { server = tls.accept(socket_fd{fds[0]}, tls_deadline(), server_error); }};
    channel client = tls.connect(socket_fd{fds[1]}, tls_deadline(), client_error);
    accepting.join();
    BOOST_REQUIRE_MESSAGE(!server_error, server_error->message);
    BOOST_REQUIRE_MESSAGE(!client_error, client_error->message);
    BOOST_REQUIRE(server.encrypted() && client.encrypted());
    a = std::move(server); // moved after the handshake: output follows the channel
    b = std::move(client);
  }
};

std::shared_ptr<const tls_context> context_for(const tls_files& files) {
  maybe_failure error;
  auto tls = tls_context::make(files, error);
  BOOST_REQUIRE_MESSAGE(tls, (error ? error->message : "no context"));
  return tls;
}

// One identity both ends use, and a handshaken pair of channels.
struct connected {
  identity_files identity;
  std::shared_ptr<const tls_context> tls = context_for(identity.files);
  channel_pair p{*tls};
};

} // namespace

BOOST_AUTO_TEST_SUITE(tls_channel)

BOOST_FIXTURE_TEST_CASE(frames_of_every_size_cross_a_moved_tls_channel_bit_exact, connected) {
  maybe_failure error;
  // Sizes around a TLS record (16 KiB) and far beyond the socket buffers.
  std::vector<size_t> sizes{1, 4095, 4096, 4097, 7850, 16384, 300'000};
  uint64_t request = 0;
  for (size_t n : sizes) {
    for (int direction = 0; direction < 2; ++direction) {
      std::vector<float> values(n);
      for (size_t i = 0; i < n; ++i)
        values[i] = static_cast<float>(i * 7 + n + direction);
      std::vector<tensor> sent{tensor({static_cast<int64_t>(n)}, std::move(values)),
                               tensor({2}, std::vector<float>{-0.0f, 1e-40f})};
      meta_writer meta{&sent};
      meta.u64(n).text(direction ? "back" : "forth");
      frame_writer writer{frame_kind::push, ++request, meta, &sent};
      frame_reader reader{{}};
      auto& from = direction ? p.b : p.a;
      auto& to = direction ? p.a : p.b;
      bool received = testing::interleave(writer, reader, from, to, error, tls_deadline());
      BOOST_REQUIRE_MESSAGE(received, (error ? error->message : "no frame") << " at " << n);
      BOOST_TEST(reader.header().request == request);
      auto fields = reader.fields();
      BOOST_TEST(fields.u64() == n);
      BOOST_TEST(fields.text() == (direction ? "back" : "forth"));
      BOOST_REQUIRE_EQUAL(reader.tensors().size(), sent.size());
      for (size_t i = 0; i < sent.size(); ++i)
        BOOST_TEST(reader.tensors()[i].bit_equal(sent[i]), "tensor " << i << " of " << n);
    }
  }
}

BOOST_FIXTURE_TEST_CASE(bytes_forged_onto_the_wire_are_refused_with_the_connection, connected) {
  maybe_failure error;
  // A well-formed record header and 32 bytes that no key sealed, written
  // on the socket past the channel, as a man in the middle would.
  std::vector<char> forged(4 + 16 + record_cipher::tag_bytes, 'x');
  forged[0] = forged[1] = forged[2] = 0;
  forged[3] = 16;
  BOOST_REQUIRE(::send(p.b.fd(), forged.data(), forged.size(), 0) == ssize_t(forged.size()));
  char got[64];
  ssize_t n = 0;
  for (int turn = 0; turn < 100 && n == 0; ++turn)
    if (wait_for(p.a, false, tls_deadline(), error))
      n = p.a.read_some(got, sizeof(got), error);
  BOOST_TEST(n == -1);
  BOOST_REQUIRE(error);
  BOOST_TEST(error->message.find("integrity") != std::string::npos, error->message);
}

BOOST_AUTO_TEST_CASE(a_client_the_server_refuses_learns_it_in_its_handshake) {
  // Under TLS 1.3 a client's side of the handshake ends before the server
  // has checked its certificate: the ready record is where it hears "no".
  identity_files server_identity{"troupe-cluster"}, stranger{"troupe-stranger"};
  tls_files trusts_the_server = stranger.files;
  trusts_the_server.cafile = server_identity.files.certificate;
  auto server_tls = context_for(server_identity.files);
  auto client_tls = context_for(trusts_the_server);
  int fds[2];
  BOOST_REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM, 0, fds) == 0);
  prepare(fds[0]);
  prepare(fds[1]);
  maybe_failure server_error, client_error;
  std::thread accepting{
    [&] { server_tls->accept(socket_fd{fds[0]}, tls_deadline(), server_error); }};
  channel client = client_tls->connect(socket_fd{fds[1]}, tls_deadline(), client_error);
  accepting.join();
  BOOST_TEST(!client);
  BOOST_REQUIRE(server_error);
  BOOST_TEST(server_error->message.find("TLS handshake failed") != std::string::npos,
             server_error->message);
  BOOST_REQUIRE(client_error);
  BOOST_TEST(client_error->message.find("TLS handshake failed") != std::string::npos,
             client_error->message);
  BOOST_TEST(client_error->message.find("alert") != std::string::npos, client_error->message);
}

BOOST_AUTO_TEST_SUITE_END()
