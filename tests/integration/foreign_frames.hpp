#pragma once
// troupe-foreign-client's attacks on CAF's own decoding, below Troupe's
// protocol: messages that name CAF's built-in types with bytes of the
// stranger's choosing, and BASP headers announcing huge payloads; and the
// raw connections those and its silent ones are held on.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include <caf/actor_system_config.hpp>

namespace troupe::foreign {

/// Registers one impostor type under each of CAF's built-in type names
/// (before the actor system is made): messages of them carry raw bytes.
void register_impostors(caf::actor_system_config& cfg);

struct target {
  std::string what; ///< "ps" or "chief", for the output
  std::string host;
  uint16_t port = 0;
};

/// For every built-in type name: sends messages of it with hostile bytes
/// (an out-of-range variant index, garbage, nothing) and errors whose
/// context holds such a message or a tower of errors; after each, the node
/// must still answer a hello, on a new connection if it closed this one.
/// Prints a line per type; exit 0 when the node answered every time.
int sweep_builtin_types(caf::actor_system& sys, const target& node, bool tls);

/// What a node did to raw connections held open on it.
struct held_connections {
  size_t open = 0;          ///< connected (and their first bytes sent)
  int failed = 0;           ///< refused at connect, or the first bytes not sent
  size_t closed = 0;        ///< of the open ones, closed by the node in time
  double last_closed_s = 0; ///< when the node closed the last of them
};

/// Opens `count` plain TCP connections to `node`, sends first(i) on the
/// i-th (nothing when empty) and waits up to `seconds` for the node to close
/// them, discarding what it sends; then closes the rest. nullopt: the host
/// is not an IPv4 address.
std::optional<held_connections> hold_connections(const target& node, int count, int seconds,
                                                 const std::function<std::string(int)>& first);

/// Opens `count` plain TCP connections, each sending one BASP header that
/// announces a 4 GiB payload (alternately a handshake and a message) and
/// then a few bytes; prints how many the node closed within `seconds`.
int send_huge_frames(int count, int seconds, const target& node);

} // namespace troupe::foreign
