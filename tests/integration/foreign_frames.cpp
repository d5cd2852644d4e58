#include "tests/integration/foreign_frames.hpp"

#include <array>
#include <chrono>
#include <cstdio>
#include <functional>
#include <memory>
#include <random>
#include <thread>
#include <utility>
#include <vector>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <caf/all.hpp>
#include <caf/io/all.hpp>
#include <caf/openssl/all.hpp>

#include "actors/protocol/basp_guard.hpp"
#include "actors/protocol/protocol.hpp"

namespace troupe::foreign {

namespace {

constexpr size_t builtin_count = caf::type_nrs - 1;

/// A type of the stranger's that goes on the wire under CAF's built-in
/// name number I, carrying whatever bytes it holds.
template <size_t I>
struct impostor {
  std::string bytes;
};

template <size_t I>
caf::error inspect(caf::serializer& f, impostor<I>& x) {
  if (x.bytes.empty())
    return caf::none;
  return f.apply_raw(x.bytes.size(), x.bytes.data());
}

template <size_t I>
caf::error inspect(caf::deserializer&, impostor<I>&) {
  return caf::sec::unknown_type; // the stranger never receives one
}

template <class Inspector, size_t I>
std::enable_if_t<!std::is_base_of<caf::serializer, Inspector>::value
                   && !std::is_base_of<caf::deserializer, Inspector>::value,
                 typename Inspector::result_type>
inspect(Inspector& f, impostor<I>& x) {
  return f(caf::meta::type_name("impostor"), x.bytes);
}

using message_maker = std::function<caf::message(std::string)>;

template <size_t... Is>
std::array<message_maker, builtin_count> makers(std::index_sequence<Is...>) {
  return {[](std::string bytes) { return caf::make_message(impostor<Is>{std::move(bytes)}); }...};
}

const std::array<message_maker, builtin_count>& impostor_makers() {
  static const auto all = makers(std::make_index_sequence<builtin_count>{});
  return all;
}

template <size_t... Is>
void register_all(caf::actor_system_config& cfg, std::index_sequence<Is...>) {
  auto& names = caf_builtin_type_names();
  (cfg.add_message_type<impostor<Is>>(names[Is]), ...);
}

// The hostile payloads sent under each name: a variant index out of range
// followed by 0xff (what crashed CAF's @config_value), nothing at all, and
// seeded garbage.
std::vector<std::pair<std::string, std::string>> payloads_for(size_t name_index) {
  std::string garbage(256, '\0');
  std::mt19937 bits(static_cast<uint32_t>(name_index) + 1);
  for (auto& c : garbage)
    c = static_cast<char>(bits());
  return {{"bad variant index", "\x7f" + std::string(63, '\xff')},
          {"no bytes", ""},
          {"garbage", garbage}};
}

template <class Handle>
caf::expected<caf::actor> connect_as(caf::actor_system& sys, const target& node, bool tls) {
  auto handle = tls ? caf::openssl::remote_actor<Handle>(sys, node.host, node.port)
                    : sys.middleman().remote_actor<Handle>(node.host, node.port);
  if (!handle)
    return handle.error();
  return caf::actor_cast<caf::actor>(*handle);
}

caf::expected<caf::actor> connect(caf::actor_system& sys, const target& node, bool tls) {
  return node.what == "chief" ? connect_as<chief_actor>(sys, node, tls)
                              : connect_as<ps_shard_actor>(sys, node, tls);
}

bool answers_hello(caf::actor_system& sys, const caf::actor& node) {
  caf::scoped_actor self{sys};
  bool answered = false;
  self
    ->request(node, std::chrono::seconds(2), hello_atom::value, protocol_version,
              std::string("stranger"), int32_t{0})
    .receive([&](uint32_t) { answered = true; }, [&](caf::error&) {});
  return answered;
}

// The node answers a hello within 10 s, on a new connection if needed.
bool still_up(caf::actor_system& sys, const target& node, bool tls, caf::actor& handle) {
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  std::string last_error = "no attempt";
  while (std::chrono::steady_clock::now() < until) {
    if (auto fresh = connect(sys, node, tls)) {
      handle = *fresh;
      if (answers_hello(sys, handle))
        return true;
      last_error = "connected, but no answer to a hello";
    } else {
      last_error = sys.render(fresh.error());
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  std::printf("%s: no answer within 10 s: %s\n", node.what.c_str(), last_error.c_str());
  return false;
}

// Sends `msg`, then a hello on the same connection, and says what became of
// the connection: "closed" (the node cut it: the monitor fires), "dropped"
// (the hello was answered: the connection lives on), or "NODE DOWN". The
// hello is sent without a request id: the node's answer comes back as an
// ordinary message, which a blocking actor receives beside the down message.
std::string attempt(caf::actor_system& sys, const target& node, bool tls, caf::actor& handle,
                    const caf::message& msg) {
  std::string what = "no answer";
  {
    caf::scoped_actor self{sys};
    self->monitor(handle);
    self->send(handle, msg);
    self->send(handle, hello_atom::value, protocol_version, std::string("stranger"), int32_t{0});
    bool waiting = true;
    self->receive_while(waiting)(
      [&](uint32_t) {
        what = "dropped";
        waiting = false;
      },
      [&](caf::down_msg&) {
        what = "closed";
        waiting = false;
      },
      caf::after(std::chrono::seconds(5)) >> [&] { waiting = false; });
  }
  if (what == "dropped")
    return what;
  if (!still_up(sys, node, tls, handle))
    return "NODE DOWN";
  return what == "closed" ? what : "closed (no answer to a hello on that connection)";
}

// An error whose context holds `inner` (CAF decodes it as a nested message).
caf::message error_around(caf::message inner) {
  return caf::make_message(caf::error{1, caf::atom("troupe"), std::move(inner)});
}

} // namespace

void register_impostors(caf::actor_system_config& cfg) {
  register_all(cfg, std::make_index_sequence<builtin_count>{});
}

int sweep_builtin_types(caf::actor_system& sys, const target& node, bool tls) {
  caf::actor handle;
  if (!still_up(sys, node, tls, handle)) {
    std::printf("cannot connect to the %s\n", node.what.c_str());
    return 3;
  }
  auto& names = caf_builtin_type_names();
  int down = 0;
  auto report = [&](const std::string& what, const std::string& outcome) {
    std::printf("%s: %s: %s\n", node.what.c_str(), what.c_str(), outcome.c_str());
    std::fflush(stdout);
    if (outcome == "NODE DOWN")
      ++down;
    return outcome != "NODE DOWN";
  };
  for (size_t i = 0; i < builtin_count; ++i) {
    for (auto& [label, bytes] : payloads_for(i)) {
      auto outcome = attempt(sys, node, tls, handle, impostor_makers()[i](bytes));
      if (!report(names[i] + " with " + label, outcome))
        return 1;
    }
    // The same bytes one level down, where only decoding (not the frame's
    // type list) can see them.
    auto nested = error_around(impostor_makers()[i]("\x7f" + std::string(63, '\xff')));
    if (!report("@error holding " + names[i], attempt(sys, node, tls, handle, nested)))
      return 1;
  }
  // CAF's broker casts the actor of a (link, actor) message to a proxy:
  // here it is the node's own actor.
  for (auto what : {caf::atom("link"), caf::atom("unlink")}) {
    auto request = caf::make_message(what, caf::actor_cast<caf::strong_actor_ptr>(handle));
    report(std::string("a ") + caf::to_string(what) + " request naming the node's own actor",
           attempt(sys, node, tls, handle, request));
  }
  auto tower = caf::make_message(std::string("bottom"));
  for (int level = 0; level < 200; ++level)
    tower = error_around(std::move(tower));
  report("a tower of 200 nested errors", attempt(sys, node, tls, handle, tower));
  std::printf("%s: %d time(s) down\n", node.what.c_str(), down);
  return down == 0 ? 0 : 1;
}

std::optional<held_connections> hold_connections(const target& node, int count, int seconds,
                                                 const std::function<std::string(int)>& first) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(node.port);
  if (inet_pton(AF_INET, node.host.c_str(), &addr.sin_addr) != 1)
    return std::nullopt;
  held_connections held;
  std::vector<pollfd> open;
  for (int i = 0; i < count; ++i) {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0 || ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
      ++held.failed;
      if (fd >= 0)
        ::close(fd);
      continue;
    }
    std::string bytes = first(i);
    if (!bytes.empty() && ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL) < 0) {
      ++held.failed;
      ::close(fd);
      continue;
    }
    open.push_back(pollfd{fd, POLLIN, 0});
  }
  held.open = open.size();
  auto start = std::chrono::steady_clock::now();
  auto end = start + std::chrono::seconds(seconds);
  while (held.closed < open.size() && std::chrono::steady_clock::now() < end) {
    if (::poll(open.data(), open.size(), 100) <= 0)
      continue;
    for (auto& p : open) {
      if (p.fd < 0 || p.revents == 0)
        continue;
      char buf[4096];
      if (::recv(p.fd, buf, sizeof(buf), MSG_DONTWAIT) > 0)
        continue; // what the node says first (its handshake)
      ::close(p.fd);
      p.fd = -1;
      ++held.closed;
      held.last_closed_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
                             .count();
    }
  }
  for (auto& p : open)
    if (p.fd >= 0)
      ::close(p.fd);
  return held;
}

int send_huge_frames(int count, int seconds, const target& node) {
  // BASP headers (32 bytes, network order): operation, 2 padding bytes,
  // flags, payload length, operation data, source actor, destination actor.
  auto header = [](uint8_t operation, uint64_t destination) {
    std::string h(32, '\0');
    h[0] = static_cast<char>(operation);
    for (int i = 4; i < 8; ++i)
      h[i] = '\xff'; // 4 GiB - 1
    for (int i = 0; i < 8; ++i)
      h[24 + i] = static_cast<char>(destination >> (56 - 8 * i));
    return h;
  };
  const std::string handshake = header(0x01, 0); // client handshake
  const std::string message = header(0x02, 1);   // direct message to actor 1
  auto held = hold_connections(node, count, seconds, [&](int i) {
    return (i % 2 == 0 ? handshake : message) + std::string(1000, 'x');
  });
  if (!held)
    return 2;
  std::printf("sent %zu header(s) announcing 4 GiB: closed by the node %zu\n", held->open,
              held->closed);
  return 0;
}

} // namespace troupe::foreign
