// Tensors between two real processes over loopback: NaN payloads,
// infinities, denormals, signed zero, empty and 40 MB tensors arrive
// bit-exact; the protocol handshake refuses another version.
#define BOOST_TEST_MODULE wire
#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include <sys/wait.h>
#include <unistd.h>

#include <boost/test/unit_test.hpp>
#include <caf/all.hpp>
#include <caf/io/all.hpp>

#include "actors/protocol/protocol.hpp"
#include "actors/ps/ps_shard.hpp"

using namespace troupe;

namespace {

struct node_cfg : caf::actor_system_config {
  node_cfg() {
    load<caf::io::middleman>();
    register_protocol(*this);
  }
};

caf::behavior echo(caf::event_based_actor* self) {
  return {
    [](std::vector<tensor>& xs) { return std::move(xs); },
    [self](stop_atom) { self->quit(); },
  };
}

// The server process: publishes an echo actor and a PS shard on ephemeral
// ports, writes both ports into the pipe and serves until told to stop.
[[noreturn]] void serve(int fd) {
  int code = 1;
  {
    node_cfg cfg;
    caf::actor_system sys{cfg};
    auto e = sys.spawn(echo);
    ps_shard_actor shard = sys.spawn(ps_shard, ps_shard_config{0, plain_sgd(0.1)});
    auto p1 = sys.middleman().publish(e, 0, "127.0.0.1", true);
    auto p2 = sys.middleman().publish(shard, 0, "127.0.0.1", true);
    uint16_t ports[2] = {p1 ? *p1 : uint16_t(0), p2 ? *p2 : uint16_t(0)};
    if (::write(fd, ports, sizeof(ports)) == sizeof(ports) && p1 && p2) {
      caf::scoped_actor self{sys};
      self->monitor(e);
      self->receive([](const caf::down_msg&) {});
      code = 0;
    }
    caf::anon_send_exit(shard, caf::exit_reason::user_shutdown);
  }
  ::_exit(code);
}

struct two_processes {
  pid_t child = -1;
  uint16_t echo_port = 0, shard_port = 0;
  two_processes() {
    int fds[2];
    BOOST_REQUIRE(::pipe(fds) == 0);
    child = ::fork();
    BOOST_REQUIRE(child >= 0);
    if (child == 0) {
      ::close(fds[0]);
      serve(fds[1]);
    }
    ::close(fds[1]);
    uint16_t ports[2] = {0, 0};
    BOOST_REQUIRE(::read(fds[0], ports, sizeof(ports)) == sizeof(ports));
    ::close(fds[0]);
    echo_port = ports[0];
    shard_port = ports[1];
    BOOST_REQUIRE(echo_port != 0);
  }
  ~two_processes() {
    int status = 0;
    ::waitpid(child, &status, 0);
    BOOST_TEST((WIFEXITED(status) && WEXITSTATUS(status) == 0));
  }
};

tensor from_bits(std::vector<uint32_t> bits, shape_t shape) {
  std::vector<float> values(bits.size());
  std::memcpy(values.data(), bits.data(), bits.size() * 4);
  return tensor(std::move(shape), std::move(values));
}

} // namespace

BOOST_FIXTURE_TEST_CASE(tensors_round_trip_bit_exact, two_processes) {
  node_cfg cfg;
  caf::actor_system sys{cfg};
  auto server = sys.middleman().remote_actor("127.0.0.1", echo_port);
  BOOST_REQUIRE(server);
  std::vector<tensor> special{
    from_bits({0x7fc00000u, 0x7fa12345u, 0xffc00001u}, {3}), // NaNs with payloads
    tensor({2}, std::vector<float>{std::numeric_limits<float>::infinity(),
                                   -std::numeric_limits<float>::infinity()}),
    tensor({3}, std::vector<float>{1e-40f, std::numeric_limits<float>::denorm_min(), -0.0f}),
    tensor({0, 5}),                              // zero elements
    tensor(shape_t{}, std::vector<float>{3.5f}), // scalar
  };
  std::mt19937 rng(1);
  std::vector<uint32_t> bits(10'000'000); // 40 MB of any bits
  for (auto& b : bits)
    b = rng();
  auto big = from_bits(std::move(bits), {2500, 4000});
  caf::scoped_actor self{sys};
  for (auto* batch : {&special, static_cast<std::vector<tensor>*>(nullptr)}) {
    std::vector<tensor> sent = batch ? *batch : std::vector<tensor>{big};
    bool answered = false;
    self->request(*server, std::chrono::seconds(60), sent)
      .receive(
        [&](const std::vector<tensor>& back) {
          answered = true;
          BOOST_REQUIRE_EQUAL(back.size(), sent.size());
          for (size_t i = 0; i < sent.size(); ++i)
            BOOST_TEST(back[i].bit_equal(sent[i]),
                       "tensor " << i << " of shape " << to_string(sent[i].shape()));
        },
        [&](caf::error& err) { BOOST_FAIL("round trip failed: " << describe(err)); });
    BOOST_TEST(answered);
  }
  self->send(*server, stop_atom::value);
}

BOOST_FIXTURE_TEST_CASE(handshake_refuses_another_protocol_version, two_processes) {
  node_cfg cfg;
  caf::actor_system sys{cfg};
  // Asking for the wrong interface is refused by CAF itself.
  auto wrong = sys.middleman().remote_actor<chief_actor>("127.0.0.1", shard_port);
  BOOST_TEST(!wrong);
  auto shard = sys.middleman().remote_actor<ps_shard_actor>("127.0.0.1", shard_port);
  BOOST_REQUIRE(shard);
  caf::scoped_actor self{sys};
  self
    ->request(*shard, std::chrono::seconds(10), hello_atom::value, protocol_version + 7,
              std::string("worker"), int32_t{3})
    .receive([&](uint32_t) { BOOST_FAIL("a peer of another version was accepted"); },
             [&](caf::error& err) {
               BOOST_TEST(err.category() == caf::atom("troupe"));
               BOOST_TEST(err.code() == static_cast<uint8_t>(errc::protocol_mismatch));
               BOOST_TEST(describe(err).find("worker:3") != std::string::npos, describe(err));
             });
  self
    ->request(*shard, std::chrono::seconds(10), hello_atom::value, protocol_version,
              std::string("worker"), int32_t{0})
    .receive([&](uint32_t v) { BOOST_TEST(v == protocol_version); },
             [&](caf::error& err) { BOOST_FAIL(describe(err)); });
  auto server = sys.middleman().remote_actor("127.0.0.1", echo_port);
  BOOST_REQUIRE(server);
  self->send(*server, stop_atom::value);
}
